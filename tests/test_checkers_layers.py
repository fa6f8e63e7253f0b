"""Chapter 7's exercise checkers (lib.teach.checkers.layers): solutions pass, stubs are
"not implemented yet", and every named mistake is recognised from an independent wrong version."""

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args, **kwargs):
    raise NotImplementedError


def mistake_names(check):
    """The mistake names a checker knows, read from the verdicts it gives below (kept in sync)."""
    return {name for name, _ in WRONG[check]}


# ------------------------------------------------------------------ encoder layers


def post_ln(x, attn, ffn, norm1, norm2, mask=None):
    x = norm1(x + attn(x, x, x, mask=mask))
    return norm2(x + ffn(x))


def pre_ln(x, attn, ffn, norm1, norm2, mask=None):
    h = norm1(x)
    x = x + attn(h, h, h, mask=mask)
    return x + ffn(norm2(x))


def post_norm_inside_residual(x, attn, ffn, norm1, norm2, mask=None):
    a = attn(x, x, x, mask=mask)
    x = x + norm1(a)
    f = ffn(x)
    return x + norm2(f)


def post_without_residual(x, attn, ffn, norm1, norm2, mask=None):
    return norm2(ffn(norm1(attn(x, x, x, mask=mask))))


def post_written_as_pre(x, attn, ffn, norm1, norm2, mask=None):
    n = norm1(x)
    x = attn(n, n, n, mask=mask) + x
    n = norm2(x)
    return ffn(n) + x


def post_ffn_first(x, attn, ffn, norm1, norm2, mask=None):
    x = norm1(ffn(x) + x)
    return norm2(attn(x, x, x, mask=mask) + x)


def pre_normalised_stream(x, attn, ffn, norm1, norm2, mask=None):
    x = norm1(x)
    x = x + attn(x, x, x, mask=mask)
    x = norm2(x)
    return x + ffn(x)


def pre_written_as_post(x, attn, ffn, norm1, norm2, mask=None):
    x = norm1(attn(x, x, x, mask=mask) + x)
    return norm2(ffn(x) + x)


def pre_without_residual(x, attn, ffn, norm1, norm2, mask=None):
    h = norm1(x)
    return ffn(norm2(attn(h, h, h, mask=mask)))


def pre_norm2_at_the_end(x, attn, ffn, norm1, norm2, mask=None):
    h = norm1(x)
    x = attn(h, h, h, mask=mask) + x
    return norm2(ffn(x) + x)


def post_mask_forgotten(x, attn, ffn, norm1, norm2, mask=None):
    x = norm1(x + attn(x, x, x))
    return norm2(x + ffn(x))


def post_norm1_twice(x, attn, ffn, norm1, norm2, mask=None):
    x = norm1(x + attn(x, x, x, mask=mask))
    return norm1(x + ffn(x))


def post_norm2_twice(x, attn, ffn, norm1, norm2, mask=None):
    x = norm2(x + attn(x, x, x, mask=mask))
    return norm2(x + ffn(x))


def post_functional_layer_norm(x, attn, ffn, norm1, norm2, mask=None):
    shape = (x.shape[-1],)
    x = torch.nn.functional.layer_norm(x + attn(x, x, x, mask=mask), shape)
    return torch.nn.functional.layer_norm(x + ffn(x), shape)


def pre_mask_forgotten(x, attn, ffn, norm1, norm2, mask=None):
    h = norm1(x)
    x = x + attn(h, h, h)
    return x + ffn(norm2(x))


def pre_norm1_twice(x, attn, ffn, norm1, norm2, mask=None):
    h = norm1(x)
    x = x + attn(h, h, h, mask=mask)
    return x + ffn(norm1(x))


def pre_new_layer_norm_modules(x, attn, ffn, norm1, norm2, mask=None):
    fresh = torch.nn.LayerNorm(x.shape[-1], dtype=x.dtype)  # gain 1, bias 0
    h = fresh(x)
    x = x + attn(h, h, h, mask=mask)
    return x + ffn(fresh(x))


def pre_extra_norm_at_the_end(x, attn, ffn, norm1, norm2, mask=None):
    h = norm1(x)
    x = x + attn(h, h, h, mask=mask)
    x = x + ffn(norm2(x))
    return norm2(x)


# ------------------------------------------------------------------ decoder mask


def mask_solution(tgt, pad_id):
    m = tgt.shape[1]
    keep_keys = (tgt != pad_id).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, m)
    past = torch.tril(torch.ones(m, m)).bool()  # (m, m)
    return keep_keys & past


def mask_causal_only(tgt, pad_id):
    m = tgt.shape[1]
    return torch.arange(m)[None, :] <= torch.arange(m)[:, None]  # (m, m)


def mask_padding_only(tgt, pad_id):
    return (tgt != pad_id).view(tgt.shape[0], 1, 1, -1)


def mask_padding_on_queries(tgt, pad_id):
    m = tgt.shape[1]
    rows = (tgt != pad_id).view(tgt.shape[0], 1, m, 1)
    return rows & torch.tril(torch.ones(m, m, dtype=torch.bool))


def mask_upper_triangle(tgt, pad_id):
    m = tgt.shape[1]
    return (tgt != pad_id).view(-1, 1, 1, m) & torch.triu(torch.ones(m, m, dtype=torch.bool))


def mask_strict_past(tgt, pad_id):
    m = tgt.shape[1]
    strict = torch.arange(m)[None, :] < torch.arange(m)[:, None]
    return (tgt != pad_id).view(-1, 1, 1, m) & strict


def mask_inverted(tgt, pad_id):
    m = tgt.shape[1]
    future = torch.triu(torch.ones(m, m, dtype=torch.bool), diagonal=1)
    return (tgt == pad_id).view(-1, 1, 1, m) | future


def mask_as_int(tgt, pad_id):  # right values, but 0/1 integers: lib refuses such a mask
    return mask_solution(tgt, pad_id).int()


def mask_as_float01(tgt, pad_id):
    return mask_solution(tgt, pad_id).float()


def mask_additive(tgt, pad_id):  # PyTorch's float convention: 0 allowed, -inf forbidden
    keep = mask_solution(tgt, pad_id)
    return torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))


def mask_pad_zero(tgt, pad_id):
    m = tgt.shape[1]
    return (tgt != 0).view(-1, 1, 1, m) & torch.tril(torch.ones(m, m, dtype=torch.bool))


CHECKS = {
    lib.check_post_ln_encoder_layer: post_ln,
    lib.check_pre_ln_encoder_layer: pre_ln,
    lib.check_decoder_self_attention_mask: mask_solution,
}

WRONG = {
    lib.check_post_ln_encoder_layer: [
        ("LayerNorm applied to the sub-layer's output before the residual add", post_norm_inside_residual),
        ("residual connection missing", post_without_residual),
        ("pre-LN order instead of post-LN", post_written_as_pre),
        ("sub-layers in the wrong order", post_ffn_first),
        ("mask not passed to the attention (only the padded cases differ)", post_mask_forgotten),
        ("the same LayerNorm used twice", post_norm1_twice),
        ("the same LayerNorm used twice", post_norm2_twice),
        ("a fresh LayerNorm instead of norm1/norm2", post_functional_layer_norm),
    ],
    lib.check_pre_ln_encoder_layer: [
        ("the residual stream is normalised too", pre_normalised_stream),
        ("post-LN order instead of pre-LN", pre_written_as_post),
        ("residual connection missing", pre_without_residual),
        ("norm2 applied to the layer's output instead of the FFN's input", pre_norm2_at_the_end),
        ("mask not passed to the attention (only the padded cases differ)", pre_mask_forgotten),
        ("the same LayerNorm used twice", pre_norm1_twice),
        ("a fresh LayerNorm instead of norm1/norm2", pre_new_layer_norm_modules),
        ("an extra LayerNorm after the layer's output", pre_extra_norm_at_the_end),
    ],
    lib.check_decoder_self_attention_mask: [
        ("causal only: padding keys are not masked", mask_causal_only),
        ("padding only: the future is visible", mask_padding_only),
        ("padding masks the queries (rows) instead of the keys (columns)", mask_padding_on_queries),
        ("upper triangle: each position sees the future, not the past", mask_upper_triangle),
        ("the diagonal is masked: a position cannot see itself", mask_strict_past),
        ("the mask is inverted (True = forbidden)", mask_inverted),
        ("padding compared with 0 instead of pad_id", mask_pad_zero),
        ("a mask of numbers (0/1) instead of a bool mask", mask_as_int),
        ("a mask of numbers (0/1) instead of a bool mask", mask_as_float01),
        ("an additive float mask (0 / -inf) instead of a bool mask", mask_additive),
    ],
}


@pytest.mark.parametrize("check", list(CHECKS), ids=lambda c: c.__name__)
def test_solution_passes(check):
    verdict = check(CHECKS[check])
    assert verdict, str(verdict)
    assert verdict.mistake is None and "✓" in str(verdict)


@pytest.mark.parametrize("check", list(CHECKS), ids=lambda c: c.__name__)
def test_stub_is_not_implemented_yet(check):
    verdict = check(stub)
    assert not verdict and NOT_IMPLEMENTED in str(verdict)


@pytest.mark.parametrize(
    "check, name, wrong",
    [(c, n, f) for c, pairs in WRONG.items() for n, f in pairs],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_each_mistake_is_named(check, name, wrong):
    verdict = check(wrong)
    assert not verdict
    assert verdict.mistake == name, str(verdict)
    assert name in str(verdict)


@pytest.mark.parametrize("check", list(CHECKS), ids=lambda c: c.__name__)
def test_at_least_three_mistakes(check):
    assert len(mistake_names(check)) >= 3


def test_an_equivalent_broadcastable_mask_passes():
    """A (B, 1, 1, m) & (m, m) result and an explicit (B, 1, m, m) one are the same answer."""
    def expanded(tgt, pad_id):
        return mask_solution(tgt, pad_id).expand(-1, 1, -1, -1).contiguous()

    assert lib.check_decoder_self_attention_mask(expanded)


def test_a_wrong_shape_is_reported():
    verdict = lib.check_decoder_self_attention_mask(lambda tgt, pad_id: (tgt != pad_id))
    assert not verdict and verdict.mistake is None


def test_the_checker_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    lib.check_pre_ln_encoder_layer(pre_ln)
    assert torch.equal(torch.rand(3), expected)


def test_the_verdict_is_deterministic():
    assert str(lib.check_post_ln_encoder_layer(pre_ln)) == str(lib.check_post_ln_encoder_layer(pre_ln))


@pytest.mark.parametrize("wrong", [mask_as_int, mask_as_float01, mask_additive])
def test_a_mask_lib_refuses_never_passes_and_the_dtype_is_named(wrong):
    """lib.MultiHeadAttention refuses a non-bool mask; the checker must not say ✓ to one."""
    tgt = torch.tensor([[3, 4, 0]])
    attention = lib.MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 3, 8)
    with pytest.raises(TypeError):
        attention(x, x, x, mask=wrong(tgt, 0))
    verdict = lib.check_decoder_self_attention_mask(wrong)
    assert not verdict
    assert "expected dtype bool" in str(verdict) and str(wrong(tgt, 0).dtype)[6:] in str(verdict)


def test_an_additive_mask_is_not_called_inverted():
    verdict = lib.check_decoder_self_attention_mask(mask_additive)
    assert "inverted" not in str(verdict)


# ------------------------------------------------------------------ decoder stack (exercise 4)


def decoder_solution(y, encoder_outputs, layers, tgt_mask, memory_mask):
    memory = encoder_outputs[-1]
    for layer in layers:
        y = layer.norm1(y + layer.self_attn(y, y, y, mask=tgt_mask))
        y = layer.norm2(y + layer.cross_attn(y, memory, memory, mask=memory_mask))
        y = layer.norm3(y + layer.feed_forward(y))
    return y


def decoder_kv_from_decoder(y, encoder_outputs, layers, tgt_mask, memory_mask):
    for layer in layers:
        y = layer.norm1(y + layer.self_attn(y, y, y, mask=tgt_mask))
        y = layer.norm2(y + layer.cross_attn(y, y, y, mask=memory_mask))
        y = layer.norm3(y + layer.feed_forward(y))
    return y


def decoder_masks_swapped(y, encoder_outputs, layers, tgt_mask, memory_mask):
    memory = encoder_outputs[-1]
    for layer in layers:
        y = layer.norm1(y + layer.self_attn(y, y, y, mask=memory_mask))
        y = layer.norm2(y + layer.cross_attn(y, memory, memory, mask=tgt_mask))
        y = layer.norm3(y + layer.feed_forward(y))
    return y


def decoder_one_norm(y, encoder_outputs, layers, tgt_mask, memory_mask):
    memory = encoder_outputs[-1]
    for layer in layers:
        norm = layer.norm1
        y = norm(y + layer.self_attn(y, y, y, mask=tgt_mask))
        y = norm(y + layer.cross_attn(y, memory, memory, mask=memory_mask))
        y = norm(y + layer.feed_forward(y))
    return y


def decoder_same_depth_memory(y, encoder_outputs, layers, tgt_mask, memory_mask):
    for memory, layer in zip(encoder_outputs, layers):
        y = layer.norm1(y + layer.self_attn(y, y, y, mask=tgt_mask))
        y = layer.norm2(y + layer.cross_attn(y, memory, memory, mask=memory_mask))
        y = layer.norm3(y + layer.feed_forward(y))
    return y


def decoder_pre_ln(y, encoder_outputs, layers, tgt_mask, memory_mask):
    memory = encoder_outputs[-1]
    for layer in layers:
        h = layer.norm1(y)
        y = y + layer.self_attn(h, h, h, mask=tgt_mask)
        y = y + layer.cross_attn(layer.norm2(y), memory, memory, mask=memory_mask)
        y = y + layer.feed_forward(layer.norm3(y))
    return y


def decoder_cross_first(y, encoder_outputs, layers, tgt_mask, memory_mask):
    memory = encoder_outputs[-1]
    for layer in layers:
        y = layer.norm1(y + layer.cross_attn(y, memory, memory, mask=memory_mask))
        y = layer.norm2(y + layer.self_attn(y, y, y, mask=tgt_mask))
        y = layer.norm3(y + layer.feed_forward(y))
    return y


def decoder_no_memory_mask(y, encoder_outputs, layers, tgt_mask, memory_mask):
    return decoder_solution(y, encoder_outputs, layers, tgt_mask, None)


DECODER_WRONG = [
    ("keys and values from the decoder in cross-attention", decoder_kv_from_decoder),
    ("the masks swapped", decoder_masks_swapped),
    ("the same LayerNorm reused", decoder_one_norm),
    ("memory from the wrong encoder layer", decoder_same_depth_memory),
    ("pre-LN order instead of post-LN", decoder_pre_ln),
    ("cross-attention before self-attention", decoder_cross_first),
    ("source padding mask not passed to the cross-attention", decoder_no_memory_mask),
]


def test_decoder_solution_passes_and_stub_is_not_implemented():
    verdict = lib.check_post_ln_decoder(decoder_solution)
    assert verdict and "✓" in str(verdict), str(verdict)
    assert NOT_IMPLEMENTED in str(lib.check_post_ln_decoder(stub))


@pytest.mark.parametrize("name, wrong", DECODER_WRONG, ids=[f.__name__ for _, f in DECODER_WRONG])
def test_each_decoder_mistake_is_named(name, wrong):
    verdict = lib.check_post_ln_decoder(wrong)
    assert not verdict and verdict.mistake == name, str(verdict)




def test_the_decoder_reference_equals_torch():
    """The checker's reference is lib.DecoderLayer: it must equal nn.TransformerDecoderLayer."""
    from lib.teach.checkers.layers import _decoder_cases, _decoder_reference

    y, encoder_outputs, layers, tgt_mask, memory_mask = _decoder_cases()[0].args
    memory = encoder_outputs[-1]
    expected = y
    for modules in layers:
        ours = lib.DecoderLayer(16, 4, 32, dropout=0.0).double().eval()
        for name, module in vars(modules).items():
            setattr(ours, name, module)
        theirs = torch.nn.TransformerDecoderLayer(16, 4, 32, 0.0, batch_first=True).double().eval()
        lib.copy_decoder_layer_to_torch(ours, theirs)
        expected = theirs(expected, memory, tgt_mask=~tgt_mask[:, 0].repeat_interleave(4, 0),
                          memory_key_padding_mask=~memory_mask[:, 0, 0])
    got = _decoder_reference(y, encoder_outputs, layers, tgt_mask, memory_mask)
    assert torch.allclose(got, expected, atol=1e-9)
