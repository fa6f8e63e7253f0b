"""Checking a number the learner computed or predicted by hand (chapters 2, 4, 6, 8, 9).

A chapter's prompt ("what is Var(q·k)?") is followed by a cell ``my_… = …`` whose
stored value is ``None``, and a checker built on `check_number`: not answered
yet (for ``None``, so the stored page shows no verdict), right, wrong, or the
slip by name with a hint. The answer is not revealed: the solution below the
prompt gives it. A NaN is never right; anything else that is not a real number
(a string, a bool, a list) is refused with a TypeError naming the variable,
before any comparison.

Tests: the chapters' tests/test_checkers_*.py.
"""

from __future__ import annotations

import math
import sys
import numbers

import torch

from lib.teach.exercises import CheckResult, not_answered

__all__: list[str] = []


def real_number(name: str, value: object) -> float:
    """`value` as a float (int, float, NumPy scalar or 0-d tensor); TypeError otherwise."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{name} must be one real number, got a tensor of shape "
                            f"{tuple(value.shape)} and dtype {value.dtype}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if isinstance(value, numbers.Integral) and abs(int(value)) > sys.float_info.max:
        raise ValueError(f"{name} must be a number a float can hold, got an int of "
                         f"{len(str(abs(int(value))))} digits")  # float() would raise OverflowError
    return float(value)


def real_vector(name: str, value: object, length: int) -> torch.Tensor:
    """`value` (a list or tuple of numbers, or a 1-D tensor) as float64; TypeError otherwise."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 1 or value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{name} must be a list of {length} numbers, got a tensor of shape "
                            f"{tuple(value.shape)} and dtype {value.dtype}")
        entries = value.detach().to(torch.float64)
    elif isinstance(value, (list, tuple)):
        entries = torch.tensor([real_number(f"{name}[{i}]", v) for i, v in enumerate(value)],
                               dtype=torch.float64)
    else:
        raise TypeError(f"{name} must be a list of {length} numbers, got {type(value).__name__}")
    if entries.numel() != length:
        raise ValueError(f"{name} must have {length} entries, got {entries.numel()}")
    return entries


def _show(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:.6g}"


def check_number(answer, exact: float, *, atol: float, what: str, name: str,
                 slips: dict | None = None) -> CheckResult:
    """Right when |answer - exact| <= atol; else the first slip within atol, by name.

    ``None`` (the chapter's placeholder) gets `NOT_ANSWERED`, with no verdict.

    ``slips``: ``{slip name: (its value, a hint)}``, the likely wrong answers of the
    prompt; a slip whose value is within atol of the exact one is never named.
    """
    expected = torch.tensor([[float(exact)]], dtype=torch.float64)
    if answer is None:  # the chapter's placeholder: not answered yet
        return not_answered(expected)
    value = real_number(name, answer)
    if math.isnan(value):
        return CheckResult(False, f"Wrong: {name} is NaN, and a NaN is never right.", expected)
    if abs(value - exact) <= atol:
        return CheckResult(True, f"Right: {_show(value)} is the {what}.", expected)
    for slip, (slip_value, hint) in (slips or {}).items():
        if abs(slip_value - exact) > atol and abs(value - slip_value) <= atol:
            return CheckResult(
                False,
                f"Wrong: {_show(value)} is not the {what}. It is a classic slip: {slip}. {hint}",
                expected, ((0, 0),), slip,
            )
    return CheckResult(
        False, f"Wrong: {_show(value)} is not the {what} (off by more than {atol:g}): "
        "recompute it.", expected, ((0, 0),),
    )
