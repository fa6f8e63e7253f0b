"""Checkers for chapter 2's coding exercises (attention math).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_attention.py).

The exercises, in the chapter's order:

- `softmax(scores)` along the last axis (the keys);
- `scaled_attention(q, k, v, mask=None)`, the output of
  softmax(q kᵀ / √d_k) v with an optional bool mask (True = may attend);
- `causal_mask(n)`, the (n, n) mask of a decoder's self-attention;
- `padding_mask(tokens, pad_id)`, the (B, 1, 1, n) mask that hides padding.
"""

from __future__ import annotations

import math

import torch

from lib.model.attention import causal_mask as _causal_mask
from lib.model.attention import padding_mask as _padding_mask
from lib.model.attention import scaled_dot_product_attention as _attention
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_softmax", "check_scaled_attention", "check_causal_mask", "check_padding_mask"]


# --- softmax -----------------------------------------------------------------------------


def _softmax_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, dtype in (((3, 4), torch.float64), ((2, 3, 5), torch.float32), ((4, 4), torch.float32)):
        cases.append(Case((torch.randn(shape, generator=g, dtype=dtype) * 3,), label=f"shape {shape}"))
    # Large scores: exp overflows unless each row's maximum is subtracted first; the
    # second row is far below the first, so subtracting the maximum of the whole
    # tensor instead of each row's makes its exponentials underflow to 0.
    cases.append(Case((torch.tensor([[1000.0, 999.0, 998.0], [-5.0, 0.0, 5.0]]),), label="large scores"))
    return cases


def check_softmax(softmax) -> Verdict:
    """Chapter 2, exercise: `softmax(scores)` along the last axis (the keys)."""
    mistakes = [
        Mistake(
            "softmax over the wrong axis",
            "Each query's weights must sum to 1 over the keys: did you normalise along dim=-1 (not dim=0)?",
            lambda s: torch.softmax(s, dim=0),
        ),
        Mistake(
            "overflow: the row maximum is not subtracted",
            "exp(1000) is inf. Did you subtract each row's maximum before exp? The softmax does not change.",
            lambda s: torch.exp(s) / torch.exp(s).sum(dim=-1, keepdim=True),
        ),
        Mistake(
            "no normalisation",
            "exp(s) alone is not a distribution: did you divide by the sum of each row?",
            lambda s: torch.exp(s),
        ),
        Mistake(
            "the maximum of the whole tensor subtracted, not each row's",
            "A row far below the overall maximum underflows to 0/0. Did you use "
            "s.amax(dim=-1, keepdim=True) rather than s.max()?",
            lambda s: torch.exp(s - s.max()) / torch.exp(s - s.max()).sum(dim=-1, keepdim=True),
        ),
    ]
    return check_function(softmax, lambda s: torch.softmax(s, dim=-1), _softmax_cases(), mistakes, name="softmax")


# --- scaled attention --------------------------------------------------------------------


def _attention_cases() -> list[Case]:
    """Several shapes (m ≠ n, batch and heads), both masks, float32 and float64.

    No mask row is all False: every query may see at least one key, so the
    result does not depend on what an implementation does with an empty row.
    """
    g = torch.Generator().manual_seed(0)

    def qkv(lead, m, n, d_k, d_v, dtype=torch.float32):
        return tuple(
            torch.randn(*lead, rows, width, generator=g, dtype=dtype)
            for rows, width in ((m, d_k), (n, d_k), (n, d_v))
        )

    pad = _padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]), pad_id=0)  # (2, 1, 1, 5)
    return [
        Case(qkv((), 3, 5, 4, 2), label="m=3, n=5, d_k=4, no mask"),
        Case(qkv((2,), 4, 4, 16, 3, torch.float64), label="batch of 2, d_k=16, float64, no mask"),
        Case(qkv((2, 3), 5, 5, 8, 4), {"mask": _causal_mask(5)}, label="(B, h)=(2, 3), causal mask"),
        Case(qkv((2, 3), 5, 5, 8, 4), {"mask": pad}, label="(B, h)=(2, 3), padding mask"),
        Case(qkv((2, 1), 5, 5, 4, 2, torch.float64), {"mask": _causal_mask(5) & pad},
             label="causal and padding masks, float64"),
    ]


def _attention_reference(q, k, v, mask=None):
    return _attention(q, k, v, mask)[0]


def _softmax_attention(q, k, v, mask=None, *, divisor=None, dim=-1, mask_after=False, invert=False):
    """The mistakes below, as variations of one implementation."""
    scores = q @ k.transpose(-2, -1)
    scores = scores / (math.sqrt(q.shape[-1]) if divisor is None else divisor)
    if mask is not None and not mask_after:
        scores = scores.masked_fill(mask if invert else ~mask, float("-inf"))
    weights = scores.softmax(dim=dim)
    if mask is not None and mask_after:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v


def check_scaled_attention(scaled_attention) -> Verdict:
    """Chapter 2, exercise: `scaled_attention(q, k, v, mask=None)` returns softmax(q kᵀ/√d_k) v.

    q (..., m, d_k), k (..., n, d_k), v (..., n, d_v), mask bool broadcastable
    to (..., m, n), True where the query may attend. Returns (..., m, d_v).
    """
    mistakes = [
        Mistake(
            "no √d_k scaling",
            "Did you divide the scores q kᵀ by √d_k, with d_k = q.shape[-1]?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, divisor=1.0),
        ),
        Mistake(
            "divided by d_k instead of √d_k",
            "The scores' variance is d_k, so their standard deviation is √d_k: did you use math.sqrt(d_k)?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, divisor=q.shape[-1]),
        ),
        Mistake(
            "softmax over the wrong axis",
            "Each query's weights must sum to 1 over the keys: did you take the softmax along dim=-1?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, dim=-2),
        ),
        Mistake(
            "mask ignored",
            "Your result is right without a mask but not with one: did you set the scores to -inf where "
            "the mask is False?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, None),
        ),
        Mistake(
            "mask convention inverted",
            "In `lib` a mask is True where the query MAY attend: did you fill -inf where the mask is False "
            "(scores.masked_fill(~mask, float('-inf')))?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, invert=True),
        ),
        Mistake(
            "mask applied after the softmax",
            "Zeroing weights after the softmax leaves rows that no longer sum to 1. Did you set the masked "
            "scores to -inf before the softmax?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, mask_after=True),
        ),
    ]
    return check_function(
        scaled_attention, _attention_reference, _attention_cases(), mistakes, name="scaled_attention"
    )


# --- masks -------------------------------------------------------------------------------


def check_causal_mask(causal_mask) -> Verdict:
    """Chapter 2, exercise: `causal_mask(n)`, an (n, n) bool mask, True where key j ≤ query i."""
    cases = [Case((n,), label=f"n = {n}") for n in (1, 2, 5, 8)]
    mistakes = [
        Mistake(
            "upper triangle instead of lower",
            "Row i is query i, column j key j; query i may see keys 0..i, on and BELOW the diagonal: "
            "did you use torch.tril rather than torch.triu?",
            lambda n: torch.ones(n, n, dtype=torch.bool).triu(),
        ),
        Mistake(
            "diagonal excluded",
            "A query may attend to its own position: did you keep the diagonal (tril(), not tril(diagonal=-1))?",
            lambda n: torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1),
        ),
        Mistake(
            "True marks the blocked keys (nn.MultiheadAttention's convention)",
            "In `lib` True means MAY attend: did you return the future (triu(diagonal=1)) instead of its "
            "complement?",
            lambda n: torch.ones(n, n, dtype=torch.bool).triu(diagonal=1),
        ),
    ]
    return check_function(causal_mask, _causal_mask, cases, mistakes, name="causal_mask")


def _padding_cases() -> list[Case]:
    return [
        Case((torch.tensor([[5, 7, 2, 9, 0], [4, 8, 0, 0, 0]]), 0), label="pad_id = 0"),
        Case((torch.tensor([[1, 1, 2, 3]]), 1), label="pad_id = 1, left padding"),
        Case((torch.tensor([[3, 5, 6], [4, 3, 3], [7, 8, 9]]), 3), label="pad_id = 3"),
    ]


def check_padding_mask(padding_mask) -> Verdict:
    """Chapter 2, exercise: `padding_mask(tokens, pad_id)`, (B, 1, 1, n), False at padding."""
    mistakes = [
        Mistake(
            "True on the padding instead of the real tokens",
            "In `lib` True means MAY attend: did you compare with != pad_id rather than == pad_id?",
            lambda t, p: (t == p)[:, None, None, :],
        ),
        Mistake(
            "pad id hard-coded as 0",
            "The padding id is an argument: did you compare with pad_id rather than with 0?",
            lambda t, p: (t != 0)[:, None, None, :],
        ),
        Mistake(
            "shape (B, n): no axes for the heads and the queries",
            "Scores are (B, h, m, n); the mask must broadcast over heads and queries. Did you add two "
            "singleton axes, mask[:, None, None, :]?",
            lambda t, p: t != p,
        ),
        Mistake(
            "shape (B, 1, n, 1): the padding masks queries, not keys",
            "Padding is a property of the keys, the LAST axis of the scores (B, h, m, n): did you put n last, "
            "mask[:, None, None, :]?",
            lambda t, p: (t != p)[:, None, :, None],
        ),
    ]
    return check_function(padding_mask, _padding_mask, _padding_cases(), mistakes, name="padding_mask")
