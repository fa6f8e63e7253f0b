"""Checkers for chapter 4's coding exercises (multi-head attention; see lib.teach.checking).

- `check_split_heads`: ``split_heads(x, n_heads)`` cuts (B, n, d_model) into
  (B, h, n, d_k), head i taking features i·d_k ... (i+1)·d_k - 1;
- `check_multi_head_attention`: the whole layer's forward pass with the four
  projection matrices given, masks with True = may attend. Its cases (float32
  and float64; no mask, causal and padding masks; m = n and m != n) separate the
  classic slips: no scaling, d_k for √d_k, the softmax over the queries, the mask
  left out, inverted (with -inf or -1e9) or added, the weights transposed.

The references are written here with plain torch operations; the chapter shows
that `lib.MultiHeadAttention` computes the same function.
Tests: tests/test_checkers_heads.py.
"""

from __future__ import annotations

import math

import torch

from lib.teach.checkers._dtypes import with_exact_dtype
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_split_heads", "check_multi_head_attention"]


def _split(x, n_heads):
    B, n, d_model = x.shape
    return x.reshape(B, n, n_heads, d_model // n_heads).transpose(1, 2)  # (B, h, n, d_k)


def _split_cases() -> list[Case]:
    g = torch.Generator().manual_seed(5)
    cases = []
    for B, n, d_model, h, dtype in ((2, 5, 8, 2, torch.float32), (1, 3, 12, 4, torch.float64),
                                    (3, 4, 6, 3, torch.float32), (1, 7, 4, 1, torch.float64)):
        x = torch.randn(B, n, d_model, generator=g, dtype=dtype)
        cases.append(Case((x, h), label=f"B={B}, n={n}, d_model={d_model}, n_heads={h}"))
    return cases


def check_split_heads(split_heads) -> Verdict:
    """Chapter 4, exercise: ``split_heads(x, n_heads)``: (B, n, d_model) -> (B, h, n, d_k)."""
    mistakes = [
        Mistake(
            "heads not moved next to the batch",
            "Is your result (B, n, h, d_k)? Swap dimensions 1 and 2 with .transpose(1, 2).",
            lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h),
        ),
        Mistake(
            "reshaped straight to (B, h, n, d_k)",
            "A view to (B, h, n, d_k) cuts the sequence, not the features: head 0 gets whole "
            "tokens. View as (B, n, h, d_k) first, then transpose(1, 2).",
            lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h),
        ),
        Mistake(
            "(h, d_k) in the wrong order",
            "Did you view the features as (d_k, h)? Then head i gets every h-th feature. "
            "Head i owns the consecutive features i·d_k ... (i+1)·d_k - 1: view as (h, d_k).",
            lambda x, h: x.reshape(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2),
        ),
    ]
    cases = _split_cases()
    verdict = check_function(split_heads, _split, cases, mistakes, name="split_heads")
    return with_exact_dtype(verdict, split_heads, _split, cases, "split_heads",
                            "keep x's dtype (a view or reshape does)")


def _mha(x_q, x_k, x_v, w_q, w_k, w_v, w_o, n_heads, mask=None, *, scale=None, merge="right",
         mask_mode="right", softmax_dim=-1, transposed=False, use_w_o=True):
    """The layer, with switches that reproduce the named mistakes.

    mask_mode: "right" (fill -inf where False), "inverted" (-inf where True),
    "inverted_1e9" (-1e9 where True), "ignored", "added" (the 0/1 mask added to
    the scores). transposed: every weight used as x @ W.T (nn.Linear's habit).
    """
    B, m, d_model = x_q.shape
    d_k = d_model // n_heads
    if transposed:
        w_q, w_k, w_v, w_o = w_q.T, w_k.T, w_v.T, w_o.T
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_k @ w_k, n_heads), _split(x_v @ w_v, n_heads)
    divisor = math.sqrt(d_k) if scale is None else scale
    scores = q @ k.transpose(-2, -1) / divisor  # (B, h, m, n)
    if mask is not None:
        if mask_mode == "right":
            scores = scores.masked_fill(~mask, float("-inf"))
        elif mask_mode == "inverted":
            scores = scores.masked_fill(mask, float("-inf"))
        elif mask_mode == "inverted_1e9":
            scores = scores.masked_fill(mask, -1e9)
        elif mask_mode == "added":
            scores = scores + mask.to(scores.dtype)
    heads = torch.softmax(scores, dim=softmax_dim) @ v  # (B, h, m, d_k)
    if merge == "right":
        concat = heads.transpose(1, 2).reshape(B, m, d_model)
    else:  # no transpose back: positions and heads interleaved
        concat = heads.reshape(B, m, d_model)
    return concat @ w_o if use_w_o else concat


def _mha_cases() -> list[Case]:
    g = torch.Generator().manual_seed(6)
    cases = []
    # (B, m, n, d_model, h, mask, dtype): self-attention without a mask, with a causal
    # mask and with a padding mask (the second sequence 2 tokens shorter), and
    # cross-attention with m != n, padded or not; float32 and float64. d_k is never 1
    # and √d_model never equals d_k, so the scaling slips differ on every case.
    for B, m, n, d_model, h, masking, dtype in (
        (2, 4, 4, 8, 2, None, torch.float32),
        (1, 5, 5, 12, 3, "causal", torch.float64),
        (2, 3, 6, 8, 4, None, torch.float64),
        (1, 4, 4, 6, 2, "causal", torch.float32),
        (2, 5, 5, 8, 2, "padding", torch.float32),
        (2, 3, 6, 12, 2, "padding", torch.float64),
    ):
        def r(*shape):
            return torch.randn(*shape, generator=g, dtype=dtype)

        weights = [r(d_model, d_model) / math.sqrt(d_model) for _ in range(4)]
        x_q = r(B, m, d_model)
        x_kv = x_q if m == n else r(B, n, d_model)
        if masking == "causal":
            mask = torch.ones(m, m, dtype=torch.bool).tril()  # (m, n)
        elif masking == "padding":
            lengths = torch.tensor([n, n - 2])  # the second sequence ends in 2 pad tokens
            mask = (torch.arange(n) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, n)
        else:
            mask = None
        label = f"B={B}, m={m}, n={n}, d_model={d_model}, n_heads={h}, {dtype}".replace("torch.", "")
        label += f", {masking} mask" if masking else ""
        cases.append(Case((x_q, x_kv, x_kv, *weights, h), {"mask": mask}, label=label))
    return cases


def _slip(**switches):
    return lambda *a, mask=None: _mha(*a, mask=mask, **switches)


def check_multi_head_attention(multi_head_attention) -> Verdict:
    """Chapter 4, exercise: the multi-head forward pass.

    ``multi_head_attention(x_q, x_k, x_v, w_q, w_k, w_v, w_o, n_heads, mask=None)``:
    x_q (B, m, d_model), x_k and x_v (B, n, d_model); the four weights
    (d_model, d_model), used as x W (no biases); mask None or bool, broadcastable
    to (B, h, m, n) (a causal (m, n) mask, or a padding mask (B, 1, 1, n)), True =
    may attend. Returns (B, m, d_model), in x_q's dtype.
    """
    mistakes = [
        Mistake(
            "no 1/√d_k scaling",
            "Did you divide the scores q kᵀ by √d_k before the softmax? Without it the "
            "softmax saturates as d_k grows.",
            _slip(scale=1.0),
        ),
        Mistake(
            "divided by d_k instead of √d_k",
            "The scale is the square root of d_k: math.sqrt(d_k), not d_k.",
            lambda *a, mask=None: _mha(*a, mask=mask, scale=float(a[0].shape[-1] // a[7])),
        ),
        Mistake(
            "scaled by √d_model instead of √d_k",
            "Did you divide by math.sqrt(d_model)? Each head compares d_k-wide vectors: use √d_k.",
            lambda *a, mask=None: _mha(*a, mask=mask, scale=math.sqrt(a[0].shape[-1])),
        ),
        Mistake(
            "softmax over the wrong axis",
            "Each query's weights must sum to 1 over the keys: the softmax goes along the "
            "last axis (dim=-1), not over the queries (dim=-2).",
            _slip(softmax_dim=-2),
        ),
        Mistake(
            "mask not passed on",
            "The result is what attention gives with no mask at all: did you apply `mask` "
            "to the scores (masked_fill where it is False) before the softmax?",
            _slip(mask_mode="ignored"),
        ),
        Mistake(
            "mask read the wrong way round",
            "Did you fill the scores with -inf where the mask is True? Here True = may attend: "
            "fill where it is False (~mask).",
            _slip(mask_mode="inverted"),
        ),
        Mistake(
            "mask read the wrong way round (with a -1e9 fill)",
            "Did you fill the scores with -1e9 where the mask is True? Here True = may attend: "
            "fill where it is False (~mask). A fully masked row then shows up as NaN with "
            "-inf; -1e9 hides it behind uniform weights.",
            _slip(mask_mode="inverted_1e9"),
        ),
        Mistake(
            "the 0/1 mask added to the scores",
            "A boolean mask is not an additive one: adding True = 1 shifts the scores a little "
            "and hides nothing. Use scores.masked_fill(~mask, float('-inf')).",
            _slip(mask_mode="added"),
        ),
        Mistake(
            "weights used as x @ W.T",
            "The weights here are used as x W (rows in, columns out), as in the paper; "
            "x @ w.T is nn.Linear's convention, whose .weight stores Wᵀ.",
            _slip(transposed=True),
        ),
        Mistake(
            "W^O left out",
            "Did you multiply the concatenated heads by w_o at the end?",
            _slip(use_w_o=False),
        ),
        Mistake(
            "heads concatenated without transposing back",
            "Did you reshape (B, h, m, d_k) straight to (B, m, d_model)? That interleaves "
            "positions and heads: transpose(1, 2) first, then reshape.",
            _slip(merge="wrong"),
        ),
    ]
    cases = _mha_cases()
    verdict = check_function(multi_head_attention, _mha, cases, mistakes,
                             name="multi_head_attention")
    return with_exact_dtype(verdict, multi_head_attention, _mha, cases, "multi_head_attention",
                            "return x_q's dtype")
