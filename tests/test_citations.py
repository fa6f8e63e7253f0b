"""Citations that read well in JupyterLab and link in the web book (_ext/citations.py,
tools/cite_links.py; issue 27): jupyterlab-myst shows a {cite} role as its raw key."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
sys.path.insert(0, str(ROOT / "tools"))
import citations  # noqa: E402
import cite_links  # noqa: E402

sys.path.remove(str(ROOT / "_ext"))
sys.path.remove(str(ROOT / "tools"))

KNOWN = citations.entries()


@pytest.mark.parametrize(
    "key, authors, year",
    [
        ("vaswani2017attention", "Vaswani et al.", "2017"),  # eight authors
        ("och2003systematic", "Och and Ney", "2003"),  # two
        ("popovic2015chrf", "Popović", "2015"),  # one, with a LaTeX accent
        ("sutskever2014sequence", "Sutskever et al.", "2014"),
    ],
)
def test_author_and_year_from_the_bibliography(key, authors, year):
    assert KNOWN[key] == (authors, year)


def test_links_read_as_the_book_prints_them():
    text = "as in {cite:t}`sutskever2014sequence`, scaled {cite:p}`vaswani2017attention`; both {cite:p}`och2003systematic,garg2019jointly`."
    assert citations.roles_to_links(text, KNOWN) == (
        "as in [Sutskever et al. (2014)](bibliography.md#cite-sutskever2014sequence), scaled "
        "([Vaswani et al., 2017](bibliography.md#cite-vaswani2017attention)); both "
        "([Och and Ney, 2003](bibliography.md#cite-och2003systematic); "
        "[Garg et al., 2019](bibliography.md#cite-garg2019jointly))."
    )


def test_a_link_inside_other_words_keeps_them():
    text = "(see [Vaswani et al., 2017](bibliography.md#cite-vaswani2017attention), section 3)"
    assert citations.links_to_roles(text) == "(see {cite:alp}`vaswani2017attention`, section 3)"


def _markdown_of_every_chapter() -> list[str]:
    texts = []
    for path in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                texts.append("".join(cell["source"]))
    return texts


def test_every_chapter_citation_survives_the_round_trip():
    """Roles -> links (what tools/cite_links.py writes) -> roles (what the book build reads)
    gives back every citation of every chapter, and every key is in the bibliography."""
    checked = 0
    for text in _markdown_of_every_chapter():
        roles = [(m["kind"], m["keys"].replace(" ", "")) for m in citations.ROLE.finditer(text)]
        if not roles:
            continue
        for _, keys in roles:
            assert all(k in KNOWN for k in keys.split(",")), keys
        back = citations.links_to_roles(citations.roles_to_links(text, KNOWN))
        assert [(m["kind"], m["keys"]) for m in citations.ROLE.finditer(back)] == roles
        checked += len(roles)
    # before the chapters are converted they hold roles; after, links: check those instead
    for text in _markdown_of_every_chapter():
        assert not cite_links.problems(re.sub(citations.ROLE, "", text), KNOWN)
        checked += len(citations.LINK.findall(text))
    assert checked > 40


def test_the_tool_converts_a_chapter_and_checks_it(tmp_path):
    source = ROOT / "book" / "12_translation.ipynb"
    path = Path(shutil.copy(source, tmp_path / source.name))
    before = json.loads(path.read_text())
    assert cite_links.main([], book=tmp_path) == 0
    assert cite_links.main(["--check"], book=tmp_path) == 0
    after = json.loads(path.read_text())
    assert [c for c in after["cells"] if c["cell_type"] != "markdown"] == [
        c for c in before["cells"] if c["cell_type"] != "markdown"]
    text = "\n".join("".join(c["source"]) for c in after["cells"] if c["cell_type"] == "markdown")
    assert "{cite:" not in text and "bibliography.md#cite-" in text
    # a link whose text no longer matches its entry is reported
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if "bibliography.md#cite-" in "".join(c["source"]))
    cell["source"] = [re.sub(r"\[[^\]]+\](\(bibliography\.md#cite-)", r"[Someone, 1999]\1", "".join(cell["source"]), 1)]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    assert cite_links.main(["--check"], book=tmp_path) == 1


def test_the_book_gives_entries_the_ids_the_links_use():
    config = (ROOT / "_config.yml").read_text()
    assert 'bibtex_cite_id: "cite-{key}"' in config
    assert re.search(r"^\s+citations: _ext$", config, re.M)


# --------------------------------------------------------------------------- the install cell

sys.path.insert(0, str(ROOT / "_ext"))
import notebook_page  # noqa: E402

sys.path.remove(str(ROOT / "_ext"))


def test_the_install_cell_leaves_the_page_and_stays_in_the_notebook():
    """The text myst-nb parses has the chapter's install cell tagged remove-cell; nothing else
    changes, and the file on disk keeps the cell as it is (Colab and JupyterLab run it)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import install_cell

    sys.path.remove(str(ROOT / "tools"))
    assert notebook_page.MARKER == install_cell.MARKER
    path = ROOT / "book" / "04_multi_head_attention.ipynb"
    text = path.read_text()
    before = json.loads(text)
    after = json.loads(notebook_page.drop_install_cell(text))
    i = install_cell.install_cell_index(before)
    assert i is not None and "remove-cell" not in before["cells"][i]["metadata"].get("tags", [])
    assert after["cells"][i]["metadata"]["tags"][-1] == "remove-cell"
    after["cells"][i]["metadata"]["tags"].pop()
    if not after["cells"][i]["metadata"]["tags"]:
        del after["cells"][i]["metadata"]["tags"]
    assert after == before
    assert path.read_text() == text


def test_a_notebook_without_install_cell_is_left_alone():
    text = json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}}]})
    assert notebook_page.drop_install_cell(text) == text
