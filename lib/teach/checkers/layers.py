"""Checkers for chapter 7's coding exercises: the encoder layer in both LayerNorm orders,
the decoder's self-attention mask, and a post-LN decoder stack (see lib.teach.checking).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_layers.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from lib.model.attention import MultiHeadAttention, causal_mask, padding_mask
from lib.model.layers import PositionwiseFeedForward
from lib.model.transformer import DecoderLayer, EncoderLayer
from lib.model.inspect import compare_layers
from lib.teach.checking import NOT_IMPLEMENTED, Case, Mistake, Verdict, _clone, check_function
from lib.teach.exercises import CheckResult, check_answer

__all__ = [
    "check_post_ln_encoder_layer",
    "check_pre_ln_encoder_layer",
    "check_decoder_self_attention_mask",
    "check_post_ln_decoder",
    "check_layer_norm_row",
]


# --------------------------------------------------------------------------- where it differs


def _locate(verdict: Verdict, learner, reference, cases, modules_of) -> Verdict:
    """A failed verdict that no named mistake explains gets the first sub-module whose
    output differs from the reference's (`lib.compare_layers`, chapter 16)."""
    if verdict.passed or verdict.mistake is not None or NOT_IMPLEMENTED in verdict.message:
        return verdict
    for i, case in enumerate(cases):
        try:
            diff = compare_layers(lambda: learner(*_clone(case.args), **_clone(case.kwargs)),
                                  lambda: reference(*_clone(case.args), **_clone(case.kwargs)),
                                  (), atol=1e-5, rtol=1e-5, modules=modules_of(case))
        except Exception:  # noqa: BLE001  (the learner's function raised: the verdict says so)
            return verdict
        if diff is not None:
            return Verdict(False, f"{verdict.message}\n  Where (lib.compare_layers, case {i}): {diff}.")
    return verdict


def _layer_modules(case: Case) -> dict:
    return dict(zip(("attn", "ffn", "norm1", "norm2"), case.args[1:5]))


def _decoder_modules_of(case: Case) -> dict:
    return {f"layers[{i}].{name}": module for i, ns in enumerate(case.args[2])
            for name, module in vars(ns).items()}


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


def _no_mask(attn, x, mask):
    return attn(x, x, x)


def _plain_norm(x):
    """LayerNorm without the given module's gain and bias (what a fresh nn.LayerNorm does)."""
    return F.layer_norm(x, x.shape[-1:])


def _post(x, attn, ffn, norm1, norm2, mask, attend=_attend):
    x = norm1(x + attend(attn, x, mask))
    return norm2(x + ffn(x))


def _pre(x, attn, ffn, norm1, norm2, mask, attend=_attend):
    y = norm1(x)
    x = x + attend(attn, y, mask)
    return x + ffn(norm2(x))


def _shared_mistakes(layer) -> list[Mistake]:
    """Slips both orders share: no mask, one LayerNorm for both sub-layers, no gain and bias."""
    same_norm = (
        "Each sub-layer has its own LayerNorm with its own gain and bias: norm1 goes with the "
        "attention, norm2 with the FFN."
    )
    def inverted(attn, x, mask):  # PyTorch's nn.MultiheadAttention: True = forbidden
        return attn(x, x, x, mask=None if mask is None else ~mask)

    return [
        Mistake(
            "mask inverted (PyTorch's convention, True = forbidden)",
            "lib's masks are True where attention is *allowed*; PyTorch's attn_mask for "
            "nn.MultiheadAttention uses True = forbidden. Did you pass ~mask (or build "
            "the mask the PyTorch way)?",
            lambda x, attn, ffn, norm1, norm2, mask=None: layer(x, attn, ffn, norm1, norm2, mask,
                                                                 inverted),
        ),
        Mistake(
            "mask not passed to the attention (only the padded cases differ)",
            "Call attn(q, k, v, mask=mask): without it the padding keys get attention weight.",
            lambda x, attn, ffn, norm1, norm2, mask=None: layer(x, attn, ffn, norm1, norm2, mask, _no_mask),
        ),
        Mistake(
            "the same LayerNorm used twice",
            same_norm,
            lambda x, attn, ffn, norm1, norm2, mask=None: layer(x, attn, ffn, norm1, norm1, mask),
        ),
        Mistake(
            "the same LayerNorm used twice",
            same_norm,
            lambda x, attn, ffn, norm1, norm2, mask=None: layer(x, attn, ffn, norm2, norm2, mask),
        ),
        Mistake(
            "a fresh LayerNorm instead of norm1/norm2",
            "Use the norm1 and norm2 you are given: F.layer_norm(x, shape) or a new nn.LayerNorm "
            "has gain 1 and bias 0, not the layer's learned ones.",
            lambda x, attn, ffn, norm1, norm2, mask=None: layer(x, attn, ffn, _plain_norm, _plain_norm, mask),
        ),
    ]


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
        *_shared_mistakes(_post),
    ]
    cases, reference = _layer_cases(), _encoder_reference(False)
    verdict = check_function(post_ln_encoder_layer, reference, cases, mistakes, name="post_ln_encoder_layer")
    return _locate(verdict, post_ln_encoder_layer, reference, cases, _layer_modules)


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

    def extra_final_norm(x, attn, ffn, norm1, norm2, mask=None):
        return norm2(_pre(x, attn, ffn, norm1, norm2, mask))

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
        Mistake(
            "an extra LayerNorm after the layer's output",
            "A pre-LN layer ends with the residual sum x + ffn(norm2(x)). The one final LayerNorm "
            "of a pre-LN model closes the whole stack, after its last layer, not each layer.",
            extra_final_norm,
        ),
        *_shared_mistakes(_pre),
    ]
    cases, reference = _layer_cases(), _encoder_reference(True)
    verdict = check_function(pre_ln_encoder_layer, reference, cases, mistakes, name="pre_ln_encoder_layer")
    return _locate(verdict, pre_ln_encoder_layer, reference, cases, _layer_modules)


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


ADDITIVE_MASK = "an additive float mask (0 / -inf) instead of a bool mask"
NUMBER_MASK = "a mask of numbers (0/1) instead of a bool mask"


def _mask_dtype_verdict(mask_fn) -> Verdict | None:
    """A named verdict when the learner returns a mask `lib` would refuse for its dtype.

    Checked before any comparison, so that a 0/1 integer mask never passes and a
    PyTorch-style additive mask is not misread as an inverted one. None: dtype fine
    (or the function raised: `check_function` reports that).
    """
    try:
        mask = mask_fn(*_mask_cases()[0].args)
    except Exception:  # noqa: BLE001  (reported by check_function with its inputs)
        return None
    if not isinstance(mask, torch.Tensor) or mask.dtype == torch.bool:
        return None
    dtype = str(mask.dtype).replace("torch.", "")
    if mask.is_floating_point() and bool(torch.isinf(mask).any()):
        name, hint = ADDITIVE_MASK, (
            "A mask of 0 and -inf to add to the scores is PyTorch's other convention. "
            "lib takes bool masks, True = may attend: return keys & past itself."
        )
    else:
        name, hint = NUMBER_MASK, (
            "lib refuses it (lib.MultiHeadAttention raises TypeError for a non-bool mask): "
            "return the bool tensor itself, without .int() or .float()."
        )
    return Verdict(
        False,
        f"✗ decoder_self_attention_mask returned a {dtype} tensor; expected dtype bool. "
        f"Likely mistake: {name}.\n  {hint}",
        mistake=name,
    )


def check_decoder_self_attention_mask(decoder_self_attention_mask) -> Verdict:
    """Chapter 7, exercise: `decoder_self_attention_mask(tgt, pad_id)`, causal AND padding.

    The mask must be bool: a 0/1 or additive float mask is named before any comparison.
    """
    if not callable(decoder_self_attention_mask):
        raise TypeError(
            f"the checker needs your function itself, got {type(decoder_self_attention_mask).__name__}"
        )
    wrong_dtype = _mask_dtype_verdict(decoder_self_attention_mask)
    if wrong_dtype is not None:
        return wrong_dtype

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
            "(tgt != pad_id)[:, None, None, :]. Did you (also) hide them as queries, "
            "[:, None, :, None]? With right padding and the causal mask, hiding them as "
            "queries only and as queries and keys give the same mask: either way whole "
            "query rows become fully masked.",
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


# --------------------------------------------------------------------------- decoder stack


def _decoder_modules(d_model: int, n_heads: int, seed: int, dtype: torch.dtype) -> SimpleNamespace:
    """One decoder layer's modules (no forward of their own to call), random gains and biases."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        modules = SimpleNamespace(
            self_attn=MultiHeadAttention(d_model, n_heads),
            cross_attn=MultiHeadAttention(d_model, n_heads),
            feed_forward=PositionwiseFeedForward(d_model, 2 * d_model, dropout=0.0),
            norm1=nn.LayerNorm(d_model),
            norm2=nn.LayerNorm(d_model),
            norm3=nn.LayerNorm(d_model),
        )
        with torch.no_grad():
            for norm in (modules.norm1, modules.norm2, modules.norm3):
                norm.weight.copy_(1 + 0.5 * torch.randn(d_model))
                norm.bias.copy_(0.5 * torch.randn(d_model))
    for name, module in vars(modules).items():
        setattr(modules, name, module.to(dtype).eval().requires_grad_(False))
    return modules


def _decoder_cases() -> list[Case]:
    """Target and source of the same length n (so that every named slip runs), padded or not."""
    g = torch.Generator().manual_seed(13)
    cases = []
    for k, (B, n, d_model, n_heads, n_layers, dtype, padded) in enumerate(
        (
            (2, 5, 16, 4, 2, torch.float64, True),
            (1, 4, 8, 2, 3, torch.float32, False),
            (3, 6, 12, 3, 2, torch.float64, True),
        )
    ):
        layers = [_decoder_modules(d_model, n_heads, 200 + 10 * k + i, dtype) for i in range(n_layers)]
        y = 2 * torch.randn(B, n, d_model, generator=g, dtype=dtype) + 1
        encoder_outputs = [torch.randn(B, n, d_model, generator=g, dtype=dtype) for _ in range(n_layers)]
        tokens = torch.ones(B, n, dtype=torch.long)
        if padded:
            tokens[-1, -2:] = 0  # the last sequence ends with two pads
        tgt_mask = padding_mask(tokens, 0) & causal_mask(n)  # (B, 1, n, n)
        memory_mask = padding_mask(tokens.flip(0), 0)  # (B, 1, 1, n): other rows padded
        label = (
            f"{n_layers} layers, y {tuple(y.shape)}, {str(dtype).replace('torch.', '')}, "
            f"{'padded' if padded else 'no padding'}"
        )
        cases.append(Case((y, encoder_outputs, layers, tgt_mask, memory_mask), label=label))
    return cases


def _decoder_reference(y, encoder_outputs, layers, tgt_mask, memory_mask):
    memory = encoder_outputs[-1]  # every decoder layer reads the last encoder layer's output
    with torch.no_grad():
        for modules in layers:
            with torch.random.fork_rng(devices=[]):
                layer = DecoderLayer(modules.self_attn.d_model, modules.self_attn.n_heads,
                                     modules.feed_forward.d_ff, dropout=0.0, norm_first=False)
            for name, module in vars(modules).items():
                setattr(layer, name, module)
            y = layer.eval()(y, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
    return y


def _decoder_variant(*, kv_from="memory", swap_masks=False, norms=(1, 2, 3), memory="last",
                     order="post", cross_first=False, memory_mask_used=True):
    """A decoder stack with one slip, for the named mistakes (all defaults: the right one)."""

    def run(y, encoder_outputs, layers, tgt_mask, memory_mask):
        self_mask, cross_mask = (memory_mask, tgt_mask) if swap_masks else (tgt_mask, memory_mask)
        cross_mask = cross_mask if memory_mask_used else None
        for i, mod in enumerate(layers):
            mem = {"last": encoder_outputs[-1], "same depth": encoder_outputs[i],
                   "first": encoder_outputs[0]}[memory]
            n1, n2, n3 = (getattr(mod, f"norm{j}") for j in norms)

            def self_block(x, norm):
                if order == "pre":
                    h = norm(x)
                    return x + mod.self_attn(h, h, h, mask=self_mask)
                return norm(x + mod.self_attn(x, x, x, mask=self_mask))

            def cross_block(x, norm):
                kv = mem if kv_from == "memory" else (x if order == "post" else norm(x))
                if order == "pre":
                    h = norm(x)
                    return x + mod.cross_attn(h, kv, kv, mask=cross_mask)
                return norm(x + mod.cross_attn(x, kv, kv, mask=cross_mask))

            if cross_first:
                y = self_block(cross_block(y, n1), n2)
            else:
                y = cross_block(self_block(y, n1), n2)
            y = n3(y + mod.feed_forward(y)) if order == "post" else y + mod.feed_forward(n3(y))
        return y

    return run


def check_post_ln_decoder(post_ln_decoder) -> Verdict:
    """Chapter 7, exercise: a post-LN decoder stack written from each layer's modules.

    ``post_ln_decoder(y, encoder_outputs, layers, tgt_mask, memory_mask)``: y the
    embedded target (B, m, d_model), ``encoder_outputs`` every encoder layer's
    output (first layer first), ``layers`` one namespace of modules per decoder layer
    (self_attn, cross_attn, feed_forward, norm1, norm2, norm3). Compared with
    `lib.DecoderLayer(norm_first=False)` built from the same modules.
    """
    same_norm = (
        "Each sub-layer has its own LayerNorm: norm1 after self-attention, norm2 after "
        "cross-attention, norm3 after the FFN."
    )
    mistakes = [
        Mistake(
            "keys and values from the decoder in cross-attention",
            "Cross-attention takes its queries from the decoder and its keys and values from the "
            "encoder: cross_attn(x, memory, memory, mask=memory_mask).",
            _decoder_variant(kv_from="decoder"),
        ),
        Mistake(
            "the masks swapped",
            "tgt_mask (causal + target padding) belongs to the self-attention, memory_mask "
            "(source padding) to the cross-attention.",
            _decoder_variant(swap_masks=True),
        ),
        Mistake("the same LayerNorm reused", same_norm, _decoder_variant(norms=(1, 1, 1))),
        Mistake("the same LayerNorm reused", same_norm, _decoder_variant(norms=(1, 2, 2))),
        Mistake("the same LayerNorm reused", same_norm, _decoder_variant(norms=(1, 1, 3))),
        Mistake(
            "memory from the wrong encoder layer",
            "Every decoder layer reads the output of the *last* encoder layer, "
            "encoder_outputs[-1], not the encoder layer of the same depth.",
            _decoder_variant(memory="same depth"),
        ),
        Mistake(
            "memory from the wrong encoder layer",
            "Every decoder layer reads the output of the *last* encoder layer, encoder_outputs[-1].",
            _decoder_variant(memory="first"),
        ),
        Mistake(
            "source padding mask not passed to the cross-attention",
            "Without mask=memory_mask the decoder attends to the source's padding.",
            _decoder_variant(memory_mask_used=False),
        ),
        Mistake(
            "pre-LN order instead of post-LN",
            "That is x + sublayer(norm(x)). The paper's order normalises the sum: norm(x + sublayer(x)).",
            _decoder_variant(order="pre"),
        ),
        Mistake(
            "cross-attention before self-attention",
            "A decoder layer first attends to the target so far (masked self-attention), then to "
            "the source (cross-attention), then runs the FFN.",
            _decoder_variant(cross_first=True),
        ),
    ]
    cases = _decoder_cases()
    verdict = check_function(post_ln_decoder, _decoder_reference, cases, mistakes, name="post_ln_decoder")
    return _locate(verdict, post_ln_decoder, _decoder_reference, cases, _decoder_modules_of)


def check_layer_norm_row(my_row, row=(2.0, 4.0, 6.0, 8.0)) -> CheckResult:
    """Chapter 7, exercise 5: LayerNorm of `row` (gain 1, bias 0, no ε) by hand, to four
    decimals. Slips named: not divided by the standard deviation, divided by the
    variance, the unbiased variance (n - 1). ``None`` is "not answered yet"."""
    x = torch.tensor([row], dtype=torch.float64)
    centred = x - x.mean()
    exact = F.layer_norm(x, (x.shape[1],), eps=0.0)
    if my_row is None:
        return CheckResult(False, "Not answered yet: replace None in my_layer_norm with your "
                           "answer.", exact)
    return check_answer(my_row, exact, 1e-4, "LayerNorm", slips={
        "not divided by the standard deviation": (centred, "Divide by sqrt(variance)."),
        "divided by the variance": (centred / centred.pow(2).mean(),
                                    "Divide by the square root of it."),
        "the unbiased variance (n - 1)": (centred / centred.std(),
                                          "LayerNorm's variance divides by n, not n - 1."),
    })
