"""Checkers for chapter 3's coding exercises (worked examples; see lib.teach.checking).

- `check_attention_by_steps`: ``attention_by_steps(q, k, v)`` returns the
  scores, the weights and the output of one attention computation;
- `check_two_head_attention`: ``two_head_attention(x_q, x_k, x_v, w_q, w_k, w_v, w_o)``
  is the multi-head layer written out with one matrix per head.

Tests: tests/test_checkers_worked_examples.py.
"""

from __future__ import annotations

import functools
import math

import torch

from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_attention_by_steps", "check_two_head_attention"]


def _steps(q, k, v, scale):
    """(QKᵀ, softmax(QKᵀ / scale) along the keys, weights · V)."""
    scores = q @ k.T
    weights = torch.softmax(scores / scale, dim=-1)
    return scores, weights, weights @ v


def _exp_steps(q, k, v, divisor=None):
    """The four steps with a softmax written as exp / sum, without the shift."""
    scores = q @ k.T
    e = torch.exp(scores / (math.sqrt(k.shape[-1]) if divisor is None else divisor(k)))
    weights = e / e.sum(dim=-1, keepdim=True)
    return scores, weights, weights @ v


def _steps_cases() -> list[Case]:
    g = torch.Generator().manual_seed(3)
    cases = [  # the chapter's Example 1 first, then random ones (m != n, d_v != d_k)
        Case(
            (
                torch.tensor([[2.0, 0.0], [2.0, 1.0], [1.0, 1.0]], dtype=torch.float64),
                torch.tensor([[2.0, 1.0], [0.0, 2.0], [2.0, 2.0]], dtype=torch.float64),
                torch.tensor([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]], dtype=torch.float64),
            ),
            label="Example 1",
        )
    ]
    for m, n, d_k, d_v, dtype in ((2, 5, 4, 3, torch.float32), (4, 6, 8, 2, torch.float64),
                                  (1, 3, 9, 5, torch.float32)):
        q = torch.randn(m, d_k, generator=g, dtype=dtype) * 2
        k = torch.randn(n, d_k, generator=g, dtype=dtype) * 2
        v = torch.randn(n, d_v, generator=g, dtype=dtype)
        cases.append(Case((q, k, v), label=f"m={m}, n={n}, d_k={d_k}, d_v={d_v}"))
    # Large negative scores in float32: exp without each row's maximum subtracted
    # underflows to 0/0 there, while torch.softmax (or a shifted exp) does not.
    q = -torch.tensor([[30.0, 30.0], [1.0, 0.0]])
    k = torch.tensor([[5.0, 4.0], [4.0, 5.0], [6.0, 6.0]])
    cases.append(Case((q, k, torch.randn(3, 2, generator=g)), label="all-negative scores, float32"))
    return cases


def check_attention_by_steps(attention_by_steps) -> Verdict:
    """Chapter 3, exercise: ``attention_by_steps(q, k, v) -> (scores, weights, output)``.

    q (m, d_k), k (n, d_k), v (n, d_v); scores = q kᵀ (m, n), unscaled;
    weights = softmax(scores / √d_k) per row (m, n); output = weights v (m, d_v).

    Input classes that separate right from plausible wrong code, each in a case:
    the chapter's Example 1 (m = n = d_k); m ≠ n ≠ d_k ≠ d_v (scale by √d_k, not
    √m, √n or d_k; softmax along the rows; output from the weights; results in
    order); a single query (m = 1); float32 and float64; all-negative float32
    scores (an exp without the row maximum gives 0/0).
    """
    mistakes = [
        Mistake(
            "no scaling by √d_k",
            "Did you divide the scores by √d_k before the softmax?",
            lambda q, k, v: _steps(q, k, v, 1.0),
        ),
        Mistake(
            "divided by d_k instead of √d_k",
            "Did you divide by d_k itself? The scale is its square root, math.sqrt(d_k).",
            lambda q, k, v: _steps(q, k, v, k.shape[-1]),
        ),
        Mistake(
            "softmax over the wrong axis",
            "Does each row of your weights sum to 1? Normalise over the keys: dim=-1.",
            lambda q, k, v: (
                q @ k.T,
                torch.softmax(q @ k.T / math.sqrt(k.shape[-1]), dim=0),
                torch.softmax(q @ k.T / math.sqrt(k.shape[-1]), dim=0) @ v,
            ),
        ),
        Mistake(
            "divided by √d_v instead of √d_k",
            "The scale comes from the width of the queries and keys, d_k = k.shape[-1], not from "
            "the values' width d_v: did you use v.shape[-1]?",
            lambda q, k, v: _steps(q, k, v, math.sqrt(v.shape[-1])),
        ),
        Mistake(
            "exp without the row maximum subtracted (0/0 on large negative scores)",
            "exp(-200) is 0 in float32, so a row of large negative scores gives 0/0 = NaN. Did you "
            "subtract each row's maximum before exp, or use torch.softmax?",
            lambda q, k, v: _exp_steps(q, k, v),
        ),
        Mistake(
            "the scaled scores returned as `scores`",
            "Is your first result S = q kᵀ itself? The division by √d_k belongs to the softmax step.",
            lambda q, k, v: (q @ k.T / math.sqrt(k.shape[-1]),) + _steps(q, k, v, math.sqrt(k.shape[-1]))[1:],
        ),
    ]
    # The same scale slips with a softmax written as exp / sum (NaN on the all-negative case).
    for name, divisor in (("no scaling by √d_k", lambda k: 1.0),
                          ("divided by d_k instead of √d_k", lambda k: k.shape[-1])):
        hint = next(m.hint for m in mistakes if m.name == name)
        mistakes.append(Mistake(name, hint, functools.partial(_exp_steps, divisor=divisor)))
    return check_function(
        attention_by_steps,
        lambda q, k, v: _steps(q, k, v, math.sqrt(k.shape[-1])),
        _steps_cases(),
        mistakes,
        name="attention_by_steps",
    )


def _heads(x_q, x_k, x_v, w_q, w_k, w_v, scale=None):
    """The per-head outputs, head_i = Attention(x_q W_i^Q, x_k W_i^K, x_v W_i^V)."""
    heads = []
    for wq, wk, wv in zip(w_q, w_k, w_v):
        s = math.sqrt(wk.shape[1]) if scale is None else scale
        weights = torch.softmax((x_q @ wq) @ (x_k @ wk).T / s, dim=-1)
        heads.append(weights @ (x_v @ wv))
    return heads


def _two_heads(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    return torch.cat(_heads(x_q, x_k, x_v, w_q, w_k, w_v), dim=-1) @ w_o


def _two_head_cases() -> list[Case]:
    f64 = torch.float64
    t = lambda rows: torch.tensor(rows, dtype=f64)  # noqa: E731
    chapter = Case(  # the chapter's two-head example
        (
            t([[1, 2, 1, 0], [0, 1, 1, 1], [1, 0, 2, 1]]),
            t([[1, 1, 0, 2], [2, 1, 1, 0], [0, 1, 1, 1]]),
            t([[1, 1, 0, 0], [0, 2, 1, 1], [1, 1, 2, 2]]),
            [t([[1, 0], [0, 1], [1, 0], [0, 1]]), t([[0, 1], [1, 0], [1, 1], [0, 0]])],
            [t([[1, 0], [0, 1], [0, 1], [1, 0]]), t([[0, 1], [1, 0], [1, 0], [1, 1]])],
            [t([[1, 0], [0, 1], [1, 0], [0, 1]]), t([[0, 1], [1, 1], [0, 1], [1, 0]])],
            t([[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]]),
        ),
        label="the chapter's example",
    )
    g = torch.Generator().manual_seed(4)
    cases = [chapter]
    # (m, n, d_model, d_k, d_v, dtype): d_k and d_v need not be d_model / 2
    for m, n, d_model, d_k, d_v, dtype in ((2, 5, 6, 3, 3, torch.float32), (4, 3, 4, 3, 2, f64),
                                           (3, 3, 8, 4, 4, f64)):
        r = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
        cases.append(Case(
            (r(m, d_model), r(n, d_model), r(n, d_model),
             [r(d_model, d_k), r(d_model, d_k)], [r(d_model, d_k), r(d_model, d_k)],
             [r(d_model, d_v), r(d_model, d_v)], r(2 * d_v, d_model)),
            label=f"m={m}, n={n}, d_model={d_model}, d_k={d_k}, d_v={d_v}",
        ))
    return cases


def check_two_head_attention(two_head_attention) -> Verdict:
    """Chapter 3, exercise: ``two_head_attention(x_q, x_k, x_v, w_q, w_k, w_v, w_o)``.

    x_q (m, d_model), x_k and x_v (n, d_model); w_q, w_k: lists of two
    (d_model, d_k) matrices, one per head; w_v: two (d_model, d_v); w_o
    (2 d_v, d_model). Returns Concat(head_1, head_2) W^O, shape (m, d_model).

    Input classes that separate right from plausible wrong code, each in a case:
    the chapter's example; d_k ≠ d_model / 2 and d_v ≠ d_k (scale by √d_k, not
    √(d_model/2) or √d_v); m ≠ n (keys and values from x_k and x_v, softmax over
    the keys); a non-symmetric W^O (not transposed; heads concatenated in
    order); float32 and float64.
    """
    mistakes = [
        Mistake(
            "W^O left out",
            "Did you multiply the concatenated heads by w_o? It mixes them back to d_model features.",
            lambda xq, xk, xv, wq, wk, wv, wo: torch.cat(_heads(xq, xk, xv, wq, wk, wv), dim=-1),
        ),
        Mistake(
            "scaled by √d_model instead of √d_k",
            "Did you divide by the square root of the inputs' width? Each head's scale is √d_k, "
            "the width of its own queries and keys.",
            lambda xq, xk, xv, wq, wk, wv, wo: torch.cat(
                _heads(xq, xk, xv, wq, wk, wv, scale=math.sqrt(xq.shape[-1])), dim=-1) @ wo,
        ),
        Mistake(
            "heads concatenated in the wrong order",
            "Does head 1 come first in your concatenation? W^O's first d_v rows read head 1.",
            lambda xq, xk, xv, wq, wk, wv, wo: torch.cat(
                _heads(xq, xk, xv, wq, wk, wv)[::-1], dim=-1) @ wo,
        ),
        Mistake(
            "divided by d_k instead of √d_k",
            "Did you divide each head's scores by d_k itself? The scale is its square root.",
            lambda xq, xk, xv, wq, wk, wv, wo: torch.cat(
                _heads(xq, xk, xv, wq, wk, wv, scale=wk[0].shape[1]), dim=-1) @ wo,
        ),
        Mistake(
            "no scaling",
            "Did you divide each head's scores by √d_k before the softmax?",
            lambda xq, xk, xv, wq, wk, wv, wo: torch.cat(
                _heads(xq, xk, xv, wq, wk, wv, scale=1.0), dim=-1) @ wo,
        ),
    ]
    return check_function(two_head_attention, _two_heads, _two_head_cases(), mistakes,
                          name="two_head_attention")
