"""Property-based tests of lib's attention (hypothesis): many shapes, dtypes and masks.

Each property is checked on at most 50 generated examples, derandomized so that
every run (and CI) sees the same examples.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import lib
from conftest import copy_mha

SETTINGS = settings(
    max_examples=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
FLOATS = {"float32": (torch.float32, 1e-5), "float64": (torch.float64, 1e-10)}


@st.composite
def attention_inputs(draw):
    """q (*batch, m, d_k), k (*batch, n, d_k), v (*batch, n, d_v) and maybe a bool mask."""
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    m, n = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    dtype, tol = FLOATS[draw(st.sampled_from(sorted(FLOATS)))]
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    scale = draw(st.sampled_from([0.1, 1.0, 10.0]))
    q = torch.randn(*batch, m, d_k, generator=g, dtype=dtype) * scale
    k = torch.randn(*batch, n, d_k, generator=g, dtype=dtype) * scale
    v = torch.randn(*batch, n, d_v, generator=g, dtype=dtype)
    mask = None
    kind = draw(st.sampled_from(["none", "full", "keys", "causal"]))
    if kind == "full":  # one entry per score
        mask = torch.rand(*batch, m, n, generator=g) < draw(st.sampled_from([0.3, 0.7, 1.0]))
    elif kind == "keys":  # padding-style: one row for every query, broadcast
        mask = (torch.rand(*batch, 1, n, generator=g) < 0.7)
    elif kind == "causal":
        mask = torch.ones(m, n, dtype=torch.bool).tril()
    return q, k, v, mask, tol


@SETTINGS
@given(attention_inputs())
def test_attention_equals_torch_sdpa(inputs):
    q, k, v, mask, tol = inputs
    out, weights = lib.scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (*q.shape[:-1], v.shape[-1]) and out.dtype == q.dtype
    assert bool(torch.isfinite(out).all())
    if mask is None:
        ref = F.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), atol=tol, rtol=tol)
        return
    full = mask.expand(weights.shape)
    has_key = full.any(dim=-1)  # (..., m)
    # Rows with at least one allowed key are the same function as PyTorch's ...
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~has_key[..., None])
    torch.testing.assert_close(out[has_key], ref[has_key], atol=tol, rtol=tol)
    # ... masked keys get exactly zero weight, and a row with none gets zero output.
    assert bool((weights[~full] == 0).all())
    assert bool((out[~has_key] == 0).all())


@SETTINGS
@given(
    B=st.integers(1, 3),
    m=st.integers(1, 5),
    n=st.integers(1, 5),
    heads_and_dk=st.sampled_from([(1, 4), (2, 2), (2, 4), (4, 2), (3, 3)]),
    masked=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_multi_head_attention_equals_torch(B, m, n, heads_and_dk, masked, seed):
    h, d_k = heads_and_dk
    d_model = h * d_k
    torch.manual_seed(seed)
    ours = lib.MultiHeadAttention(d_model, h).eval()
    theirs = nn.MultiheadAttention(d_model, h, batch_first=True).eval()
    copy_mha(ours, theirs)
    query, memory = torch.randn(B, m, d_model), torch.randn(B, n, d_model)
    if masked:
        keep = torch.rand(B, n) < 0.7
        keep[:, 0] = True  # at least one key per row: PyTorch's own NaN convention differs otherwise
        got = ours(query, memory, memory, keep[:, None, None, :])
        expected, _ = theirs(query, memory, memory, key_padding_mask=~keep)
    else:
        got = ours(query, memory, memory)
        expected, _ = theirs(query, memory, memory)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # the fused (training-mode) path computes the same function
    ours.train()
    fused = ours(query, memory, memory, keep[:, None, None, :] if masked else None)
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)


@SETTINGS
@given(
    dtype=st.sampled_from([torch.float16, torch.bfloat16]),
    scale=st.sampled_from([1.0, 30.0, 100.0, 300.0]),
    d_k=st.sampled_from([16, 64]),
    seed=st.integers(0, 2**16),
)
def test_half_precision_attention_is_finite_where_torch_is(dtype, scale, d_k, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, 2, 5, d_k, generator=g) * scale for _ in range(2))
    v = torch.randn(2, 2, 5, d_k, generator=g)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    ref = F.scaled_dot_product_attention(q, k, v)
    out, weights = lib.scaled_dot_product_attention(q, k, v)
    assert out.dtype == dtype and weights.dtype == dtype
    assert bool(torch.isfinite(out).all()) == bool(torch.isfinite(ref).all())
    tol = 1e-2 if dtype == torch.float16 else 5e-2
    torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)


# ---------------------------------------------------------------------------
# Bad input: refused with TypeError/ValueError naming the argument, never a RuntimeError.
# ---------------------------------------------------------------------------

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@SETTINGS
@given(dtypes=st.lists(st.sampled_from(DTYPES), min_size=3, max_size=3), m=st.integers(1, 4))
def test_mixed_float_dtypes_are_refused_by_name(dtypes, m):
    q, k, v = (torch.randn(m, 4, dtype=d) for d in dtypes)
    if len(set(dtypes)) == 1:
        lib.scaled_dot_product_attention(q, k, v)
        return
    with pytest.raises(TypeError, match=r"same dtype") as info:
        lib.scaled_dot_product_attention(q, k, v)
    assert str(dtypes[0]) in str(info.value) or str(dtypes[1]) in str(info.value)


@SETTINGS
@given(dtype=st.sampled_from(DTYPES), which=st.sampled_from(["query", "key", "value"]))
def test_module_and_input_dtypes_must_agree(dtype, which):
    mha = lib.MultiHeadAttention(8, 2)
    x = {name: torch.randn(1, 3, 8) for name in ("query", "key", "value")}
    x[which] = x[which].to(dtype)
    if dtype == torch.float32:
        assert mha(**x).shape == (1, 3, 8)
        return
    with pytest.raises(TypeError, match=rf"{which} has dtype {dtype}"):
        mha(**x)


@SETTINGS
@given(
    mask_shape=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    m=st.integers(1, 4),
    n=st.integers(1, 4),
)
def test_masks_that_do_not_broadcast_are_refused(mask_shape, m, n):
    q, k = torch.randn(2, m, 4), torch.randn(2, n, 4)
    mask = torch.ones(mask_shape, dtype=torch.bool)
    try:
        fits = torch.broadcast_shapes(mask.shape, (2, m, n)) == (2, m, n)
    except RuntimeError:
        fits = False
    if fits:
        assert lib.scaled_dot_product_attention(q, k, k, mask)[0].shape == (2, m, 4)
    else:
        with pytest.raises(ValueError, match=r"mask of shape .* does not broadcast"):
            lib.scaled_dot_product_attention(q, k, k, mask)


@SETTINGS
@given(
    dtype=st.sampled_from([torch.int8, torch.int16, torch.uint8, torch.int32, torch.int64]),
    seed=st.integers(0, 2**16),
)
def test_narrow_integer_token_ids_are_accepted(dtype, seed):
    # int8/int16/uint8 ids are converted to int64 (nn.Embedding indexes with int32/int64 only)
    torch.manual_seed(0)
    model = lib.Transformer(11, 11, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=16).eval()
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(0, 11, (2, 5), generator=g), torch.randint(0, 11, (2, 4), generator=g)
    expected = model(src, tgt, tgt_mask=lib.causal_mask(4))
    got = model(src.to(dtype), tgt.to(dtype), tgt_mask=lib.causal_mask(4))
    torch.testing.assert_close(got, expected)


@SETTINGS
@given(bad=st.one_of(st.integers(-5, -1), st.integers(11, 300)), where=st.sampled_from(["src", "tgt"]))
def test_token_ids_outside_the_vocabulary_are_refused_by_name(bad, where):
    model = lib.Transformer(11, 11, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=16)
    ids = {"src": torch.ones(1, 3, dtype=torch.long), "tgt": torch.ones(1, 3, dtype=torch.long)}
    ids[where][0, 1] = bad
    with pytest.raises(ValueError, match=rf"{where} holds token id {bad}"):
        model(ids["src"], ids["tgt"])
