"""Predict first, then see (issue 35 item 5): no chapter's stored page shows a verdict.

Every code cell's stored output (what the web page shows) is read. A verdict is a line
that judges an answer: the by-hand checkers' "Right: ..." / "Wrong: ...", a ✓, a ✗ other
than an unwritten stub's "not implemented yet" or a blank prediction's "not filled in
yet", or "You predicted ...". A chapter stores its answer cells as ``None`` (or "?"),
and its checkers print a prompt instead (`lib.teach.exercises.NOT_ANSWERED`).
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))

VERDICT = re.compile(r"\b(Right|Wrong):|✓|✗|You predicted")
NOT_A_VERDICT = re.compile(r"✗ [\w.]+: not implemented yet\.|✗ prediction: not filled in yet\.")


def verdicts(path: pathlib.Path) -> list[str]:
    """'cell i: line' for every stored output line that judges an answer."""
    found = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain") or ""
            for line in "".join(text).splitlines():
                if VERDICT.search(line) and not NOT_A_VERDICT.search(line):
                    found.append(f"cell {i}: {line[:120]}")
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_verdict_is_stored(path):
    assert verdicts(path) == []


def test_the_check_finds_a_stored_verdict(tmp_path):
    """The check itself: a stored slip's verdict and a ✓ are found; prompts are not."""
    outputs = ["Wrong: 64 is not the variance of q·k. It is a classic slip.\n",
               "✓ softmax matches the reference on all 6 test cases.\n",
               "✗ softmax: not implemented yet. Replace `raise NotImplementedError`.\n",
               "Not answered yet: replace None with your answer and run this cell.\n"]
    cells = [{"cell_type": "code", "source": "", "metadata": {},
              "outputs": [{"output_type": "stream", "name": "stdout", "text": [t]}]}
             for t in outputs]
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert [line.split(":")[0] for line in verdicts(path)] == ["cell 0", "cell 1"]
