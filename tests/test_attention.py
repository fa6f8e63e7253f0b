"""lib.model.attention against torch.nn.functional.scaled_dot_product_attention and nn.MultiheadAttention."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lib
from conftest import copy_mha


def reference_weights(q, k, mask=None):
    """softmax(q kᵀ / √d_k) in float64, written out with exp and sum."""
    s = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("shape_q,shape_k,d_v", [((5, 8), (5, 8), 8), ((2, 3, 4, 16), (2, 3, 7, 16), 5), ((1, 1, 4), (1, 9, 4), 2)])
def test_sdpa_equals_torch(shape_q, shape_k, d_v):
    q = torch.randn(shape_q)
    k = torch.randn(shape_k)
    v = torch.randn(*shape_k[:-1], d_v)
    out, w = lib.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.double(), reference_weights(q, k), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))


def test_sdpa_masked_equals_torch():
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 3)
    mask = lib.causal_mask(6)
    out, w = lib.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-5)
    assert torch.all(w.masked_select(~mask.expand_as(w)) == 0)


def test_sdpa_padding_mask_equals_torch():
    tokens = torch.tensor([[5, 6, 7, 0, 0], [1, 2, 3, 4, 0]])
    mask = lib.padding_mask(tokens, pad_id=0)
    q, k, v = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    out, w = lib.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5)
    assert torch.all(w[0, :, :, 3:] == 0) and torch.all(w[1, :, :, 4] == 0)


def test_fully_masked_row_gives_zeros_not_nan():
    q = torch.randn(3, 4, requires_grad=True)
    k, v = torch.randn(5, 4), torch.randn(5, 2)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False  # query 1 may attend to nothing
    out, w = lib.scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(w[1] == 0) and torch.all(out[1] == 0)
    torch.testing.assert_close(w[[0, 2]].sum(-1), torch.ones(2))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_huge_scores_are_stable():
    q = torch.randn(4, 16, dtype=torch.float64) * 1e4
    k = torch.randn(6, 16, dtype=torch.float64) * 1e4
    v = torch.randn(6, 3, dtype=torch.float64)
    out, w = lib.scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    # with scores this far apart, each row puts (almost) all weight on its best key
    torch.testing.assert_close(w.amax(-1), torch.ones(4, dtype=torch.float64))


def test_softmax_shift_invariance():
    # Adding one vector u to every key adds q_i·u/√d_k to every score of row i:
    # a constant per row, which softmax ignores.
    q, k, v = torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 2)
    u = 3.0 * torch.randn(1, 4)
    _, w1 = lib.scaled_dot_product_attention(q, k, v)
    _, w2 = lib.scaled_dot_product_attention(q, k + u, v)
    torch.testing.assert_close(w1, w2, atol=1e-6, rtol=1e-5)


def test_dropout_zeroes_weights_only_in_expectation():
    q, k, v = torch.randn(64, 8), torch.randn(64, 8), torch.randn(64, 8)
    _, w = lib.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    frac_zero = (w == 0).float().mean().item()
    assert 0.4 < frac_zero < 0.6
    # kept weights are scaled by 1/(1-p), so row sums average to about 1
    assert abs(w.sum(-1).mean().item() - 1.0) < 0.15


def test_causal_mask_values():
    m = lib.causal_mask(4)
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert m.dtype == torch.bool and torch.equal(m, expected)


def test_padding_mask_shape_and_values():
    m = lib.padding_mask(torch.tensor([[4, 9, 1, 1], [2, 1, 1, 1]]), pad_id=1)
    assert m.shape == (2, 1, 1, 4)
    assert m[:, 0, 0].tolist() == [[True, True, False, False], [True, False, False, False]]


def make_pair(d_model=32, n_heads=4):
    ours = lib.MultiHeadAttention(d_model, n_heads)
    theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    copy_mha(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mha_self_attention_equals_torch(mode):
    ours, theirs = make_pair()
    ours.train(mode == "train"), theirs.train(mode == "train")
    x = torch.randn(3, 7, 32)
    expected, w_ref = theirs(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(ours(x, x, x), expected, atol=1e-5, rtol=1e-5)
    if mode == "eval":
        torch.testing.assert_close(ours.attention_weights, w_ref, atol=1e-6, rtol=1e-5)


def test_mha_cross_attention_m_ne_n_equals_torch():
    ours, theirs = make_pair()
    ours.eval(), theirs.eval()
    x, memory = torch.randn(2, 3, 32), torch.randn(2, 9, 32)
    expected, _ = theirs(x, memory, memory)
    got = ours(x, memory, memory)
    assert got.shape == (2, 3, 32) and ours.attention_weights.shape == (2, 4, 3, 9)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mha_causal_equals_torch(mode):
    ours, theirs = make_pair()
    ours.train(mode == "train"), theirs.train(mode == "train")
    x = torch.randn(2, 6, 32)
    mask = lib.causal_mask(6)
    # torch's bool attn_mask means True = NOT allowed: the opposite of lib's convention.
    expected, _ = theirs(x, x, x, attn_mask=~mask)
    torch.testing.assert_close(ours(x, x, x, mask), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mha_key_padding_equals_torch(mode):
    ours, theirs = make_pair()
    ours.train(mode == "train"), theirs.train(mode == "train")
    tokens = torch.tensor([[3, 4, 5, 0, 0], [3, 4, 5, 6, 7]])
    x = torch.randn(2, 5, 32)
    expected, _ = theirs(x, x, x, key_padding_mask=(tokens == 0))
    torch.testing.assert_close(ours(x, x, x, lib.padding_mask(tokens, 0)), expected, atol=1e-5, rtol=1e-5)


def test_mha_fused_and_textbook_paths_agree_with_empty_rows():
    mha = lib.MultiHeadAttention(16, 2)
    x = torch.randn(2, 4, 16)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[0, 0, 2] = False  # one query with no key at all
    fused = mha.train()(x, x, x, mask)
    textbook = mha.eval()(x, x, x, mask)
    assert torch.isfinite(fused).all()
    torch.testing.assert_close(fused, textbook, atol=1e-5, rtol=1e-5)


def test_mha_parameter_count():
    d = 512
    assert sum(p.numel() for p in lib.MultiHeadAttention(d, 8).parameters()) == 4 * d * d + 4 * d
    assert sum(p.numel() for p in lib.MultiHeadAttention(d, 8, bias=False).parameters()) == 4 * d * d


def test_mha_gradients_match_torch():
    ours, theirs = make_pair()
    x1 = torch.randn(2, 5, 32, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    ours(x1, x1, x1).square().sum().backward()
    theirs(x2, x2, x2, need_weights=False)[0].square().sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours.w_o.weight.grad, theirs.out_proj.weight.grad, atol=1e-4, rtol=1e-4)
