"""Chapter 4's exercise checkers: a right solution passes, a stub is "not implemented yet",
and every named mistake, written out independently here, is recognised by name."""

import math

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


# split_heads --------------------------------------------------------------------------


def split_right(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n, n_heads, d_model // n_heads).transpose(1, 2)


def split_no_transpose(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n, n_heads, d_model // n_heads)


def split_straight_view(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n_heads, n, d_model // n_heads)


def split_dims_swapped(x, n_heads):
    B, n, d_model = x.shape
    return x.view(B, n, d_model // n_heads, n_heads).transpose(2, 3).transpose(1, 2)


def split_stub(x, n_heads):
    raise NotImplementedError


def test_split_heads_right_passes():
    verdict = lib.check_split_heads(split_right)
    assert verdict and verdict.mistake is None, verdict.message


def test_split_heads_head_i_owns_a_block_of_features():
    x = torch.arange(2 * 3 * 8, dtype=torch.float64).view(2, 3, 8)
    heads = split_right(x, 4)  # d_k = 2
    assert heads.shape == (2, 4, 3, 2)
    assert torch.equal(heads[1, 2, 0], x[1, 0, 4:6])  # batch 1, head 2, position 0


def test_split_heads_stub():
    verdict = lib.check_split_heads(split_stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (split_no_transpose, "heads not moved next to the batch"),
        (split_straight_view, "reshaped straight to (B, h, n, d_k)"),
        (split_dims_swapped, "(h, d_k) in the wrong order"),
    ],
)
def test_split_heads_mistakes_named(fn, mistake):
    verdict = lib.check_split_heads(fn)
    assert not verdict and verdict.mistake == mistake, verdict.message


# multi_head_attention -----------------------------------------------------------------


def mha_generic(x_q, x_k, x_v, w_q, w_k, w_v, w_o, n_heads, mask=None, scale_by=None,
                keep=lambda m: m, transpose_back=True, with_w_o=True):
    B, m, d_model = x_q.shape
    n, d_k = x_k.shape[1], d_model // n_heads
    q = (x_q @ w_q).view(B, m, n_heads, d_k).transpose(1, 2)
    k = (x_k @ w_k).view(B, n, n_heads, d_k).transpose(1, 2)
    v = (x_v @ w_v).view(B, n, n_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_by or d_k)
    if mask is not None:
        scores = torch.where(keep(mask), scores, torch.full_like(scores, -math.inf))
    heads = torch.softmax(scores, dim=-1) @ v
    if transpose_back:
        heads = heads.transpose(1, 2)
    concat = heads.contiguous().view(B, m, d_model)
    return concat @ w_o if with_w_o else concat


def mha_right(*args, mask=None):
    return mha_generic(*args, mask=mask)


def mha_sqrt_d_model(*args, mask=None):
    return mha_generic(*args, mask=mask, scale_by=args[0].shape[-1])


def mha_no_w_o(*args, mask=None):
    return mha_generic(*args, mask=mask, with_w_o=False)


def mha_no_transpose_back(*args, mask=None):
    return mha_generic(*args, mask=mask, transpose_back=False)


def mha_mask_inverted(*args, mask=None):
    return mha_generic(*args, mask=mask, keep=lambda m: ~m)


def mha_stub(*args, mask=None):
    raise NotImplementedError


def test_multi_head_attention_right_passes():
    verdict = lib.check_multi_head_attention(mha_right)
    assert verdict and verdict.mistake is None, verdict.message


def test_multi_head_attention_stub():
    verdict = lib.check_multi_head_attention(mha_stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (mha_sqrt_d_model, "scaled by √d_model instead of √d_k"),
        (mha_no_w_o, "W^O left out"),
        (mha_no_transpose_back, "heads concatenated without transposing back"),
        (mha_mask_inverted, "mask read the wrong way round"),
    ],
)
def test_multi_head_attention_mistakes_named(fn, mistake):
    verdict = lib.check_multi_head_attention(fn)
    assert not verdict and verdict.mistake == mistake, verdict.message


def test_multi_head_attention_reference_is_lib_module():
    """The checker's reference computes what lib.MultiHeadAttention computes."""
    torch.manual_seed(0)
    mha = lib.MultiHeadAttention(12, 3, bias=False).double().eval()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = lib.causal_mask(5)
    ws = [layer.weight.T for layer in (mha.w_q, mha.w_k, mha.w_v, mha.w_o)]
    with torch.no_grad():
        torch.testing.assert_close(mha(x, x, x, mask=mask), mha_right(x, x, x, *ws, 3, mask=mask))
