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


def _outcome(fn: Callable, case: Case):
    """(True, result) when `fn` returns on this case, (False, the exception) when it raises."""
    try:
        return True, _call(fn, case)
    except Exception as err:  # noqa: BLE001  (any bug of the learner's, or of a Mistake's)
        return False, err


def _same_outcome(got, want) -> bool:
    """Both returned the same result (NaN where the other has NaN), or both raised the same type."""
    (got_ok, got_value), (want_ok, want_value) = got, want
    if got_ok and want_ok:
        return _same(got_value, want_value, allow_nan=True)
    if not got_ok and not want_ok:
        return type(got_value) is type(want_value)
    return False


def _exact_dtype(dtype: torch.dtype) -> bool:
    """Bool and integer results are compared exactly, dtype included."""
    return dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex)


def _less_precise(got: torch.dtype, want: torch.dtype) -> bool:
    """A float dtype with fewer mantissa bits than the reference's (float32 for float64,
    bfloat16 for float16): its result cannot reach the reference's tolerance."""
    return got != want and torch.finfo(got).eps > torch.finfo(want).eps


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing results of this dtype."""
    if dtype == torch.float64:
        return 1e-9, 1e-9
    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2, 1e-2
    return 1e-5, 1e-5


def _same(got, want, *, allow_nan: bool = False) -> bool:
    """Equal within the dtype's tolerance; ±inf equal themselves.

    A bool or integer tensor must have the reference's dtype exactly (a 0/1 float
    mask is not a bool mask: `lib` refuses it). A float tensor may not be less
    precise than the reference (float32 where `lib` returns float64 is wrong; the
    message names both dtypes); a more precise one is compared in the reference's
    dtype. Integers (integer tensors, Python ints) are compared exactly: a count
    off by one is wrong however large it is. A NaN
    in `got` is never right, unless `allow_nan` (used to match a `Mistake`,
    whose NaNs may be the learner's too) and the reference has NaN at the same
    place.
    """
    if isinstance(want, (tuple, list)):
        return (
            isinstance(got, (tuple, list))
            and len(got) == len(want)
            and all(_same(g, w, allow_nan=allow_nan) for g, w in zip(got, want))
        )
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return False
        if _exact_dtype(want.dtype):
            return got.dtype == want.dtype and bool(torch.equal(got, want))
        if _exact_dtype(got.dtype) or _less_precise(got.dtype, want.dtype):
            return False  # a float result returned as bool or integers, or in a coarser float
        if not allow_nan and bool(torch.isnan(got).any()):
            return False
        rtol, atol = _tolerance(want.dtype)
        return bool(torch.allclose(got.to(want.dtype), want, rtol=rtol, atol=atol, equal_nan=True))
    if isinstance(want, bool):
        if isinstance(got, torch.Tensor) and got.numel() == 1 and got.dtype == torch.bool:
            got = got.item()
        return isinstance(got, bool) and got == want
    if isinstance(want, (int, float)):
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return False
        if isinstance(want, int) and not isinstance(got, int):
            return False  # an integer result (a count, an index) must be an int
        if math.isnan(got):
            return allow_nan and math.isnan(want)
        if math.isnan(want):
            return False
        if isinstance(want, int):
            return got == want  # a count or an index: exactly, 2,099,713 is not 2,099,712
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    return got == want


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).replace('torch.', '')} tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}: " + ", ".join(_describe(v) for v in value)
    return f"{type(value).__name__} {value!r}"


def _float_dtype_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    """A float result less precise than the reference's: both dtypes named first, then
    whether the values agree at the coarser dtype's precision."""
    head = (
        f"returned {_dtype_name(got.dtype)}; expected {_dtype_name(want.dtype)}. "
        f"Return a {_dtype_name(want.dtype)} tensor, as `lib` does"
    )
    coarse = min((got.dtype, want.dtype), key=lambda d: torch.finfo(d).bits)
    rtol, atol = _tolerance(coarse)
    common = torch.promote_types(got.dtype, want.dtype)
    g, w = got.to(common), want.to(common)
    if not bool(torch.isnan(got).any()) and bool(torch.allclose(g, w, rtol=rtol, atol=atol)):
        return f"{head} (the values agree to {_dtype_name(coarse)}'s precision)"
    same_dtype = _difference(g, w)
    return f"{head}; the values differ too: {same_dtype}"


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
        if _exact_dtype(want.dtype) and got.dtype != want.dtype:
            values = "right" if bool(torch.equal(got.to(want.dtype), want)) else "also wrong"
            return (
                f"returned dtype {_dtype_name(got.dtype)}; expected {_dtype_name(want.dtype)} "
                f"(the values are {values}). Return a {_dtype_name(want.dtype)} tensor "
                f"(dtype={want.dtype}), as `lib` does"
            )
        if _exact_dtype(want.dtype):
            bad = (got != want).nonzero()
            return f"{len(bad)} entries differ, the first at index {tuple(bad[0].tolist())}"
        if _exact_dtype(got.dtype):
            return (
                f"returned dtype {_dtype_name(got.dtype)}; expected a float tensor "
                f"({_dtype_name(want.dtype)})"
            )
        if _less_precise(got.dtype, want.dtype):
            return _float_dtype_difference(got, want)
        nan = torch.isnan(got) & ~torch.isnan(want)
        if bool(nan.any()):
            first = tuple(int(i) for i in nan.nonzero()[0].tolist())
            return (
                f"NaN in {int(nan.sum())} of {nan.numel()} entries where the reference is a "
                f"number, the first at index {first}"
            )
        diff = (got.detach().to(want.dtype) - want.detach()).abs()  # a learner's output may carry grad
        diff = torch.where(torch.isnan(diff) & ~(torch.isnan(got) & torch.isnan(want)), torch.inf, diff)
        diff = torch.nan_to_num(diff, nan=0.0)
        index = tuple(torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
        index = tuple(int(i) for i in index)
        where = f"largest difference {float(diff.max()):.3g} at index {index}"
        if got.dtype != want.dtype:  # a more precise result, compared in want's dtype
            where += f" (returned {_dtype_name(got.dtype)}, compared as {_dtype_name(want.dtype)})"
        return where
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        if isinstance(got, float) and math.isnan(got):
            return f"returned NaN; expected {want!r}"
        if isinstance(want, int) and isinstance(got, float):
            return f"returned the float {got!r}; expected the int {want!r} (return an int)"
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
    outcomes = []
    for case in cases:
        try:
            outcomes.append((True, _call(learner, case)))
        except NotImplementedError:
            return Verdict(False, f"✗ {name}: {NOT_IMPLEMENTED}. Replace `raise NotImplementedError` with your code.")
        except Exception as err:  # the learner's bug, reported rather than raised
            outcomes.append((False, err))
    raised = [i for i, (ok, _) in enumerate(outcomes) if not ok]
    expected = [] if raised else [_call(reference, case) for case in cases]
    failing = raised or [
        i for i, ((_, got), want) in enumerate(zip(outcomes, expected)) if not _same(got, want)
    ]
    if not failing:
        return Verdict(True, f"✓ {name} matches the reference on all {len(cases)} test cases.")
    # A mistake fits when it returns what the learner returned on every case, and
    # raises the same type of exception where the learner's function raised.
    for mistake in mistakes:
        if all(_same_outcome(got, _outcome(mistake.fn, case)) for got, case in zip(outcomes, cases)):
            return Verdict(
                False,
                f"✗ {name} differs from the reference. Likely mistake: {mistake.name}.\n  {mistake.hint}",
                mistake=mistake.name,
            )
    i = failing[0]
    where = f" ({cases[i].label})" if cases[i].label else ""
    if raised:
        err = outcomes[i][1]
        inputs = ", ".join(_describe(a) for a in cases[i].args)
        return Verdict(False, f"✗ {name} raised {type(err).__name__}: {err}\n  on inputs{where}: {inputs}")
    return Verdict(
        False,
        f"✗ {name} differs from the reference on {len(failing)} of {len(cases)} cases.\n"
        f"  First on case {i}{where}: {_difference(outcomes[i][1], expected[i])}.",
    )
