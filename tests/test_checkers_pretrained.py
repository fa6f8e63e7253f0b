"""The pretrained-model chapter's checkers: the learner's Q8_0 and Q4_1 dequantizers (the
solution passes bit for bit on the whole file, a stub is "not implemented yet", each named
mistake, written out independently here, is named), and chapter 6's RoPE checker with the
pairing conventions (interleaved, half-split, either)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from smollm2_reference import gguf_path

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(blocks):
    raise NotImplementedError


def _f16(two_bytes) -> np.float32:
    return np.float32(np.frombuffer(bytes(two_bytes), dtype="<f2")[0])


def q8_0(blocks, signed=True, f16=False):
    """Block by block, as the chapter's prose states the format."""
    out = np.empty((len(blocks), 32), np.float32)
    for k, block in enumerate(blocks):
        d = _f16(block[:2])
        q = np.frombuffer(bytes(block[2:]), dtype=np.int8 if signed else np.uint8)
        if f16:
            out[k] = (np.float16(d) * q.astype(np.float16)).astype(np.float32)
        else:
            out[k] = d * q.astype(np.float32)
    return out


def q4_1(blocks, minimum=+1, order="low first", f16=False, swap=False):
    out = np.empty((len(blocks), 32), np.float32)
    for k, block in enumerate(blocks):
        d, m = _f16(block[0:2]), _f16(block[2:4])
        if swap:
            d, m = m, d
        q = np.zeros(32, np.float32)
        for j, byte in enumerate(block[4:]):
            low, high = int(byte) & 15, int(byte) >> 4
            if order == "low first":
                q[j], q[j + 16] = low, high
            elif order == "high first":
                q[j], q[j + 16] = high, low
            else:  # byte by byte
                q[2 * j], q[2 * j + 1] = low, high
        if f16:
            out[k] = (np.float16(d) * q.astype(np.float16) + np.float16(minimum * m)).astype(np.float32)
        else:
            out[k] = d * q + np.float32(minimum) * m
    return out


def test_q8_0_solution_passes_on_the_whole_file():
    gguf_path()  # skips without `make data`
    assert lib.check_dequantize_q8_0(q8_0, on_file=False)  # block by block (slow on the file)

    def vectorised(blocks):
        d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        return d * blocks[:, 2:].copy().view(np.int8).astype(np.float32)

    verdict = lib.check_dequantize_q8_0(vectorised)
    assert verdict, verdict.message
    assert "1 tensors" in verdict.message and "884,736 blocks" in verdict.message


def test_q4_1_solution_passes():
    assert lib.check_dequantize_q4_1(q4_1, on_file=False)
    assert lib.check_dequantize_q4_1(lib.dequantize_q4_1, on_file=False)


def test_q4_1_vectorised_solution_passes_on_the_whole_file():
    gguf_path()

    def vectorised(blocks):
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        q = np.concatenate([blocks[:, 4:] & 0x0F, blocks[:, 4:] >> 4], axis=1)
        return d * q.astype(np.float32) + m

    verdict = lib.check_dequantize_q4_1(vectorised)
    assert verdict and "210 tensors" in verdict.message, verdict.message


@pytest.mark.parametrize("check", [lib.check_dequantize_q8_0, lib.check_dequantize_q4_1])
def test_stub_is_not_implemented(check):
    verdict = check(stub, on_file=False)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("wrong, name", [
    (lambda b: q8_0(b, signed=False), "values read as unsigned bytes"),
    (lambda b: q8_0(b, f16=True), "the scale kept in float16"),
])
def test_q8_0_mistakes_are_named(wrong, name):
    verdict = lib.check_dequantize_q8_0(wrong, on_file=False)
    assert not verdict and verdict.mistake == name, verdict.message


@pytest.mark.parametrize("wrong, name", [
    (lambda b: q4_1(b, minimum=0), "forgot the minimum"),
    (lambda b: q4_1(b, minimum=-1), "the minimum subtracted"),
    (lambda b: q4_1(b, order="byte by byte"), "nibble order"),
    (lambda b: q4_1(b, order="high first"), "nibble order"),
    (lambda b: q4_1(b, swap=True), "scale and minimum swapped"),
    (lambda b: q4_1(b, f16=True), "the scale kept in float16"),
])
def test_q4_1_mistakes_are_named(wrong, name):
    verdict = lib.check_dequantize_q4_1(wrong, on_file=False)
    assert not verdict and verdict.mistake == name, verdict.message


def test_dtype_shape_and_bits_are_exact():
    verdict = lib.check_dequantize_q4_1(lambda b: q4_1(b).astype(np.float64), on_file=False)
    assert not verdict and verdict.mistake == "a result of another dtype"
    verdict = lib.check_dequantize_q8_0(lambda b: q8_0(b).reshape(-1), on_file=False)
    assert not verdict  # (n_blocks * 32,) is not (n_blocks, 32)
    verdict = lib.check_dequantize_q8_0(lambda b: torch.from_numpy(q8_0(b)), on_file=False)
    assert not verdict and verdict.mistake == "not a numpy array"
    # w = (d·q)·(1 + 2^-24): within allclose's tolerance, not the same bits
    nudged = lambda b: np.nextafter(q8_0(b), np.float32(np.inf))  # noqa: E731
    verdict = lib.check_dequantize_q8_0(nudged, on_file=False)
    assert not verdict and verdict.mistake == "not bit-exact", verdict.message


def test_nan_is_never_right():
    verdict = lib.check_dequantize_q8_0(lambda b: q8_0(b) * np.float32(math.nan), on_file=False)
    assert not verdict


# --- chapter 6's RoPE checker: both pairing conventions --------------------------------


def rope(x, halves=False, sign=+1.0):
    """Row at position p, pair (a, b) turned: a cos t + s·b sin t, -s·a sin t + b cos t."""
    n, d = x.shape[-2], x.shape[-1]
    t = torch.arange(n, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d)
    x64 = x.double()
    a, b = (x64[..., : d // 2], x64[..., d // 2:]) if halves else (x64[..., 0::2], x64[..., 1::2])
    ra = a * t.cos() + sign * b * t.sin()
    rb = -sign * a * t.sin() + b * t.cos()
    out = torch.cat([ra, rb], -1) if halves else torch.stack([ra, rb], -1).flatten(-2)
    return out.to(x.dtype)


def rotate_half_rope(x):
    """Hugging Face's Llama: x·cos + rotate_half(x)·sin, angles repeated over both halves."""
    n, d = x.shape[-2], x.shape[-1]
    t = torch.arange(n, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d)
    emb = torch.cat([t, t], -1)
    rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1).double()
    return (x.double() * emb.cos() + rotated * emb.sin()).to(x.dtype)


@pytest.mark.parametrize("fn", [rotate_half_rope, lambda x: rope(x, halves=True)])
def test_half_pairing_accepted_when_asked_and_named_otherwise(fn):
    assert lib.check_apply_rope(fn, pairing="half")
    verdict = lib.check_apply_rope(fn, pairing="either")
    assert verdict and "half-split" in verdict.message
    verdict = lib.check_apply_rope(fn)  # chapter 6: accepted, the mismatch named
    assert verdict and "This chapter pairs (2i, 2i + 1)" in verdict.message


@pytest.mark.parametrize("fn", [rope, lambda x: rope(x, sign=-1.0)])
def test_interleaved_pairing_named_when_half_is_asked(fn):
    verdict = lib.check_apply_rope(fn, pairing="half")
    assert not verdict and verdict.mistake == "the other pairing convention", verdict.message
    assert "interleaved" in verdict.message
    verdict = lib.check_apply_rope(fn, pairing="either")
    assert verdict and "interleaved" in verdict.message
    assert lib.check_apply_rope(fn)  # unchanged for chapter 6


def test_pairing_checker_still_names_other_mistakes():
    verdict = lib.check_apply_rope(lambda x: x, pairing="either")
    assert not verdict
    verdict = lib.check_apply_rope(lambda x: rope(x, halves=True).float(), pairing="half")
    assert not verdict  # float64 cases must stay float64
    with pytest.raises(ValueError, match="pairing"):
        lib.check_apply_rope(rope, pairing="halves")


def test_q4_1_size_checkers():
    # the file's own tensor, not the formula: its Q4_1 bytes and weights
    ffn_up = lib.read_gguf(gguf_path()).tensors["blk.0.ffn_up.weight"]
    n, nbytes = ffn_up.n_elements, ffn_up.data.nbytes
    assert (n, nbytes) == (884_736, 552_960)
    assert lib.check_q4_1_bytes(nbytes) and lib.check_q4_1_bits(8 * nbytes / n)
    f32 = torch.empty(1536, 576, dtype=torch.float32, device="meta").nbytes
    assert lib.check_f32_bytes(f32)
    half = torch.empty(1536, 576, dtype=torch.float16, device="meta").nbytes
    blocks = n // 32
    cases = [
        (lib.check_q4_1_bytes, {
            "4 bits exactly: the scale and minimum left out": n // 2,
            "the scale only, no minimum": n // 2 + 2 * blocks,
            "a float32 scale and minimum": n // 2 + 8 * blocks,
            "bits, not bytes": 8 * nbytes}, 500_000),
        (lib.check_q4_1_bits, {
            "4 bits exactly: the scale and minimum left out": 4.0,
            "the scale only, no minimum": (16 + 2) * 8 / 32,
            "a float32 scale and minimum": (16 + 8) * 8 / 32,
            "Q8_0's bits": 34 * 8 / 32}, 5.5),
        (lib.check_f32_bytes, {
            "bits, not bytes": 8 * f32, "float16's 2 bytes": half, "one byte a weight": n},
         3_000_000),
    ]
    for checker, slips, wrong in cases:
        for name, value in slips.items():
            verdict = checker(value)
            assert not verdict and verdict.slip == name, (name, verdict.message)
        assert not checker(wrong) and checker(wrong).slip is None
        assert not checker(float("nan"))


@pytest.mark.parametrize("checker, name", [(lib.check_q4_1_bytes, "my_q4_bytes"),
                                           (lib.check_q4_1_bits, "my_q4_bits"),
                                           (lib.check_f32_bytes, "my_f32_bytes")])
@pytest.mark.parametrize("bad", ["5", True, [5]])  # None: the chapter's placeholder
def test_q4_1_size_checkers_refuse_what_is_not_a_number(checker, name, bad):
    with pytest.raises(TypeError, match=name):
        checker(bad)


# ------------------------------------------- chapter 15's prediction on the rotary pairing

ROPE_SLIPS = {"a": "the pairing taken for a convention of the code alone",
              "b": "a rounding effect",
              "c": "a small perturbation"}


def test_rope_pairing_prediction_right_answer_and_each_slip():
    for answer in ("d", "D", " (d) "):
        verdict = lib.check_rope_pairing_prediction(answer)
        assert verdict and verdict.mistake is None, answer
    for letter, slip in ROPE_SLIPS.items():
        verdict = lib.check_rope_pairing_prediction(letter)
        assert not verdict and verdict.mistake == slip, letter
        assert verdict.message.count("(d)") == 0  # a slip does not give the answer away
    for other in ("?", "e", "", "ab"):
        verdict = lib.check_rope_pairing_prediction(other)
        assert not verdict and verdict.mistake == "not one of the options"
    assert sorted(lib.ROPE_PAIRING_CHOICES) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("bad", [4, True, ["d"]])  # None: the chapter's placeholder
def test_rope_pairing_prediction_refuses_what_is_not_a_letter(bad):
    with pytest.raises(TypeError, match="my_pairing_prediction"):
        lib.check_rope_pairing_prediction(bad)


def test_rope_pairing_answer_is_what_the_file_shows():
    """Independent of the checker: SmolLM2's file with the half-split pairing on its own
    rows gives another model (logits move by more than 1, the argmax changes), not a
    rounding effect; and a query and key at the same position keep their score."""
    gguf_path()  # skips without `make data`
    model, tokenizer = lib.load_smollm2()
    x = torch.tensor([tokenizer.encode("To be, or not to be, that is the question:")])
    with torch.no_grad():
        right = model(x)
        for block in model.blocks:
            block.attn.pairing = "half"
        wrong = model(x)
    diff = (right - wrong).abs().amax(dim=-1)[0]  # per position
    assert float(diff[0]) < 1e-3  # position 0: no rotation at all, under either pairing
    assert float(diff.max()) > 1
    changed = int((right.argmax(-1) != wrong.argmax(-1)).sum())
    assert changed >= 2  # the predicted token changes at several positions
    assert lib.check_rope_pairing_prediction("d")
    assert not any(lib.check_rope_pairing_prediction(c) for c in "abc")
