"""Checkers for chapter 6's coding exercises (the sinusoidal positional encoding).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_positions.py).
"""

from __future__ import annotations

import torch

from lib.model.layers import sinusoidal_positional_encoding
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_sinusoidal_table", "check_apply_rope"]

# (length, d_model): several widths, never d_model = 2 (one pair hides the layout mistakes).
_TABLE_SIZES = ((5, 4), (12, 8), (30, 6), (50, 16), (3, 64))


def _angles(positions: torch.Tensor, d_model: int, base: float = 10000.0, exponent_scale: float = 2.0):
    """positions / base^(scale·i / d_model) for pair i: (len(positions), d_model/2), float64."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    return positions.double()[:, None] / base ** (exponent_scale * i / d_model)


def _interleave(sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    return torch.stack([sin, cos], dim=-1).flatten(-2).float()  # sin, cos, sin, cos, ...


def check_sinusoidal_table(sinusoidal_table) -> Verdict:
    """Chapter 6, exercise: `sinusoidal_table(length, d_model)`, the (length, d_model) table
    PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same angle)."""
    cases = [Case((length, d_model), label=f"length={length}, d_model={d_model}") for length, d_model in _TABLE_SIZES]

    def concatenated(length, d_model):
        angle = _angles(torch.arange(length), d_model)
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1).float()

    def swapped(length, d_model):
        angle = _angles(torch.arange(length), d_model)
        return _interleave(torch.cos(angle), torch.sin(angle))

    def pair_index_exponent(length, d_model):
        angle = _angles(torch.arange(length), d_model, exponent_scale=1.0)
        return _interleave(torch.sin(angle), torch.cos(angle))

    def base_1000(length, d_model):
        angle = _angles(torch.arange(length), d_model, base=1000.0)
        return _interleave(torch.sin(angle), torch.cos(angle))

    def one_based(length, d_model):
        angle = _angles(torch.arange(1, length + 1), d_model)
        return _interleave(torch.sin(angle), torch.cos(angle))

    mistakes = [
        Mistake(
            "sines and cosines concatenated, not interleaved",
            "The sine of pair i goes to column 2i and its cosine to column 2i+1: "
            "did you put all sines first and all cosines after (torch.cat)? "
            "Fill pe[:, 0::2] and pe[:, 1::2] instead.",
            concatenated,
        ),
        Mistake(
            "sin and cos swapped",
            "Even columns hold sines, odd columns cosines: position 0 must be [0, 1, 0, 1, ...].",
            swapped,
        ),
        Mistake(
            "the exponent uses i where the formula has 2i",
            "With i the pair index the exponent is 2i/d_model, not i/d_model. "
            "torch.arange(0, d_model, 2) gives the values 2i directly.",
            pair_index_exponent,
        ),
        Mistake(
            "base 1000 instead of 10000",
            "The wavelengths run from 2π to about 10000·2π: is your base 10000?",
            base_1000,
        ),
        Mistake(
            "positions counted from 1",
            "The first row is position 0 (all sines 0, all cosines 1): use torch.arange(length).",
            one_based,
        ),
    ]
    return check_function(
        sinusoidal_table, sinusoidal_positional_encoding, cases, mistakes, name="sinusoidal_table"
    )


def _rotate_pairs(x: torch.Tensor, *, first: int = 0, sign: float = 1.0, same_angle: bool = False,
                  exponent_scale: float = 2.0, halves: bool = False) -> torch.Tensor:
    """Rotate pair i of the row at position p (axis -2) by sign · p · ω_i, in float64.

    Row-vector form, as in the chapter: [a, b] @ [[cos t, -sin t], [sin t, cos t]]
    = [a cos t + b sin t, -a sin t + b cos t]. With ``halves`` the pairs are
    (i, i + d_model/2) instead of (2i, 2i + 1).
    """
    n, d_model = x.shape[-2], x.shape[-1]
    positions = torch.arange(first, first + n, dtype=torch.float64)
    i = torch.arange(d_model // 2, dtype=torch.float64)
    omega = torch.ones_like(i) if same_angle else 10000.0 ** (-exponent_scale * i / d_model)
    t = sign * positions[:, None] * omega  # (n, d_model/2)
    x64 = x.double()
    a, b = (x64[..., : d_model // 2], x64[..., d_model // 2 :]) if halves else (x64[..., 0::2], x64[..., 1::2])
    ra, rb = a * torch.cos(t) + b * torch.sin(t), -a * torch.sin(t) + b * torch.cos(t)
    out = torch.cat([ra, rb], dim=-1) if halves else torch.stack([ra, rb], dim=-1).flatten(-2)
    return out.to(x.dtype)


def _rope_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    shapes = ((6, 4), (2, 10, 8), (2, 3, 12, 16), (1, 20, 6))  # (..., n, d_model); heads in the third
    return [Case((torch.randn(shape, generator=g),), label=f"x {shape}") for shape in shapes]


def check_apply_rope(apply_rope) -> Verdict:
    """Chapter 6, exercise: `apply_rope(x)`, rotary position embedding of x (..., n, d_model):
    the row at position p (0-based, axis -2) is multiplied by M_p, so that pair i
    (dimensions 2i, 2i+1) turns by p · ω_i with ω_i = 10000^(-2i/d_model)."""
    mistakes = [
        Mistake(
            "the pairs rotate the wrong way",
            "Row p must become x[p] @ M_p, with blocks [[cos, -sin], [sin, cos]] in row-vector form "
            "(the constant row [0, 1, 0, 1, ...] then turns into PE[p]). Is a sign flipped?",
            lambda x: _rotate_pairs(x, sign=-1.0),
        ),
        Mistake(
            "the same angle p for every pair",
            "Pair i turns by ω_i = 10000^(-2i/d_model) per position: its angle is p·ω_i, not p.",
            lambda x: _rotate_pairs(x, same_angle=True),
        ),
        Mistake(
            "positions counted from 1",
            "The first row is position 0 and is not rotated at all: use torch.arange(n).",
            lambda x: _rotate_pairs(x, first=1),
        ),
        Mistake(
            "the exponent uses i where the formula has 2i",
            "ω_i = 10000^(-2i/d_model) with i the pair index (0, 1, ..., d_model/2 - 1).",
            lambda x: _rotate_pairs(x, exponent_scale=1.0),
        ),
        Mistake(
            "pairs (i, i + d_model/2) instead of (2i, 2i + 1)",
            "Some libraries rotate the first half against the second half; this chapter pairs "
            "neighbouring dimensions 2i and 2i + 1, like the sinusoidal table.",
            lambda x: _rotate_pairs(x, halves=True),
        ),
    ]
    return check_function(apply_rope, _rotate_pairs, _rope_cases(), mistakes, name="apply_rope")
