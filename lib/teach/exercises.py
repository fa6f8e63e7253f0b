"""Checking hand computations: answer checkers and rounding tables.

Introduced in chapter 3 (worked examples). A reader works an attention example
by hand, types the answer in, and `check_attention` (or, one step earlier,
`check_attention_weights`) says whether it is right and, if not, which entry is
off, without giving the exact value away unless asked (``reveal=True``). When
the answer is one of the classic slips (the scale left out, divided by d_k, the
softmax over the wrong axis, weights rounded before the last step) the message
names it. `check_answer` does the same for any other number grid the chapter
asks for (a row of W^O's output, say). A NaN entry is never right.
`compare_table` (not used by a chapter; kept for instructors) prints
hand-rounded values next to the exact ones.

Predict first: a chapter's answer cell starts as ``my_… = None``, and every
checker here (and `lib.teach.checkers`' by-hand ones) answers ``None`` with
`NOT_ANSWERED`, a prompt and no verdict, so the stored page shows no answer,
right or wrong, before the reader types one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lib._checks import shape
from lib.model.attention import check_qkv, scaled_dot_product_attention

__all__ = [
    "AttentionSteps", "attention_steps", "CheckResult", "NOT_ANSWERED", "check_answer", "check_attention",
    "check_attention_weights", "compare_table", "text_table",
]


def _as_matrix(name: str, value: object) -> torch.Tensor:
    """A number grid (tensor or nested list) as a 2-D float64 tensor; a clear error otherwise."""
    if isinstance(value, torch.Tensor):
        t = value.detach().to(torch.float64)
    else:
        try:
            t = torch.tensor(value, dtype=torch.float64)
        except OverflowError as err:  # an int beyond the largest float
            raise ValueError(f"{name} holds a number too large for a float: {err}") from None
        except (TypeError, ValueError, RuntimeError) as err:
            if "Overflow" in str(err):  # torch's message for an int beyond 64 bits
                raise ValueError(f"{name} holds a number too large for a float") from None
            raise TypeError(f"{name} must be a tensor or a nested list of numbers, got {type(value).__name__}") from err
    if t.dim() == 0:
        t = t.reshape(1, 1)  # a single number
    if t.dim() == 1:
        t = t.unsqueeze(0)  # a single row, as the reader would write it
    if t.dim() != 2:
        raise ValueError(f"{name} must be a matrix (rows, columns), got shape {shape(t)}")
    return t


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate of one attention computation, in the order a hand calculation meets them."""

    scores: torch.Tensor  # Q Kᵀ, (m, n)
    scaled: torch.Tensor  # Q Kᵀ / √d_k, (m, n)
    weights: torch.Tensor  # softmax of each row, (m, n)
    output: torch.Tensor  # weights · V, (m, d_v)


def attention_steps(q, k, v) -> AttentionSteps:
    """softmax(Q Kᵀ / √d_k) V in four separate steps, in float64, keeping each one.

    Chapter 3 reveals these after the reader has computed each step by hand.
    The steps are written out here independently of
    `scaled_dot_product_attention`, so the two can check each other. q (m, d_k), k (n, d_k), v (n, d_v): tensors
    or nested lists.
    """
    q, k, v = _as_matrix("q", q), _as_matrix("k", k), _as_matrix("v", v)
    check_qkv(q, k, v)
    scores = q @ k.T  # (m, n)
    scaled = scores / math.sqrt(k.shape[1])  # (m, n)
    exp = torch.exp(scaled - scaled.max(dim=1, keepdim=True).values)  # shift: same softmax, no overflow
    weights = exp / exp.sum(dim=1, keepdim=True)  # (m, n)
    return AttentionSteps(scores, scaled, weights, weights @ v)


@dataclass(frozen=True)
class CheckResult:
    """The verdict on an answer: ``bool(result)`` is True when it is right."""

    correct: bool
    message: str
    expected: torch.Tensor
    wrong_entries: tuple[tuple[int, int], ...] = ()
    slip: str | None = None  # the name of the recognised slip, if any

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return self.message


NOT_ANSWERED = "Not answered yet: replace None with your answer and run this cell."


def not_answered(expected) -> CheckResult:
    """The result for an answer still ``None``: not right, no verdict, nothing revealed."""
    return CheckResult(False, NOT_ANSWERED, expected)


@dataclass(frozen=True)
class _Slip:
    """A classic wrong way to do the computation, and the value it gives."""

    name: str
    hint: str
    value: torch.Tensor


def _weights(q, k, mask, divisor: float, dim: int = -1) -> torch.Tensor:
    """softmax(q kᵀ / divisor) along `dim`, masked keys at zero weight."""
    scores = q @ k.T / divisor
    if mask is not None:
        scores = scores.masked_fill(~torch.as_tensor(mask, dtype=torch.bool), float("-inf"))
    return torch.softmax(scores, dim=dim).nan_to_num(0.0)


def _weight_slips(q, k, mask) -> list[_Slip]:
    d_k = k.shape[1]
    root = math.sqrt(d_k)
    return [
        _Slip("no √d_k scaling",
              f"Did you divide the scores by √d_k = {root:.4f} before the softmax?",
              _weights(q, k, mask, 1.0)),
        _Slip("divided by d_k instead of √d_k",
              f"The scale is the square root of d_k = {d_k}: did you divide by {root:.4f}?",
              _weights(q, k, mask, float(d_k))),
        _Slip("softmax down each column instead of along each row",
              "Each query's weights (one row) must sum to 1 over the keys: did you normalise "
              "along the row?",
              _weights(q, k, mask, root, dim=0)),
    ]


def _verdict(what: str, answer: torch.Tensor, expected: torch.Tensor, atol: float, reveal: bool,
             slips: list[_Slip] = ()) -> CheckResult:
    if answer.shape != expected.shape:
        raise ValueError(
            f"your {what} has shape {shape(answer)}, but it must have shape {shape(expected)}"
        )
    off = ~((answer - expected).abs() <= atol)  # NaN is off too
    if not bool(off.any()):
        return CheckResult(True, f"Right: every entry of the {what} is within {atol:g} of the exact value.", expected)
    entries = tuple((int(i), int(j)) for i, j in off.nonzero().tolist())
    i, j = entries[0]
    nan = torch.isnan(answer)
    if answer.numel() == 1:  # a single number: no index to name
        message = f"Wrong: the {what} is off by more than {atol:g}."
        if bool(nan.any()):
            message += " It is NaN: a NaN is never right (did a softmax overflow, or divide 0 by 0?)."
        yours, first = f"Your {what} is", "It is"
    else:
        # a single row is a vector: entry j; a matrix keeps [row, column]
        name = (lambda a, b: f"{b}") if answer.shape[0] == 1 else (lambda a, b: f"[{a}, {b}]")
        where = ", ".join(name(a, b) for a, b in entries)
        noun = "entry" if len(entries) == 1 else "entries"
        verb = "is" if len(entries) == 1 else "are"
        index = "0-based" if answer.shape[0] == 1 else "0-based [row, column]"
        message = (
            f"Wrong: {len(entries)} of {answer.numel()} entries of the {what} {verb} off by more "
            f"than {atol:g}: {noun} {where} ({index})."
        )
        if bool(nan.any()):
            a, b = (int(x) for x in nan.nonzero()[0].tolist())
            message += (
                f" {int(nan.sum())} of them are NaN, the first at entry {name(a, b)}: a NaN is never"
                " right (did a softmax overflow, or divide 0 by 0?)."
            )
        yours, first = f"Your entry {name(i, j)} is", f"Entry {name(i, j)} is"
    for slip in slips:
        if slip.value.shape == answer.shape and bool(((answer - slip.value).abs() <= atol).all()):
            message += f" These numbers match a classic slip: {slip.name}. {slip.hint}"
            return CheckResult(False, message, expected, entries, slip.name)
    if reveal:
        message += f" {first} {answer[i, j].item():.4f}; the exact value is {expected[i, j].item():.4f}."
    else:
        message += (
            f" {yours} {answer[i, j].item():.4f}: recompute it"
            " (reveal=True shows the exact value)."
        )
    return CheckResult(False, message, expected, entries)


def check_answer(answer, exact, atol: float = 1e-2, what: str = "answer", reveal: bool = False,
                 slips: dict | None = None) -> CheckResult:
    """Check a hand-computed number grid against the exact one, like `check_attention`.

    For any result the chapter asks for besides the attention output and weights
    (a projection, a row of the output of W^O, a parameter count). ``answer`` and
    ``exact``: tensors or nested lists of the same shape; a flat list is one row.
    ``slips``: the chapter's likely wrong answers, ``{name: (value, hint)}``; an
    answer within ``atol`` of one (and not right) is named with its hint.
    """
    exact = _as_matrix("exact", exact)
    if not atol > 0:
        raise ValueError(f"atol must be positive, got {atol}")
    if slips is not None and not isinstance(slips, dict):
        raise TypeError(f"slips must be a dict {{name: (value, hint)}}, got {type(slips).__name__}")
    named = []
    for name, item in (slips or {}).items():
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)):
            raise TypeError(f"slips[{name!r}] must be a (value, hint) pair")
        value = _as_matrix(f"slips[{name!r}]", item[0])
        if value.shape != exact.shape:
            raise ValueError(f"slips[{name!r}] has shape {shape(value)}, the exact value {shape(exact)}")
        named.append(_Slip(name, item[1], value))
    if answer is None:  # the chapter's placeholder: not answered yet
        return not_answered(exact)
    answer = _as_matrix("answer", answer)
    if answer.shape != exact.shape:
        raise ValueError(
            f"the answer must have the shape of the exact value, {shape(exact)}, got shape {shape(answer)}"
        )
    return _verdict(what, answer, exact, atol, reveal, named)


def check_attention(q, k, v, answer, atol: float = 1e-2, mask=None, reveal: bool = False) -> CheckResult:
    """Check a hand-computed softmax(q kᵀ / √d_k) v against `scaled_dot_product_attention`.

    q (m, d_k), k (n, d_k), v (n, d_v) and ``answer`` (m, d_v) may be tensors or
    nested lists; a single row may be given as a flat list. An entry counts as
    right when it is within ``atol`` of the exact value (the default 0.01 suits
    two-decimal hand work). A wrong answer's message names every entry that
    is off; only with ``reveal=True`` does it also give the exact value.
    Shapes that do not fit raise ``ValueError`` before anything is computed.
    """
    q, k, v = _as_matrix("q", q), _as_matrix("k", k), _as_matrix("v", v)
    check_qkv(q, k, v)  # q and k share d_k, k and v share n
    if not atol > 0:
        raise ValueError(f"atol must be positive, got {atol}")
    if answer is None:  # the chapter's placeholder: not answered yet
        return not_answered(scaled_dot_product_attention(q, k, v, mask)[0])
    answer = _as_matrix("answer", answer)
    if answer.shape != (q.shape[0], v.shape[1]):
        raise ValueError(
            f"the output of attention has one row per query and one column per value feature: "
            f"q is {shape(q)} and v is {shape(v)}, so the answer must have shape "
            f"({q.shape[0]}, {v.shape[1]}), got shape {shape(answer)}"
        )
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    slips = [_Slip(slip.name, slip.hint, slip.value @ v) for slip in _weight_slips(q, k, mask)]
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    slips.append(_Slip(
        "weights rounded to two decimals before the last step",
        "Keep three or four digits of the weights until the last step, then round.",
        weights.round(decimals=2) @ v,
    ))
    return _verdict("output", answer, expected, atol, reveal, slips)


def check_attention_weights(q, k, answer, atol: float = 1e-2, mask=None, reveal: bool = False) -> CheckResult:
    """Check hand-computed weights softmax(q kᵀ / √d_k), shape (m, n), like `check_attention`."""
    q, k = _as_matrix("q", q), _as_matrix("k", k)
    check_qkv(q, k, k)
    if not atol > 0:
        raise ValueError(f"atol must be positive, got {atol}")
    if answer is None:  # the chapter's placeholder: not answered yet
        return not_answered(scaled_dot_product_attention(q, k, k, mask)[1])
    answer = _as_matrix("answer", answer)
    if answer.shape != (q.shape[0], k.shape[0]):
        raise ValueError(
            f"the weights have one row per query and one column per key: q is {shape(q)} and "
            f"k is {shape(k)}, so the answer must have shape ({q.shape[0]}, {k.shape[0]}), got shape {shape(answer)}"
        )
    _, expected = scaled_dot_product_attention(q, k, k, mask)
    return _verdict("weights", answer, expected, atol, reveal, _weight_slips(q, k, mask))


def text_table(header: list[str], rows: list[list[object]]) -> str:
    """Rows as an aligned plain-text table (right-aligned columns), for deterministic notebook output."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    if any(len(row) != len(header) for row in cells):
        raise ValueError(f"every row needs {len(header)} cells, one per header entry")
    widths = [max(len(row[c]) for row in cells) for c in range(len(header))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def compare_table(text_values, exact, decimals: int = 2) -> str:
    """A table of a text's hand-rounded values beside the exact ones, entry by entry.

    ``decimals`` is how many decimals the text printed. The verdict is "rounds
    right" when the text's value is the exact one rounded to that many decimals
    (|difference| <= half a unit in the last place), and "OFF" otherwise.
    """
    text_values, exact = _as_matrix("text_values", text_values), _as_matrix("exact", exact)
    if text_values.shape != exact.shape:
        raise ValueError(f"text_values {shape(text_values)} and exact {shape(exact)} must have the same shape")
    half_unit = 0.5 * 10.0**-decimals + 1e-9
    rows = []
    for i in range(exact.shape[0]):
        for j in range(exact.shape[1]):
            t, e = text_values[i, j].item(), exact[i, j].item()
            verdict = "rounds right" if abs(t - e) <= half_unit else "OFF"
            rows.append([f"[{i},{j}]", f"{t:.{decimals}f}", f"{e:.4f}", f"{t - e:+.4f}", verdict])
    return text_table(["entry", "text", "exact", "text - exact", "verdict"], rows)

