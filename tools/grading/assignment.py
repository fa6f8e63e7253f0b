"""A chapter as an nbgrader assignment: the learner's version, generated from the chapter.

    python tools/grading/assignment.py --chapter 2 --out assignments   # `make assignment CHAPTER=2`
    python tools/grading/assignment.py --out assignments               # every chapter

The chapter as committed (`book/NN_*.ipynb`) is the only source. Each coding exercise there
is a cell `# Exercise N: ...` (a stub that raises `NotImplementedError`, then
`lib.check_x(fn)`), a "Solution" dropdown, and a hidden `# Solution check` cell holding
the solution as `fn_solution`. From that this writes, in nbgrader's course layout:

- `source/NN_name/NN_name.ipynb`, the instructor's version: each exercise becomes an
  nbgrader *autograded answer* cell (the stub with the solution's body between
  `### BEGIN SOLUTION` / `### END SOLUTION`) and a locked *autograder tests* cell worth
  one point, `verdict = lib.check_x(fn)`, which prints the checker's verdict and fails
  unless it is ✓;
- `release/NN_name/NN_name.ipynb`, the learner's version, made from the source by
  nbgrader's own preprocessors (LockCells, ClearSolutions, ClearOutput, ComputeChecksums):
  every solution body, every "Solution" dropdown and the solution-check cells are gone;
  prompts, stubs and checkers stay.

nbgrader was chosen over otter-grader because it grades locally, with no Docker (the
course's machines and CI have none), its cell metadata is Jupyter's own standard, and it
installs from PyPI next to the pinned environment (0.9.6 on Python 3.11+, 0.9.5 on 3.10).
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
import textwrap
from pathlib import Path

import nbformat
from nbgrader.preprocessors import ClearOutput, ClearSolutions, ComputeChecksums, LockCells

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
EXERCISE = re.compile(r"^# Exercise (\w+): (.*)$")  # numbered or lettered
CHECK_CALL = re.compile(r"^lib\.(check_\w+)\((\w+)\)\s*$")
# a "Solution" (or "Solutions", "Solution, and lib's version") dropdown, up to its closing fence
DROPDOWN = re.compile(r"^(:{3,})\{dropdown\} Solution.*?\n\1[ \t]*(?:\n|$)", re.M | re.S)
SCHEMA = 3
# code cells that hold solutions: "# Solution check: ...", "# Check: the solutions of ..."
SOLUTION_CELL = re.compile(r"^# (Solution check|Check:.*solution)", re.I)
USES_SOLUTION = re.compile(r"\b\w+_solution\b")  # a cell that calls a hidden solution


def chapter_path(chapter: int) -> Path:
    """The committed chapter `book/NN_*.ipynb` for chapter number `chapter`."""
    if not isinstance(chapter, int) or isinstance(chapter, bool):
        raise TypeError(f"chapter must be an int, got {type(chapter).__name__}")
    found = sorted(BOOK.glob(f"{chapter:02d}_*.ipynb"))
    if len(found) != 1:
        raise ValueError(f"chapter={chapter}: no notebook book/{chapter:02d}_*.ipynb")
    return found[0]


def _solution_body(solution_src: str, fn: str, indent: str) -> tuple[str, str]:
    """(helpers, body): the solution cell's other functions and imports, and the body of
    its `..._solution` function re-indented to `indent`, that name replaced by `fn`.
    The cell's asserts and test data (everything else) are left out."""
    lines = solution_src.splitlines()
    tree = ast.parse(solution_src)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    solutions = [n for n in defs if n.name.endswith("_solution")]
    if len(solutions) != 1:
        raise ValueError(f"{fn}: the solution cell defines {len(solutions)} ..._solution functions")
    solution = solutions[0]
    helpers = []
    for node in tree.body:
        if node is solution or not isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom)):
            continue
        start = node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno
        helpers.append("\n".join(lines[start - 1:node.end_lineno]))
    body = textwrap.dedent("\n".join(lines[solution.body[0].lineno - 1:solution.end_lineno]))
    def rename(code: str) -> str:  # this solution's name -> fn; an earlier one's -> its stub's
        code = re.sub(rf"\b{solution.name}\b", fn, code)
        return re.sub(r"\b(\w+)_solution\b", r"\1", code)
    return rename("\n\n".join(helpers)), textwrap.indent(rename(body), indent)


def _exercise_cells(stub: str, solution_src: str, number: str, title: str):
    """The nbgrader answer cell and tests cell of one exercise."""
    lines = stub.rstrip().splitlines()
    match = CHECK_CALL.match(lines[-1])
    if not match:
        raise ValueError(f"exercise {number}: the stub's last line is not lib.check_x(fn)")
    checker, fn = match.groups()
    lines = lines[:-1]
    while lines and not lines[-1].strip():
        lines.pop()
    at = next(i for i, l in enumerate(lines) if l.strip().startswith("raise NotImplementedError"))
    indent = re.match(r"\s*", lines[at]).group(0)
    helpers, body = _solution_body(solution_src, fn, indent)
    answer = lines[:at] + [f"{indent}### BEGIN SOLUTION", body, f"{indent}### END SOLUTION"]
    answer += lines[at + 1:]
    if helpers:
        answer += ["", "### BEGIN SOLUTION", helpers, "### END SOLUTION"]
    grade_id = f"ex{number}_{fn}"
    answer_cell = nbformat.v4.new_code_cell("\n".join(answer))
    answer_cell.metadata["nbgrader"] = {
        "grade": False, "solution": True, "locked": False, "task": False,
        "grade_id": grade_id, "schema_version": SCHEMA,
    }
    test_cell = nbformat.v4.new_code_cell(
        f"# Check exercise {number} ({title}): 1 point; the checker names your mistake\n"
        f"verdict = lib.{checker}({fn})\n"
        "print(verdict)\n"
        'assert verdict, "not yet: the message above says what differs"'
    )
    test_cell.metadata["nbgrader"] = {
        "grade": True, "solution": False, "locked": True, "task": False,
        "grade_id": f"{grade_id}_check", "points": 1, "schema_version": SCHEMA,
    }
    exercise = {"grade_id": grade_id, "number": number, "title": title, "function": fn,
                "checker": checker, "points": 1}
    return answer_cell, test_cell, exercise


def source_notebook(chapter: int) -> nbformat.NotebookNode:
    """The instructor's (nbgrader source) version of a chapter, solutions marked."""
    path = chapter_path(chapter)
    nb = nbformat.read(path, as_version=4)
    cells, exercises = nb.cells, []
    out = []
    for i, cell in enumerate(cells):
        src = cell.source
        if cell.cell_type == "code" and (SOLUTION_CELL.match(src) or USES_SOLUTION.search(src)):
            continue  # a solution check (folded into the answer cell below) or the solutions' numbers
        if cell.cell_type == "markdown":
            text = DROPDOWN.sub("", src).strip()
            if text:
                new = nbformat.v4.new_markdown_cell(text)
                new.metadata.update(copy.deepcopy(cell.metadata))
                out.append(new)
            continue
        head = EXERCISE.match(src.splitlines()[0]) if src else None
        if cell.cell_type == "code" and head:
            solution = next((c.source for c in cells[i + 1:i + 4]
                             if c.cell_type == "code" and c.source.startswith("# Solution check")),
                            None)
            if solution is None:
                raise ValueError(f"{path.name}: exercise {head.group(1)} has no solution cell")
            answer, test, exercise = _exercise_cells(src, solution, head.group(1),
                                                     head.group(2))
            out += [answer, test]
            exercises.append(exercise)
            continue
        new = nbformat.v4.new_code_cell(src)
        new.metadata.update(copy.deepcopy(cell.metadata))
        out.append(new)
    nb.cells = out
    nb.metadata["transformer_course"] = {
        "chapter": chapter, "name": path.stem, "source": f"book/{path.name}",
        "exercises": exercises,
    }
    ClearOutput().preprocess(nb, {})
    return nb


def release_notebook(source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The learner's version: nbgrader's preprocessors on the source (as generate_assignment)."""
    nb = copy.deepcopy(source)
    resources: dict = {}
    for pre in (LockCells(), ClearSolutions(enforce_metadata=True), ClearOutput(),
                ComputeChecksums()):
        nb, resources = pre.preprocess(nb, resources)
    return nb


def setup_sources(nb: nbformat.NotebookNode) -> list[str]:
    """The chapter's import cells (those that `import lib`), IPython magics and %pip removed:
    what the grader runs before a learner's answers."""
    out = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "nbgrader" not in cell.metadata and re.search(
                r"^import lib\b|^from lib import", cell.source, re.M):
            out.append("\n".join(l for l in cell.source.splitlines()
                                 if not l.lstrip().startswith(("%", "!"))))
    return out


def write(chapter: int, out: Path) -> tuple[Path, Path]:
    """Write the source and release notebooks of `chapter` under `out`; return their paths."""
    source = source_notebook(chapter)
    name = source.metadata["transformer_course"]["name"]
    paths = []
    for kind, nb in (("source", source), ("release", release_notebook(source))):
        path = Path(out, kind, name, f"{name}.ipynb")
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
        paths.append(path)
    return paths[0], paths[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chapter", type=int, help="one chapter (default: every chapter)")
    parser.add_argument("--out", type=Path, default=ROOT / "assignments")
    args = parser.parse_args(argv)
    chapters = [args.chapter] if args.chapter else sorted(
        int(p.name[:2]) for p in BOOK.glob("[0-9][0-9]_*.ipynb"))
    for chapter in chapters:
        source, release = write(chapter, args.out)
        n = len(nbformat.read(source, 4).metadata["transformer_course"]["exercises"])
        print(f"chapter {chapter}: {n} graded exercises -> {release.relative_to(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
