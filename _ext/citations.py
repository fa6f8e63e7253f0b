"""Sphinx extension: citations that read well in JupyterLab and link in the web book (issue 27).

jupyterlab-myst (2.7) does not resolve ``{cite}`` roles: JupyterLab showed each as its raw
bibliography key with a warning icon. So the chapters write a citation as a Markdown link
whose text is the author and year and whose target is the entry on the References page:

    ([Vaswani et al., 2017](bibliography.md#cite-vaswani2017attention))      parenthetical
    ([Och and Ney, 2003](bibliography.md#cite-och2003systematic); [Garg et al., 2019](...))
    [Sutskever et al. (2014)](bibliography.md#cite-sutskever2014sequence)     in the sentence

JupyterLab, Colab and any Markdown viewer show "(Vaswani et al., 2017)" as a link. When the
book is built, this extension turns each back into the role it stands for before myst-nb
parses the notebook, so the web book keeps sphinxcontrib-bibtex's citations (tooltip, link
to the entry, the entry listed on the References page):

    ([A, 2017](...#cite-a)) and ([A, 2017](...#cite-a); [B, 2019](...#cite-b))  ->  {cite:p}`a,b`
    [A (2017)](...#cite-a)                                                     ->  {cite:t}`a`
    [A, 2017](...#cite-a) inside other words, e.g. "(see [A, 2017](...))"     ->  {cite:alp}`a`

``tools/cite_links.py`` writes the links from ``{cite}`` roles (and checks that each link's
text is the author and year of its key); tests/test_citations.py checks both directions.
``bibtex_cite_id = "cite-{key}"`` in _config.yml gives each entry of the References page
the id the links point at.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

BIB = Path(__file__).resolve().parents[1] / "site" / "references.bib"

_TARGET = r"\(bibliography\.md#cite-{key}\)"
_KEY = r"[A-Za-z0-9_.:-]+"
LINK = re.compile(r"\[(?P<text>[^\[\]]+)\]" + _TARGET.format(key=f"(?P<key>{_KEY})"))
_ANY_LINK = r"\[[^\[\]]+\]" + _TARGET.format(key=_KEY)
# "(" link ("; " link)* ")": a parenthetical citation of one or more works.
GROUP = re.compile(r"\((?P<links>" + _ANY_LINK + r"(?:;\s+" + _ANY_LINK + r")*)\)")


def links_to_roles(markdown: str) -> str:
    """The Markdown links of a chapter's citations back into sphinxcontrib-bibtex roles."""

    def group(match: re.Match) -> str:
        keys = [m["key"] for m in LINK.finditer(match["links"])]
        return "{cite:p}`" + ",".join(keys) + "`"

    def single(match: re.Match) -> str:
        textual = re.search(r"\(\d{4}[a-z]?\)$", match["text"].strip())
        return ("{cite:t}`" if textual else "{cite:alp}`") + match["key"] + "`"

    return LINK.sub(single, GROUP.sub(group, markdown))


def _plain(latex: str) -> str:
    from pybtex.richtext import Text

    return str(Text.from_latex(latex)).replace("{", "").replace("}", "")


def entries(bib: Path = BIB) -> dict[str, tuple[str, str]]:
    """Bibliography key -> (authors as cited, year): "Vaswani et al.", "Och and Ney", "Popović"."""
    from pybtex.database import parse_file

    found = {}
    for key, entry in parse_file(str(bib)).entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [_plain(" ".join(p.prelast_names + p.last_names)) for p in people]
        if not names:
            authors = _plain(entry.fields.get("organization", entry.fields.get("title", key)))
        elif len(names) == 1:
            authors = names[0]
        elif len(names) == 2:
            authors = f"{names[0]} and {names[1]}"
        else:
            authors = f"{names[0]} et al."
        found[key] = (authors, entry.fields.get("year", "n.d."))
    return found


def link(key: str, textual: bool, known: dict[str, tuple[str, str]]) -> str:
    authors, year = known[key]
    text = f"{authors} ({year})" if textual else f"{authors}, {year}"
    return f"[{text}](bibliography.md#cite-{key})"


ROLE = re.compile(r"\{cite:(?P<kind>p|t|alp)\}`(?P<keys>[^`]+)`")


def roles_to_links(markdown: str, known: dict[str, tuple[str, str]]) -> str:
    """{cite:p}`a,b` -> ([A, 2017](...); [B, 2019](...)); {cite:t}`a` -> [A (2017)](...)."""

    def one(match: re.Match) -> str:
        keys = [k.strip() for k in match["keys"].split(",")]
        if match["kind"] == "p":
            return "(" + "; ".join(link(k, False, known) for k in keys) + ")"
        if match["kind"] == "alp":
            return "; ".join(link(k, False, known) for k in keys)
        return " and ".join(link(k, True, known) for k in keys)

    return ROLE.sub(one, markdown)


def restore_roles(app, docname: str, source: list[str]) -> None:
    """source-read: in a notebook's Markdown cells, citation links become roles again."""
    if "bibliography.md#cite-" not in source[0]:
        return
    try:
        notebook = json.loads(source[0])
    except ValueError:  # a Markdown page: the same Markdown
        source[0] = links_to_roles(source[0])
        return
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if "bibliography.md#cite-" in text:
                cell["source"] = links_to_roles(text)
    source[0] = json.dumps(notebook, ensure_ascii=False)


def setup(app) -> dict:
    app.connect("source-read", restore_roles)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
