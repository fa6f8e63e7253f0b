"""Chapters 15 and 16: every checker refuses a catalogue of wrong solutions (issue 34 item 3).

For each exercise: the 2026-11-28 review's wrong solutions (§3 of
reviews/2026-11-28/chapters-15-16.md) and at least three more of our own, written before
reading the checkers' cases. Each must be refused, and where the checker's docstring lists
the mistake, the verdict must name it. The dequantizer checkers run with
``on_file=False``: their small cases alone must catch every slip, not the file's tensors.
A correct solution (and the review's correct controls) must pass, so that a checker that
refuses everything fails here too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import lib

# ------------------------------------------------------------------ 15/1 Q8_0


def q8_right(b):
    d = np.ascontiguousarray(b[:, :2]).view(np.float16).astype(np.float32)
    q = np.ascontiguousarray(b[:, 2:]).view(np.int8).astype(np.float32)
    return d * q


def _d(b, lo=0):
    return np.ascontiguousarray(b[:, lo:lo + 2]).view(np.float16).astype(np.float32)


Q8_WRONG = {
    # the review's
    "scale from the last two bytes": lambda b: np.ascontiguousarray(b[:, -2:]).view(
        np.float16).astype(np.float32) * np.ascontiguousarray(b[:, 2:]).view(np.int8).astype(
        np.float32),
    "values one byte early": lambda b: _d(b) * np.ascontiguousarray(b[:, 1:33]).view(
        np.int8).astype(np.float32),
    "float64 result": lambda b: q8_right(b).astype(np.float64),
    "flattened": lambda b: q8_right(b).reshape(-1),
    "product in float16": lambda b: (_d(b).astype(np.float16) * np.ascontiguousarray(
        b[:, 2:]).view(np.int8).astype(np.float16)),
    "scale value-converted": lambda b: b[:, :1].astype(np.float32) * np.ascontiguousarray(
        b[:, 2:]).view(np.int8).astype(np.float32),
    # ours
    "big-endian scale": lambda b: np.ascontiguousarray(b[:, :2]).view(">f2").astype(
        np.float32) * np.ascontiguousarray(b[:, 2:]).view(np.int8).astype(np.float32),
    "values unsigned": lambda b: _d(b) * b[:, 2:].astype(np.float32),
    "scale broadcast on the wrong axis": lambda b: (_d(b)[:, 0][None, :32]
                                                    * np.ascontiguousarray(b[:, 2:]).view(
                                                        np.int8).astype(np.float32)),
    "float16 result": lambda b: q8_right(b).astype(np.float16),
    "off by a relative 1e-4 (not bit for bit)": lambda b: q8_right(b) * np.float32(1.0001),
}

# ------------------------------------------------------------------ 15/2 Q4_1


def q4_right(b):
    d, m = _d(b, 0), _d(b, 2)
    p = b[:, 4:]
    q = np.concatenate([p & 0x0F, p >> 4], axis=1).astype(np.float32)
    return d * q + m


def _q4(b, q, d=None, m=None, dtype=np.float32):
    d = _d(b, 0) if d is None else d
    m = _d(b, 2) if m is None else m
    return d.astype(dtype) * q.astype(dtype) + m.astype(dtype)


Q4_WRONG = {
    # the review's
    "minimum inside the product": lambda b: _d(b) * (np.concatenate(
        [b[:, 4:] & 15, b[:, 4:] >> 4], 1).astype(np.float32) + _d(b, 2)),
    "packed one byte early": lambda b: _q4(b, np.concatenate([b[:, 3:19] & 15, b[:, 3:19] >> 4], 1)),
    "low nibbles twice": lambda b: _q4(b, np.concatenate([b[:, 4:] & 15, b[:, 4:] & 15], 1)),
    "signed before shifting": lambda b: _q4(b, np.concatenate(
        [b[:, 4:].view(np.int8) & 15, b[:, 4:].view(np.int8) >> 4], 1)),
    "centred like Q4_0, then + m": lambda b: _q4(b, np.concatenate(
        [b[:, 4:] & 15, b[:, 4:] >> 4], 1).astype(np.float32) - 8),
    "minimum subtracted": lambda b: _d(b) * np.concatenate(
        [b[:, 4:] & 15, b[:, 4:] >> 4], 1).astype(np.float32) - _d(b, 2),
    "all in float16": lambda b: _q4(b, np.concatenate([b[:, 4:] & 15, b[:, 4:] >> 4], 1),
                                    dtype=np.float16),
    # ours
    "high nibbles first": lambda b: _q4(b, np.concatenate([b[:, 4:] >> 4, b[:, 4:] & 15], 1)),
    "scale and minimum swapped": lambda b: _q4(b, np.concatenate(
        [b[:, 4:] & 15, b[:, 4:] >> 4], 1), d=_d(b, 2), m=_d(b, 0)),
    "nibbles interleaved": lambda b: _q4(b, np.stack([b[:, 4:] & 15, b[:, 4:] >> 4],
                                                     2).reshape(len(b), 32)),
    "no minimum": lambda b: _d(b) * np.concatenate([b[:, 4:] & 15, b[:, 4:] >> 4],
                                                   1).astype(np.float32),
}

# named where the checker's docstring (the chapter's text) lists the slip
Q4_NAMED = {"minimum subtracted", "all in float16", "high nibbles first",
            "scale and minimum swapped", "no minimum", "centred like Q4_0, then + m"}


@pytest.mark.parametrize("name", sorted(Q8_WRONG))
def test_q8_0_wrong_solutions_are_refused(name):
    verdict = lib.check_dequantize_q8_0(Q8_WRONG[name], on_file=False)
    assert not verdict, name


@pytest.mark.parametrize("name", sorted(Q4_WRONG))
def test_q4_1_wrong_solutions_are_refused(name):
    verdict = lib.check_dequantize_q4_1(Q4_WRONG[name], on_file=False)
    assert not verdict, name
    if name in Q4_NAMED:
        assert verdict.mistake is not None or "float16" in verdict.message, verdict.message


def test_dequantizers_right_solutions_pass():
    assert lib.check_dequantize_q8_0(q8_right, on_file=False)
    assert lib.check_dequantize_q4_1(q4_right, on_file=False)
    # the review's control: float64 arithmetic, cast at the end, is bit-identical
    assert lib.check_dequantize_q4_1(lambda b: (_d(b).astype(np.float64) * np.concatenate(
        [b[:, 4:] & 15, b[:, 4:] >> 4], 1) + _d(b, 2)).astype(np.float32), on_file=False)


# ------------------------------------------------------------------ 15/3 sizes on paper

BLOCKS = 1536 * 576 // 32
SIZE_WRONG = [  # (checker, answer, named slip or None)
    (lib.check_q4_1_bytes, BLOCKS * 32 * 8, None),  # review: float64, 8 bytes a weight
    (lib.check_q4_1_bytes, 18 * BLOCKS, "the scale only, no minimum"),  # review
    (lib.check_q4_1_bits, 20 / 32, None),  # review: bytes per weight
    (lib.check_q4_1_bytes, 16 * BLOCKS, "4 bits exactly: the scale and minimum left out"),
    (lib.check_q4_1_bytes, 34 * BLOCKS, None),  # ours: Q8_0's block size
    (lib.check_q4_1_bytes, 160 * BLOCKS, "bits, not bytes"),
    (lib.check_q4_1_bits, 20.0, None),  # ours: bytes per block
    (lib.check_q4_1_bits, 4.0, "4 bits exactly: the scale and minimum left out"),
    (lib.check_q4_1_bits, 8.5, "Q8_0's bits"),
    (lib.check_f32_bytes, 4 * 576, None),  # ours: one row
    (lib.check_f32_bytes, 32 * 1536 * 576, "bits, not bytes"),
    (lib.check_f32_bytes, 2 * 1536 * 576, "float16's 2 bytes"),
    (lib.check_q4_1_bytes, float("nan"), None),  # ours: NaN is never right
]


@pytest.mark.parametrize("i", range(len(SIZE_WRONG)))
def test_size_answers_wrong_are_refused(i):
    check, answer, slip = SIZE_WRONG[i]
    try:
        verdict = check(answer)
    except (TypeError, ValueError):
        return  # refused with an error naming the argument
    assert not verdict
    if slip:  # check_number's results name it .slip
        assert verdict.slip == slip, verdict.message


def test_size_answers_right_and_unanswered():
    assert lib.check_q4_1_bytes(552_960) and lib.check_q4_1_bits(5.0) and lib.check_q4_1_bits(5)
    assert lib.check_f32_bytes(3_538_944)
    for check in (lib.check_q4_1_bytes, lib.check_q4_1_bits, lib.check_f32_bytes):
        verdict = check(None)  # the stored placeholder: neutral, not a verdict on a slip
        assert not verdict and verdict.mistake == "no answer yet"
        assert "Right" not in verdict.message and "slip" not in verdict.message


def test_rope_pairing_prediction():
    assert lib.check_rope_pairing_prediction("d") and lib.check_rope_pairing_prediction("(D)")
    for letter in "abc":
        verdict = lib.check_rope_pairing_prediction(letter)
        assert not verdict and verdict.mistake and verdict.mistake != "no prediction yet"
    placeholder = lib.check_rope_pairing_prediction(None)
    assert not placeholder and placeholder.mistake == "no prediction yet"
    assert "function itself changes" not in placeholder.message  # gives nothing away
    assert not lib.check_rope_pairing_prediction("e")


# ------------------------------------------------------------------ 16/1 induction score


def ind_right(p, n):
    return p.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)[..., -n:].mean(dim=(0, -1))


IND_WRONG = {
    # the review's
    "skips the first query of the second copy": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., -(n - 1):].mean(dim=(0, -1)),
    "one query too many": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., -(n + 1):].mean(dim=(0, -1)),
    "assumes no prefix token": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., :n].mean(dim=(0, -1)),
    "key block of the first copy only": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., -n:-1].mean(dim=(0, -1)),
    "mean over the batch only": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., -n:].mean(dim=0),
    "float32 for float64 input": lambda p, n: ind_right(p, n).float(),
    "duplicate-token diagonal": lambda p, n: p.diagonal(
        offset=-n, dim1=-2, dim2=-1)[..., -n:].mean(dim=(0, -1)),
    # ours
    "every query of the diagonal": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1).mean(dim=(0, -1)),
    "sum instead of mean": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., -n:].sum(dim=-1).mean(0),
    "queries and keys swapped": lambda p, n: p.transpose(-2, -1).diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., -n:].mean(dim=(0, -1)),
    "averaged over heads, not the batch": lambda p, n: p.diagonal(
        offset=-(n - 1), dim1=-2, dim2=-1)[..., -n:].mean(dim=(1, -1)),
    "previous-token diagonal": lambda p, n: p.diagonal(
        offset=-1, dim1=-2, dim2=-1)[..., -n:].mean(dim=(0, -1)),
}


@pytest.mark.parametrize("name", sorted(IND_WRONG))
def test_induction_score_wrong_solutions_are_refused(name):
    verdict = lib.check_induction_score(IND_WRONG[name])
    assert not verdict, name
    if name == "duplicate-token diagonal":
        assert verdict.mistake is not None, verdict.message


def test_induction_score_right_solution_passes():
    assert lib.check_induction_score(ind_right)


# ------------------------------------------------------------------ 16/2 zero_head


def zero_right(z, head):
    out = z.clone()
    out[:, :, head, :] = 0.0
    return out


def _in_place(z, head):
    z[:, :, head, :] = 0.0
    return z


def _from_head_on(z, head):
    out = z.clone()
    out[:, :, head:, :] = 0.0
    return out


def _one_based(z, head):
    out = z.clone()
    out[:, :, head - 1, :] = 0.0
    return out


def _positions(z, head):
    out = z.clone()
    out[:, head] = 0.0
    return out


def _last_axis(z, head):
    out = z.clone()
    out[..., head] = 0.0
    return out


def _mean_instead(z, head):
    out = z.clone()
    out[:, :, head, :] = z[:, :, head, :].mean()
    return out


ZERO_WRONG = {
    # the review's
    "zeroed in place": _in_place,
    "heads from `head` onwards": _from_head_on,
    "1-based head index": _one_based,
    "cast to float32": lambda z, h: zero_right(z, h).float(),
    # ours
    "positions axis": _positions,
    "last axis": _last_axis,
    "every head": lambda z, h: z * 0,
    "mean instead of zero": _mean_instead,
}


@pytest.mark.parametrize("name", sorted(ZERO_WRONG))
def test_zero_head_wrong_solutions_are_refused(name):
    verdict = lib.check_zero_head(ZERO_WRONG[name])
    assert not verdict, name
    if name == "zeroed in place":
        assert "clone" in verdict.message


def test_zero_head_right_solutions_pass():
    assert lib.check_zero_head(zero_right)
    mask = lambda z, h: z * (torch.arange(z.shape[2]) != h).to(z.dtype)[:, None]  # noqa: E731
    assert lib.check_zero_head(mask)  # the review's control
