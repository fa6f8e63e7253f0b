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
