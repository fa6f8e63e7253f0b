"""Chapter 14's exercise checkers: the solution passes, a stub is "not implemented yet",
and each named mistake, written out independently here, is recognised by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.teach.checkers.modern import (
    LADDER_CHANGES,
    check_kv_bytes_per_token,
    check_ladder_prediction,
    check_repeat_kv,
    check_rms_norm,
    reveal_ladder_prediction,
)
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args):
    raise NotImplementedError


# --- rms_norm(x, weight, eps) ------------------------------------------------------


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight


def rms_norm_by_hand(x, weight, eps):  # another correct way
    d = x.shape[-1]
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) / d + eps) * weight


def eps_outside(x, weight, eps):
    return x / (x.square().mean(-1, keepdim=True).sqrt() + eps) * weight


def layer_norm(x, weight, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, None, eps)


def first_axis(x, weight, eps):
    return x * torch.rsqrt(x.square().mean(0, keepdim=True) + eps) * weight


def all_axes(x, weight, eps):
    return x * torch.rsqrt(x.square().mean() + eps) * weight


def no_root(x, weight, eps):
    return x / (x.square().mean(-1, keepdim=True) + eps) * weight


def no_gain(x, weight, eps):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)


def float32_always(x, weight, eps):
    return rms_norm(x, weight, eps).float()


@pytest.mark.parametrize("solution", [rms_norm, rms_norm_by_hand])
def test_rms_norm_solutions_pass(solution):
    assert check_rms_norm(solution)


@pytest.mark.parametrize("wrong, name", [
    (eps_outside, "ε outside the square root"),
    (layer_norm, "the mean subtracted, as LayerNorm does"),
    (first_axis, "the mean taken over the wrong axis"),
    (all_axes, "the mean taken over the wrong axis"),
    (no_root, "the square root left out"),
    (no_gain, "the gain (weight) not applied"),
])
def test_rms_norm_mistakes_named(wrong, name):
    verdict = check_rms_norm(wrong)
    assert not verdict and verdict.mistake == name


def test_rms_norm_stub_and_dtype():
    assert NOT_IMPLEMENTED in check_rms_norm(stub).message
    verdict = check_rms_norm(float32_always)
    assert not verdict and "dtype" in verdict.message


def test_rms_norm_nan_is_never_right():
    verdict = check_rms_norm(lambda x, w, eps: torch.full_like(x, float("nan")))
    assert not verdict


# --- repeat_kv(k, n_heads) --------------------------------------------------------


def repeat_kv(k, n_heads):
    return k.repeat_interleave(n_heads // k.shape[1], dim=1)


def repeat_kv_expand(k, n_heads):  # Hugging Face's way
    B, g, T, d = k.shape
    return k[:, :, None].expand(B, g, n_heads // g, T, d).reshape(B, n_heads, T, d)


def tiled(k, n_heads):
    return torch.cat([k] * (n_heads // k.shape[1]), dim=1)


def not_repeated(k, n_heads):
    return k.clone()


def positions_repeated(k, n_heads):
    return torch.repeat_interleave(k, n_heads // k.shape[1], dim=2)


def too_many(k, n_heads):
    return torch.repeat_interleave(k, n_heads, dim=1)


@pytest.mark.parametrize("solution", [repeat_kv, repeat_kv_expand])
def test_repeat_kv_solutions_pass(solution):
    assert check_repeat_kv(solution)


@pytest.mark.parametrize("wrong, name", [
    (tiled, "the heads tiled (repeat) instead of grouped (repeat_interleave)"),
    (not_repeated, "no repeat at all"),
    (positions_repeated, "repeated along the position axis"),
    (too_many, "each key/value head repeated n_heads times"),
])
def test_repeat_kv_mistakes_named(wrong, name):
    verdict = check_repeat_kv(wrong)
    assert not verdict and verdict.mistake == name


def test_repeat_kv_stub_and_dtype():
    assert NOT_IMPLEMENTED in check_repeat_kv(stub).message
    assert not check_repeat_kv(lambda k, h: repeat_kv(k, h).double())


# --- kv_bytes_per_token(n_layers, n_heads, n_kv_heads, d_head, bytes_per_value) ---


def kv_bytes(n_layers, n_heads, n_kv_heads, d_head, bytes_per_value):
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_value


def test_kv_bytes_solution_passes_and_numpy_ints_too():
    assert check_kv_bytes_per_token(kv_bytes)
    assert check_kv_bytes_per_token(lambda *a: np.int64(kv_bytes(*a)))


@pytest.mark.parametrize("wrong, name", [
    (lambda L, h, g, d, b: L * g * d * b, "the keys counted but not the values"),
    (lambda L, h, g, d, b: 2 * L * h * d * b, "the query heads counted instead of the key/value heads"),
    (lambda L, h, g, d, b: 2 * g * d * b, "one layer only"),
    (lambda L, h, g, d, b: 16 * L * g * d * b, "bits instead of bytes"),
])
def test_kv_bytes_mistakes_named(wrong, name):
    verdict = check_kv_bytes_per_token(wrong)
    assert not verdict and verdict.mistake == name


def test_kv_bytes_float_and_stub_refused():
    assert not check_kv_bytes_per_token(lambda *a: float(kv_bytes(*a)))
    assert NOT_IMPLEMENTED in check_kv_bytes_per_token(stub).message


# --- the prediction prompt ----------------------------------------------------------


def test_prediction_form():
    assert check_ladder_prediction("SwiGLU")
    for bad in ("swiglu", 3, "everything"):
        verdict = check_ladder_prediction(bad)
        assert not verdict and verdict.mistake == "not one of the changes"
    verdict = check_ladder_prediction(None)  # the prompt's empty default
    assert not verdict and verdict.mistake == "no prediction yet"


def test_reveal_needs_agreement_of_the_seeds():
    gains = {c: [0.0, 0.0] for c in LADDER_CHANGES}
    gains["rotary"] = [0.2, 0.3]
    assert "right" in reveal_ladder_prediction("rotary", gains)
    assert "not what the runs show" in reveal_ladder_prediction("SwiGLU", gains)
    empty = reveal_ladder_prediction(None, gains)  # no verdict, no answer named
    assert "No prediction" in empty and "rotary" not in empty and "right" not in empty
    gains["SwiGLU"] = [0.25, 0.1]  # seed 0: SwiGLU, seed 1: rotary
    message = reveal_ladder_prediction("rotary", gains)
    assert "seeds disagree" in message and "right" not in message
    with pytest.raises(ValueError, match="gains must have one entry per change"):
        reveal_ladder_prediction("rotary", {"rotary": [0.1]})
