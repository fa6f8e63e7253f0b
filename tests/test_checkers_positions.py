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


def table(length, d_model, *, base=10000.0, first=0, two_i=True, layout="interleaved",
          k=2, multiply=False):
    """The table written out entry by entry with math.sin/math.cos (float64 lists)."""
    rows = []
    for pos in range(first, first + length):
        row = [0.0] * d_model
        for i in range(d_model // 2):
            freq = base ** ((k * i if two_i else i) / d_model)
            angle = pos * freq if multiply else pos / freq
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
    assert lib.check_sinusoidal_table(lambda L, d: table(L, d).float())  # entry by entry


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
        (lambda L, d: table(L, d, k=4), "the exponent is 2·(2i)/d_model"),
        (lambda L, d: table(L, d, multiply=True),
         "the position multiplied by 10000^(2i/d_model) instead of divided"),
    ],
)
def test_table_mistakes_are_named(wrong, name):
    verdict = lib.check_sinusoidal_table(wrong)
    assert not verdict
    assert verdict.mistake == name, verdict.message


# --- apply_rope(x) ------------------------------------------------------------------


def rotation(angles, d_model, *, block="row", halves=False):
    """Matrix rotating pair i by angles[i]; pairs (2i, 2i+1), or (i, i + d/2) with halves."""
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, a in enumerate(angles):
        j, k = (i, i + d_model // 2) if halves else (2 * i, 2 * i + 1)
        c, s = math.cos(a), math.sin(a)
        if block == "column":  # the column-vector rotation used on row vectors
            s = -s
        m[j, j], m[j, k], m[k, j], m[k, k] = c, -s, s, c
    return m


def rope(x, *, first=0, omega=None, block="row", halves=False):
    """Row p of x times the rotation of pair i by (p + first) * omega(i, d_model)."""
    n, d_model = x.shape[-2:]
    if omega is None:
        def omega(i, d):
            return 10000.0 ** (-2 * i / d)
    rows = []
    for p in range(n):
        angles = [(p + first) * omega(i, d_model) for i in range(d_model // 2)]
        rows.append(x[..., p, :].double() @ rotation(angles, d_model, block=block, halves=halves))
    return torch.stack(rows, dim=-2).to(x.dtype)


def apply_rope(x, angle_dtype=None):
    n, d_model = x.shape[-2:]
    dt = angle_dtype or x.dtype
    two_i = torch.arange(0, d_model, 2, dtype=dt)
    angle = torch.arange(n, dtype=dt)[:, None] * 10000.0 ** (-two_i / d_model)
    sin, cos = torch.sin(angle), torch.cos(angle)  # (n, d_model/2)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos + odd * sin
    out[..., 1::2] = odd * cos - even * sin
    return out


def apply_rope_roformer(x):
    """RoFormer's eq. 34 written out: [a cos - b sin, a sin + b cos] (column-vector R_p)."""
    n, d_model = x.shape[-2:]
    two_i = torch.arange(0, d_model, 2, dtype=x.dtype)
    angle = torch.arange(n, dtype=x.dtype)[:, None] * 10000.0 ** (-two_i / d_model)
    sin, cos = torch.sin(angle), torch.cos(angle)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def rotate_half_hf(x):
    """Hugging Face's LLaMA: x * cos + rotate_half(x) * sin, the half-split layout."""
    n, d_model = x.shape[-2:]
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    x1, x2 = x[..., : d_model // 2], x[..., d_model // 2 :]
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.double() * emb.cos() + rotated.double() * emb.sin()).to(x.dtype)


def test_rope_roformer_sign_is_accepted_and_named():
    verdict = lib.check_apply_rope(apply_rope_roformer)
    assert verdict and verdict.mistake is None
    assert "RoFormer" in verdict.message and "transpose" in verdict.message


def test_rope_angles_in_float32_on_float64_input_are_named():
    verdict = lib.check_apply_rope(lambda x: apply_rope(x, angle_dtype=torch.float32))
    assert not verdict and verdict.mistake == "angles computed in float32", verdict.message


def test_rope_cases_have_both_float_dtypes():
    from lib.teach.checkers.positions import _rope_cases

    assert {c.args[0].dtype for c in _rope_cases()} == {torch.float32, torch.float64}


def same_sign(x, s):
    """[a cos + s b sin, s a sin + b cos]: both sine terms with the sign s."""
    n, d_model = x.shape[-2:]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = torch.arange(n, dtype=torch.float64)[:, None] * 10000.0 ** (-two_i / d_model)
    a, b = x[..., 0::2].double(), x[..., 1::2].double()
    out = [a * angle.cos() + s * b * angle.sin(), s * a * angle.sin() + b * angle.cos()]
    return torch.stack(out, dim=-1).flatten(-2).to(x.dtype)


def test_rope_solution_passes_and_turns_position_zero_into_the_table():
    assert lib.check_apply_rope(apply_rope)
    assert lib.check_apply_rope(rope)
    pe = lib.sinusoidal_positional_encoding(30, 16).double()
    start = torch.tensor([0.0, 1.0] * 8, dtype=torch.float64).expand(30, 16)
    assert torch.allclose(rope(start), pe, atol=1e-6)


def test_rope_scores_depend_on_the_offset_only():
    q, k = torch.randn(2, 1, 16, dtype=torch.float64)
    rq, rk = rope(q.expand(40, 16)), rope(k.expand(40, 16))
    assert math.isclose(float(rq[12] @ rk[5]), float(rq[30] @ rk[23]), rel_tol=1e-9, abs_tol=1e-9)


def test_rope_stub_is_not_implemented():
    verdict = lib.check_apply_rope(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "wrong, name",
    [
        (lambda x: same_sign(x, -1.0), "the two sine terms have the same sign (not a rotation)"),
        (lambda x: same_sign(x, 1.0), "the two sine terms have the same sign (not a rotation)"),
        (lambda x: rope(x, omega=lambda i, d: 1.0), "the same angle p for every pair"),
        (lambda x: rope(x, first=1), "positions counted from 1"),
        (lambda x: rope(x, omega=lambda i, d: 10000.0 ** (-i / d)), "the exponent uses i where the formula has 2i"),
    ],
)
def test_rope_mistakes_are_named(wrong, name):
    verdict = lib.check_apply_rope(wrong)
    assert not verdict
    assert verdict.mistake == name, verdict.message


def test_wrong_float_dtype_is_named():
    from lib.teach.checkers._dtypes import WRONG_DTYPE

    verdict = lib.check_sinusoidal_table(table)  # float64: lib's table is float32
    assert not verdict and verdict.mistake == WRONG_DTYPE and "float32" in verdict.message
    verdict = lib.check_apply_rope(lambda x: rope(x).float())
    assert not verdict and verdict.mistake == WRONG_DTYPE and "float64" in verdict.message


# --- on paper: a row of the table and the wavelengths (numbers) ----------------------


def test_pe_row_checker():
    # the reference: torch's own sin and cos of position * 10000^(-2i/d), pairs interleaved
    omega = 10000.0 ** (-torch.arange(0, 4, 2, dtype=torch.float64) / 4)  # (1, 1/100)
    angles = 2 * omega
    exact = torch.stack([angles.sin(), angles.cos()], -1).flatten()
    assert torch.allclose(exact, torch.tensor([0.9093, -0.4161, 0.0200, 0.9998],
                                              dtype=torch.float64), atol=1e-4)
    assert lib.check_pe_row(exact.tolist()) and lib.check_pe_row([0.9093, -0.4161, 0.02, 0.9998])
    swapped = torch.stack([angles.cos(), angles.sin()], -1).flatten()
    degrees = torch.deg2rad(angles)
    in_degrees = torch.stack([degrees.sin(), degrees.cos()], -1).flatten()
    pair_index = 2 * 10000.0 ** (-torch.arange(2, dtype=torch.float64) / 4)  # 10000^(-i/d)
    own_index = 2 * 10000.0 ** (-torch.arange(4, dtype=torch.float64) / 4)  # 10000^(-j/d)
    slips = {
        "sin and cos swapped": swapped,
        "the angle read in degrees": in_degrees,
        "the pair index i in the exponent, not 2i":
            torch.stack([pair_index.sin(), pair_index.cos()], -1).flatten(),
        "each dimension's own index in the exponent":
            torch.where(torch.arange(4) % 2 == 0, own_index.sin(), own_index.cos()),
    }
    for name, row in slips.items():
        verdict = lib.check_pe_row(row.tolist())
        assert not verdict and verdict.slip == name, (name, verdict.message)
    wrong = lib.check_pe_row([0.9093, -0.4161, 0.5, 0.5])
    assert not wrong and wrong.slip is None
    assert not lib.check_pe_row([float("nan"), -0.4161, 0.02, 0.9998])
    with pytest.raises(ValueError, match="my_row"):
        lib.check_pe_row([0.9093, -0.4161])
    for bad in ("0.9093", 0.9093, [0.9, "x", 0.0, 1.0], [True, 0, 0, 1]):
        with pytest.raises(TypeError, match="my_row"):
            lib.check_pe_row(bad)


def _wavelengths(d_model):
    """2π/ω_i of every pair, from the table's own frequencies (lib's sinusoidal table, brute force)."""
    table = lib.sinusoidal_positional_encoding(2, d_model).double()
    omega = torch.asin(table[1, 0::2].clamp(-1, 1))  # PE(1, 2i) = sin(ω_i), ω_i <= 1
    return 2 * math.pi / omega


def test_wavelength_checkers():
    waves = _wavelengths(64)
    shortest, longest = float(waves.min()), float(waves.max())
    ratio = float((waves[1:] / waves[:-1]).mean())
    assert abs(shortest - 6.2832) < 1e-3 and abs(longest / 47_117 - 1) < 1e-3
    assert lib.check_shortest_wavelength(6.283) and lib.check_shortest_wavelength(shortest)
    assert lib.check_longest_wavelength(47_117) and lib.check_wavelength_ratio(1.3335)
    assert lib.check_wavelength_ratio(ratio)
    cases = [
        (lib.check_shortest_wavelength, 1.0, "the frequency ω_0, not the wavelength"),
        (lib.check_shortest_wavelength, math.pi, "half a period, π"),
        (lib.check_longest_wavelength, 2 * math.pi * 10000,
         "2π · 10000: a pair d_model/2 that does not exist"),
        (lib.check_longest_wavelength, longest / (2 * math.pi), "2π left out"),
        (lib.check_wavelength_ratio, math.sqrt(ratio),
         "10000^(1/d_model): one dimension, not one pair"),
        (lib.check_wavelength_ratio, 1 / ratio, "the frequencies' ratio (upside down)"),
    ]
    for checker, value, name in cases:
        verdict = checker(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    for checker, value in ((lib.check_shortest_wavelength, 7.0),
                           (lib.check_longest_wavelength, 40_000),
                           (lib.check_wavelength_ratio, 1.5)):
        assert not checker(value) and checker(value).slip is None
        assert not checker(float("nan"))
        for bad in ("6.283", True, [6.283]):  # None: not answered
            with pytest.raises(TypeError, match="my_"):
                checker(bad)
    with pytest.raises(ValueError, match="d_model"):
        lib.check_wavelength_ratio(1.3, d_model=7)


# --- predict first: past the training length -------------------------------------------


class _Run:
    """A stand-in for lib's PatternRun: accuracy at position 16, past 15, share of pattern tokens."""

    def __init__(self, at16, past, in_pattern):
        self.correct = torch.full((63,), float(past))
        self.correct[15] = at16
        self._in_pattern = in_pattern

    def accuracy(self, first, stop=None):
        return float(self.correct[first:stop].mean())

    def in_pattern_share(self):
        return self._in_pattern


def _runs(sin_at16=(0.07, 0.07), learned_at16=(0.88, 0.40), past=0.3, in_pattern=0.98):
    runs = {}
    for seed in (0, 1):
        runs["sinusoidal", seed] = _Run(sin_at16[seed], past, in_pattern)
        runs["learned", seed] = _Run(learned_at16[seed], past, in_pattern)
    return runs


def test_extrapolation_outcome():
    stored = {"better at position 16": "learned", "gets the rule right past 15": "neither",
              "predicts instead": "tokens of the pattern"}
    assert lib.extrapolation_outcome(_runs()) == stored
    mixed = lib.extrapolation_outcome(_runs(sin_at16=(0.9, 0.1), learned_at16=(0.5, 0.5)))
    assert mixed["better at position 16"] == "mixed"
    both = lib.extrapolation_outcome(_runs(past=0.95))
    assert both["gets the rule right past 15"] == "both"
    assert lib.extrapolation_outcome(_runs(in_pattern=0.1))["predicts instead"] == "random tokens"
    with pytest.raises(ValueError, match="same seeds"):
        lib.extrapolation_outcome({("sinusoidal", 0): _Run(0.1, 0.3, 0.9)})
    with pytest.raises(TypeError, match="runs"):
        lib.extrapolation_outcome([])


def test_extrapolation_prediction_checker():
    outcome = lib.extrapolation_outcome(_runs())
    blank = dict.fromkeys(lib.EXTRAPOLATION_QUESTIONS, "?")
    verdict = lib.check_extrapolation_prediction(blank, outcome)
    assert not verdict and "not filled in" in verdict.message
    assert lib.check_extrapolation_prediction(dict(outcome), outcome)
    hopeful = dict(outcome, **{"better at position 16": "sinusoidal"})
    verdict = lib.check_extrapolation_prediction(hopeful, outcome)
    assert not verdict and "1 of 3" in verdict.message
    with pytest.raises(ValueError, match="keys"):
        lib.check_extrapolation_prediction({"better": "learned"}, outcome)
    with pytest.raises(TypeError, match="my_prediction"):
        lib.check_extrapolation_prediction("learned", outcome)


@pytest.mark.parametrize("fn", [rotate_half_hf, lambda x: rope(x, halves=True)])
def test_rope_in_the_half_split_layout_is_accepted_and_the_mismatch_named(fn):
    """Issue 23: the chapter-6 checker accepts both pairing conventions and names the
    mismatch with the chapter's (2i, 2i + 1)."""
    verdict = lib.check_apply_rope(fn)
    assert verdict, verdict.message
    assert "half-split" in verdict.message and "This chapter pairs (2i, 2i + 1)" in verdict.message
    # the chapter's own layout gets no such note
    assert "This chapter pairs" not in lib.check_apply_rope(rope).message


def test_half_split_layout_still_needs_the_dtype_and_the_angles():
    verdict = lib.check_apply_rope(lambda x: rotate_half_hf(x).float())
    assert not verdict  # float64 cases must stay float64
    verdict = lib.check_apply_rope(lambda x: rope(x, halves=True, first=1))
    assert not verdict  # positions counted from 1, in the half-split layout


def test_extrapolation_prediction_leaves_out_a_question_the_seeds_disagree_on():
    """Review 2026-11-28 (5-8) P8: no answer could match an outcome of "mixed"."""
    outcome = {"better at position 16": "mixed", "gets the rule right past 15": "neither",
               "predicts instead": "tokens of the pattern"}
    mine = {"better at position 16": "learned", "gets the rule right past 15": "neither",
            "predicts instead": "tokens of the pattern"}
    verdict = lib.check_extrapolation_prediction(mine, outcome)
    assert verdict and "2 predictions the runs settle" in verdict.message
    assert "not counted" in verdict.message
    verdict = lib.check_extrapolation_prediction({**mine, "predicts instead": "random tokens"},
                                                 outcome)
    assert not verdict and "1 of 2" in verdict.message
    settled = {**outcome, "better at position 16": "learned"}
    assert lib.check_extrapolation_prediction(mine, settled).message.startswith(
        "✓ all three predictions match the runs.")
