"""Sphinx extension: the first page's live model (book/intro, issue 35).

The intro holds ``<div class="course-live-model" data-model="date-translator">``. On
the pages that hold one (and only there) this extension adds ``live_model.js``
(an ES module, in live_model/); after the build it writes into
``_static/live_model/``:

* ``date_model.json``: the state `lib.DateTranslator` syncs for chapter 8's
  trained model, loaded from the shipped checkpoint (`lib.load_date_checkpoint`,
  pinned by SHA-256; nothing is trained here);
* ``date_translator.js``: lib/widgets/static/date_translator.js, unchanged;
* ``live_model.js``: the loader, which hands that module a plain object as its
  model (the page needs neither the 3.6 MB widget manager nor RequireJS).

Widget pages (issue 35: the 3.6 MB widget manager loaded on pages that need less): on a
page whose stored widgets are all anywidget models (and their layout models), the widget
manager, RequireJS and their configuration are taken out of the page and
``anywidgets.js`` (about 3 kB) draws the widgets instead, with each widget's own ES
module as stored in the notebook. A page with any other widget keeps the manager.

It also gives the pages the substitutions ``date_heldout``, ``date_inside``,
``date_2040s`` and ``date_seed``: the checkpoint's recorded exact match of the
float16 model on chapter 8's three test sets (tools/date_checkpoint.py measured
them), so the intro's numbers are read from the file, never typed.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "live_model"
ROOT = Path(__file__).resolve().parent.parent
MARKER = 'class="course-live-model"'
EXAMPLE = "2019-03-07"


def _lib():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import lib  # noqa: F401  (the course's library, from the repository)
    from lib.train import date_checkpoint

    return date_checkpoint


def checkpoint_figures() -> dict[str, str]:
    """The substitutions read from the checkpoint's recipe."""
    import torch

    ck = _lib()
    path = ck.require_pinned_file(ck.DATE_CHECKPOINT, ck.DATE_CHECKPOINT_SHA256)
    recipe = torch.load(path, map_location="cpu", weights_only=True)["recipe"]
    scores = recipe["exact_match_float16"]
    share = lambda x: f"{round(1000 * x):,d}"  # noqa: E731  (of the 1,000 dates of each set)
    return {"date_heldout": share(scores["held_out"]), "date_inside": share(scores["inside_years"]),
            "date_2040s": share(scores["2040s"]), "date_seed": str(recipe["seed"])}


def widget_state() -> dict:
    """What `lib.DateTranslator` on the shipped checkpoint syncs to its page."""
    from lib.widgets.dates import DateTranslator

    ck = _lib()
    model, _ = ck.load_date_checkpoint()
    widget = DateTranslator(model, example=EXAMPLE)
    return {key: getattr(widget, key) for key in ("source", "weights", "weight_layout", "config", "example")}


def add_substitutions(app, config) -> None:
    config.myst_substitutions = {**(config.myst_substitutions or {}), **checkpoint_figures()}


def add_script(app, pagename, templatename, context, doctree) -> None:
    if MARKER in context.get("body", ""):
        app.add_js_file("live_model/live_model.js", type="module")
        app.env.live_model_pages = getattr(app.env, "live_model_pages", set()) | {pagename}


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LIGHT_MODELS = {("anywidget", "AnyModel"), ("@jupyter-widgets/base", "LayoutModel")}
MANAGER_FILES = ("offline/require.js", "offline/html-manager/embed-amd.js")


def _attributes(js) -> dict:
    return dict(getattr(js, "attributes", {}) or {})


def light_widget_page(app, pagename, templatename, context, doctree) -> None:
    """Swap the widget manager for anywidgets.js where every stored model is an anywidget's."""
    scripts = context.get("script_files")
    if not scripts:
        return
    states = [_attributes(js)["body"] for js in scripts
              if _attributes(js).get("type") == WIDGET_STATE and _attributes(js).get("body")]
    if not states:
        return
    models = [m for body in states for m in json.loads(body).get("state", {}).values()]
    if not all((m.get("model_module"), m.get("model_name")) in LIGHT_MODELS for m in models):
        return
    scripts[:] = [js for js in scripts
                  if not str(js.filename or "").endswith(MANAGER_FILES)
                  and "requirejs.config" not in _attributes(js).get("body", "")]
    app.add_js_file("live_model/anywidgets.js", type="module")
    app.env.light_widget_pages = getattr(app.env, "light_widget_pages", set()) | {pagename}


def write_assets(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / "_static" / "live_model"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "live_model.js", out / "live_model.js")
    shutil.copyfile(HERE / "anywidgets.js", out / "anywidgets.js")
    shutil.copyfile(ROOT / "lib" / "widgets" / "static" / "date_translator.js", out / "date_translator.js")
    (out / "date_model.json").write_text(json.dumps(widget_state(), separators=(",", ":")), encoding="utf-8")


def setup(app) -> dict:
    app.connect("config-inited", add_substitutions)
    app.connect("html-page-context", add_script)
    # after myst-nb added the manager and _ext/offline_assets.py configured it (priority 900)
    app.connect("html-page-context", light_widget_page, priority=950)
    app.connect("build-finished", write_assets)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
