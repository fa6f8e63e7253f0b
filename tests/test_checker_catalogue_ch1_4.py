"""A catalogue of wrong solutions that the checkers of chapters 1-4 must refuse.

Issue 34, item 3. Each exercise gets the wrong solutions of the 2026-11-28 review
(reviewer A's table, section 3) and at least three more written here from the
exercise's prompt alone, before reading the checker's cases: the mistakes a
learner plausibly makes. Every one must get a ✗ verdict; where the checker has a
named mistake for the slip, the verdict must name it. A right solution written
differently must still pass (the last test of each group).
"""

import math

import pytest
import torch
import torch.nn.functional as F

import lib

# --- chapter 1, exercise 4: additive_score(s, h, w_s, w_h, v) -> (..., n) ---------------------


def _hidden(s, h, w_s, w_h):
    return (s @ w_s.T)[..., None, :] + h @ w_h.T


ADDITIVE_WRONG = {
    # the review's
    "no positions axis": (lambda s, h, w_s, w_h, v: torch.tanh(s @ w_s.T + h @ w_h.T) @ v, None),
    "positions axis that needs a batch": (
        lambda s, h, w_s, w_h, v: torch.tanh((s @ w_s.T)[:, None, :] + h @ w_h.T) @ v, None),
    "float32 for a float64 input": (
        lambda s, h, w_s, w_h, v: (torch.tanh(_hidden(s, h, w_s, w_h)) @ v).float(), None),
    "sigmoid instead of tanh": (
        lambda s, h, w_s, w_h, v: torch.sigmoid(_hidden(s, h, w_s, w_h)) @ v, None),
    "relu instead of tanh": (lambda s, h, w_s, w_h, v: torch.relu(_hidden(s, h, w_s, w_h)) @ v, None),
    "weights not transposed": (
        lambda s, h, w_s, w_h, v: torch.tanh((s @ w_s)[..., None, :] + h @ w_h) @ v, None),
    # mine
    "v applied inside the tanh": (lambda s, h, w_s, w_h, v: torch.tanh(_hidden(s, h, w_s, w_h) @ v), None),
    "tanh of each term separately": (
        lambda s, h, w_s, w_h, v: (torch.tanh((s @ w_s.T)[..., None, :]) + torch.tanh(h @ w_h.T)) @ v,
        None),
    "sum over d_a instead of v": (lambda s, h, w_s, w_h, v: torch.tanh(_hidden(s, h, w_s, w_h)).sum(-1),
                                  None),
    "softmax of the scores returned": (
        lambda s, h, w_s, w_h, v: torch.softmax(torch.tanh(_hidden(s, h, w_s, w_h)) @ v, -1), None),
    "product instead of sum (multiplicative)": (
        lambda s, h, w_s, w_h, v: torch.tanh((s @ w_s.T)[..., None, :] * (h @ w_h.T)) @ v, None),
    "w_s and w_h swapped": (
        lambda s, h, w_s, w_h, v: torch.tanh((s @ w_h.T)[..., None, :] + h @ w_s.T) @ v, None),
}


@pytest.mark.parametrize("slip", list(ADDITIVE_WRONG))
def test_additive_score_checker_refuses(slip):
    fn, name = ADDITIVE_WRONG[slip]
    verdict = lib.check_additive_score(fn)
    assert not verdict, slip
    if name:
        assert verdict.mistake == name, verdict.message


def test_additive_score_checker_passes_einsum():
    def einsum(s, h, w_s, w_h, v):
        hidden = torch.einsum("as,...s->...a", w_s, s)[..., None, :] + torch.einsum("ah,...nh->...na", w_h, h)
        return torch.einsum("a,...na->...n", v, torch.tanh(hidden))
    assert lib.check_additive_score(einsum)


# --- chapter 1, exercise 5: attend(scores, h) -> (context, weights) ----------------------------


def _attend(scores, h, weights):
    return (weights[..., None] * h).sum(-2), weights


ATTEND_WRONG = {
    # the review's
    "weighted sum over the feature axis": (
        lambda s, h: ((torch.softmax(s, -1)[..., None] * h).sum(-1), torch.softmax(s, -1))),
    "normalised by the sum, no exp": (lambda s, h: _attend(s, h, s / s.sum(-1, keepdim=True))),
    "log-softmax as weights": (lambda s, h: _attend(s, h, torch.log_softmax(s, -1))),
    # mine
    "softmax over dim 0": (lambda s, h: _attend(s, h, torch.softmax(s, 0))),
    "(weights, context) swapped": (lambda s, h: _attend(s, h, torch.softmax(s, -1))[::-1]),
    "weights @ h without the positions axis": (
        lambda s, h: (torch.softmax(s, -1) @ h, torch.softmax(s, -1))),
    "mean instead of weighted sum": (
        lambda s, h: ((torch.softmax(s, -1)[..., None] * h).mean(-2), torch.softmax(s, -1))),
    "softmax of minus the scores": (lambda s, h: _attend(s, h, torch.softmax(-s, -1))),
    "scores returned as weights": (lambda s, h: ((torch.softmax(s, -1)[..., None] * h).sum(-2), s)),
}


@pytest.mark.parametrize("slip", list(ATTEND_WRONG))
def test_attend_checker_refuses(slip):
    assert not lib.check_attend(ATTEND_WRONG[slip]), slip


def test_attend_checker_passes_matmul():
    def attend(scores, h):
        w = torch.softmax(scores, dim=-1)
        return (w[..., None, :] @ h)[..., 0, :], w
    assert lib.check_attend(attend)


# --- chapter 2, exercise 5: softmax ----------------------------------------------------------


def _shift(s, shift):
    e = torch.exp(s - shift)
    return e / e.sum(-1, keepdim=True)


SOFTMAX_WRONG = {
    # the review's
    "shift by the row minimum": (lambda s: _shift(s, s.amin(-1, keepdim=True)),
                                 "shifted by something other than the row maximum"),
    "shift by the row mean": (lambda s: _shift(s, s.mean(-1, keepdim=True)),
                              "shifted by something other than the row maximum"),
    "max without keepdim": (lambda s: _shift(s, s.amax(-1)), None),
    "sum without keepdim": (lambda s: torch.exp(s - s.amax(-1, keepdim=True))
                            / torch.exp(s - s.amax(-1, keepdim=True)).sum(-1), None),
    "normalised by the whole tensor's sum": (
        lambda s: torch.exp(s - s.amax(-1, keepdim=True)) / torch.exp(s - s.amax(-1, keepdim=True)).sum(),
        None),
    "nn.Softmax": (lambda s: torch.nn.Softmax(dim=-1)(s), "torch.softmax called"),
    "torch.special.log_softmax(...).exp()": (lambda s: torch.special.log_softmax(s, -1).exp(),
                                            "torch.softmax called"),
    # mine
    "no shift": (lambda s: torch.exp(s) / torch.exp(s).sum(-1, keepdim=True),
                 "overflow: the row maximum is not subtracted"),
    "divided by the row maximum of exp, not the sum": (
        lambda s: torch.exp(s - s.amax(-1, keepdim=True)), "no normalisation"),
    "float32 for a float64 input": (lambda s: _shift(s.float(), s.float().amax(-1, keepdim=True)), None),
    "shift by the row median": (lambda s: _shift(s, s.median(-1, keepdim=True).values), None),
    "scores clamped to [-80, 80] instead of shifted": (
        lambda s: torch.exp(s.clamp(-80, 80)) / torch.exp(s.clamp(-80, 80)).sum(-1, keepdim=True), None),
    "F.softmax": (lambda s: F.softmax(s, dim=-1), "torch.softmax called"),
    "torch.special.softmax": (lambda s: torch.special.softmax(s, -1), "torch.softmax called"),
    "F.log_softmax(...).exp()": (lambda s: F.log_softmax(s, -1).exp(), "torch.softmax called"),
}


@pytest.mark.parametrize("slip", list(SOFTMAX_WRONG))
def test_softmax_checker_refuses(slip):
    fn, name = SOFTMAX_WRONG[slip]
    verdict = lib.check_softmax(fn)
    assert not verdict, slip
    if name:
        assert verdict.mistake == name, verdict.message


def test_softmax_checker_passes_logsumexp():
    assert lib.check_softmax(lambda s: torch.exp(s - torch.logsumexp(s, -1, keepdim=True)))


# --- chapter 2, exercise 6: scaled_attention -------------------------------------------------


def _att(q, k, v, mask=None, *, scale=None, fill=float("-inf"), invert=False, guard=True, dim=-1,
         additive=False, after=False, weights_out=False, dtype=None):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale is None else scale(q, k, v))
    if mask is not None and additive:
        scores = scores + torch.where(mask, 0.0, fill).to(scores.dtype)
    elif mask is not None and not after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    w = torch.softmax(scores if dtype is None else scores.to(dtype), dim=dim)
    if mask is not None and after:
        w = w.masked_fill(~mask, 0.0)
        w = w / w.sum(-1, keepdim=True)
    if mask is not None and guard:
        w = w.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return w if weights_out else w @ v.to(w.dtype)


ATTENTION_WRONG = {
    # the review's
    "-1e9 fill, no empty-row guard": (lambda q, k, v, mask=None: _att(q, k, v, mask, fill=-1e9, guard=False),
                                      "masked scores filled with -1e9 instead of -inf"),
    "additive -1e9 mask": (lambda q, k, v, mask=None: _att(q, k, v, mask, fill=-1e9, additive=True,
                                                           guard=False), None),
    "additive finfo.min mask": (
        lambda q, k, v, mask=None: _att(q, k, v, mask, fill=torch.finfo(q.dtype).min, additive=True,
                                        guard=False), None),
    "inverted mask, -1e9 fill": (
        lambda q, k, v, mask=None: _att(q, k, v, mask, fill=-1e9, invert=True, guard=False),
        "mask convention inverted"),
    "scale after the softmax": (
        lambda q, k, v, mask=None: _att(q, k, v, mask, scale=lambda q, k, v: 1.0) / math.sqrt(q.shape[-1]),
        None),
    ".T on batched keys": (lambda q, k, v, mask=None: _att(q, k.T.transpose(-2, -1), v, mask), None),
    "mask after the softmax, renormalised": (
        lambda q, k, v, mask=None: _att(q, k, v, mask, after=True, guard=False), None),
    "F.scaled_dot_product_attention": (
        lambda q, k, v, mask=None: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "a ready-made attention called"),
    # mine
    "scaled by √n": (lambda q, k, v, mask=None: _att(q, k, v, mask, scale=lambda q, k, v: math.sqrt(
        k.shape[-2])), None),
    "softmax over the queries": (lambda q, k, v, mask=None: _att(q, k, v, mask, dim=-2), None),
    "weights returned instead of the output": (
        lambda q, k, v, mask=None: _att(q, k, v, mask, weights_out=True), None),
    "scaled by √d_v": (lambda q, k, v, mask=None: _att(q, k, v, mask, scale=lambda q, k, v: math.sqrt(
        v.shape[-1])), "divided by √d_v instead of √d_k"),
    "multiplied by √d_k": (lambda q, k, v, mask=None: _att(q, k, v, mask, scale=lambda q, k, v: 1 / math.sqrt(
        q.shape[-1])), None),
    "computed in float32 for float64": (
        lambda q, k, v, mask=None: _att(q.float(), k.float(), v.float(), mask), None),
    "lib's attention called": (
        lambda q, k, v, mask=None: lib.scaled_dot_product_attention(q, k, v, mask)[0],
        "a ready-made attention called"),
}


@pytest.mark.parametrize("slip", list(ATTENTION_WRONG))
def test_scaled_attention_checker_refuses(slip):
    fn, name = ATTENTION_WRONG[slip]
    verdict = lib.check_scaled_attention(fn)
    assert not verdict, slip
    if name:
        assert verdict.mistake == name, verdict.message


def test_scaled_attention_checker_passes_a_nan_to_num_guard():
    def ok(q, k, v, mask=None):
        scores = torch.einsum("...md,...nd->...mn", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, -1).nan_to_num(0.0) @ v
    assert lib.check_scaled_attention(ok)
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention  # restored


# --- chapter 2, exercises 7 and 8: the masks ---------------------------------------------------

CAUSAL_WRONG = {
    "float mask": lambda n: torch.ones(n, n).tril(),
    "uint8 mask": lambda n: torch.ones(n, n, dtype=torch.uint8).tril(),
    "one future key allowed": lambda n: torch.ones(n, n, dtype=torch.bool).tril(diagonal=1),
    "extra leading axes": lambda n: torch.ones(n, n, dtype=torch.bool).tril()[None, None],
    # mine
    "upper triangle": lambda n: torch.ones(n, n, dtype=torch.bool).triu(),
    "strict comparison (no diagonal)": lambda n: torch.arange(n)[:, None] > torch.arange(n)[None, :],
    "transposed": lambda n: torch.ones(n, n, dtype=torch.bool).tril().T.contiguous(),
    "True marks the future": lambda n: torch.ones(n, n, dtype=torch.bool).triu(1),
}


@pytest.mark.parametrize("slip", list(CAUSAL_WRONG))
def test_causal_mask_checker_refuses(slip):
    assert not lib.check_causal_mask(CAUSAL_WRONG[slip]), slip


PADDING_WRONG = {
    "> pad_id": ((lambda t, p: (t > p)[:, None, None, :]), "ids compared with > pad_id instead of !="),
    "pad assumed 0": ((lambda t, p: (t != 0)[:, None, None, :]), "pad id hard-coded as 0"),
    "pad assumed 0, as truthiness": ((lambda t, p: t.bool()[:, None, None, :]), "pad id hard-coded as 0"),
    "one singleton axis": ((lambda t, p: (t != p)[:, None, :]), None),
    # mine
    "(B, 1, n, 1)": ((lambda t, p: (t != p)[:, None, :, None]),
                     "shape (B, 1, n, 1): the padding masks queries, not keys"),
    "== pad_id": ((lambda t, p: (t == p)[:, None, None, :]), None),
    "float mask": ((lambda t, p: (t != p).float()[:, None, None, :]), None),
    ">= pad_id + 1": ((lambda t, p: (t >= p + 1)[:, None, None, :]), None),
    "axes in front of the batch": ((lambda t, p: (t != p)[None, None]), None),
}


@pytest.mark.parametrize("slip", list(PADDING_WRONG))
def test_padding_mask_checker_refuses(slip):
    fn, name = PADDING_WRONG[slip]
    verdict = lib.check_padding_mask(fn)
    assert not verdict, slip
    if name:
        assert verdict.mistake == name, verdict.message


def test_mask_checkers_pass_arange_solutions():
    assert lib.check_causal_mask(lambda n: torch.arange(n)[:, None] >= torch.arange(n)[None, :])
    assert lib.check_padding_mask(lambda t, p: t.ne(p).unsqueeze(1).unsqueeze(1))


# --- chapter 2, exercise 2: the numbers --------------------------------------------------------

@pytest.mark.parametrize("variance", [64, 16, 128, 4 * math.sqrt(16), 32, 8, float("nan")])
def test_score_variance_checker_refuses(variance):
    assert not lib.check_score_variance(variance, sigma2=4, d_k=16)


@pytest.mark.parametrize("divisor", [4, 8, 256, 2, 64, float("nan")])
def test_score_divisor_checker_refuses(divisor):
    assert not lib.check_score_divisor(divisor, sigma2=4, d_k=16)


# --- chapter 3, exercise 1: attention_by_steps(q, k, v) -> (S, weights, output) ---------------


def _steps(q, k, v, *, scale=None, dim=-1, scores_scaled=False, order=None, weights_from_raw=False):
    s = q @ k.T
    c = math.sqrt(q.shape[-1]) if scale is None else scale(q, k)
    w = torch.softmax(s if weights_from_raw else s / c, dim=dim)
    out = (s / c if scores_scaled else s, w, w @ v)
    return out if order is None else tuple(out[i] for i in order)


STEPS_WRONG = {
    # the review's
    "scaled by √n": lambda q, k, v: _steps(q, k, v, scale=lambda q, k: math.sqrt(k.shape[0])),
    "scaled by √m": lambda q, k, v: _steps(q, k, v, scale=lambda q, k: math.sqrt(q.shape[0])),
    "scaled scores returned as S": lambda q, k, v: _steps(q, k, v, scores_scaled=True),
    "results in the wrong order": lambda q, k, v: _steps(q, k, v, order=(1, 0, 2)),
    # mine
    "softmax down the columns": lambda q, k, v: _steps(q, k, v, dim=0),
    "divided by d_k": lambda q, k, v: _steps(q, k, v, scale=lambda q, k: q.shape[-1]),
    "weights from the unscaled scores": lambda q, k, v: _steps(q, k, v, weights_from_raw=True),
    "output from the scores, not the weights": lambda q, k, v: (
        q @ k.T, torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), -1), q @ k.T @ v),
}


@pytest.mark.parametrize("slip", list(STEPS_WRONG))
def test_attention_by_steps_checker_refuses(slip):
    assert not lib.check_attention_by_steps(STEPS_WRONG[slip]), slip


# --- chapter 3, exercise 2: two_head_attention -------------------------------------------------


def _two(x_q, x_k, x_v, w_q, w_k, w_v, w_o, *, scale=None, wo_T=False, kv_from_q=False, dim=-1,
         order=(0, 1), same_head=False):
    heads = []
    for i in order:
        i = 0 if same_head else i
        q = x_q @ w_q[i]
        k = (x_q if kv_from_q else x_k) @ w_k[i]
        v = (x_q if kv_from_q else x_v) @ w_v[i]
        c = math.sqrt(q.shape[-1]) if scale is None else scale(x_q, q)
        heads.append(torch.softmax(q @ k.T / c, dim=dim) @ v)
    cat = torch.cat(heads, dim=-1)
    return cat @ (w_o.T if wo_T else w_o)


TWO_WRONG = {
    # the review's
    "scale √(d_model/2)": lambda *a: _two(*a, scale=lambda x, q: math.sqrt(x.shape[-1] / 2)),
    "W^O transposed": lambda *a: _two(*a, wo_T=True),
    "x_q used for keys and values": lambda *a: _two(*a, kv_from_q=True),
    "softmax over the queries": lambda *a: _two(*a, dim=0),
    # mine
    "heads concatenated in reverse order": lambda *a: _two(*a, order=(1, 0)),
    "head 1's weights used for both heads": lambda *a: _two(*a, same_head=True),
    "no scaling": lambda *a: _two(*a, scale=lambda x, q: 1.0),
    "both heads through W^O's first block": lambda x_q, x_k, x_v, w_q, w_k, w_v, w_o: sum(
        torch.softmax((x_q @ w_q[i]) @ (x_k @ w_k[i]).T / math.sqrt(w_q[i].shape[-1]), -1)
        @ (x_v @ w_v[i]) @ w_o[: w_v[0].shape[-1]] for i in (0, 1)),
}


@pytest.mark.parametrize("slip", list(TWO_WRONG))
def test_two_head_attention_checker_refuses(slip):
    assert not lib.check_two_head_attention(TWO_WRONG[slip]), slip


# --- chapter 4, exercise 1: split_heads ---------------------------------------------------------

SPLIT_WRONG = {
    # the review's
    "(B, h, d_k, n)": lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(0, 2, 3, 1),
    "float32 result": lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 2).float(),
    "d_k from the wrong axis": lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[1] // h)
    .transpose(1, 2),
    # mine
    "heads left after the positions": lambda x, h: x.view(x.shape[0], x.shape[1], h, -1),
    "a straight view": lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1),
    "features cut as (d_k, h)": lambda x, h: x.view(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2),
    "batch and heads swapped": lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(2, 0, 1, 3),
}


@pytest.mark.parametrize("slip", list(SPLIT_WRONG))
def test_split_heads_checker_refuses(slip):
    assert not lib.check_split_heads(SPLIT_WRONG[slip]), slip


# --- chapter 4, exercise 2: multi_head_attention ------------------------------------------------


def _mha(x_q, x_k, x_v, w_q, w_k, w_v, w_o, n_heads, mask=None, *, merge_dk_h=False, scale=None,
         invert=False, fill=float("-inf"), additive=False, transpose_w=False, dim=-1, no_mask=False,
         merge_no_transpose=False):
    B, m, d = x_q.shape
    n = x_k.shape[1]
    d_k = d // n_heads
    lin = (lambda x, w: x @ w.T) if transpose_w else (lambda x, w: x @ w)

    def split(x, length):
        return x.view(B, length, n_heads, d_k).transpose(1, 2)

    q, k, v = split(lin(x_q, w_q), m), split(lin(x_k, w_k), n), split(lin(x_v, w_v), n)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale is None else scale(d_k, n))
    if mask is not None and not no_mask:
        if additive:
            scores = scores + torch.where(mask, 0.0, fill).to(scores.dtype)
        else:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
    w = torch.softmax(scores, dim=dim)
    if mask is not None and not invert and not additive and not no_mask:
        w = w.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    out = w @ v  # (B, h, m, d_k)
    if merge_no_transpose:
        merged = out.reshape(B, m, d)
    elif merge_dk_h:
        merged = out.permute(0, 2, 3, 1).reshape(B, m, d)
    else:
        merged = out.transpose(1, 2).reshape(B, m, d)
    return lin(merged, w_o)


MHA_WRONG = {
    # the review's
    "heads merged as (d_k, h)": lambda *a, **kw: _mha(*a, **kw, merge_dk_h=True),
    "scale from the key length": lambda *a, **kw: _mha(*a, **kw, scale=lambda d_k, n: math.sqrt(n)),
    "mask inverted, finfo.min fill": lambda *a, **kw: _mha(*a, **kw, invert=True, fill=-3.4e38),
    # mine
    "no scaling": lambda *a, **kw: _mha(*a, **kw, scale=lambda d_k, n: 1.0),
    "weights used as x W^T": lambda *a, **kw: _mha(*a, **kw, transpose_w=True),
    "softmax over the queries": lambda *a, **kw: _mha(*a, **kw, dim=-2),
    "mask not passed on": lambda *a, **kw: _mha(*a, **kw, no_mask=True),
    "merged without moving the heads back": lambda *a, **kw: _mha(*a, **kw, merge_no_transpose=True),
    "divided by d_k": lambda *a, **kw: _mha(*a, **kw, scale=lambda d_k, n: d_k),
}


@pytest.mark.parametrize("slip", list(MHA_WRONG))
def test_multi_head_attention_checker_refuses(slip):
    assert not lib.check_multi_head_attention(MHA_WRONG[slip]), slip


def test_multi_head_attention_checker_passes_the_reference_pattern():
    assert lib.check_multi_head_attention(lambda *a, **kw: _mha(*a, **kw))


# --- chapter 3's hand checkers and chapter 4's numbers ------------------------------------------

Q3 = [[2.0, 0.0], [2.0, 1.0], [1.0, 1.0]]  # chapter 3's Example 1
K3 = [[2.0, 1.0], [0.0, 2.0], [2.0, 2.0]]
V3 = [[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]]


def _weights(scale, dim=-1):
    s = torch.tensor(Q3) @ torch.tensor(K3).T / scale
    return torch.softmax(s, dim=dim)


HAND_WEIGHTS_WRONG = {
    # the review's
    "all NaN": torch.full((3, 3), float("nan")),
    "normalised down the columns": _weights(math.sqrt(2), dim=0),
    "unscaled": _weights(1.0),
    "divided by d_k": _weights(2.0),
    "the scaled scores typed as weights": torch.tensor(Q3) @ torch.tensor(K3).T / math.sqrt(2),
    # mine
    "uniform weights": torch.full((3, 3), 1 / 3),
    "rows and columns swapped": _weights(math.sqrt(2)).T,
    "rounded to one decimal": _weights(math.sqrt(2)).round(decimals=1),
}


@pytest.mark.parametrize("slip", list(HAND_WEIGHTS_WRONG))
def test_hand_weights_checker_refuses(slip):
    assert not lib.check_attention_weights(Q3, K3, HAND_WEIGHTS_WRONG[slip])
    assert lib.check_attention_weights(Q3, K3, _weights(math.sqrt(2)))


@pytest.mark.parametrize("slip", ["all NaN", "normalised down the columns", "unscaled", "divided by d_k",
                                  "uniform weights", "rows and columns swapped"])
def test_hand_output_checker_refuses(slip):
    answer = HAND_WEIGHTS_WRONG[slip] @ torch.tensor(V3)
    assert not lib.check_attention(Q3, K3, V3, answer)
    assert lib.check_attention(Q3, K3, V3, _weights(math.sqrt(2)) @ torch.tensor(V3))


@pytest.mark.parametrize("count", [2_359_296, 4 * 768**2 * 12, 196_864, 3 * 768**2 + 3 * 768,
                                   4 * 768**2 + 768, float("nan")])
def test_mha_parameters_checker_refuses(count):
    assert not lib.check_mha_parameters(count, d_model=768, n_heads=12)
    assert lib.check_mha_parameters(2_362_368, d_model=768, n_heads=12)


@pytest.mark.parametrize("flops", [115_097_600, 209_715_200, 20_480_000, 4 * 100 * 512**2
                                   + 4 * 100**2 * 512, 230_195_200 // 8])
def test_attention_flops_checker_refuses(flops):
    assert not lib.check_attention_flops(flops, n=100, d_model=512, n_heads=8)
    assert lib.check_attention_flops(230_195_200, n=100, d_model=512, n_heads=8)


@pytest.mark.parametrize("n", [512, 256, 2048, 100, 64])
def test_flops_crossover_checker_refuses(n):
    assert not lib.check_flops_crossover(n, d_model=512)
    assert lib.check_flops_crossover(1024, d_model=512)
