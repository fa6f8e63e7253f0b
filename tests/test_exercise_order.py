"""Predict or write, then check, then reveal: no chapter shows an answer above its question.

Every chapter (every ``book/*.ipynb``, new ones included) is read as stored, outputs
and all. An *ask* is a code cell that asks the learner for something:

- an exercise (first line ``# Exercise``), which calls a checker from `lib`
  (``check_…(my_function)``);
- a prediction, a cell that assigns ``my_… = …`` for a checker to judge.

For each ask, two things must not appear in any cell above it:

1. **the source of the function it asks for.** The functions asked for are found
   from the checker itself: the checker is called with a stub while
   ``check_function`` is intercepted, which hands over the reference it compares
   with. The reference and the `lib` functions (outside `lib.teach`) it calls
   itself are the ones asked for (a checker's reference often builds
   `lib.EncoderLayer` and runs it), found by running the reference once on the
   checker's first case under a tracer. A cell above prints that source when
   its output (or a markdown cell) contains lines of the function's body, or when
   its code passes the function to ``inspect.getsource`` (directly, or through a
   helper the chapter defines that calls it), whatever its stored output.
2. **the value it asks for.** The value is read from the ask's answer as the
   prose states it: the first markdown cell after it, which for an exercise must
   be its solution dropdown (code outputs also print the inputs, so they do not
   say which numbers are the answer; code blocks in the dropdown are left out).
   Numbers with at least three significant digits count (0.4856, 45.4, 1.29);
   the numbers the prose above already gives (at any precision it writes them)
   do not. Such a number printed
   by a cell above the ask, at the answer's precision or finer, gives it away.

The checker of the order is itself tested on small synthetic notebooks that break
each rule (``test_the_order_check_…``).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import pathlib
import re
import sys
import textwrap
from dataclasses import dataclass, field

import pytest
import torch

import lib
import lib.teach.checkers as checkers
from lib.teach import checking

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
LIB_DIR = ROOT / "lib"
MIN_LINE = 16  # shorter body lines ("return x", "x = x") prove nothing


# ---------------------------------------------------------------------------
# Reading a notebook


@dataclass
class Cell:
    index: int
    kind: str  # "code" or "markdown"
    source: str
    output: str  # every text the reader sees below the cell (code cells)
    tags: frozenset = frozenset()

    @property
    def first_line(self) -> str:
        text = self.source.lstrip()
        return text.splitlines()[0] if text else ""

    @property
    def shown(self) -> str:
        """What the page shows of the cell besides its code: the output, or the markdown."""
        return self.source if self.kind == "markdown" else self.output


def _output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        data = out.get("data", {})
        for mime in ("text/plain", "text/markdown", "text/html"):
            value = data.get(mime, "")
            parts.append("".join(value) if isinstance(value, list) else str(value))
    return "\n".join(p for p in parts if p)


def read_cells(nb: dict) -> list[Cell]:
    cells = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] not in ("code", "markdown"):
            continue
        source = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        output = _output_text(c) if c["cell_type"] == "code" else ""
        tags = frozenset(c.get("metadata", {}).get("tags", []))
        cells.append(Cell(i, c["cell_type"], source, output, tags))
    return cells


def _statements(source: str) -> list[ast.stmt]:
    text = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )
    try:
        return ast.parse(text).body
    except SyntaxError:
        return []


# ---------------------------------------------------------------------------
# The asks


@dataclass
class Ask:
    cell: Cell
    kind: str  # "exercise" or "prediction"
    names: list[str]  # my_… names, or the exercise's functions
    checkers: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"cell {self.cell.index} ({self.kind}: {', '.join(self.names) or '?'})"


CHECKER_CALL = re.compile(r"\b(check_\w+)\s*\(")


def find_asks(cells: list[Cell]) -> list[Ask]:
    asks = []
    for cell in cells:
        if cell.kind != "code" or cell.first_line.startswith(("# Check", "# Solution check")):
            continue
        body = _statements(cell.source)
        called = CHECKER_CALL.findall(cell.source)
        if cell.first_line.startswith("# Exercise"):
            names = [s.name for s in body if isinstance(s, (ast.FunctionDef, ast.ClassDef))]
            asks.append(Ask(cell, "exercise", names, called))
            continue
        mine = [
            t.id
            for s in body
            if isinstance(s, (ast.Assign, ast.AnnAssign))
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
            if isinstance(t, ast.Name) and t.id.startswith("my_")
        ]
        if mine:
            asks.append(Ask(cell, "prediction", mine, called))
    return asks


# ---------------------------------------------------------------------------
# Rule 1: the source of the function asked for


@functools.lru_cache(maxsize=None)
def _lib_file(path: str) -> bool:
    """A file of `lib` outside lib.teach (cached: the tracer asks for every call)."""
    if not path.startswith(str(LIB_DIR)):
        return False
    p = pathlib.Path(path).resolve()
    try:
        rel = p.relative_to(LIB_DIR)
    except ValueError:
        return False
    return rel.parts[0] != "teach" and rel.name != "_checks.py"


class _Captured(Exception):
    pass


def checker_reference(checker) -> tuple | None:
    """(reference, first case) that `checker` compares with, or None if it uses no reference."""
    module = sys.modules[checker.__module__]
    seen = {}

    def intercept(learner, reference, cases, mistakes=(), *, name):
        seen["reference"], seen["case"] = reference, cases[0]
        raise _Captured

    def stub(*args, **kwargs):
        raise NotImplementedError

    original = module.__dict__.get("check_function")
    if original is None:
        return None
    module.check_function = intercept
    try:
        checker(stub)
    except _Captured:
        pass
    except Exception:  # noqa: BLE001  (a checker that is not a function checker)
        return None
    finally:
        module.check_function = original
    if "reference" not in seen:
        return None
    return seen["reference"], seen["case"]


def _unwrap(fn):
    fn = getattr(fn, "__func__", fn)
    return inspect.unwrap(fn) if callable(fn) else fn


@functools.cache
def asked_functions(checker) -> list:
    """The functions an exercise asks for: its checker's reference and the `lib` code it wraps.

    The reference (unless it is a lambda, ``lambda scores, h: _attend(scores, h)``)
    and the `lib` functions outside lib.teach that it calls itself (through torch's
    module machinery if need be, but not through other `lib` functions): it is run
    once on the checker's first case under a tracer to find them.
    """
    found = checker_reference(checker)
    if found is None:
        return []
    reference, case = found
    ref = _unwrap(reference)
    if not inspect.isfunction(ref):
        return []
    codes = []

    def caller(frame):
        """The nearest calling frame in lib or in the reference (torch's frames skipped)."""
        frame = frame.f_back
        while frame is not None:
            if frame.f_code is ref.__code__ or frame.f_code.co_filename.startswith(str(LIB_DIR)):
                return frame
            frame = frame.f_back
        return None

    def trace(frame, event, arg):
        if event == "call" and _lib_file(frame.f_code.co_filename):
            above = caller(frame)
            if above is not None and above.f_code is ref.__code__:
                codes.append(frame.f_code)
        return None  # no line events

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the checkers' cases are tiny
    try:  # once untraced first: lazy imports and first-call set-up stay out of the trace
        checking._call(reference, case)
    except Exception:  # noqa: BLE001
        pass
    old = sys.gettrace()
    sys.settrace(trace)
    try:
        checking._call(reference, case)
    except Exception:  # noqa: BLE001
        pass
    finally:
        sys.settrace(old)
        torch.set_num_threads(threads)
    functions = [] if ref.__name__ == "<lambda>" else [ref]
    for code in dict.fromkeys(codes):
        fn = _function_of(code)
        if fn is not None and fn not in functions:
            functions.append(fn)
    return functions


def namesakes(names) -> list:
    """`lib`'s functions and methods of these names: the exercise's own name (``split_heads``,
    ``my_attend`` -> ``attend``), or the name of a checker's private reference that
    re-implements `lib`'s (``_split`` for ``MultiHeadAttention._split``)."""
    found = []
    for name in dict.fromkeys(names):
        obj = _unwrap(getattr(lib, name, None))
        if inspect.isfunction(obj) and _lib_file(inspect.getfile(obj)):
            found.append(obj)
        for cls in vars(lib).values():
            method = _unwrap(vars(cls).get(name)) if inspect.isclass(cls) else None
            if inspect.isfunction(method) and _lib_file(inspect.getfile(method)):
                found.append(method)
    return found


def _function_of(code):
    """The function object whose code this is (module-level functions and methods of lib)."""
    path = pathlib.Path(code.co_filename).resolve().relative_to(ROOT)
    module = importlib.import_module(".".join(path.with_suffix("").parts))
    for obj in vars(module).values():
        candidates = [obj]
        if inspect.isclass(obj):
            candidates = [_unwrap(v) for v in vars(obj).values()]
        for c in candidates:
            if inspect.isfunction(c) and c.__code__ is code:
                return c
    return None


def body_lines(fn) -> list[str]:
    """The function's body after its docstring, one stripped line each, long enough to prove a copy."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    if not body:
        return []
    lines = source.splitlines()[body[0].lineno - 1 : body[-1].end_lineno]
    out = [line.strip() for line in lines]
    return [line for line in out if len(line) >= MIN_LINE and not line.startswith("#")]


def source_printers(cells: list[Cell]) -> set[str]:
    """getsource, and every function a chapter defines that calls it."""
    names = {"getsource", "getsourcelines"}
    for cell in cells:
        for node in ast.walk(ast.Module(body=_statements(cell.source), type_ignores=[])):
            if isinstance(node, ast.FunctionDef) and "getsource" in ast.unparse(node):
                names.add(node.name)
    return names


def _dotted(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001
        return ""


def prints_source_of(cell: Cell, fn, printers: set[str]) -> bool:
    if cell.kind != "code":
        return False
    wanted = {fn.__qualname__}  # a method is named with its class: Class.forward
    for node in ast.walk(ast.Module(body=_statements(cell.source), type_ignores=[])):
        if not isinstance(node, ast.Call):
            continue
        callee = _dotted(node.func).split(".")[-1]
        if callee not in printers:
            continue
        for arg in node.args:
            text = _dotted(arg)
            # tiled_module._TiledAttention.forward -> compare its last one or two parts
            parts = text.split(".")
            if parts[-1] in wanted or ".".join(parts[-2:]) in wanted:
                return True
    return False


def shows_lines_of(cell: Cell, lines: list[str]) -> bool:
    shown = {line.strip() for line in cell.shown.splitlines()}
    hits = sum(line in shown for line in lines)
    return bool(lines) and hits >= min(2, len(lines))


# ---------------------------------------------------------------------------
# Rule 2: the value asked for

NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?!\w)(?!\.\d)")  # a full stop may end a sentence


def _significant(text: str) -> int:
    return len(text.lstrip("-").replace(".", "").lstrip("0"))


def numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _decimals(text: str) -> int:
    return len(text.split(".")[1])


def same_number(shown: str, answer: str) -> bool:
    """`shown` is `answer`, written with at least the answer's decimals."""
    k = _decimals(answer)
    if _decimals(shown) < k:
        return False
    return abs(round(float(shown), k) - float(answer)) < 0.5 * 10 ** (-k - 3)


def given_in(answer: str, text: str) -> bool:
    """The prose already gives this number, at its own precision (0.28 or 0.28403 give 0.2840)."""
    a, k = float(answer), _decimals(answer)
    for g in numbers(text):
        coarser = _significant(g) >= 2 and abs(round(a, _decimals(g)) - float(g)) < 1e-12
        finer = _decimals(g) >= k and abs(round(float(g), k) - a) < 1e-12
        if coarser or finer:
            return True
    return False


FENCE = re.compile(r"```.*?```", re.S)


def answer_numbers(cells: list[Cell], position: int, ask: Ask, next_ask: int) -> list[str]:
    """The distinctive numbers of the ask's answer (position = its index in `cells`).

    The answer is the first markdown cell after the ask: for an exercise only if
    it is its solution dropdown; its code blocks are left out (their constants
    are code, not answers). Numbers the prose above already gave are not part of
    the answer.
    """
    given = ask.cell.source + "\n".join(c.source for c in cells[:position] if c.kind == "markdown")
    after = [c for c in cells[position + 1 : next_ask] if c.kind == "markdown"]
    if not after or (ask.kind == "exercise" and ":::{dropdown}" not in after[0].source):
        return []
    reveal = FENCE.sub("", after[0].source)
    found = [n for n in numbers(reveal) if _significant(n) >= 3 and not given_in(n, given)]
    return list(dict.fromkeys(found))


# ---------------------------------------------------------------------------
# The order check


def order_problems(nb: dict, *, name: str = "") -> list[str]:
    cells = read_cells(nb)
    asks = find_asks(cells)
    position = {id(c): i for i, c in enumerate(cells)}
    printers = source_printers(cells)
    problems = []
    for k, ask in enumerate(asks):
        here = position[id(ask.cell)]
        before = cells[:here]
        next_ask = position[id(asks[k + 1].cell)] if k + 1 < len(asks) else len(cells)
        functions = []
        for checker_name in ask.checkers:
            checker = getattr(checkers, checker_name, None) or getattr(lib, checker_name, None)
            if callable(checker):
                functions += [f for f in asked_functions(checker) if f not in functions]
        own = [f.__name__ for f in functions if f.__module__.startswith("lib.teach")]
        names = [n.removeprefix("my_") for n in ask.names] + own
        functions += [f for f in namesakes(names) if f not in functions]
        for fn in functions:
            lines = body_lines(fn)
            for cell in before:
                how = None
                if prints_source_of(cell, fn, printers):
                    how = "passes it to a source printer"
                elif shows_lines_of(cell, lines):
                    how = "shows lines of its body"
                if how:
                    problems.append(
                        f"{name} {ask}: cell {cell.index} {how}: "
                        f"{fn.__module__}.{fn.__qualname__}"
                    )
        for answer in answer_numbers(cells, here, ask, next_ask):
            for cell in before:
                if cell.kind == "code" and any(same_number(n, answer) for n in numbers(cell.output)):
                    problems.append(
                        f"{name} {ask}: cell {cell.index} prints {answer}, part of its answer"
                    )
                    break
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_answer_above_its_question(path):
    problems = order_problems(json.loads(path.read_text()), name=path.stem)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# The order check itself, on synthetic notebooks that break (or keep) each rule


def _code(source: str, output: str = "", tags=()) -> dict:
    outputs = [{"output_type": "stream", "name": "stdout", "text": output}] if output else []
    return {"cell_type": "code", "source": source, "outputs": outputs, "metadata": {"tags": list(tags)},
            "execution_count": None}


def _md(source: str) -> dict:
    return {"cell_type": "markdown", "source": source, "metadata": {}}


ATTEND_SOURCE = inspect.getsource(lib.attend)
EXERCISE = "# Exercise 1: attend\ndef my_attend(scores, h):\n    raise NotImplementedError\n\n" \
           "lib.check_attend(my_attend)"
SOLUTION = ":::{dropdown} Solution\n```python\nweights = scores.softmax(-1)\n```\n:::"


def _notebook(*cells) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_the_order_check_finds_the_functions_an_exercise_asks_for():
    # check_attend compares with a lambda that calls lib.attend: the profiler finds attend
    assert lib.attend in asked_functions(lib.check_attend)
    assert lib.additive_score in asked_functions(lib.check_additive_score)
    assert len(body_lines(lib.attend)) >= 2
    # chapter 4's checker compares with its own _split: lib's method of that name counts too
    assert lib.MultiHeadAttention._split in namesakes(
        [f.__name__ for f in asked_functions(lib.check_split_heads)])


def test_the_order_check_flags_source_printed_above_an_exercise():
    nb = _notebook(
        _code("import inspect\nprint(inspect.getsource(lib.attend))", ATTEND_SOURCE),
        _md("Write `my_attend`."), _code(EXERCISE), _md(SOLUTION),
    )
    problems = order_problems(nb)
    assert problems == [
        " cell 2 (exercise: my_attend): cell 0 passes it to a source printer: "
        "lib.model.rnn_attention.attend"
    ], problems


def test_the_order_check_flags_a_source_printer_defined_by_the_chapter():
    # outputs cleared: the call alone gives it away
    nb = _notebook(
        _code("def show(fn):\n    print(inspect.getsource(fn))"),
        _code("show(lib.model.rnn_attention.attend)"),
        _code(EXERCISE),
    )
    assert any("cell 1 passes it to a source printer" in p for p in order_problems(nb))


def test_the_order_check_flags_body_lines_in_any_output_or_markdown():
    body = "\n".join(body_lines(lib.attend))
    for cell in (_code("print(something)", body), _md(f"```python\n{body}\n```")):
        problems = order_problems(_notebook(cell, _code(EXERCISE)))
        assert problems == [
            " cell 1 (exercise: my_attend): cell 0 shows lines of its body: "
            "lib.model.rnn_attention.attend"
        ], problems


def test_the_order_check_accepts_the_source_after_the_exercise():
    nb = _notebook(
        _md("Write `my_attend`."), _code(EXERCISE), _md(SOLUTION),
        _code("print(inspect.getsource(lib.attend))", ATTEND_SOURCE),
    )
    assert order_problems(nb) == []


def test_the_order_check_flags_a_value_printed_above_a_prediction():
    prompt = _md("Predict the weight of key 0, given $e^{2.8284} \\approx 16.92$.")
    ask = _code("my_weight = 0.5  # replace with yours\nprint(check_answer(my_weight, w))")
    reveal = _md("Key 0 gets 0.4856 and key 1 gets 0.0287.")
    leak = _code("print(weights)", "tensor([0.48559, 0.02870, 0.48559])")
    problems = order_problems(_notebook(leak, prompt, ask, reveal))
    assert problems == [
        " cell 2 (prediction: my_weight): cell 0 prints 0.4856, part of its answer",
        " cell 2 (prediction: my_weight): cell 0 prints 0.0287, part of its answer",
    ], problems
    # the same numbers after the reveal, or only the prompt's own givens above: no problem
    assert order_problems(_notebook(prompt, ask, reveal, leak)) == []
    given = _code("print(math.exp(2.8284))", "16.9188")
    assert order_problems(_notebook(given, prompt, ask, reveal)) == []
    # a coarser print (0.49) does not give 0.4856 away
    assert order_problems(_notebook(_code("print(w)", "0.49"), prompt, ask, reveal)) == []


def test_the_order_check_reads_the_solution_dropdown_of_an_exercise():
    leak = _code("print(recovered)", "45.4 numbers recovered")
    ask = _code(EXERCISE)
    solution = _md(":::{dropdown} Solution\nAbout 45.4 of them.\n:::")
    assert order_problems(_notebook(leak, ask, solution)) == [
        " cell 1 (exercise: my_attend): cell 0 prints 45.4, part of its answer"
    ]
