"""Issue 37: the chapters as nbgrader assignments, and the contained grader on a synthetic class.

The class (made here, at test time) has a perfect learner, an empty one, one learner per
classic mistake of chapter 5's two exercises and a mixed chapter-2 learner (two right, two
classic mistakes), and one learner per hostile case: invalid JSON, a syntax error, a
deleted answer cell, a renamed one, an endless loop, unbounded allocation, megabytes of
prints, os.system, a write into the course, and a checker monkey-patched to return ✓.
The expected gradebook is written out below, row by row; the grader's is compared with it.
"""

import copy
import csv
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "grading"))
import assignment  # noqa: E402
import grade  # noqa: E402

FF, COUNT = "ex1_feed_forward", "ex2_ffn_parameter_count"
HACK = ROOT / "book" / "_grading_test_hacked.txt"


def _with(nb, answers: dict, drop=(), rename=()):
    """A copy of release notebook `nb` with the answer cells' sources replaced."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in drop:
            continue
        if gid in rename:
            cell.metadata.nbgrader.grade_id = gid + "_mine"
        if gid in answers:
            cell.source = answers[gid]
        cells.append(cell)
    nb.cells = cells
    return nb


FF_RIGHT = ("def feed_forward(x, w1, b1, w2, b2):\n"
            "    return torch.relu(x @ w1 + b1) @ w2 + b2\n")
COUNT_RIGHT = ("def ffn_parameter_count(d_model, d_ff):\n"
               "    return 2 * d_model * d_ff + d_ff + d_model\n")


def _class_of(folder: Path) -> dict:
    """Write the synthetic class into `folder`; return {file stem: chapter}."""
    r5 = assignment.release_notebook(assignment.source_notebook(5))
    r2 = assignment.release_notebook(assignment.source_notebook(2))
    right = {FF: FF_RIGHT, COUNT: COUNT_RIGHT}
    bodies = {
        "05_perfect": right,
        "05_empty": {},
        "05_mistake_no_relu": {FF: "def feed_forward(x, w1, b1, w2, b2):\n"
                                   "    return (x @ w1 + b1) @ w2 + b2\n", COUNT: COUNT_RIGHT},
        "05_mistake_relu_before_bias": {FF: "def feed_forward(x, w1, b1, w2, b2):\n"
                                            "    return (torch.relu(x @ w1) + b1) @ w2 + b2\n"},
        "05_mistake_no_b2": {FF: "def feed_forward(x, w1, b1, w2, b2):\n"
                                 "    return torch.relu(x @ w1 + b1) @ w2\n"},
        "05_mistake_no_biases": {COUNT: "def ffn_parameter_count(d_model, d_ff):\n"
                                        "    return 2 * d_model * d_ff\n"},
        "05_mistake_one_layer": {COUNT: "def ffn_parameter_count(d_model, d_ff):\n"
                                        "    return d_model * d_ff + d_ff\n"},
        "05_hostile_syntax": {FF: "def feed_forward(x, w1, b1, w2, b2)\n    return x\n",
                              COUNT: COUNT_RIGHT},
        "05_hostile_loop": {FF: "while True:\n    pass\n", COUNT: COUNT_RIGHT},
        "05_hostile_alloc": {FF: "hoard = []\nwhile True:\n    hoard.append(torch.empty(2**28))\n"},
        "05_hostile_print": {FF: "print('x' * 5_000_000)\n" + FF_RIGHT},
        "05_hostile_os_system": {FF: "import os\nos.system('echo pwned')\n" + FF_RIGHT},
        "05_hostile_write": {FF: f"open({str(HACK)!r}, 'w').write('x')\n" + FF_RIGHT},
        "05_hostile_tamper": {FF: "import lib\nfrom lib.teach.checking import Verdict\n"
                                  "lib.check_feed_forward = lambda fn: Verdict(True, '✓')\n"
                                  "def feed_forward(x, w1, b1, w2, b2):\n    return x\n"},
    }
    for stem, answers in bodies.items():
        nbformat.write(_with(r5, answers), folder / f"{stem}.ipynb")
    nbformat.write(_with(r5, right, drop=(FF,)), folder / "05_hostile_deleted.ipynb")
    nbformat.write(_with(r5, right, rename=(COUNT,)), folder / "05_hostile_renamed.ipynb")
    (folder / "05_hostile_not_json.ipynb").write_text('{"cells": [ oops')
    ids = {ex["function"]: ex["grade_id"] for ex in r2.metadata["transformer_course"]["exercises"]}
    mixed = {  # softmax and padding mask right, the causal mask upper, attention not done
        "softmax": "def softmax(s):\n    e = torch.exp(s - s.amax(-1, keepdim=True))\n"
                       "    return e / e.sum(-1, keepdim=True)\n",
        "causal_mask": "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool)"
                           ".triu()\n",
        "padding_mask": "def padding_mask(tokens, pad_id):\n"
                            "    return (tokens != pad_id)[:, None, None, :]\n",
    }
    nbformat.write(_with(r2, {ids[fn]: src for fn, src in mixed.items()}),
                   folder / "02_mixed.ipynb")


# (submission, exercise) -> (points, status, mistake); the rest of each row is the detail.
# Chapter 2's exercises are named by their function (their numbers may change with the chapter).
EXPECTED = {
    ("02_mixed", "softmax"): (1, "passed", ""),
    ("02_mixed", "scaled_attention"): (0, "failed", "not implemented"),
    ("02_mixed", "causal_mask"): (0, "failed", "upper triangle instead of lower"),
    ("02_mixed", "padding_mask"): (1, "passed", ""),
    ("05_empty", FF): (0, "failed", "not implemented"),
    ("05_empty", COUNT): (0, "failed", "not implemented"),
    ("05_hostile_alloc", FF): (0, "error", "memory limit"),
    ("05_hostile_alloc", COUNT): (0, "failed", "not implemented"),
    ("05_hostile_deleted", FF): (0, "refused", "cell deleted or renamed"),
    ("05_hostile_deleted", COUNT): (1, "passed", ""),
    ("05_hostile_loop", FF): (0, "error", "time limit"),
    ("05_hostile_loop", COUNT): (1, "passed", ""),
    ("05_hostile_not_json", FF): (0, "refused", "not valid JSON"),
    ("05_hostile_not_json", COUNT): (0, "refused", "not valid JSON"),
    ("05_hostile_os_system", FF): (0, "error", "called os.system"),
    ("05_hostile_os_system", COUNT): (0, "failed", "not implemented"),
    ("05_hostile_print", FF): (1, "passed", ""),
    ("05_hostile_print", COUNT): (0, "failed", "not implemented"),
    ("05_hostile_renamed", FF): (1, "passed", ""),
    ("05_hostile_renamed", COUNT): (0, "refused", "cell deleted or renamed"),
    ("05_hostile_syntax", FF): (0, "error", "syntax error"),
    ("05_hostile_syntax", COUNT): (1, "passed", ""),
    ("05_hostile_tamper", FF): (0, "tampered", "tampered with lib or the checker"),
    ("05_hostile_tamper", COUNT): (0, "tampered", "tampered with lib or the checker"),
    ("05_hostile_write", FF): (0, "error", "wrote outside its folder"),
    ("05_hostile_write", COUNT): (0, "failed", "not implemented"),
    ("05_mistake_no_b2", FF): (0, "failed", "the output bias b2 left out"),
    ("05_mistake_no_b2", COUNT): (0, "failed", "not implemented"),
    ("05_mistake_no_biases", FF): (0, "failed", "not implemented"),
    ("05_mistake_no_biases", COUNT): (0, "failed", "the biases left out"),
    ("05_mistake_no_relu", FF): (0, "failed", "no ReLU"),
    ("05_mistake_no_relu", COUNT): (1, "passed", ""),
    ("05_mistake_one_layer", FF): (0, "failed", "not implemented"),
    ("05_mistake_one_layer", COUNT): (0, "failed", "only one of the two layers counted"),
    ("05_mistake_relu_before_bias", FF): (0, "failed", "the ReLU before the bias b1"),
    ("05_mistake_relu_before_bias", COUNT): (0, "failed", "not implemented"),
    ("05_perfect", FF): (1, "passed", ""),
    ("05_perfect", COUNT): (1, "passed", ""),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    _class_of(folder)
    out = tmp_path_factory.mktemp("gradebook")
    HACK.unlink(missing_ok=True)
    saved = dict(grade.LIMITS)
    grade.LIMITS.update(cell_timeout=3.0, notebook_timeout=300.0)
    start = time.monotonic()
    try:
        rows = grade.grade(folder, out)
    finally:
        grade.LIMITS.update(saved)
    print(f"graded {len({r['submission'] for r in rows})} submissions in "
          f"{time.monotonic() - start:.0f} s")
    return folder, out, rows


def test_the_gradebook_of_the_synthetic_class(graded):
    folder, out, rows = graded
    by_id = {ex["grade_id"]: ex["function"] for ex in assignment.source_notebook(2).metadata[
        "transformer_course"]["exercises"]}
    got = {(r["submission"], by_id[r["exercise"]] if r["chapter"] == "2" else r["exercise"]):
           (int(r["points"]), r["status"], r["mistake"]) for r in rows}
    assert got == EXPECTED
    assert len({s for s, _ in EXPECTED}) >= 12
    assert not HACK.exists(), "a submission wrote into the course"
    detail = {(r["submission"], r["exercise"]): r["detail"] for r in rows}
    assert "printed 4.8 MB" in detail["05_hostile_print", FF]
    assert "replaced check_feed_forward" in detail["05_hostile_tamper", FF].replace("lib.", "")
    assert detail["05_mistake_no_relu", FF].startswith("✗")
    with (out / "gradebook.csv").open() as f:
        assert list(csv.DictReader(f)) == rows
    page = (out / "gradebook.html").read_text()
    assert "<td>ex1_feed_forward</td><td>no ReLU</td><td>1</td>" in page
    blank = sum(1 for (_, ex), v in EXPECTED.items() if ex == FF and v[2] == "not implemented")
    assert blank == 3
    assert f"<td>ex1_feed_forward</td><td>not implemented</td><td>{blank}</td>" in page


def test_a_rerun_gives_the_same_bytes_and_lost_rows_are_kept(graded, tmp_path):
    folder, out, rows = graded
    first = (out / "gradebook.csv").read_bytes(), (out / "gradebook.html").read_bytes()
    # a grader that crashed after two submissions left their rows in the partial file:
    # the re-run keeps them (not re-graded) and grades only the rest
    keep = [r for r in rows if r["submission"] in ("02_mixed", "05_empty")]
    again = tmp_path / "gradebook"
    again.mkdir()
    with (again / "gradebook.partial.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, grade.COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(keep)
    only = tmp_path / "only"
    only.mkdir()
    for stem in ("02_mixed", "05_empty", "05_hostile_not_json", "05_perfect"):
        (only / f"{stem}.ipynb").write_bytes((folder / f"{stem}.ipynb").read_bytes())
    rerun = grade.grade(only, again)
    assert rerun == [r for r in rows if r["submission"] in
                     ("02_mixed", "05_empty", "05_hostile_not_json", "05_perfect")]
    assert not (again / "gradebook.partial.csv").exists()
    # and the same submissions again, from scratch: byte for byte the same gradebook
    third = tmp_path / "third"
    grade.grade(only, third)
    assert (third / "gradebook.csv").read_bytes() == (again / "gradebook.csv").read_bytes()
    assert (third / "gradebook.html").read_bytes() == (again / "gradebook.html").read_bytes()
    assert first[0].startswith((third / "gradebook.csv").read_bytes()[:60])


def test_a_tampered_checker_gets_no_points_even_when_the_function_is_right(tmp_path):
    r5 = assignment.release_notebook(assignment.source_notebook(5))
    patch = ("import lib.teach.checking as checking\n"
             "checking._same = lambda got, want, **kw: True\n" + FF_RIGHT)
    nbformat.write(_with(r5, {FF: patch, COUNT: COUNT_RIGHT}), tmp_path / "05_sly.ipynb")
    rows = grade.grade_one(tmp_path / "05_sly.ipynb", "05_sly", 5, r5,
                           [str(ROOT), str(tmp_path)])
    assert [(r["points"], r["status"]) for r in rows] == [(0, "tampered"), (0, "tampered")]
    assert "_same" in rows[0]["detail"]


@pytest.mark.parametrize("chapter", range(1, 18))
def test_the_learners_version_holds_no_solution(chapter):
    source = assignment.source_notebook(chapter)
    release = assignment.release_notebook(source)
    text = "\n".join(c.source for c in release.cells)
    exercises = source.metadata["transformer_course"]["exercises"]
    assert exercises, f"chapter {chapter} has no graded exercise"
    assert "dropdown} Solution" not in text and "_solution" not in text
    assert "BEGIN SOLUTION" not in text and "# Solution check" not in text
    flat = " ".join(text.split())
    for cell in source.cells:
        nbg = cell.metadata.get("nbgrader", {})
        if nbg.get("solution"):  # the solution's body, as a block, is gone
            body = cell.source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
            assert " ".join(body.split()) not in flat, nbg["grade_id"]
            assert "raise NotImplementedError" in text
        if nbg.get("grade"):
            assert nbg["points"] == 1 and nbg["locked"]
    chapter_text = assignment.chapter_path(chapter).read_text()
    dropdowns = re.findall(r":::\{dropdown\} Solution.*?\n(.*?)\n:::", "\n".join(
        c.source for c in nbformat.read(assignment.chapter_path(chapter), 4).cells), re.S)
    assert dropdowns and "dropdown} Solution" in chapter_text
    for block in dropdowns:  # each "Solution" dropdown of the chapter, as a block, is gone
        assert " ".join(block.split()) not in flat, block[:80]
    graded = [c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(graded) == len(exercises)
