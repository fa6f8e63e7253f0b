"""A catalogue of wrong solutions for the checkers of chapters 5-8 (issue 34, item 3).

Every entry is plausible-wrong code a learner could write, written here from the
exercise's prompt: the 2026-11-28 review's probes (§3 of chapters-5-8.md, marked
"review") and at least three more per exercise ("own"). Each must be refused;
where the checker has a name for the mistake, the entry gives it and the verdict
must carry that name. A few right variants are fed too, so that the checkers do
not over-reject.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lib
from lib.model.attention import causal_mask

# ----------------------------------------------------------------------------- chapter 5

def _ffn(x, w1, b1, w2, b2, act=torch.relu):
    return act(x @ w1 + b1) @ w2 + b2


FEED_FORWARD_WRONG = {  # name: (function, mistake name or None)
    "review: GELU": (lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, F.gelu), None),
    "review: dropout on the hidden layer": (
        lambda x, w1, b1, w2, b2: F.dropout(torch.relu(x @ w1 + b1), 0.1, training=True) @ w2 + b2,
        None),
    "review: always float32": (lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2).float(), None),
    "review: weights the nn.Linear way": (lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2,
                                          None),
    "review: b1 left out": (lambda x, w1, b1, w2, b2: torch.relu(x @ w1) @ w2 + b2, None),
    "review: leaky ReLU": (lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, F.leaky_relu), None),
    "own: sigmoid": (lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, torch.sigmoid), None),
    "own: b2 left out": (lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2, None),
    "own: ReLU before b1": (lambda x, w1, b1, w2, b2: (torch.relu(x @ w1) + b1) @ w2 + b2, None),
    "own: no ReLU": (lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2, "no ReLU"),
    "own: ReLU after the output too": (
        lambda x, w1, b1, w2, b2: torch.relu(_ffn(x, w1, b1, w2, b2)),
        "a ReLU after the second layer too"),
}

PARAM_COUNT_WRONG = {
    "review: one bias only (b1)": (lambda d, f: 2 * d * f + f, None),
    "review: one bias only (b2)": (lambda d, f: 2 * d * f + d, None),
    "review: both biases of width d_model": (lambda d, f: 2 * d * f + 2 * d, None),
    "review: a float count": (lambda d, f: float(2 * d * f + d + f), None),
    "own: both biases of width d_ff": (lambda d, f: 2 * d * f + 2 * f, None),
    "own: one matrix only": (lambda d, f: d * f + d + f, None),
    "own: a LayerNorm counted in": (lambda d, f: 2 * d * f + d + f + 2 * d, None),
    "own: the biases left out": (lambda d, f: 2 * d * f, "the biases left out"),
}


@pytest.mark.parametrize("entry", list(FEED_FORWARD_WRONG))
def test_feed_forward_refuses(entry):
    fn, name = FEED_FORWARD_WRONG[entry]
    verdict = lib.check_feed_forward(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(PARAM_COUNT_WRONG))
def test_ffn_parameter_count_refuses(entry):
    fn, name = PARAM_COUNT_WRONG[entry]
    verdict = lib.check_ffn_parameter_count(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


def test_chapter5_right_variants_pass():
    assert lib.check_feed_forward(lambda x, w1, b1, w2, b2: F.linear(
        torch.relu(F.linear(x, w1.T, b1)), w2.T, b2))
    assert lib.check_ffn_parameter_count(lambda d, f: np.int64(2 * d * f + d + f))


# ----------------------------------------------------------------------------- chapter 6

def _table(length, d_model, *, exponent=None, pos_from=0, base=10000.0, swap=False,
           dtype=torch.float32, layout="interleaved"):
    pos = torch.arange(pos_from, pos_from + length, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    expo = two_i / d_model if exponent is None else exponent(d_model)
    angle = pos / base ** expo
    s, c = (torch.cos(angle), torch.sin(angle)) if swap else (torch.sin(angle), torch.cos(angle))
    if layout == "concat":
        return torch.cat([s, c], dim=1).to(dtype)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = s, c
    return pe.to(dtype)


def _by_column(length, d_model, j_over_d):
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    j = torch.arange(d_model, dtype=torch.float64)
    angle = pos / 10000.0 ** j_over_d(j, d_model)
    pe = torch.where(j.long() % 2 == 0, torch.sin(angle), torch.cos(angle))
    return pe.float()


TABLE_WRONG = {
    "review: each column its own exponent j/d": (
        lambda n, d: _by_column(n, d, lambda j, d: j / d), None),
    "review: exponent 2j/d, j the column": (
        lambda n, d: _by_column(n, d, lambda j, d: 2 * j / d), None),
    "review: exponent 2i/(d - 1)": (
        lambda n, d: _table(n, d, exponent=lambda d: torch.arange(0, d, 2, dtype=torch.float64)
                            / (d - 1)), None),
    "review: exponents by linspace(0, 1)": (
        lambda n, d: _table(n, d, exponent=lambda d: torch.linspace(0, 1, d // 2,
                                                                    dtype=torch.float64)), None),
    "review: float64 returned": (lambda n, d: _table(n, d, dtype=torch.float64), None),
    "review: transposed": (lambda n, d: _table(n, d).T.contiguous(), None),
    "own: sin and cos swapped": (lambda n, d: _table(n, d, swap=True), None),
    "own: positions counted from 1": (lambda n, d: _table(n, d, pos_from=1), None),
    "own: base 1000": (lambda n, d: _table(n, d, base=1000.0), None),
    "own: every sine, then every cosine (Marian's layout)": (
        lambda n, d: _table(n, d, layout="concat"), None),
}


def _rope(x, *, pos_from=0, sign=1, theta_dtype=torch.float64, cast_back=True, freq=None):
    n, d = x.shape[-2:]
    pos = torch.arange(pos_from, pos_from + n, dtype=theta_dtype)[:, None]
    two_i = torch.arange(0, d, 2, dtype=theta_dtype)
    omega = 10000.0 ** (-two_i / d) if freq is None else freq(two_i, d)
    cos, sin = torch.cos(pos * omega), torch.sin(pos * omega)
    a, b = x[..., 0::2].to(theta_dtype), x[..., 1::2].to(theta_dtype)
    out = torch.empty(x.shape, dtype=theta_dtype)
    out[..., 0::2] = a * cos + sign * b * sin
    out[..., 1::2] = -sign * a * sin + b * cos
    return out.to(x.dtype) if cast_back else out


def _rope_in_place(x):
    n, d = x.shape[-2:]
    out = x.double().clone()
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = torch.cos(pos * omega), torch.sin(pos * omega)
    out[..., 0::2] = out[..., 0::2] * cos + out[..., 1::2] * sin
    out[..., 1::2] = -out[..., 0::2] * sin + out[..., 1::2] * cos  # reads the new evens
    return out.to(x.dtype)


def _rope_sin_cos_swapped(x):
    n, d = x.shape[-2:]
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = torch.cos(pos * omega), torch.sin(pos * omega)
    a, b = x[..., 0::2].double(), x[..., 1::2].double()
    out = torch.empty(x.shape, dtype=torch.float64)
    out[..., 0::2] = a * sin + b * cos
    out[..., 1::2] = -a * cos + b * sin
    return out.to(x.dtype)


def _rope_wrong_axis(x):
    return _rope(x.transpose(-1, -2).contiguous()).transpose(-1, -2) if x.shape[-1] % 2 == 0 \
        and x.shape[-2] % 2 == 0 else x * 2


ROPE_WRONG = {
    "review: in-place overwrite": (_rope_in_place, None),
    "review: sin and cos swapped": (_rope_sin_cos_swapped, None),
    "review: no cast back": (lambda x: _rope(x, cast_back=False), None),
    "review: angles in float32": (lambda x: _rope(x, theta_dtype=torch.float32), None),
    "review: rotation along the wrong axis": (_rope_wrong_axis, None),
    "own: positions counted from 1": (lambda x: _rope(x, pos_from=1), None),
    "own: frequency exponent doubled": (
        lambda x: _rope(x, freq=lambda two_i, d: 10000.0 ** (-2 * two_i / d)), None),
    "own: wavelength for frequency (p / omega)": (
        lambda x: _rope(x, freq=lambda two_i, d: 10000.0 ** (two_i / d)), None),
    "own: unrotated (identity)": (lambda x: x.clone(), None),
}


@pytest.mark.parametrize("entry", list(TABLE_WRONG))
def test_sinusoidal_table_refuses(entry):
    fn, _ = TABLE_WRONG[entry]
    assert not lib.check_sinusoidal_table(fn), entry


@pytest.mark.parametrize("entry", list(ROPE_WRONG))
def test_apply_rope_refuses(entry):
    fn, _ = ROPE_WRONG[entry]
    assert not lib.check_apply_rope(fn), entry


def test_chapter6_right_variants_pass():
    assert lib.check_sinusoidal_table(lambda n, d: _table(n, d))
    assert lib.check_apply_rope(lambda x: _rope(x))


# ----------------------------------------------------------------------------- chapter 7

def _inv(mask):
    return None if mask is None else ~mask


def _post_layer(x, attn, ffn, norm1, norm2, mask=None, *, mask_fn=lambda m: m, dropout=False,
                ffn_reads="sum", final_only=False, swap_norms=False, double_res=False):
    m = mask_fn(mask)
    if swap_norms:
        norm1, norm2 = norm2, norm1
    a = attn(x, x, x, mask=m)
    if dropout:
        a = F.dropout(a, 0.1, training=True)
    if final_only:
        h = x + a
        return norm2(h + ffn(h))
    h = norm1(x + a + (x if double_res else 0))
    return norm2(h + ffn(a if ffn_reads == "attention" else h))


POST_LN_WRONG = {
    "review: inverted mask": (lambda *a, mask=None: _post_layer(*a, mask=mask, mask_fn=_inv),
                              "mask inverted (PyTorch's convention, True = forbidden)"),
    "review: dropout left on": (lambda *a, mask=None: _post_layer(*a, mask=mask, dropout=True),
                                None),
    "review: FFN reads the attention output": (
        lambda *a, mask=None: _post_layer(*a, mask=mask, ffn_reads="attention"), None),
    "review: one LayerNorm at the very end": (
        lambda *a, mask=None: _post_layer(*a, mask=mask, final_only=True), None),
    "own: no mask": (lambda *a, mask=None: _post_layer(*a, mask=None),
                     "mask not passed to the attention (only the padded cases differ)"),
    "own: norms swapped": (lambda *a, mask=None: _post_layer(*a, mask=mask, swap_norms=True),
                           None),
    "own: the input added twice": (lambda *a, mask=None: _post_layer(*a, mask=mask,
                                                                       double_res=True), None),
}


def _pre_layer(x, attn, ffn, norm1, norm2, mask=None, *, mask_fn=lambda m: m, parallel=False,
               query_only=False, final_norm=False, swap_norms=False, stream="raw"):
    m = mask_fn(mask)
    if swap_norms:
        norm1, norm2 = norm2, norm1
    y = norm1(x)
    a = attn(y, x, x, mask=m) if query_only else attn(y, y, y, mask=m)
    h = (y if stream == "normalised" else x) + a
    out = x + a + ffn(norm2(x)) if parallel else h + ffn(norm2(h))
    return norm2(out) if final_norm else out


PRE_LN_WRONG = {
    "review: parallel block": (lambda *a, mask=None: _pre_layer(*a, mask=mask, parallel=True),
                               None),
    "review: only the query normalised": (
        lambda *a, mask=None: _pre_layer(*a, mask=mask, query_only=True), None),
    "review: inverted mask": (lambda *a, mask=None: _pre_layer(*a, mask=mask, mask_fn=_inv),
                              "mask inverted (PyTorch's convention, True = forbidden)"),
    "own: a LayerNorm on the output": (
        lambda *a, mask=None: _pre_layer(*a, mask=mask, final_norm=True), None),
    "own: norms swapped": (lambda *a, mask=None: _pre_layer(*a, mask=mask, swap_norms=True), None),
    "own: the residual stream normalised": (
        lambda *a, mask=None: _pre_layer(*a, mask=mask, stream="normalised"), None),
    "own: no mask": (lambda *a, mask=None: _pre_layer(*a, mask=None),
                     "mask not passed to the attention (only the padded cases differ)"),
}


def _tri(m, diagonal=0, upper=False):
    ones = torch.ones(m, m, dtype=torch.bool)
    return torch.triu(ones, diagonal) if upper else torch.tril(ones, diagonal)


MASK_WRONG = {
    "review: padding test inverted": (
        lambda tgt, pad: (tgt == pad)[:, None, None, :] & _tri(tgt.shape[1]), None),
    "review: padding on queries and keys": (
        lambda tgt, pad: (tgt != pad)[:, None, None, :] & (tgt != pad)[:, None, :, None]
        & _tri(tgt.shape[1]),
        "padding masks the queries (rows) instead of the keys (columns)"),
    "review: int mask": (
        lambda tgt, pad: ((tgt != pad)[:, None, None, :] & _tri(tgt.shape[1])).int(), None),
    "review: uint8 mask": (
        lambda tgt, pad: ((tgt != pad)[:, None, None, :] & _tri(tgt.shape[1])).to(torch.uint8),
        None),
    "review: no head axis": (lambda tgt, pad: (tgt != pad)[:, None, :] & _tri(tgt.shape[1]), None),
    "own: causal only": (lambda tgt, pad: _tri(tgt.shape[1]).expand(tgt.shape[0], 1, -1, -1),
                         "causal only: padding keys are not masked"),
    "own: strictly the past (no diagonal)": (
        lambda tgt, pad: (tgt != pad)[:, None, None, :] & _tri(tgt.shape[1], -1), None),
    "own: upper triangle": (
        lambda tgt, pad: (tgt != pad)[:, None, None, :] & _tri(tgt.shape[1], upper=True), None),
    "own: pad id taken as 0": (
        lambda tgt, pad: (tgt != 0)[:, None, None, :] & _tri(tgt.shape[1]), None),
    "own: float additive mask": (
        lambda tgt, pad: torch.zeros(tgt.shape[0], 1, tgt.shape[1], tgt.shape[1]).masked_fill(
            ~((tgt != pad)[:, None, None, :] & _tri(tgt.shape[1])), float("-inf")), None),
}


def _decoder(y, encoder_outputs, layers, tgt_mask, memory_mask, *, q_from="decoder",
             memory="last", tgt_masks=None, replace_memory=False, self_mask_in_cross=False,
             no_cross=False):
    mem = encoder_outputs[-1]
    for i, mod in enumerate(layers):
        if memory == "same depth":
            mem = encoder_outputs[i]
        t_mask = tgt_mask if tgt_masks is None else tgt_masks(y)
        y = mod.norm1(y + mod.self_attn(y, y, y, mask=t_mask))
        if not no_cross:
            c_mask = t_mask if self_mask_in_cross else memory_mask
            if q_from == "memory":
                c = mod.cross_attn(mem, y, y, mask=None)
                c = c if c.shape == y.shape else y
            else:
                c = mod.cross_attn(y, mem, mem, mask=c_mask)
            y = mod.norm2(y + c)
        y = mod.norm3(y + mod.feed_forward(y))
        if replace_memory:
            mem = y
    return y


DECODER_WRONG = {
    "review: queries from the memory": (lambda *a: _decoder(*a, q_from="memory"), None),
    "review: own causal mask, target padding ignored": (
        lambda *a: _decoder(*a, tgt_masks=lambda y: causal_mask(y.shape[1])[None, None]), None),
    "review: tgt_mask in both attentions": (
        lambda y, e, l, t, m: _decoder(y, e, l, t, m, self_mask_in_cross=True)
        if t.shape[-1] == e[-1].shape[1] else (_ for _ in ()).throw(RuntimeError("shape")), None),
    "review: memory replaced by the decoder state": (
        lambda *a: _decoder(*a, replace_memory=True), None),
    "own: layer i reads encoder layer i": (lambda *a: _decoder(*a, memory="same depth"), None),
    "own: no cross-attention": (lambda *a: _decoder(*a, no_cross=True), None),
    "own: no target mask": (lambda *a: _decoder(*a, tgt_masks=lambda y: None), None),
}


@pytest.mark.parametrize("entry", list(POST_LN_WRONG))
def test_post_ln_encoder_layer_refuses(entry):
    fn, name = POST_LN_WRONG[entry]
    verdict = lib.check_post_ln_encoder_layer(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(PRE_LN_WRONG))
def test_pre_ln_encoder_layer_refuses(entry):
    fn, name = PRE_LN_WRONG[entry]
    verdict = lib.check_pre_ln_encoder_layer(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(MASK_WRONG))
def test_decoder_mask_refuses(entry):
    fn, name = MASK_WRONG[entry]
    verdict = lib.check_decoder_self_attention_mask(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(DECODER_WRONG))
def test_post_ln_decoder_refuses(entry):
    fn, name = DECODER_WRONG[entry]
    verdict = lib.check_post_ln_decoder(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


def test_chapter7_right_variants_pass():
    assert lib.check_post_ln_encoder_layer(lambda *a, mask=None: _post_layer(*a, mask=mask))
    assert lib.check_pre_ln_encoder_layer(lambda *a, mask=None: _pre_layer(*a, mask=mask))
    assert lib.check_decoder_self_attention_mask(
        lambda tgt, pad: (tgt != pad)[:, None, None, :] & ~_tri(tgt.shape[1], 1, upper=True))
    assert lib.check_post_ln_decoder(lambda *a: _decoder(*a))


# ----------------------------------------------------------------------------- chapter 8

def _step(model, batch, optimizer, smoothing, pad_id, *, train=True, eval_mode=False,
          tgt_mask=True, src_mask=True, shift=False, clip=False, step=True, smooth=True):
    if train:
        model.train()
    if eval_mode:
        model.eval()
    logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask if src_mask else None,
                   tgt_mask=batch.tgt_mask if tgt_mask else None)
    target = batch.tgt_out
    if shift:
        logits, target = logits[:, :-1], target[:, 1:]
    loss = lib.label_smoothed_nll(logits, target, smoothing if smooth else 0.0,
                                  ignore_index=pad_id)
    optimizer.zero_grad()
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if step:
        optimizer.step()
    return loss.item()


STEP_WRONG = {
    "review: no model.train()": (lambda *a: _step(*a, train=False),
                                 "model left in eval mode: no model.train()"),
    "review: model.eval() inside": (lambda *a: _step(*a, eval_mode=True),
                                    "model left in eval mode: no model.train()"),
    "review: tgt_mask not passed": (lambda *a: _step(*a, tgt_mask=False), None),
    "review: an extra LM-style shift": (lambda *a: _step(*a, shift=True), None),
    "review: gradient clipping added": (lambda *a: _step(*a, clip=True), None),
    "own: no optimizer.step()": (lambda *a: _step(*a, step=False), None),
    "own: src_mask not passed": (lambda *a: _step(*a, src_mask=False), None),
    "own: label smoothing left out": (lambda *a: _step(*a, smooth=False), None),
}

NOAM_WRONG = {
    "review: warmup^+1.5": (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**1.5), None),
    "review: step^+0.5": (lambda s, d, w: d**-0.5 * min(s**0.5, s * w**-1.5), None),
    "review: np.float32 result": (
        lambda s, d, w: np.float32(d**-0.5 * min(s**-0.5, s * w**-1.5)), None),
    "own: a 0-d tensor": (
        lambda s, d, w: torch.tensor(d**-0.5 * min(s**-0.5, s * w**-1.5)), None),
    "own: steps from 0": (lambda s, d, w: d**-0.5 * min((s + 1) ** -0.5, (s + 1) * w**-1.5),
                          "steps counted from 0 (off by one)"),
    "own: max": (lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), "max instead of min"),
    "own: no d_model factor": (lambda s, d, w: min(s**-0.5, s * w**-1.5),
                               "the d_model^(-0.5) factor is missing"),
}


def _smoothed(logits, target, eps, pad_id, *, uniform="mean", pad_test=None, true_gets="1-eps",
              reduce=True, kl=False, over=None, pad_in_mean=False):
    log_p = logits.log_softmax(-1)
    V = logits.shape[-1]
    keep = (target != (pad_id if pad_test is None else pad_test))
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    smooth = -log_p.mean(-1) if uniform == "mean" else -log_p.sum(-1)
    k = V if over is None else over
    if true_gets == "1-eps":
        per = (1 - eps) * nll + eps * (V / k) * smooth if over is not None else \
            (1 - eps) * nll + eps * smooth
    else:  # true class 1 - eps, the others eps/|V|, true class left out of eps
        per = (1 - eps) * nll + eps / V * (smooth * V - nll)
    if kl:
        q_true, q_rest = 1 - eps + eps / V, eps / V
        per = per - (-(q_true * math.log(q_true) + (V - 1) * q_rest * math.log(q_rest)))
    if pad_in_mean:
        return (per * keep).sum() / per.numel()
    if not reduce:
        return per * keep
    return (per * keep).sum() / keep.sum()


SMOOTH_WRONG = {
    "review: uniform term summed": (lambda *a: _smoothed(*a, uniform="sum"), None),
    "review: PAD compared with 0": (lambda l, t, e, p: _smoothed(l, t, e, p, pad_test=0), None),
    "review: true class gets 1 - eps": (lambda *a: _smoothed(*a, true_gets="no eps/V"), None),
    "review: per-token losses": (lambda *a: _smoothed(*a, reduce=False), None),
    "review: KL instead of cross-entropy": (lambda *a: _smoothed(*a, kl=True), None),
    "own: eps over |V| - 1": (lambda l, t, e, p: _smoothed(l, t, e, p, over=l.shape[-1] - 1),
                              None),
    "own: PAD in the mean's denominator": (lambda *a: _smoothed(*a, pad_in_mean=True), None),
    "own: calls F.cross_entropy": (
        lambda l, t, e, p: F.cross_entropy(l.reshape(-1, l.shape[-1]), t.reshape(-1),
                                           label_smoothing=e, ignore_index=p),
        "calls F.cross_entropy"),
    "own: raw logits as log-probabilities": (
        lambda l, t, e, p: _smoothed(l.log_softmax(-1).exp(), t, e, p), None),
}


def _greedy(model, src, max_len, bos_id, eos_id, pad_id, *, enc_mask=True, dec_mask=True,
            stop_any=False, steps=None, after_end="pad", out_dtype=torch.long, keep_bos=False,
            causal=True):
    s_mask = (src != pad_id)[:, None, None, :]
    with torch.no_grad():
        memory = model.encode(src, src_mask=s_mask if enc_mask else None)
        ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len if steps is None else steps(max_len)):
            t_mask = causal_mask(ys.shape[1])[None, None] if causal else None
            logits = model.decode(ys, memory, src_mask=s_mask if dec_mask else None,
                                  tgt_mask=t_mask)[:, -1]
            nxt = logits.argmax(-1)
            nxt = nxt.masked_fill(done, pad_id if after_end == "pad" else eos_id)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            done |= nxt == eos_id
            if (done.any() if stop_any else done.all()):
                break
    out = ys if keep_bos else ys[:, 1:]
    return out.to(out_dtype)


GREEDY_WRONG = {
    "review: source mask to encode only": (lambda *a: _greedy(*a, dec_mask=False),
                                           "no source padding mask"),
    "review: source mask to decode only": (lambda *a: _greedy(*a, enc_mask=False),
                                           "no source padding mask"),
    "review: stop when any row ends": (lambda *a: _greedy(*a, stop_any=True), None),
    "review: max_len - 1 steps": (lambda *a: _greedy(*a, steps=lambda m: m - 1), None),
    "review: EOS repeated after the end": (lambda *a: _greedy(*a, after_end="eos"), None),
    "review: int32 output": (lambda *a: _greedy(*a, out_dtype=torch.int32), None),
    "own: BOS kept": (lambda *a: _greedy(*a, keep_bos=True), "BOS kept in the output"),
    "own: no causal mask": (lambda *a: _greedy(*a, causal=False),
                            "no causal mask on the decoder"),
    "own: no source mask at all": (lambda *a: _greedy(*a, enc_mask=False, dec_mask=False),
                                   "no source padding mask"),
}


def _beam(scores, log_probs, k, *, largest=True, index_dtype=torch.long, running=True,
          only_first=False, swap=False, float_parent=False):
    B, K, V = log_probs.shape
    total = (scores[..., None] if running else 0) + log_probs
    if only_first:
        total = total[:, :1].expand(B, K, V).clone()
        total[:, 1:] = float("-inf")
    best, idx = total.reshape(B, -1).topk(k, dim=-1, largest=largest)
    parent, token = (idx % V, idx // V) if swap else (idx // V, idx % V)
    if float_parent:
        parent = parent.double()
    return best, parent.to(index_dtype) if not float_parent else parent, token.to(index_dtype)


BEAM_WRONG = {
    "review: smallest instead of largest": (lambda *a: _beam(*a, largest=False), None),
    "review: int32 indices": (lambda *a: _beam(*a, index_dtype=torch.int32), None),
    "review: the token's log-prob only": (lambda *a: _beam(*a, running=False), None),
    "review: only hypothesis 0 extended": (lambda *a: _beam(*a, only_first=True), None),
    "own: parent and token swapped": (lambda *a: _beam(*a, swap=True), None),
    "own: a float parent": (lambda *a: _beam(*a, float_parent=True), None),
    "own: scores negated": (lambda s, lp, k: tuple(
        (-v if i == 0 else v) for i, v in enumerate(_beam(s, lp, k))), None),
}


@pytest.mark.parametrize("entry", list(STEP_WRONG))
def test_train_step_refuses(entry):
    fn, name = STEP_WRONG[entry]
    verdict = lib.check_train_step(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(NOAM_WRONG))
def test_noam_lr_refuses(entry):
    fn, name = NOAM_WRONG[entry]
    verdict = lib.check_noam_lr(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(SMOOTH_WRONG))
def test_label_smoothed_loss_refuses(entry):
    fn, name = SMOOTH_WRONG[entry]
    verdict = lib.check_label_smoothed_loss(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(GREEDY_WRONG))
def test_greedy_decode_refuses(entry):
    fn, name = GREEDY_WRONG[entry]
    verdict = lib.check_greedy_decode(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


@pytest.mark.parametrize("entry", list(BEAM_WRONG))
def test_beam_step_refuses(entry):
    fn, name = BEAM_WRONG[entry]
    verdict = lib.check_beam_step(fn)
    assert not verdict, entry
    if name is not None:
        assert verdict.mistake == name, (entry, verdict.message)


def test_chapter8_right_variants_pass():
    assert lib.check_train_step(lambda *a: _step(*a))
    assert lib.check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.5))
    assert lib.check_label_smoothed_loss(lambda *a: _smoothed(*a))
    assert lib.check_greedy_decode(lambda *a: _greedy(*a))
    assert lib.check_beam_step(lambda *a: _beam(*a))


def test_smoothed_floor_names_the_true_class_term_and_the_log_of_the_confidence():
    top = 1 - 0.1 + 0.1 / 42
    term = lib.check_smoothed_floor(round(-top * math.log(top), 4))
    assert not term and term.slip == "the true class's term only"
    log_conf = lib.check_smoothed_floor(round(-math.log(top), 4))
    assert not log_conf and log_conf.slip == "−log of the optimal confidence, not the entropy"
    for check in (lib.check_peak_ratio, lib.check_peak_step, lib.check_smoothed_floor,
                  lib.check_smoothed_confidence):
        unanswered = check(None)
        assert not unanswered and "Not answered yet" in unanswered.message
