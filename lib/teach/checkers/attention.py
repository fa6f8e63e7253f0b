"""Checkers for chapter 2's coding exercises (attention math).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_attention.py).
"""

from __future__ import annotations

import torch

from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_softmax"]


def _softmax_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, dtype in (((3, 4), torch.float64), ((2, 3, 5), torch.float32), ((4, 4), torch.float32)):
        cases.append(Case((torch.randn(shape, generator=g, dtype=dtype) * 3,), label=f"shape {shape}"))
    # Large scores: exp overflows unless the row maximum is subtracted first.
    cases.append(Case((torch.tensor([[1000.0, 999.0, 998.0], [-5.0, 0.0, 5.0]]),), label="large scores"))
    return cases


def check_softmax(softmax) -> Verdict:
    """Chapter 2, exercise: `softmax(scores)` along the last axis (the keys)."""
    mistakes = [
        Mistake(
            "softmax over the wrong axis",
            "Each query's weights must sum to 1 over the keys: normalise along dim=-1, not dim=0.",
            lambda s: torch.softmax(s, dim=0),
        ),
        Mistake(
            "overflow: the row maximum is not subtracted",
            "exp(1000) is inf. Subtract each row's maximum before exp; the softmax does not change.",
            lambda s: torch.exp(s) / torch.exp(s).sum(dim=-1, keepdim=True),
        ),
        Mistake(
            "no normalisation",
            "exp(s) alone is not a distribution: divide by the sum of each row.",
            lambda s: torch.exp(s - s.amax(dim=-1, keepdim=True)),
        ),
    ]
    return check_function(softmax, lambda s: torch.softmax(s, dim=-1), _softmax_cases(), mistakes, name="softmax")
