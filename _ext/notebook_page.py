"""Sphinx extension: the install cell stays in the notebook and leaves the web page (issue 27).

The first code cell of every chapter installs the course's library where it is missing
(Colab; written by tools/install_cell.py from `repository.url` in _config.yml). A reader of
the web book has nothing to install, and its nine lines stood at the top of every chapter
between the title and the text. Before myst-nb parses a chapter, this extension tags that
cell ``remove-cell`` in the text it hands on, so the page leaves it out; the notebook file
is not changed, so Colab, JupyterLab and nbval still run the cell first.
"""

from __future__ import annotations

import json
from pathlib import Path

MARKER = "# Colab or a fresh environment: install the course's library"
TAG = "remove-cell"


def drop_install_cell(text: str) -> str:
    """The notebook JSON `text` with its install cell tagged remove-cell (unchanged if none)."""
    if MARKER not in text:
        return text
    notebook = json.loads(text)
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if source.startswith(MARKER):
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if TAG not in tags:
                tags.append(TAG)
        break  # only the first code cell is the install cell
    return json.dumps(notebook, ensure_ascii=False)


def on_source_read(app, docname: str, source: list[str]) -> None:
    if Path(app.env.doc2path(docname)).suffix == ".ipynb":
        source[0] = drop_install_cell(source[0])


def setup(app) -> dict:
    app.connect("source-read", on_source_read)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
