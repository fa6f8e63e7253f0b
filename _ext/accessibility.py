"""Sphinx extension: what the book's pages need to be usable with a keyboard, a screen
reader and a phone, beyond what the theme and myst-nb give (issue 15; checked with
axe-core by tests/browser/test_site.py).

* Figures: a notebook figure made with ``lib.describe_figure(fig, alt)`` (lib/teach/figures.py)
  stores its description in the output's metadata (``{"image/png": {"alt": ...}}``).
  myst-nb writes each PNG output to ``<sha256 of the PNG>.png`` but reads only
  width/height from output metadata; here each image node of a notebook page gets
  the ``alt`` of the output whose PNG has that hash.
* Hidden code cells: myst-nb names their toggle ``aria-label="Toggle hidden content"``
  while it shows "Show code cell source": the label is dropped so the visible text
  is the name (WCAG 2.5.3, label in name).
* The bibliography: Sphinx marks each entry ``role="doc-biblioentry"``, a role
  deprecated in DPUB-ARIA 1.1 and not allowed inside its ``role="list"``: it becomes
  ``role="listitem"``.
* The theme's search and colour-mode buttons: templates in accessibility/templates/
  (see their comments) replace pydata-sphinx-theme's, whose names hid their visible text.
* Widgets drawn from stored state: accessibility/static/course-a11y.js names slider
  handles after their labels and gives widget images their description as alt text.
* Narrow screens: accessibility/static/course-a11y.css lets wide equations, tables and
  outputs scroll inside their own box; on phones a figure much wider than the column keeps
  a legible size and scrolls inside its output box (course-layout.css, course-a11y.js).
* Laptop screens (issue 27): accessibility/static/course-layout.css gives the article the
  width of the page's right-hand column from 1200 px on (the page's table of contents
  opens as a drawer, as below 1200 px), so 88-character code lines fit at 1280 px.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config

HERE = Path(__file__).resolve().parent / "accessibility"
PNG_NAME = re.compile(r"([0-9a-f]{64})\.png$")


def add_paths(app: Sphinx, config: Config) -> None:
    # Our templates come first, so they replace the theme's components of the same name.
    config.templates_path = [str(HERE / "templates"), *config.templates_path]
    config.html_static_path = [*config.html_static_path, str(HERE / "static")]


def notebook_alts(path: Path) -> dict[str, str]:
    """sha256 of each PNG output of a notebook -> the alt text in its metadata."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    alts = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) or []:
            data = (output.get("data") or {}).get("image/png")
            alt = ((output.get("metadata") or {}).get("image/png") or {}).get("alt")
            if data and alt:
                png = base64.b64decode("".join(data) if isinstance(data, list) else data)
                alts[hashlib.sha256(png).hexdigest()] = str(alt)
    return alts


def set_figure_alts(app: Sphinx, doctree: nodes.document) -> None:
    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix != ".ipynb":
        return
    alts = notebook_alts(source)
    if not alts:
        return
    for image in doctree.findall(nodes.image):
        match = PNG_NAME.search(image.get("uri", ""))
        if match and match[1] in alts:
            image["alt"] = alts[match[1]]


def rewrite_body(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    body = context.get("body")
    if not body:
        return
    body = body.replace('<summary aria-label="Toggle hidden content">', "<summary>")
    body = body.replace('role="doc-biblioentry"', 'role="listitem"')
    context["body"] = body


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", add_paths)
    app.connect("doctree-read", set_figure_alts)
    app.connect("html-page-context", rewrite_body)
    app.add_css_file("course-a11y.css")
    app.add_css_file("course-layout.css")
    app.add_js_file("course-a11y.js")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
