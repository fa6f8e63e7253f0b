"""The ``{eval}`` role rendered from the values a notebook glued.

The chapters quote a run's numbers as ``{eval}`name` ``. In JupyterLab,
jupyterlab-myst evaluates ``name`` in the reader's kernel. The built book does
not run the notebooks (they are stored with their outputs), so myst-nb's own
``eval`` role, which needs a live kernel, would only warn. This extension
replaces it: ``{eval}`name` `` renders the value that ``lib.glue("name", ...)``
stored in the same notebook, and an unknown name is a build warning (an error
under ``-W``). Only plain identifiers are accepted, so the page and JupyterLab
always show the same thing.
"""

from __future__ import annotations

from docutils import nodes
from myst_nb.core.variables import RetrievalError
from myst_nb.ext.glue.utils import glue_warning, retrieve_glue_data
from myst_nb.ext.utils import RoleBase


def plain_text(data: dict) -> str:
    """The text a glued value shows: its text/plain form without string quotes."""
    text = data.get("text/plain")
    if text is None:
        raise RetrievalError("the glued value has no text/plain form")
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


class RunValueRole(RoleBase):
    def run(self):
        key = self.text.strip()
        if not key.isidentifier():
            return [], [
                glue_warning(
                    f"{{eval}} takes a variable name glued with lib.glue, got {key!r}",
                    self.document,
                    self.line,
                )
            ]
        try:
            found = retrieve_glue_data(self.document, key)
            text = plain_text(found.data)
        except RetrievalError as exc:
            return [], [glue_warning(f"{{eval}}`{key}`: {exc}", self.document, self.line)]
        node = nodes.inline(text, text, classes=["run-value"])
        return [node], []


def _register(app):
    app.add_role("eval", RunValueRole(), override=True)


def setup(app):
    # myst-nb registers its own `eval` role in its setup; ours replaces it once
    # every extension has loaded.
    app.connect("builder-inited", _register)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
