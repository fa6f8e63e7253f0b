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
    ],
    lib.check_pre_ln_encoder_layer: [
        ("the residual stream is normalised too", pre_normalised_stream),
        ("post-LN order instead of pre-LN", pre_written_as_post),
        ("residual connection missing", pre_without_residual),
        ("norm2 applied to the layer's output instead of the FFN's input", pre_norm2_at_the_end),
    ],
    lib.check_decoder_self_attention_mask: [
        ("causal only: padding keys are not masked", mask_causal_only),
        ("padding only: the future is visible", mask_padding_only),
        ("padding masks the queries (rows) instead of the keys (columns)", mask_padding_on_queries),
        ("upper triangle: each position sees the future, not the past", mask_upper_triangle),
        ("the diagonal is masked: a position cannot see itself", mask_strict_past),
        ("the mask is inverted (True = forbidden)", mask_inverted),
        ("padding compared with 0 instead of pad_id", mask_pad_zero),
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
