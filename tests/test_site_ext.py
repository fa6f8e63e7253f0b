"""_ext/offline_assets.py, the Sphinx extension that keeps the built site offline.

The real proof is the browser test (tests/browser); these check the helpers
on hand-made inputs without building the book.
"""

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.builders.html._assets import _JavaScript

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("offline_assets", ROOT / "_ext" / "offline_assets.py")
offline_assets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(offline_assets)


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("0.11.0", "~0.11.*", True),  # what anywidget 0.11 stores
        ("0.11.7", "~0.11.*", True),
        ("0.12.0", "~0.11.*", False),
        ("0.10.9", "~0.11.*", False),
        ("0.11.0", "0.11.0", True),
        ("0.11.1", "0.11.0", False),
        ("1.4.2", "^1.2.0", True),
        ("2.0.0", "^1.2.0", False),
        ("0.3.5", "^0.3.1", True),
        ("0.4.0", "^0.3.1", False),
        ("5.0.0", "*", True),
    ],
)
def test_version_spec(version, spec, ok):
    assert offline_assets._satisfies(version, spec) is ok


def _page(scripts):
    app = SimpleNamespace(
        offline_widget_modules=set(),
        config=SimpleNamespace(html_theme_options={"launch_buttons": {"thebe": False}}),
    )
    # Sphinx's pathto(target, 1) for a page one folder deep.
    context = {"script_files": list(scripts), "pathto": lambda target, resource=0: "../" + target}
    offline_assets.rewrite_page_scripts(app, "book/02_attention_math", "page.html", context, None)
    return app, context["script_files"]


def test_widget_cdn_made_page_relative_and_modules_noted():
    state = {
        "state": {
            "a": {"model_module": "anywidget", "model_module_version": "~0.11.*",
                  "state": {"_view_module": "anywidget", "_view_module_version": "~0.11.*"}},
            "b": {"model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
                  "state": {"_view_module": "@jupyter-widgets/controls", "_view_module_version": "2.0.0"}},
        }
    }
    scripts = [
        _JavaScript("", body=json.dumps(state), type=offline_assets.WIDGET_STATE_TYPE),
        _JavaScript("_static/offline/require.js"),
        _JavaScript("_static/offline/html-manager/embed-amd.js", **{"data-jupyter-widgets-cdn": "_static/offline/widgets/"}),
    ]
    app, out = _page(scripts)
    manager = next(js for js in out if str(js.filename).endswith("embed-amd.js"))
    assert manager.attributes["data-jupyter-widgets-cdn"] == "../_static/offline/widgets/"
    # A setup script right before the manager points RequireJS at its copy.
    setup = out[out.index(manager) - 1]
    body = setup.attributes["body"]
    assert '"@jupyter-widgets/html-manager/dist": "../_static/offline/html-manager"' in body
    assert '"anywidget": "../_static/offline/widgets/anywidget/index"' in body
    assert app.offline_widget_modules == {("anywidget", "~0.11.*", "book/02_attention_math")}


def test_thebe_scripts_dropped_without_a_thebe_button():
    scripts = [
        _JavaScript("", body='const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"'),
        _JavaScript("_static/sphinx-thebe.js", **{"async": "async"}),
        _JavaScript("_static/doctools.js"),
    ]
    _, out = _page(scripts)
    assert [str(js.filename) for js in out] == ["_static/doctools.js"]


# --------------------------------------------------------------------------- _ext/live_model.py (issue 35)

_spec_live = importlib.util.spec_from_file_location("live_model", ROOT / "_ext" / "live_model.py")
live_model = importlib.util.module_from_spec(_spec_live)
_spec_live.loader.exec_module(live_model)


def _light(scripts):
    added = []
    app = SimpleNamespace(add_js_file=lambda name, **kw: added.append((name, kw)), env=SimpleNamespace())
    context = {"script_files": list(scripts)}
    live_model.light_widget_page(app, "book/02_attention_math", "page.html", context, None)
    return added, context["script_files"]


def _manager_scripts(models):
    state = {"state": {str(i): {"model_module": module, "model_name": name, "state": {}}
                       for i, (module, name) in enumerate(models)}}
    return [
        _JavaScript("", body=json.dumps(state), type=live_model.WIDGET_STATE),
        _JavaScript(None, body="window.requirejs.config({paths: {}});"),
        _JavaScript("offline/require.js"),
        _JavaScript("offline/html-manager/embed-amd.js"),
        _JavaScript("scripts/theme.js"),
    ]


def test_anywidget_pages_drop_the_widget_manager():
    added, out = _light(_manager_scripts([("anywidget", "AnyModel"), ("@jupyter-widgets/base", "LayoutModel")]))
    names = [str(js.filename) for js in out]
    assert "offline/require.js" not in names and "offline/html-manager/embed-amd.js" not in names
    assert not any("requirejs" in js.attributes.get("body", "") for js in out)
    assert "scripts/theme.js" in names and any(js.attributes.get("type") == live_model.WIDGET_STATE for js in out)
    assert added == [("live_model/anywidgets.js", {"type": "module"})]


def test_pages_with_other_widgets_keep_the_manager():
    scripts = _manager_scripts([("anywidget", "AnyModel"), ("@jupyter-widgets/controls", "IntSliderModel")])
    added, out = _light(scripts)
    assert out == scripts and added == []
    added, out = _light([_JavaScript("scripts/theme.js")])  # no widgets at all
    assert added == [] and [str(js.filename) for js in out] == ["scripts/theme.js"]


def test_live_model_script_only_on_pages_that_hold_one():
    added = []
    app = SimpleNamespace(add_js_file=lambda name, **kw: added.append((name, kw)), env=SimpleNamespace())
    live_model.add_script(app, "book/02_attention_math", "page.html", {"body": "<p>text</p>"}, None)
    assert added == []
    live_model.add_script(app, "book/intro", "page.html",
                          {"body": '<div class="course-live-model" data-model="date-translator"></div>'}, None)
    assert added == [("live_model/live_model.js", {"type": "module"})]


def test_the_intro_figures_come_from_the_checkpoint():
    import torch

    import lib

    recipe = torch.load(lib.DATE_CHECKPOINT, weights_only=True)["recipe"]
    figures = live_model.checkpoint_figures()
    assert figures["date_heldout"] == f"{round(1000 * recipe['exact_match_float16']['held_out']):,d}"
    assert figures["date_2040s"] == f"{round(1000 * recipe['exact_match_float16']['2040s']):,d}"
    assert figures["date_seed"] == str(recipe["seed"])
    intro = (live_model.ROOT / "book" / "intro.md").read_text()
    for key in figures:
        assert "{{" + key + "}}" in intro, key


def test_the_live_model_state_is_the_widgets():
    """What the page gets is lib.DateTranslator's synced state for the shipped checkpoint."""
    import lib
    from lib.widgets.dates import export_weights

    state = live_model.widget_state()
    model, _ = lib.load_date_checkpoint()
    assert state["weights"] == export_weights(model)[0]
    assert state["source"] == live_model.EXAMPLE == state["example"]["source"]
    assert state["example"]["output"] == "March 7, 2019"
