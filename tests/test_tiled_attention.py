"""lib.model.tiled.tiled_attention against F.scaled_dot_product_attention, gradcheck and brute force.

Tolerances: 1e-5 in float32 (the issue's bound), gradcheck's defaults in float64.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lib.model.tiled import tiled_attention
from lib.teach.measure import LargestTensor as _LargestTensor


def _inputs(b, h, m, n, d_k, d_v, dtype=torch.float32, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    make = lambda *s: torch.randn(*s, generator=g, dtype=dtype).requires_grad_(requires_grad)  # noqa: E731
    return make(b, h, m, d_k), make(b, h, n, d_k), make(b, h, n, d_v)


def _key_mask(lengths, n):
    return (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]  # (B, 1, 1, n)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize(
    "m, n, block_q, block_k",
    [(64, 64, 16, 16), (37, 37, 8, 16), (50, 50, 64, 64), (29, 29, 1, 7)],
)
def test_forward_matches_torch(causal, padded, m, n, block_q, block_k):
    q, k, v = _inputs(2, 3, m, n, 16, 8)
    key_mask = _key_mask([n, n - 6], n) if padded else None
    attn_mask = key_mask
    if causal:
        tri = torch.ones(m, n, dtype=torch.bool).tril()
        attn_mask = tri if attn_mask is None else attn_mask & tri
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    got = tiled_attention(q, k, v, key_mask=key_mask, causal=causal, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_cross_attention_with_more_keys_than_queries():
    q, k, v = _inputs(1, 2, 20, 50, 8, 5, seed=1)
    want = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(tiled_attention(q, k, v, block_q=7, block_k=9), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_float64(causal):
    q, k, v = _inputs(1, 2, 13, 13, 4, 3, dtype=torch.float64, requires_grad=True)
    key_mask = _key_mask([10], 13)

    def f(q, k, v):
        return tiled_attention(q, k, v, key_mask=key_mask, causal=causal, block_q=4, block_k=5)

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_gradients_match_the_textbook_path():
    """Same gradients as autograd through softmax(QKᵀ/√d_k)V written out in full (brute force)."""
    q, k, v = _inputs(2, 2, 24, 24, 8, 8, dtype=torch.float64, requires_grad=True)
    d_out = torch.randn(2, 2, 24, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    scores = q @ k.transpose(-2, -1) / 8**0.5
    scores = scores.masked_fill(~torch.ones(24, 24, dtype=torch.bool).tril(), float("-inf"))
    want = torch.autograd.grad(scores.softmax(-1) @ v, (q, k, v), d_out)
    got = torch.autograd.grad(tiled_attention(q, k, v, causal=True, block_q=5, block_k=7), (q, k, v), d_out)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


def test_a_query_with_no_allowed_key_gets_zeros_and_zero_gradients():
    q, k, v = _inputs(1, 1, 6, 6, 4, 4, requires_grad=True)
    key_mask = torch.zeros(1, 1, 1, 6, dtype=torch.bool)  # every key hidden
    out = tiled_attention(q, k, v, key_mask=key_mask, block_q=4, block_k=4)
    assert torch.equal(out, torch.zeros_like(out))
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all() and not t.grad.any()


def test_float16_large_scores_stay_finite_like_torch():
    q, k, v = _inputs(1, 1, 32, 32, 64, 16)
    q, k = q * 40, k * 40  # q·k reaches ~1e5 > float16's 65504 before scaling
    q16, k16, v16 = q.half(), k.half(), v.half()
    want = F.scaled_dot_product_attention(q16, k16, v16)
    got = tiled_attention(q16, k16, v16, block_q=8, block_k=8)
    assert torch.isfinite(want).all() and torch.isfinite(got).all()
    # Scores near 1e4 have float16 steps of 8: both are only approximations of
    # the float32 result. Ours must be no worse than PyTorch's own float16 path.
    truth = F.scaled_dot_product_attention(q16.float(), k16.float(), v16.float())
    ours, theirs = (got.float() - truth).abs().mean(), (want.float() - truth).abs().mean()
    assert ours <= 2 * theirs + 1e-3, (ours, theirs)


def test_never_materialises_the_weights():
    b, h, n, d = 1, 2, 512, 16
    q, k, v = _inputs(b, h, n, n, d, d, requires_grad=True)
    with _LargestTensor() as forward:
        out = tiled_attention(q, k, v, causal=True, block_q=64, block_k=64)
    with _LargestTensor() as backward:
        out.sum().backward()
    block = b * h * 64 * 64
    assert forward.largest <= max(block, b * h * n * d), forward.largest
    assert backward.largest <= max(block, b * h * n * d), backward.largest
    # The textbook path, for contrast, makes the whole (B, h, n, n) score tensor.
    with _LargestTensor() as textbook:
        (q @ k.transpose(-2, -1)).softmax(-1) @ v
    assert textbook.largest == b * h * n * n


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(block_q=0), ValueError, "block_q"),
        (dict(block_k=-3), ValueError, "block_k"),
        (dict(block_q=2.5), TypeError, "block_q"),
        (dict(block_k=True), TypeError, "block_k"),
        (dict(causal=1), TypeError, "causal"),
        (dict(key_mask=torch.ones(2, 1, 1, 8)), TypeError, "key_mask"),
        (dict(key_mask=torch.ones(2, 1, 8, 8, dtype=torch.bool)), ValueError, "key_mask"),
        (dict(key_mask=torch.ones(2, 1, 1, 7, dtype=torch.bool)), ValueError, "key_mask"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, error, words):
    q, k, v = _inputs(2, 1, 8, 8, 4, 4)
    with pytest.raises(error, match=words):
        tiled_attention(q, k, v, **kwargs)


def test_bad_tensors_name_themselves():
    q, k, v = _inputs(2, 1, 8, 8, 4, 4)
    with pytest.raises(TypeError, match="one dtype"):
        tiled_attention(q, k.double(), v)
    with pytest.raises(TypeError, match="floating-point"):
        tiled_attention(q, k, v.long())
    with pytest.raises(ValueError, match="d_k"):
        tiled_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="positions n"):
        tiled_attention(q, k, v[..., :5, :])
    with pytest.raises(ValueError, match="leading"):
        tiled_attention(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="one device"):
        tiled_attention(q, k.to("meta"), v)


def test_key_mask_on_another_device_is_refused():
    q, k, v = _inputs(2, 1, 8, 8, 4, 4)
    with pytest.raises(ValueError, match="key_mask"):
        tiled_attention(q, k, v, key_mask=torch.ones(2, 1, 1, 8, dtype=torch.bool, device="meta"))


@pytest.mark.parametrize("block_q, block_k", [(1, 1), (3, 5), (1000, 1000)])
def test_block_sizes_that_do_not_divide_or_exceed_the_length(block_q, block_k):
    q, k, v = _inputs(1, 2, 11, 11, 4, 3, seed=4)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    got = tiled_attention(q, k, v, causal=True, block_q=block_q, block_k=block_k)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_keep_their_dtype(dtype):
    q, k, v = (t.to(dtype) for t in _inputs(1, 2, 16, 16, 8, 8, seed=5))
    out = tiled_attention(q, k, v, block_q=4, block_k=4)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), F.scaled_dot_product_attention(q.float(), k.float(), v.float()),
                               rtol=2e-2, atol=2e-2)
