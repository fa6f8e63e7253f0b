"""The chapters as a reader gets them: line lengths, collapsed checks, no internal labels.

Conventions every chapter follows (README, "Writing a chapter"):

- code lines are at most 88 characters, so no cell scrolls sideways on the site;
- a cell that only verifies (asserts against references, a checker run) starts
  with a ``# Check`` comment and carries the tag ``hide-input``: the site shows
  it collapsed, with its output, the same way in every chapter; a cell whose
  statements are all ``assert`` must be such a cell;
- a cell that runs an exercise checker on the solution starts with
  ``# Solution check`` and carries ``remove-cell`` (the solution is in a dropdown);
- every exercise stub raises ``NotImplementedError``;
- the first code cell installs the course where it is missing, from the
  repository in ``_config.yml`` (``tools/install_cell.py``);
- the course's source texts are never named to readers ("seed 004").
"""

from __future__ import annotations

import ast
import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
MAX_LINE = 88
INTERNAL_LABEL = re.compile(r"\bseeds? ?0{2}[0-4]\b", re.I)


def code_cells(path: pathlib.Path) -> list[tuple[int, dict, str]]:
    nb = json.loads(path.read_text())
    return [
        (i, c, "".join(c["source"]))
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code"
    ]


def python_statements(source: str) -> list[ast.stmt] | None:
    """The cell's statements, with IPython magics blanked out; None if it does not parse."""
    text = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        return ast.parse(text).body
    except SyntaxError:
        return None


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_code_lines_fit_the_page(path):
    wide = [
        f"cell {i}: {len(line)} characters: {line[:60]}..."
        for i, _, source in code_cells(path)
        for line in source.splitlines()
        if len(line) > MAX_LINE
    ]
    assert not wide, f"{path.name}: code lines over {MAX_LINE} characters:\n" + "\n".join(wide)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_check_cells_are_collapsed_the_same_way(path):
    problems = []
    for i, cell, source in code_cells(path):
        tags = set(cell.get("metadata", {}).get("tags", []))
        first = source.lstrip().splitlines()[0] if source.strip() else ""
        is_check = first.startswith("# Check")
        is_solution_check = first.startswith("# Solution check")
        if is_check and "hide-input" not in tags:
            problems.append(f"cell {i} starts with '# Check' but lacks the tag hide-input")
        if "hide-input" in tags and not is_check:
            problems.append(f"cell {i} is tagged hide-input but does not start with '# Check'")
        if is_solution_check and "remove-cell" not in tags:
            problems.append(f"cell {i} starts with '# Solution check' but lacks the tag remove-cell")
        body = python_statements(source)
        if body and all(isinstance(s, ast.Assert) for s in body) and not (is_check or is_solution_check):
            problems.append(f"cell {i} only asserts: start it with '# Check' and tag it hide-input")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_internal_source_labels(path):
    nb = json.loads(path.read_text())
    hits = []
    for i, cell in enumerate(nb["cells"]):
        texts = ["".join(cell["source"])]
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("text", "")))
            texts += ["".join(v) if isinstance(v, list) else str(v) for v in out.get("data", {}).values()]
        hits += [f"cell {i}: {m.group(0)!r}" for t in texts for m in INTERNAL_LABEL.finditer(t)]
    assert not hits, f"{path.name} names an internal source text to readers: {hits}"


def test_no_internal_source_labels_in_lib_or_book_text():
    files = [*ROOT.joinpath("lib").rglob("*.py"), *ROOT.joinpath("lib").rglob("*.js")]
    files += [*ROOT.joinpath("book").glob("*.md"), ROOT / "README.md"]
    hits = [f"{f.relative_to(ROOT)}: {m.group(0)!r}" for f in files for m in INTERNAL_LABEL.finditer(f.read_text())]
    assert not hits, hits


def test_install_cells_follow_the_config():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "install_cell.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_install_cell_names_the_distribution_not_a_module():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import install_cell
    finally:
        sys.path.pop(0)
    source = install_cell.cell_source("https://example.org/fork")
    assert 'version("transformer-course-lib")' in source
    assert "find_spec" not in source
    assert "git+{REPOSITORY}" in source and 'REPOSITORY = "https://example.org/fork"' in source
    # The project's own distribution name, as pyproject.toml declares it.
    assert f'name = "{install_cell.DISTRIBUTION}"' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_exercise_stubs_raise_not_implemented(path):
    """A cell defining an exercise function (`# Exercise` first line) ships as a stub."""
    for i, _, source in code_cells(path):
        if source.lstrip().startswith("# Exercise"):
            assert "raise NotImplementedError" in source, f"{path.name} cell {i}: exercise without a stub"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_coding_exercises_with_solution_checks(path):
    sources = [source.lstrip() for _, _, source in code_cells(path)]
    exercises = sum(s.startswith("# Exercise") for s in sources)
    solution_checks = sum(s.startswith("# Solution check") for s in sources)
    assert exercises >= 2, f"{path.name}: {exercises} coding exercises (at least 2)"
    assert solution_checks >= exercises, f"{path.name}: {exercises} exercises, {solution_checks} solution checks"
