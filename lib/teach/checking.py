"""The engine behind every coding exercise: run the learner's function, say what is wrong.

An exercise gives the learner a stub to fill in. Its checker (in
`lib.teach.checkers`) calls `check_function` with

- the learner's function,
- a reference (`lib` itself or `torch`),
- a list of random `Case`s (several shapes, masks and dtypes, seeded, so the
  verdict is the same on every run),
- the `Mistake`s learners commonly make, each written out as a function.

When the learner's outputs differ from the reference, the checker looks for the
mistake whose outputs they equal on *every* case and names it with its hint
("did you divide by √d_k?"). One verdict comes back: a `Verdict`, true when the
function passed, displayed as its message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

__all__ = ["Case", "Mistake", "Verdict", "check_function", "NOT_IMPLEMENTED"]

NOT_IMPLEMENTED = "not implemented yet"


@dataclass(frozen=True)
class Case:
    """One call: positional and keyword arguments, and a short description for messages."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    label: str = ""


@dataclass(frozen=True)
class Mistake:
    """A common bug, as a function with the exercise's signature, and what to tell the learner."""

    name: str  # short, shown first: "softmax over the wrong axis"
    hint: str  # a question that points at the fix: "Did you use dim=-1?"
    fn: Callable


@dataclass(frozen=True)
class Verdict:
    """The checker's one answer. ``bool(verdict)`` is True when the function passed."""

    passed: bool
    message: str
    mistake: str | None = None  # the name of the recognised mistake, if any

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython's display
        printer.text(self.message)


def _clone(value):
    """A deep enough copy that the learner's function cannot change the reference's inputs."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _call(fn: Callable, case: Case):
    return fn(*_clone(case.args), **_clone(case.kwargs))


def _mistake_result(mistake: Mistake, case: Case):
    """What the mistaken version returns, or None where it raises (then it cannot match)."""
    try:
        return _call(mistake.fn, case)
    except Exception:
        return _NO_RESULT


_NO_RESULT = object()


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing results of this dtype."""
    if dtype == torch.float64:
        return 1e-9, 1e-9
    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2, 1e-2
    return 1e-5, 1e-5


def _same(got, want) -> bool:
    """Equal within the dtype's tolerance; NaNs equal NaNs, ±inf equal themselves."""
    if isinstance(want, (tuple, list)):
        return (
            isinstance(got, (tuple, list))
            and len(got) == len(want)
            and all(_same(g, w) for g, w in zip(got, want))
        )
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return False
        if want.dtype == torch.bool or not want.is_floating_point():
            return bool(torch.equal(got.to(want.dtype), want))
        rtol, atol = _tolerance(want.dtype)
        return bool(torch.allclose(got.to(want.dtype), want, rtol=rtol, atol=atol, equal_nan=True))
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return False
        if math.isnan(want):
            return math.isnan(got)
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    return got == want


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).replace('torch.', '')} tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}: " + ", ".join(_describe(v) for v in value)
    return f"{type(value).__name__} {value!r}"


def _difference(got, want) -> str:
    """Where and by how much the learner's result differs (first differing tensor)."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"returned {_describe(got)}; expected {_describe(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            if not _same(g, w):
                return f"item {i}: " + _difference(g, w)
        return "no difference"
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"returned {_describe(got)}; expected {_describe(want)}"
        if got.shape != want.shape:
            return f"returned shape {tuple(got.shape)}; expected {tuple(want.shape)}"
        if not want.is_floating_point():
            bad = (got.to(want.dtype) != want).nonzero()
            return f"{len(bad)} entries differ, the first at index {tuple(bad[0].tolist())}"
        diff = (got.to(want.dtype) - want).abs()
        diff = torch.where(torch.isnan(diff) & ~(torch.isnan(got) & torch.isnan(want)), torch.inf, diff)
        diff = torch.nan_to_num(diff, nan=0.0)
        index = tuple(torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
        index = tuple(int(i) for i in index)
        return f"largest difference {float(diff.max()):.3g} at index {index}"
    return f"returned {got!r}; expected {want!r}"


def check_function(
    learner: Callable,
    reference: Callable,
    cases: Sequence[Case],
    mistakes: Sequence[Mistake] = (),
    *,
    name: str,
) -> Verdict:
    """Run `learner` and `reference` on every case; the verdict names a mistake where one fits.

    name: the exercise's function name, as the learner wrote it (for messages).
    A learner function that raises `NotImplementedError` gets "not implemented
    yet"; one that raises anything else gets the error and the inputs' shapes.
    """
    if not callable(learner):
        raise TypeError(f"the checker needs your function itself, got {type(learner).__name__}")
    if not cases:
        raise ValueError("check_function needs at least one case")
    results = []
    for case in cases:
        try:
            results.append(_call(learner, case))
        except NotImplementedError:
            return Verdict(False, f"✗ {name}: {NOT_IMPLEMENTED}. Replace `raise NotImplementedError` with your code.")
        except Exception as err:  # the learner's bug, reported rather than raised
            inputs = ", ".join(_describe(a) for a in case.args)
            where = f" ({case.label})" if case.label else ""
            return Verdict(False, f"✗ {name} raised {type(err).__name__}: {err}\n  on inputs{where}: {inputs}")
    expected = [_call(reference, case) for case in cases]
    failing = [i for i, (got, want) in enumerate(zip(results, expected)) if not _same(got, want)]
    if not failing:
        return Verdict(True, f"✓ {name} matches the reference on all {len(cases)} test cases.")
    for mistake in mistakes:
        if all(_same(got, _mistake_result(mistake, case)) for got, case in zip(results, cases)):
            return Verdict(
                False,
                f"✗ {name} differs from the reference. Likely mistake: {mistake.name}.\n  {mistake.hint}",
                mistake=mistake.name,
            )
    i = failing[0]
    where = f" ({cases[i].label})" if cases[i].label else ""
    return Verdict(
        False,
        f"✗ {name} differs from the reference on {len(failing)} of {len(cases)} cases.\n"
        f"  First on case {i}{where}: {_difference(results[i], expected[i])}.",
    )
