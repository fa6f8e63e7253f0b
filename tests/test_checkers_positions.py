"""Chapter 6's exercise checkers: the solution passes, a stub is "not implemented yet",
and each named mistake, written out independently here, is recognised by name."""

from __future__ import annotations

import math

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args):
    raise NotImplementedError


# --- sinusoidal_table(length, d_model) ---------------------------------------------


def table(length, d_model, *, base=10000.0, first=0, two_i=True, layout="interleaved"):
    """The table written out entry by entry with math.sin/math.cos (float64 lists)."""
    rows = []
    for pos in range(first, first + length):
        row = [0.0] * d_model
        for i in range(d_model // 2):
            angle = pos / base ** ((2 * i if two_i else i) / d_model)
            s, c = math.sin(angle), math.cos(angle)
            if layout == "interleaved":
                row[2 * i], row[2 * i + 1] = s, c
            elif layout == "swapped":
                row[2 * i], row[2 * i + 1] = c, s
            else:  # halves
                row[i], row[d_model // 2 + i] = s, c
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def sinusoidal_table(length, d_model):
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    angle = pos * torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def test_table_solution_passes():
    assert lib.check_sinusoidal_table(sinusoidal_table)
    assert lib.check_sinusoidal_table(table)  # float64, entry by entry


def test_table_stub_is_not_implemented():
    verdict = lib.check_sinusoidal_table(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "wrong, name",
    [
        (lambda L, d: table(L, d, layout="halves"), "sines and cosines concatenated, not interleaved"),
        (lambda L, d: table(L, d, layout="swapped"), "sin and cos swapped"),
        (lambda L, d: table(L, d, two_i=False), "the exponent uses i where the formula has 2i"),
        (lambda L, d: table(L, d, base=1000.0), "base 1000 instead of 10000"),
        (lambda L, d: table(L, d, first=1), "positions counted from 1"),
    ],
)
def test_table_mistakes_are_named(wrong, name):
    verdict = lib.check_sinusoidal_table(wrong)
    assert not verdict
    assert verdict.mistake == name, verdict.message


# --- rotation_for_offset(k, d_model) -----------------------------------------------


def rotation(k, d_model, *, block="row", angle_of=None):
    """Block-diagonal matrix; angle_of(i) gives pair i's rotation angle (default ω_i k)."""
    if angle_of is None:
        def angle_of(i):
            return k * 10000.0 ** (-2 * i / d_model)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        a = angle_of(i)
        if block == "row":  # [sin, cos] @ block = [sin(x + a), cos(x + a)]
            b = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
        else:  # the column-vector rotation matrix, used on row vectors
            b = [[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]]
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(b, dtype=torch.float64)
    return m


def test_rotation_solution_passes_and_shifts_the_table():
    assert lib.check_rotation_for_offset(rotation)
    pe = lib.sinusoidal_positional_encoding(60, 16).double()
    for k in (1, 4, 9):
        assert torch.allclose(pe[: 60 - k] @ rotation(k, 16), pe[k:], atol=1e-5)


def test_rotation_stub_is_not_implemented():
    verdict = lib.check_rotation_for_offset(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "wrong, name",
    [
        (lambda k, d: rotation(k, d, block="column"), "the blocks rotate the wrong way (PE[p] @ M gives PE[p - k])"),
        (lambda k, d: rotation(k, d, angle_of=lambda i: float(k)), "the same angle k for every pair"),
        (
            lambda k, d: rotation(k, d, angle_of=lambda i: 10000.0 ** (-2 * i / d)),
            "the angle ω_i, not ω_i·k (a shift by one position)",
        ),
        (
            lambda k, d: rotation(k, d, angle_of=lambda i: k * 10000.0 ** (-i / d)),
            "the exponent uses i where the formula has 2i",
        ),
    ],
)
def test_rotation_mistakes_are_named(wrong, name):
    verdict = lib.check_rotation_for_offset(wrong)
    assert not verdict
    assert verdict.mistake == name, verdict.message
