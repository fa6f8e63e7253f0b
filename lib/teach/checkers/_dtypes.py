"""A dtype check shared by the checkers of chapters 4-6: a float result must have the
reference's dtype exactly (`lib` keeps a float64 input float64 and its sinusoidal table
is float32), and the checker core casts float results before comparing values.

Tests: tests/test_checkers_heads.py, test_checkers_positions.py, test_checkers_feed_forward.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from lib.teach.checking import NOT_IMPLEMENTED, Case, Verdict

__all__ = ["WRONG_DTYPE", "with_exact_dtype"]

WRONG_DTYPE = "a result of another dtype"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _first_wrong_dtype(fn: Callable, reference: Callable, cases: Sequence[Case]):
    """(case index, got dtype, wanted dtype) of the first case whose float result has another
    dtype than the reference's, or None (also when `fn` raises: the verdict reports that)."""
    for i, case in enumerate(cases):
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in case.args]
        kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in case.kwargs.items()}
        try:
            got = fn(*args, **kwargs)
        except Exception:  # noqa: BLE001
            return None
        want = reference(*case.args, **case.kwargs)
        if (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
                and got.dtype.is_floating_point and got.dtype != want.dtype):
            return i, got.dtype, want.dtype
    return None


def with_exact_dtype(verdict: Verdict, fn: Callable, reference: Callable, cases: Sequence[Case],
                     name: str, how: str) -> Verdict:
    """`verdict`, unless it passed (or failed without a named mistake) while `fn` returns a
    float dtype the reference does not: then a ✗ that says which dtype to return.

    how: what to do, for the message ("return x's dtype").
    """
    if verdict.mistake is not None or NOT_IMPLEMENTED in verdict.message:
        return verdict
    with torch.random.fork_rng(devices=[]):  # a second pass must not move the reader's RNG
        wrong = _first_wrong_dtype(fn, reference, cases)
    if wrong is None:
        return verdict
    i, got, want = wrong
    label = f" ({cases[i].label})" if cases[i].label else ""
    return Verdict(
        False,
        f"✗ {name} returned dtype {_dtype_name(got)} on case {i}{label}; expected "
        f"{_dtype_name(want)}: {how}.",
        mistake=WRONG_DTYPE,
    )
