"""The expected-results table (tools/expected_results.py) and the rule that cells
showing a run's own numbers are not compared verbatim by nbval."""

import copy
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import expected_results as er  # noqa: E402

CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))


def test_the_committed_table_is_current():
    assert er.check() == []


def test_every_row_of_the_table_has_five_cells():
    import re
    rows = [l for l in (ROOT / "book" / "expected_results.md").read_text().splitlines()
            if l.startswith("|")]
    assert len(rows) > 100
    for row in rows:  # an unescaped "|" in a result's name (|dL/dq|) splits its cell
        assert len(re.split(r"(?<!\\)\|", row)) == 7, row


def _notebook_with(records):
    outputs = [{"output_type": "display_data", "metadata": {},
                "data": {er.RESULT_MIME: json.dumps(r)}} for r in records]
    return {"cells": [{"cell_type": "code", "source": "", "metadata": {}, "outputs": outputs}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_check_mine_names_the_chapter_outside_its_band(tmp_path, monkeypatch, capsys):
    band = {"name": "held-out accuracy", "value": 0.99, "low": 0.95, "high": 1.0, "unit": ""}
    data = {"hardware": "x", "chapters": [
        {"file": "08_training.ipynb", "chapter": "8. Training", "seconds": 60, "results": [band]},
        {"file": "12_translation.ipynb", "chapter": "12. Translating", "seconds": 60,
         "results": [dict(band, name="BLEU", low=2.0, high=5.0)]},
    ]}
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps(data))
    monkeypatch.setattr(er, "DATA", expected)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "08_training.ipynb").write_text(json.dumps(_notebook_with([dict(band, value=0.97)])))
    (mine / "12_translation.ipynb").write_text(json.dumps(_notebook_with([dict(band, name="BLEU", value=1.5)])))
    assert er.check_mine(mine) == 1
    out = capsys.readouterr().out
    assert "8. Training: all 1 results inside their bands" in out
    assert "12. Translating: OUTSIDE the band: BLEU = 1.5, expected 2 to 5" in out
    (mine / "12_translation.ipynb").write_text(json.dumps(_notebook_with([])))
    assert er.check_mine(mine) == 0
    assert "12. Translating: no results stored" in capsys.readouterr().out


def test_records_are_read_in_cell_order():
    recs = [{"name": n, "value": 1.0, "low": 0.0, "high": 2.0, "unit": ""} for n in "abc"]
    path = Path(__file__).parent / "_tmp_records.ipynb"
    try:
        path.write_text(json.dumps(_notebook_with(recs)))
        assert [r["name"] for r in er.records(path)] == ["a", "b", "c"]
    finally:
        path.unlink()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_cells_with_run_values_are_not_compared_verbatim(path):
    """A cell that glues a run value or checks a band shows the run's own numbers:
    nbval must not compare it (tag nbval-ignore-output); the band is the check."""
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and ("check_band(" in src or "glue(" in src):
            tags = cell.get("metadata", {}).get("tags", [])
            assert "nbval-ignore-output" in tags, f"{path.name} cell {i} needs the tag nbval-ignore-output"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_eval_role_names_a_glued_value(path):
    import re

    cells = json.loads(path.read_text())["cells"]
    glued = set()
    for cell in cells:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                glued.add(name)
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            for key in re.findall(r"\{eval\}`([^`]*)`", "".join(cell["source"])):
                assert key in glued, f"{path.name} cell {i}: {{eval}}`{key}` but nothing glued {key!r}"
