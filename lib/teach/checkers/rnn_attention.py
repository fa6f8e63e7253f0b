"""Checkers for chapter 1's coding exercises (see lib.teach.checking).

The exercises, in the chapter's order:

- `additive_score(s, h, w_s, w_h, v)`: Bahdanau's score e_j = vᵀ tanh(W_s s + W_h h_j)
  for every encoder state h_j; s (..., d_s), h (..., n, d_h), w_s (d_a, d_s),
  w_h (d_a, d_h), v (d_a,). Returns (..., n).
- `attend(scores, h)`: the softmax of the scores over the n positions and the
  weighted average of the h_j. Returns ``(context, weights)``, shapes
  (..., d_h) and (..., n).

Tests: tests/test_checkers_rnn_attention.py.
"""

from __future__ import annotations

import torch

from lib.model.rnn_attention import additive_score as _additive_score
from lib.model.rnn_attention import attend as _attend
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_additive_score", "check_attend"]


def _additive_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)

    def case(lead, n, d_s, d_h, d_a, dtype=torch.float32):
        s = torch.randn(*lead, d_s, generator=g, dtype=dtype)
        h = torch.randn(*lead, n, d_h, generator=g, dtype=dtype)
        w_s = torch.randn(d_a, d_s, generator=g, dtype=dtype)
        w_h = torch.randn(d_a, d_h, generator=g, dtype=dtype)
        v = torch.randn(d_a, generator=g, dtype=dtype)
        label = f"s {tuple(s.shape)}, h {tuple(h.shape)}, d_a = {d_a}, {str(dtype).replace('torch.', '')}"
        return Case((s, h, w_s, w_h, v), label=label)

    return [
        case((), 4, 3, 5, 6),
        case((2,), 5, 3, 4, 6, torch.float64),
        case((3,), 7, 2, 2, 8),
    ]


def _hidden(s, h, w_s, w_h):
    return (s @ w_s.T)[..., None, :] + h @ w_h.T  # (..., n, d_a)


def check_additive_score(additive_score) -> Verdict:
    """Chapter 1, exercise: Bahdanau's `additive_score(s, h, w_s, w_h, v)`, shape (..., n).

    Input classes that separate right from plausible wrong code, each in a case:
    no batch and a batch axis (the projected decoder state needs a positions
    axis, `[..., None, :]`, that works for both); d_s ≠ d_h with non-square
    weights (weights transposed or swapped raise or differ) and d_s = d_h
    (swapped weights run but differ); float64 (the dtype kept); d_a ≠ n
    (tanh inside, v after it, not a sum over d_a; no softmax on the scores).
    """
    mistakes = [
        Mistake(
            "no tanh",
            "Without the tanh the score is linear, vᵀW_s s + vᵀW_h h_j, and s adds the same amount to every "
            "key. Did you apply torch.tanh to the hidden layer before multiplying by v?",
            lambda s, h, w_s, w_h, v: _hidden(s, h, w_s, w_h) @ v,
        ),
        Mistake(
            "tanh after v",
            "The tanh acts on the d_a hidden units, then v sums them: did you write tanh(hidden) @ v, "
            "not tanh(hidden @ v)?",
            lambda s, h, w_s, w_h, v: torch.tanh(_hidden(s, h, w_s, w_h) @ v),
        ),
        Mistake(
            "v left out (the hidden units summed)",
            "The hidden units are weighted by v before they are added: did you use `@ v` rather than .sum(-1)?",
            lambda s, h, w_s, w_h, v: torch.tanh(_hidden(s, h, w_s, w_h)).sum(dim=-1),
        ),
        Mistake(
            "no positions axis on W_s s",
            "Your function works without a batch but raises with one: s @ w_s.T is (B, d_a) and "
            "h @ w_h.T is (B, n, d_a), which do not add up. Did you give the projected decoder state "
            "a positions axis, (s @ w_s.T)[..., None, :], so that it is added to every h_j?",
            lambda s, h, w_s, w_h, v: torch.tanh(s @ w_s.T + h @ w_h.T) @ v,
        ),
        Mistake(
            "softmax applied: weights returned instead of scores",
            "The score is what goes INTO the softmax; `attend` normalises it later. Did you return "
            "tanh(...) @ v without .softmax?",
            lambda s, h, w_s, w_h, v: (torch.tanh(_hidden(s, h, w_s, w_h)) @ v).softmax(dim=-1),
        ),
    ]
    return check_function(
        additive_score, _additive_score, _additive_cases(), mistakes, name="additive_score"
    )


def _attend_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    cases = []
    for lead, n, d_h, dtype in (((), 4, 3, torch.float32), ((2,), 5, 3, torch.float64), ((3,), 3, 4, torch.float32)):
        scores = 2 * torch.randn(*lead, n, generator=g, dtype=dtype)
        h = torch.randn(*lead, n, d_h, generator=g, dtype=dtype)
        cases.append(Case((scores, h), label=f"scores {tuple(scores.shape)}, h {tuple(h.shape)}"))
    return cases


def check_attend(attend) -> Verdict:
    """Chapter 1, exercise: `attend(scores, h)` returns ``(context, weights)``.

    Input classes that separate right from plausible wrong code, each in a case:
    unbatched scores (n,) and batched (B, n) (softmax over dim=-1, not 0; a
    plain `weights @ h` broadcasts over the batch); n ≠ d_h (the sum over the
    positions, not the features); scores of spread 2 (raw or sum-normalised
    scores, log-softmax); float64 (the dtype kept).
    """

    def no_softmax(scores, h):
        return (scores[..., None] * h).sum(dim=-2), scores

    def batch_matmul(scores, h):
        weights = scores.softmax(dim=-1)
        return weights @ h, weights  # (B, n) @ (B, n, d_h) broadcasts to (B, B, d_h)

    def swapped(scores, h):
        context, weights = _attend(scores, h)
        return weights, context

    mistakes = [
        Mistake(
            "softmax over the wrong axis",
            "With a batch, scores are (B, n): did you take the softmax over the positions, dim=-1?",
            lambda scores, h: ((scores.softmax(dim=0)[..., None] * h).sum(dim=-2), scores.softmax(dim=0)),
        ),
        Mistake(
            "no softmax: the raw scores used as weights",
            "Weights must be positive and sum to 1: did you apply .softmax(dim=-1) to the scores?",
            no_softmax,
        ),
        Mistake(
            "weights @ h broadcast over the batch",
            "For a batch, weights (B, n) @ h (B, n, d_h) is (B, B, d_h): every row's weights meet every "
            "sentence. Did you write (weights[..., None] * h).sum(dim=-2), or weights[..., None, :] @ h?",
            batch_matmul,
        ),
        Mistake(
            "context and weights returned in the wrong order",
            "The exercise asks for (context, weights): did you return them in that order?",
            swapped,
        ),
    ]
    return check_function(attend, lambda scores, h: _attend(scores, h), _attend_cases(), mistakes, name="attend")
