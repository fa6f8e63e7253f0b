"""Checkers for chapter 6's coding exercises (the sinusoidal positional encoding).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_positions.py).
"""

from __future__ import annotations

import math

import torch

from lib.model.layers import sinusoidal_positional_encoding
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_sinusoidal_table", "check_rotation_for_offset"]

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


def _rotation(k: int, d_model: int, *, sign: float = 1.0, same_angle: bool = False, use_k: bool = True,
              exponent_scale: float = 2.0) -> torch.Tensor:
    """Block-diagonal M with 2×2 blocks [[cos a, sign·(-sin a)], [sign·sin a, cos a]] (row-vector form)."""
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        omega = 1.0 if same_angle else 10000.0 ** (-exponent_scale * i / d_model)
        a = omega * (k if use_k else 1)
        c, s = math.cos(a), sign * math.sin(a)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    return m.float()


_ROTATION_CASES = ((3, 4), (1, 8), (7, 6), (20, 16), (-5, 8), (0, 4))  # (k, d_model)


def check_rotation_for_offset(rotation_for_offset) -> Verdict:
    """Chapter 6, exercise: `rotation_for_offset(k, d_model)`, the (d_model, d_model) matrix M_k
    with PE[p] @ M_k == PE[p + k] for every position p (2×2 rotation blocks on the diagonal)."""
    cases = [Case((k, d_model), label=f"k={k}, d_model={d_model}") for k, d_model in _ROTATION_CASES]
    mistakes = [
        Mistake(
            "the blocks rotate the wrong way (PE[p] @ M gives PE[p - k])",
            "In row-vector form [sin, cos] @ [[cos a, -sin a], [sin a, cos a]] = [sin(x+a), cos(x+a)]. "
            "Did you write the column-vector block, or transpose it?",
            lambda k, d_model: _rotation(k, d_model, sign=-1.0),
        ),
        Mistake(
            "the same angle k for every pair",
            "Pair i turns by ω_i = 10000^(-2i/d_model) per position, so its block rotates by ω_i·k, not k.",
            lambda k, d_model: _rotation(k, d_model, same_angle=True),
        ),
        Mistake(
            "the angle ω_i, not ω_i·k (a shift by one position)",
            "A shift by k positions turns pair i by k times its per-position angle: did you multiply by k?",
            lambda k, d_model: _rotation(k, d_model, use_k=False),
        ),
        Mistake(
            "the exponent uses i where the formula has 2i",
            "ω_i = 10000^(-2i/d_model) with i the pair index (0, 1, ..., d_model/2 - 1).",
            lambda k, d_model: _rotation(k, d_model, exponent_scale=1.0),
        ),
    ]
    return check_function(
        rotation_for_offset, _rotation, cases, mistakes, name="rotation_for_offset"
    )
