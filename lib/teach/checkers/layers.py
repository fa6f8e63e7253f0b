"""Checkers for chapter 7's coding exercises: the encoder layer in both LayerNorm orders,
and the decoder's self-attention mask (see lib.teach.checking).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_layers.py).
"""

from __future__ import annotations

import torch
from torch import nn

from lib.model.attention import MultiHeadAttention, causal_mask, padding_mask
from lib.model.layers import PositionwiseFeedForward
from lib.model.transformer import EncoderLayer
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_post_ln_encoder_layer", "check_pre_ln_encoder_layer", "check_decoder_self_attention_mask"]


# --------------------------------------------------------------------------- encoder layers


def _sub_modules(d_model: int, n_heads: int, d_ff: int, seed: int, dtype: torch.dtype):
    """Attention, FFN and two LayerNorms with random weights (gains and biases too), eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        attn = MultiHeadAttention(d_model, n_heads, dropout=0.0)
        ffn = PositionwiseFeedForward(d_model, d_ff, dropout=0.0)
        norm1, norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        with torch.no_grad():
            for norm in (norm1, norm2):  # not 1 and 0, so that every misuse of a norm shows
                norm.weight.copy_(1 + 0.5 * torch.randn(d_model))
                norm.bias.copy_(0.5 * torch.randn(d_model))
    return tuple(m.to(dtype).eval() for m in (attn, ffn, norm1, norm2))


def _layer_cases() -> list[Case]:
    g = torch.Generator().manual_seed(7)
    cases = []
    for k, (B, n, d_model, n_heads, dtype, padded) in enumerate(
        (
            (2, 5, 16, 4, torch.float64, True),
            (3, 4, 8, 2, torch.float32, False),
            (1, 6, 12, 3, torch.float64, False),
            (4, 3, 8, 1, torch.float32, True),
        )
    ):
        modules = _sub_modules(d_model, n_heads, 2 * d_model, seed=100 + k, dtype=dtype)
        x = 2 * torch.randn(B, n, d_model, generator=g, dtype=dtype) + 1
        mask = None
        if padded:  # the last row loses its last two positions to padding
            tokens = torch.ones(B, n, dtype=torch.long)
            tokens[-1, -2:] = 0
            mask = padding_mask(tokens, 0)  # (B, 1, 1, n)
        label = f"x {tuple(x.shape)}, {str(dtype).replace('torch.', '')}, mask {'padding' if padded else 'None'}"
        cases.append(Case((x, *modules), {"mask": mask}, label=label))
    return cases


def _encoder_reference(norm_first: bool):
    def reference(x, attn, ffn, norm1, norm2, mask=None):
        with torch.random.fork_rng(devices=[]):
            layer = EncoderLayer(attn.d_model, attn.n_heads, ffn.d_ff, dropout=0.0, norm_first=norm_first)
        layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2 = attn, ffn, norm1, norm2
        with torch.no_grad():
            return layer.eval()(x, mask=mask)

    return reference


def _attend(attn, x, mask):
    return attn(x, x, x, mask=mask)


def check_post_ln_encoder_layer(post_ln_encoder_layer) -> Verdict:
    """Chapter 7, exercise: the paper's (post-LN) encoder layer from its four sub-modules."""

    def norm_after_sublayer(x, attn, ffn, norm1, norm2, mask=None):
        x = x + norm1(_attend(attn, x, mask))
        return x + norm2(ffn(x))

    def no_residual(x, attn, ffn, norm1, norm2, mask=None):
        x = norm1(_attend(attn, x, mask))
        return norm2(ffn(x))

    def pre_ln_order(x, attn, ffn, norm1, norm2, mask=None):
        y = norm1(x)
        x = x + _attend(attn, y, mask)
        return x + ffn(norm2(x))

    def sublayers_swapped(x, attn, ffn, norm1, norm2, mask=None):
        x = norm1(x + ffn(x))
        return norm2(x + _attend(attn, x, mask))

    mistakes = [
        Mistake(
            "LayerNorm applied to the sub-layer's output before the residual add",
            "Post-LN normalises the *sum*: is it norm(x + sublayer(x)) rather than x + norm(sublayer(x))?",
            norm_after_sublayer,
        ),
        Mistake(
            "residual connection missing",
            "Did you add the sub-layer's input x back before the LayerNorm: norm(x + sublayer(x))?",
            no_residual,
        ),
        Mistake(
            "pre-LN order instead of post-LN",
            "That is x + sublayer(norm(x)), the pre-LN order. The paper normalises after the sum.",
            pre_ln_order,
        ),
        Mistake(
            "sub-layers in the wrong order",
            "Self-attention comes first (with norm1), then the FFN (with norm2).",
            sublayers_swapped,
        ),
    ]
    return check_function(
        post_ln_encoder_layer, _encoder_reference(False), _layer_cases(), mistakes, name="post_ln_encoder_layer"
    )


def check_pre_ln_encoder_layer(pre_ln_encoder_layer) -> Verdict:
    """Chapter 7, exercise: the pre-LN encoder layer (GPT-2 style) from its four sub-modules."""

    def normalised_stream(x, attn, ffn, norm1, norm2, mask=None):
        y = norm1(x)
        x = y + _attend(attn, y, mask)
        y = norm2(x)
        return y + ffn(y)

    def post_ln_order(x, attn, ffn, norm1, norm2, mask=None):
        x = norm1(x + _attend(attn, x, mask))
        return norm2(x + ffn(x))

    def no_residual(x, attn, ffn, norm1, norm2, mask=None):
        x = _attend(attn, norm1(x), mask)
        return ffn(norm2(x))

    def final_norm_inside(x, attn, ffn, norm1, norm2, mask=None):
        x = x + _attend(attn, norm1(x), mask)
        x = x + ffn(x)
        return norm2(x)

    mistakes = [
        Mistake(
            "the residual stream is normalised too",
            "Is it norm(x) + sublayer(norm(x))? Only the sub-layer's input is normalised; "
            "add the un-normalised x: x + sublayer(norm(x)).",
            normalised_stream,
        ),
        Mistake(
            "post-LN order instead of pre-LN",
            "That is norm(x + sublayer(x)), the paper's post-LN order. Pre-LN normalises the "
            "sub-layer's input: x + sublayer(norm(x)).",
            post_ln_order,
        ),
        Mistake(
            "residual connection missing",
            "Did you add x back after each sub-layer: x + sublayer(norm(x))?",
            no_residual,
        ),
        Mistake(
            "norm2 applied to the layer's output instead of the FFN's input",
            "norm2 belongs in front of the FFN; the one final LayerNorm of a pre-LN model "
            "closes the whole stack, not each layer.",
            final_norm_inside,
        ),
    ]
    return check_function(
        pre_ln_encoder_layer, _encoder_reference(True), _layer_cases(), mistakes, name="pre_ln_encoder_layer"
    )


# --------------------------------------------------------------------------- decoder mask


def _mask_cases() -> list[Case]:
    g = torch.Generator().manual_seed(11)
    cases = []
    for B, m, pad_id in ((2, 5, 0), (3, 4, 0), (2, 6, 1), (1, 3, 0)):
        tgt = torch.randint(0, 9, (B, m), generator=g)
        tgt[tgt == pad_id] = pad_id + 2  # no padding by chance ...
        for b in range(B):  # ... but row b ends with b pads
            if b:
                tgt[b, m - b :] = pad_id
        if pad_id != 0:
            tgt[0, 0] = 0  # an ordinary token that happens to be 0
        cases.append(Case((tgt, pad_id), label=f"tgt {tuple(tgt.shape)}, pad_id={pad_id}"))
    return cases


def _broadcast(mask_fn):
    """The learner's mask, broadcast to (B, 1, m, m) where it broadcasts (any equivalent shape passes)."""

    def wrapped(tgt, pad_id):
        mask = mask_fn(tgt, pad_id)
        B, m = tgt.shape
        if isinstance(mask, torch.Tensor):
            try:
                return torch.broadcast_to(mask, (B, 1, m, m)).clone()
            except RuntimeError:
                return mask
        return mask

    return wrapped


def _keys(tgt, pad_id):
    return (tgt != pad_id)[:, None, None, :]  # (B, 1, 1, m)


def _tril(m, diagonal=0):
    return torch.ones(m, m, dtype=torch.bool).tril(diagonal)


def check_decoder_self_attention_mask(decoder_self_attention_mask) -> Verdict:
    """Chapter 7, exercise: `decoder_self_attention_mask(tgt, pad_id)`, causal AND padding."""

    def reference(tgt, pad_id):
        return padding_mask(tgt, pad_id) & causal_mask(tgt.shape[1])

    mistakes = [
        Mistake(
            "causal only: padding keys are not masked",
            "Padded target positions are keys too: combine the causal mask with (tgt != pad_id) "
            "over the keys (AND, &).",
            lambda tgt, pad_id: _tril(tgt.shape[1]).expand(tgt.shape[0], 1, -1, -1),
        ),
        Mistake(
            "padding only: the future is visible",
            "The decoder must not see later positions: AND the padding mask with the causal "
            "(lower-triangular) mask.",
            lambda tgt, pad_id: _keys(tgt, pad_id).expand(-1, 1, tgt.shape[1], -1),
        ),
        Mistake(
            "padding masks the queries (rows) instead of the keys (columns)",
            "The pad positions must be hidden as *keys*: shape (B, 1, 1, m), i.e. "
            "(tgt != pad_id)[:, None, None, :], not [:, None, :, None].",
            lambda tgt, pad_id: (tgt != pad_id)[:, None, :, None] & _tril(tgt.shape[1]),
        ),
        Mistake(
            "upper triangle: each position sees the future, not the past",
            "Query i may attend to keys 0..i: keep the lower triangle (tril), not triu.",
            lambda tgt, pad_id: _keys(tgt, pad_id) & _tril(tgt.shape[1]).T,
        ),
        Mistake(
            "the diagonal is masked: a position cannot see itself",
            "Position i may attend to itself: use tril() (diagonal=0), not tril(-1).",
            lambda tgt, pad_id: _keys(tgt, pad_id) & _tril(tgt.shape[1], -1),
        ),
        Mistake(
            "the mask is inverted (True = forbidden)",
            "In lib, True means *may attend* (PyTorch's nn layers use the opposite): drop the ~.",
            lambda tgt, pad_id: ~(_keys(tgt, pad_id) & _tril(tgt.shape[1])),
        ),
        Mistake(
            "padding compared with 0 instead of pad_id",
            "Use the pad_id argument: tgt != pad_id, not tgt != 0.",
            lambda tgt, pad_id: _keys(tgt, 0) & _tril(tgt.shape[1]),
        ),
    ]
    mistakes = [Mistake(mk.name, mk.hint, _broadcast(mk.fn)) for mk in mistakes]
    return check_function(
        _broadcast(decoder_self_attention_mask),
        reference,
        _mask_cases(),
        mistakes,
        name="decoder_self_attention_mask",
    )
