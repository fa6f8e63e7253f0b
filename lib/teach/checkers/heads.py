"""Checkers for chapter 4's coding exercises (multi-head attention; see lib.teach.checking).

- `check_split_heads`: ``split_heads(x, n_heads)`` cuts (B, n, d_model) into
  (B, h, n, d_k), head i taking features i·d_k ... (i+1)·d_k - 1;
- `check_multi_head_attention`: the whole layer's forward pass with the four
  projection matrices given, masks with True = may attend.

The references are written here with plain torch operations; the chapter shows
that `lib.MultiHeadAttention` computes the same function.
Tests: tests/test_checkers_heads.py.
"""

from __future__ import annotations

import math

import torch

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
    return check_function(split_heads, _split, _split_cases(), mistakes, name="split_heads")


def _mha(x_q, x_k, x_v, w_q, w_k, w_v, w_o, n_heads, mask=None, *, scale=None, merge="right",
         inverted_mask=False, use_w_o=True):
    """The layer, with switches that reproduce the named mistakes."""
    B, m, d_model = x_q.shape
    d_k = d_model // n_heads
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_k @ w_k, n_heads), _split(x_v @ w_v, n_heads)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale is None else scale)  # (B, h, m, n)
    if mask is not None:
        scores = scores.masked_fill(mask if inverted_mask else ~mask, float("-inf"))
    heads = torch.softmax(scores, dim=-1) @ v  # (B, h, m, d_k)
    if merge == "right":
        concat = heads.transpose(1, 2).reshape(B, m, d_model)
    else:  # no transpose back: positions and heads interleaved
        concat = heads.reshape(B, m, d_model)
    return concat @ w_o if use_w_o else concat


def _mha_cases() -> list[Case]:
    g = torch.Generator().manual_seed(6)
    cases = []
    # (B, m, n, d_model, h, masked, dtype): self-attention with and without a causal mask,
    # and cross-attention with m != n
    for B, m, n, d_model, h, masked, dtype in (
        (2, 4, 4, 8, 2, False, torch.float32),
        (1, 5, 5, 12, 3, True, torch.float64),
        (2, 3, 6, 8, 4, False, torch.float64),
        (1, 4, 4, 6, 2, True, torch.float32),
    ):
        r = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
        weights = [r(d_model, d_model) / math.sqrt(d_model) for _ in range(4)]
        x_q = r(B, m, d_model)
        x_kv = x_q if m == n else r(B, n, d_model)
        mask = torch.ones(m, m, dtype=torch.bool).tril() if masked else None
        label = f"B={B}, m={m}, n={n}, d_model={d_model}, n_heads={h}" + (", causal" if masked else "")
        cases.append(Case((x_q, x_kv, x_kv, *weights, h), {"mask": mask}, label=label))
    return cases


def check_multi_head_attention(multi_head_attention) -> Verdict:
    """Chapter 4, exercise: the multi-head forward pass.

    ``multi_head_attention(x_q, x_k, x_v, w_q, w_k, w_v, w_o, n_heads, mask=None)``:
    x_q (B, m, d_model), x_k and x_v (B, n, d_model); the four weights
    (d_model, d_model), used as x W (no biases); mask bool (m, n), True = may
    attend. Returns (B, m, d_model).
    """
    mistakes = [
        Mistake(
            "scaled by √d_model instead of √d_k",
            "Did you divide by math.sqrt(d_model)? Each head compares d_k-wide vectors: use √d_k.",
            lambda *a, mask=None: _mha(*a, mask=mask, scale=math.sqrt(a[0].shape[-1])),
        ),
        Mistake(
            "W^O left out",
            "Did you multiply the concatenated heads by w_o at the end?",
            lambda *a, mask=None: _mha(*a, mask=mask, use_w_o=False),
        ),
        Mistake(
            "heads concatenated without transposing back",
            "Did you reshape (B, h, m, d_k) straight to (B, m, d_model)? That interleaves "
            "positions and heads: transpose(1, 2) first, then reshape.",
            lambda *a, mask=None: _mha(*a, mask=mask, merge="wrong"),
        ),
        Mistake(
            "mask read the wrong way round",
            "Did you fill the scores with -inf where the mask is True? Here True = may attend: "
            "fill where it is False (~mask).",
            lambda *a, mask=None: _mha(*a, mask=mask, inverted_mask=True),
        ),
    ]
    return check_function(multi_head_attention, _mha, _mha_cases(), mistakes,
                          name="multi_head_attention")
