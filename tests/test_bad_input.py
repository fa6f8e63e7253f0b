"""Bad input gets a clear ValueError/TypeError naming what is wrong, before any computation."""

import pytest
import torch

import lib


def test_d_model_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"d_model=4 is not divisible by n_heads=3"):
        lib.MultiHeadAttention(4, 3)
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=4"):
        lib.Transformer(5, 5, d_model=10, n_heads=4)


def test_query_key_feature_sizes_differ():
    with pytest.raises(ValueError, match=r"q is \(3, 4\), k is \(5, 6\)"):
        lib.scaled_dot_product_attention(torch.randn(3, 4), torch.randn(5, 6), torch.randn(5, 2))


def test_key_value_lengths_differ():
    with pytest.raises(ValueError, match=r"k is \(5, 4\), v is \(6, 2\)"):
        lib.scaled_dot_product_attention(torch.randn(3, 4), torch.randn(5, 4), torch.randn(6, 2))
    mha = lib.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"key is \(1, 5, 8\), value is \(1, 4, 8\)"):
        mha(torch.randn(1, 3, 8), torch.randn(1, 5, 8), torch.randn(1, 4, 8))


def test_mask_that_does_not_broadcast():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast .* \(2, 3, 3\)"):
        lib.scaled_dot_product_attention(q, q, q, lib.causal_mask(4))
    mha = lib.MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 1, 4\) does not broadcast .* \(2, 2, 5, 5\)"):
        mha(x, x, x, torch.ones(2, 1, 1, 4, dtype=torch.bool))
    # a mask with more leading dimensions than the scores would silently grow the output
    with pytest.raises(ValueError, match=r"does not broadcast"):
        lib.scaled_dot_product_attention(q, q, q, torch.ones(5, 2, 3, 3, dtype=torch.bool))


def test_mask_must_be_bool():
    q = torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"mask must be a bool tensor .* got dtype torch.float32"):
        lib.scaled_dot_product_attention(q, q, q, torch.ones(3, 3))


def test_input_last_dimension_not_d_model():
    mha = lib.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"query has last dimension 6, but this layer has d_model=8"):
        mha(torch.randn(1, 3, 6), torch.randn(1, 3, 8), torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match=r"x must have shape \(B, L, d_model=8\), got \(2, 3, 7\)"):
        lib.EncoderLayer(8, 2, 16)(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match=r"memory must have shape \(B, L, d_model=8\), got \(2, 3, 4\)"):
        lib.DecoderLayer(8, 2, 16)(torch.randn(2, 3, 8), torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected d_model=8"):
        lib.PositionwiseFeedForward(8, 32)(torch.randn(3, 5))


def test_token_ids_outside_vocabulary():
    model = lib.Transformer(10, 12, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    ok = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"src holds token id 10, outside \[0, 10\)"):
        model(torch.tensor([[1, 10, 2]]), ok)
    with pytest.raises(ValueError, match=r"tgt holds token id -1, outside \[0, 12\)"):
        model(ok, torch.tensor([[1, -1, 2]]))
    with pytest.raises(TypeError, match=r"integer token ids"):
        model(torch.zeros(1, 3), ok)


def test_tied_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match=r"src_vocab_size=100, tgt_vocab_size=120"):
        lib.Transformer(100, 120, d_model=8, n_heads=2, n_layers=1, d_ff=16, share_embeddings=True)


def test_other_bad_arguments():
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        lib.scaled_dot_product_attention([[1.0]], torch.randn(1, 1), torch.randn(1, 1))
    with pytest.raises(TypeError, match="floating-point"):
        x = torch.ones(2, 2, dtype=torch.long)
        lib.scaled_dot_product_attention(x, x, x)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        q = torch.randn(2, 2)
        lib.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(ValueError, match="size must be positive"):
        lib.causal_mask(0)
    with pytest.raises(ValueError, match="d_model must be even"):
        lib.sinusoidal_positional_encoding(4, 5)
    with pytest.raises(ValueError, match=r"sequence length 30 exceeds max_len=20"):
        lib.LearnedPositionalEmbedding(8, max_len=20)(torch.randn(1, 30, 8))
    with pytest.raises(ValueError, match="batch size"):
        mha = lib.MultiHeadAttention(8, 2)
        mha(torch.randn(2, 3, 8), torch.randn(3, 3, 8), torch.randn(3, 3, 8))


def test_no_nan_from_bad_mask_rows():
    # the failure mode the checks exist for: never a NaN, whatever the mask
    q = torch.randn(1, 2, 4, 8)
    out, w = lib.scaled_dot_product_attention(q, q, q, torch.zeros(4, 4, dtype=torch.bool))
    assert not out.isnan().any() and not w.isnan().any()


# ---------------------------------------------------------------------------
# The gaps of issue 9 item 6: each refused by name before any computation.
# ---------------------------------------------------------------------------


def test_qkv_of_different_float_dtypes():
    q = torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"q and k must have the same dtype: q is torch.float32, k is torch.float64"):
        lib.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(TypeError, match=r"q and v must have the same dtype"):
        lib.scaled_dot_product_attention(q, q, q.half())


def test_input_and_module_of_different_float_dtypes():
    with pytest.raises(TypeError, match=r"query has dtype torch.float64 but MultiHeadAttention's parameters are torch.float32"):
        x = torch.randn(1, 3, 8, dtype=torch.float64)
        lib.MultiHeadAttention(8, 2)(x, x, x)
    with pytest.raises(TypeError, match=r"x has dtype torch.float64"):
        lib.PositionwiseFeedForward(8, 16)(torch.randn(2, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"x has dtype torch.float16"):
        lib.EncoderLayer(8, 2, 16)(torch.randn(1, 3, 8).half())
    with pytest.raises(TypeError, match=r"memory has dtype torch.float64"):
        lib.DecoderLayer(8, 2, 16)(torch.randn(1, 3, 8), torch.randn(1, 3, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"x has dtype torch.float64"):
        lib.LearnedPositionalEmbedding(8)(torch.randn(1, 3, 8, dtype=torch.float64))
    # a module converted to the input's dtype is fine
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    assert lib.EncoderLayer(8, 2, 16).double()(x).dtype == torch.float64


def test_tensors_on_different_devices():
    # "meta" tensors have shapes but no values: a second device available on every machine.
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"q and k must be on the same device: q is on cpu, k on meta"):
        lib.scaled_dot_product_attention(q, q.to("meta"), q)
    with pytest.raises(ValueError, match=r"mask is on meta but the scores are on cpu"):
        lib.scaled_dot_product_attention(q, q, q, torch.ones(3, 3, dtype=torch.bool, device="meta"))
    x = torch.randn(1, 3, 8, device="meta")
    with pytest.raises(ValueError, match=r"query is on meta but MultiHeadAttention's parameters are on cpu"):
        lib.MultiHeadAttention(8, 2)(x, x, x)
    with pytest.raises(ValueError, match=r"x is on meta but EncoderLayer's parameters are on cpu"):
        lib.EncoderLayer(8, 2, 16)(x)
    with pytest.raises(ValueError, match=r"tokens are on meta but the embedding is on cpu"):
        lib.TokenEmbedding(10, 8)(torch.zeros(1, 3, dtype=torch.long, device="meta"))
    with pytest.raises(ValueError, match=r"target is on meta but logits are on cpu"):
        lib.label_smoothed_nll(torch.randn(2, 5), torch.zeros(2, dtype=torch.long, device="meta"))


def test_pad_id_of_the_wrong_type_or_shape():
    model = lib.DecoderOnlyModel(10, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    tokens = torch.ones(1, 4, dtype=torch.long)
    for bad in (torch.tensor(0), torch.tensor([0, 1]), 0.0, "0", True):
        with pytest.raises(TypeError, match="pad_id"):
            model(tokens, pad_id=bad)
    with pytest.raises(ValueError, match=r"pad_id=10 is outside \[0, 10\)"):
        lib.EncoderOnlyModel(10, d_model=8, n_heads=2, n_layers=1, d_ff=16)(tokens, pad_id=10)


@pytest.mark.parametrize(
    "build, flag",
    [
        (lambda v: lib.MultiHeadAttention(8, 2, bias=v), "bias"),
        (lambda v: lib.MultiHeadAttention(8, 2, fused=v), "fused"),
        (lambda v: lib.EncoderLayer(8, 2, 16, norm_first=v), "norm_first"),
        (lambda v: lib.DecoderLayer(8, 2, 16, norm_first=v), "norm_first"),
        (lambda v: lib.Transformer(10, 10, d_model=8, n_heads=2, n_layers=1, d_ff=16, norm_first=v), "norm_first"),
        (lambda v: lib.Transformer(10, 10, d_model=8, n_heads=2, n_layers=1, d_ff=16, share_embeddings=v),
         "share_embeddings"),
        (lambda v: lib.DecoderOnlyModel(10, d_model=8, n_heads=2, n_layers=1, d_ff=16, norm_first=v), "norm_first"),
    ],
)
def test_boolean_flags_must_be_bools(build, flag):
    for bad in ("no", 0, 1, None, torch.tensor(True)):
        with pytest.raises(TypeError, match=rf"{flag} must be True or False"):
            build(bad)
    build(True), build(False)


def test_noam_factor_must_be_a_finite_positive_number():
    for bad in (float("nan"), float("inf"), -1.0, 0):
        with pytest.raises(ValueError, match="factor"):
            lib.noam_lr(10, 512, 4000, factor=bad)
        with pytest.raises(ValueError, match="factor"):
            lib.noam_lambda(512, 4000, factor=bad)
    for bad in ("1", None, True):
        with pytest.raises(TypeError, match="factor"):
            lib.noam_lr(10, 512, 4000, factor=bad)
        with pytest.raises(TypeError, match="factor"):
            lib.noam_lambda(512, 4000, factor=bad)


def test_label_smoothing_nan_is_refused():
    with pytest.raises(ValueError, match="label_smoothing"):
        lib.label_smoothed_nll(torch.randn(2, 5), torch.tensor([1, 2]), float("nan"))


def test_d_k_zero_is_refused():
    with pytest.raises(ValueError, match=r"d_k > 0"):
        lib.scaled_dot_product_attention(torch.randn(3, 0), torch.randn(4, 0), torch.randn(4, 2))


def test_positional_modules_need_a_positive_d_model():
    for cls in (lib.LearnedPositionalEmbedding, lib.SinusoidalPositionalEncoding):
        with pytest.raises(ValueError, match="d_model must be positive"):
            cls(0)
        with pytest.raises(ValueError, match="d_model must be positive"):
            cls(-4)
        with pytest.raises(TypeError, match="d_model must be an int"):
            cls(8.0)


def test_narrow_integer_ids_reach_the_embedding():
    emb = lib.TokenEmbedding(10, 4)
    ids = torch.tensor([[1, 2, 9]])
    for dtype in (torch.int8, torch.int16, torch.uint8, torch.int32):
        torch.testing.assert_close(emb(ids.to(dtype)), emb(ids))


@pytest.mark.parametrize("pad_id", [None, True, 0.0, "0", torch.tensor([0, 1]), torch.tensor(0.0)])
def test_padding_mask_refuses_a_pad_id_that_is_not_one_integer(pad_id):
    # pad_id=None used to fail deep inside with "'bool' object is not subscriptable"
    with pytest.raises(TypeError, match="pad_id must be one integer token id"):
        lib.padding_mask(torch.tensor([[5, 7, 0]]), pad_id)


def test_padding_mask_accepts_integer_pad_ids():
    tokens = torch.tensor([[5, 7, 0]])
    for pad_id in (0, torch.tensor(0)):
        assert lib.padding_mask(tokens, pad_id)[0, 0, 0].tolist() == [True, True, False]
