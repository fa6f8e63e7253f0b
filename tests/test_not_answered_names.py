"""Every "Not answered yet: replace None in NAME" a chapter stores names a variable the
same cell sets to None: the message tells the learner which line to edit, so a checker
whose fixed name differs from the chapter's variable sends them looking for a line that
is not there (chapter 8 said my_ratio for my_peak_ratio)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
NAMED = re.compile(r"replace None in ([A-Za-z_][A-Za-z_0-9]*)")


def _text(output: dict) -> str:
    text = output.get("text") or output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


def named_but_not_set(path: Path) -> list[str]:
    wrong = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        for output in cell.get("outputs", []):
            for name in NAMED.findall(_text(output)):
                if not re.search(rf"^\s*{name}\s*=\s*None\b", source, re.M):
                    wrong.append(f"cell {i}: the message names {name}, the cell sets no such variable")
    return wrong


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_not_answered_messages_name_the_cells_own_variables(path):
    wrong = named_but_not_set(path)
    assert not wrong, f"{path.name}:\n" + "\n".join(wrong)


def test_the_scan_finds_a_mismatch(tmp_path):
    cell = {"cell_type": "code", "source": ["my_peak_ratio = None\n"],
            "outputs": [{"output_type": "stream", "name": "stdout",
                         "text": ["Not answered yet: replace None in my_ratio with your number.\n"]}]}
    bad = tmp_path / "bad.ipynb"
    bad.write_text(json.dumps({"cells": [cell]}))
    assert named_but_not_set(bad) == ["cell 0: the message names my_ratio, the cell sets no such variable"]
    cell["source"] = ["my_ratio = None  # yours\n"]
    bad.write_text(json.dumps({"cells": [cell]}))
    assert named_but_not_set(bad) == []
