"""Checkers for chapter 2's coding exercises (attention math).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_attention.py).

The exercises, in the chapter's order:

- `softmax(scores)` along the last axis (the keys), without PyTorch's softmax;
- `scaled_attention(q, k, v, mask=None)`, the output of
  softmax(q kᵀ / √d_k) v with an optional bool mask (True = may attend); a
  query that may see no key gets zero weights, as in `lib`;
- `causal_mask(n)`, the (n, n) mask of a decoder's self-attention;
- `padding_mask(tokens, pad_id)`, the (B, 1, 1, n) mask that hides padding.

And the numbers of exercise 2 on paper (`check_score_variance`,
`check_score_divisor`): Var(q·k) when the entries have variance σ², and the
divisor that brings it back to 1.
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
import torch.nn.functional as F

from lib.model.attention import causal_mask as _causal_mask
from lib.model.attention import padding_mask as _padding_mask
from lib.model.attention import scaled_dot_product_attention as _attention
from lib.teach.checkers._numbers import check_number, real_number
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.teach.exercises import CheckResult

__all__ = ["check_softmax", "check_scaled_attention", "check_causal_mask", "check_padding_mask",
           "check_score_variance", "check_score_divisor"]


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
    # All-negative rows far below 0: exp underflows to 0/0 unless the row maximum is subtracted.
    cases.append(Case((torch.tensor([[-1000.0, -999.0, -1001.0], [-3.0, -1.0, -2.0]],
                                    dtype=torch.float64),), label="all-negative scores, float64"))
    # A wide row, spanning more than float32's exp limit (~88) on both sides of its
    # mean: only the row MAXIMUM makes every exponent <= 0. Shifting by the minimum
    # overflows (inf/inf = NaN), shifting by the mean overflows too; both pass every
    # narrower row above.
    cases.append(Case((torch.tensor([[0.0, 200.0, -200.0], [50.0, -150.0, 10.0]]),),
                      label="wide rows [0, 200, -200], float32"))
    return cases


class SoftmaxCalled(RuntimeError):
    """Raised while the learner's softmax runs, if it calls PyTorch's own softmax."""


_SOFTMAXES = (
    (torch, "softmax"), (torch.Tensor, "softmax"), (F, "softmax"), (torch.special, "softmax"),
    (torch, "log_softmax"), (torch.Tensor, "log_softmax"), (F, "log_softmax"),
    (torch.special, "log_softmax"), (torch.nn.Softmax, "forward"), (torch.nn.LogSoftmax, "forward"),
)


@contextlib.contextmanager
def _refusing(owners, refuse):
    """Each `getattr(owner, name)` of `owners` is `refuse` inside this block, and is
    restored after it, whatever the learner's code raised."""
    saved = [(owner, name, getattr(owner, name)) for owner, name in owners]
    try:
        for owner, name, _ in saved:
            setattr(owner, name, refuse)
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@contextlib.contextmanager
def _softmax_forbidden():
    """PyTorch's softmax functions raise `SoftmaxCalled` inside this block."""

    def refuse(*args, **kwargs):
        raise SoftmaxCalled("the exercise asks for the softmax written with torch.exp; "
                            "torch.softmax (or .softmax, F.softmax) was called")

    with _refusing(_SOFTMAXES, refuse):
        yield


def _shifted_softmax(scores, shift):
    e = torch.exp(scores - shift)
    return e / e.sum(dim=-1, keepdim=True)


def _called_softmax(scores):
    raise SoftmaxCalled("torch.softmax was called")


def check_softmax(softmax) -> Verdict:
    """Chapter 2, exercise: `softmax(scores)` along the last axis (the keys), without torch.softmax.

    The learner's function runs with PyTorch's softmax functions disabled (every
    route: `torch`, `Tensor`, `F`, `torch.special`, `nn.Softmax`, and the
    log-softmax of each): a call to one of them is named as a mistake.

    Input classes that separate a right softmax from plausible wrong ones, each
    covered by a case:

    - rows of different lengths and a batch axis ((3, 4), (2, 3, 5)): the axis
      (dim=-1, not 0) and keepdim;
    - float64 input: the result keeps the input's dtype;
    - scores near 1000: overflow unless a shift is subtracted first;
    - a row far below another row: the maximum of the whole tensor underflows it;
    - all-negative rows near -1000: 0/0 without a shift;
    - wide float32 rows ([0, 200, -200]) spanning more than exp's limit (~88)
      on both sides: shifting by the row minimum or mean (or any shift other
      than the maximum) overflows to NaN there.
    """
    if not callable(softmax):
        raise TypeError(f"the checker needs your function itself, got {type(softmax).__name__}")

    def without_torch_softmax(scores):
        with _softmax_forbidden():
            return softmax(scores)

    mistakes = [
        Mistake(
            "torch.softmax called",
            "The exercise is to write the softmax yourself: did you call torch.softmax, .softmax or "
            "F.softmax? Use torch.exp, and divide by the sum of each row.",
            _called_softmax,
        ),
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
            "shifted by something other than the row maximum",
            "On a wide row like [0, 200, -200], exp overflows unless every exponent is <= 0: only "
            "the row MAXIMUM guarantees that. Did you subtract the row's minimum or mean?",
            lambda s: _shifted_softmax(s, s.amin(dim=-1, keepdim=True)),
        ),
        Mistake(
            "shifted by something other than the row maximum",
            "On a wide row like [0, 200, -200], exp overflows unless every exponent is <= 0: only "
            "the row MAXIMUM guarantees that. Did you subtract the row's minimum or mean?",
            lambda s: _shifted_softmax(s, s.mean(dim=-1, keepdim=True)),
        ),
        Mistake(
            "no normalisation",
            "exp(s) alone is not a distribution: did you divide by the sum of each row?",
            lambda s: torch.exp(s),
        ),
        Mistake(
            "no normalisation",
            "exp(s - max) alone is not a distribution: did you divide by the sum of each row?",
            lambda s: torch.exp(s - s.amax(dim=-1, keepdim=True)),
        ),
        Mistake(
            "the maximum of the whole tensor subtracted, not each row's",
            "A row far below the overall maximum underflows to 0/0. Did you use "
            "s.amax(dim=-1, keepdim=True) rather than s.max()?",
            lambda s: torch.exp(s - s.max()) / torch.exp(s - s.max()).sum(dim=-1, keepdim=True),
        ),
    ]
    return check_function(without_torch_softmax, lambda s: torch.softmax(s, dim=-1), _softmax_cases(),
                          mistakes, name="softmax")


# --- scaled attention --------------------------------------------------------------------


def _attention_cases() -> list[Case]:
    """Several shapes (m ≠ n, batch and heads), both masks, float32 and float64.

    The last case has a query whose every key is masked: the exercise asks for
    zero weights there, as in `lib`. That case tells a -inf fill (NaN there
    unless guarded) from a -1e9 fill (a plain average of the values there).
    """
    g = torch.Generator().manual_seed(0)

    def qkv(lead, m, n, d_k, d_v, dtype=torch.float32):
        return tuple(
            torch.randn(*lead, rows, width, generator=g, dtype=dtype)
            for rows, width in ((m, d_k), (n, d_k), (n, d_v))
        )

    pad = _padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]), pad_id=0)  # (2, 1, 1, 5)
    empty = torch.tensor([[True, False, True, True], [False] * 4, [True, True, False, False]])
    return [
        Case(qkv((), 3, 5, 4, 2), label="m=3, n=5, d_k=4, no mask"),
        Case(qkv((2,), 4, 4, 16, 3, torch.float64), label="batch of 2, d_k=16, float64, no mask"),
        Case(qkv((2, 3), 5, 5, 8, 4), {"mask": _causal_mask(5)}, label="(B, h)=(2, 3), causal mask"),
        Case(qkv((2, 3), 5, 5, 8, 4), {"mask": pad}, label="(B, h)=(2, 3), padding mask"),
        Case(qkv((2, 1), 5, 5, 4, 2, torch.float64), {"mask": _causal_mask(5) & pad},
             label="causal and padding masks, float64"),
        Case(qkv((), 3, 4, 4, 3), {"mask": empty}, label="query 1 may see no key, float32"),
    ]


def _attention_reference(q, k, v, mask=None):
    return _attention(q, k, v, mask)[0]


def _softmax_attention(q, k, v, mask=None, *, divisor=None, dim=-1, mask_after=False, invert=False,
                       fill=float("-inf"), guard=True, multiply=False):
    """The mistakes below, as variations of one implementation.

    guard: give a query that may see no key zero weights (else a -inf fill leaves NaN there).
    """
    scores = q @ k.transpose(-2, -1)
    scores = scores / (math.sqrt(q.shape[-1]) if divisor is None else divisor)
    if mask is not None and multiply:
        scores = scores * mask
    elif mask is not None and not mask_after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    weights = scores.softmax(dim=dim)
    if mask is not None and mask_after:
        weights = weights.masked_fill(~mask, 0.0)
    if mask is not None and guard:
        weights = weights.nan_to_num(0.0)
    return weights @ v


class AttentionCalled(RuntimeError):
    """Raised while the learner's attention runs, if it calls a ready-made attention."""


_ATTENTIONS = (
    (F, "scaled_dot_product_attention"), (torch.nn.MultiheadAttention, "forward"),
)


@contextlib.contextmanager
def _attention_forbidden():
    """PyTorch's and `lib`'s attention functions raise `AttentionCalled` inside this block."""
    import lib
    import lib.model
    import lib.model.attention

    def refuse(*args, **kwargs):
        raise AttentionCalled("the exercise asks for attention written with @ and softmax; "
                              "a ready-made attention function was called")

    owners = [(owner, name) for owner, name in _ATTENTIONS] + [
        (module, "scaled_dot_product_attention") for module in (lib, lib.model, lib.model.attention)
    ]
    with _refusing(owners, refuse):
        yield


def _called_attention(*args, **kwargs):
    raise AttentionCalled("a ready-made attention was called")


def check_scaled_attention(scaled_attention) -> Verdict:
    """Chapter 2, exercise: `scaled_attention(q, k, v, mask=None)` returns softmax(q kᵀ/√d_k) v.

    q (..., m, d_k), k (..., n, d_k), v (..., n, d_v), mask bool broadcastable
    to (..., m, n), True where the query may attend. Returns (..., m, d_v).
    The learner's function runs with `F.scaled_dot_product_attention`,
    `nn.MultiheadAttention` and `lib.scaled_dot_product_attention` disabled: a
    call to one of them is named.

    Input classes that separate right from plausible wrong code, each in a case:
    m ≠ n and d_k ≠ d_v (scale by √d_k, not √n, √m or √d_v; softmax over the
    keys); no leading axes and (B, h) leading axes (`.transpose(-2, -1)`, not
    `.T`); float64 (dtype kept); a causal mask and a padding mask (the mask
    convention True = may attend, applied before the softmax); both combined;
    and a query that may see no key (zero output: a -inf fill needs a guard, a
    -1e9 fill averages every value, an inverted mask is caught there too).
    """
    if not callable(scaled_attention):
        raise TypeError(f"the checker needs your function itself, got {type(scaled_attention).__name__}")

    def without_ready_made(*args, **kwargs):
        with _attention_forbidden():
            return scaled_attention(*args, **kwargs)

    mistakes = [
        Mistake(
            "a ready-made attention called",
            "The exercise is to write attention yourself: did you call F.scaled_dot_product_attention, "
            "nn.MultiheadAttention or lib.scaled_dot_product_attention? Use @, a softmax and the mask.",
            _called_attention,
        ),
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
            "divided by √d_v instead of √d_k",
            "The scale is the width of the queries and keys, d_k = q.shape[-1], not the values' "
            "width v.shape[-1]: which did you use?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, divisor=math.sqrt(v.shape[-1])),
        ),
        Mistake(
            "softmax over the wrong axis",
            "Each query's weights must sum to 1 over the keys: did you take the softmax along dim=-1?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, dim=-2),
        ),
        Mistake(
            "NaN for a query that may see no key",
            "softmax(-inf, ..., -inf) is 0/0 = NaN. The exercise, like `lib`, gives such a query zero "
            "weights: did you zero the rows where mask.any(dim=-1) is False, after the softmax?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, guard=False),
        ),
        Mistake(
            "masked scores filled with -1e9 instead of -inf",
            "Your result is right except for a query that may see no key: with a -1e9 fill it averages "
            "all the values instead of giving zeros (and -1e9 overflows float16). Did you fill with "
            "float('-inf') and zero the rows with no allowed key?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, fill=-1e9, guard=False),
        ),
        Mistake(
            "mask multiplied into the scores",
            "scores * mask sets the hidden scores to 0, and exp(0) = 1 is still a weight. Did you fill "
            "them with -inf, scores.masked_fill(~mask, float('-inf'))?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, multiply=True, guard=False),
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
            "mask convention inverted",
            "In `lib` a mask is True where the query MAY attend: did you fill where the mask is True? "
            "Fill where it is False, scores.masked_fill(~mask, float('-inf')), and zero the rows "
            "with no allowed key.",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, invert=True, fill=-1e9,
                                                          guard=False),
        ),
        Mistake(
            "mask applied after the softmax",
            "Zeroing weights after the softmax leaves rows that no longer sum to 1. Did you set the masked "
            "scores to -inf before the softmax?",
            lambda q, k, v, mask=None: _softmax_attention(q, k, v, mask, mask_after=True),
        ),
    ]
    # A learner who makes one of these slips often leaves a row or column of -inf
    # unguarded too (NaN there): the same slip, named the same way.
    unguarded = {
        "no √d_k scaling": dict(divisor=1.0),
        "divided by d_k instead of √d_k": dict(divisor="d_k"),
        "divided by √d_v instead of √d_k": dict(divisor="√d_v"),
        "softmax over the wrong axis": dict(dim=-2),
        "mask convention inverted": dict(invert=True),
    }
    mistakes += [
        Mistake(m.name, m.hint, functools.partial(_unguarded, **unguarded[m.name]))
        for m in mistakes
        if m.name in unguarded
    ]
    return check_function(
        without_ready_made, _attention_reference, _attention_cases(), mistakes, name="scaled_attention"
    )


def _unguarded(q, k, v, mask=None, *, divisor=None, **kwargs):
    """A slip of `_softmax_attention` with the -inf fill left unguarded (NaN where a softmax is 0/0)."""
    if divisor == "d_k":
        divisor = q.shape[-1]
    elif divisor == "√d_v":
        divisor = math.sqrt(v.shape[-1])
    return _softmax_attention(q, k, v, mask, divisor=divisor, guard=False, **kwargs)


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
            "0/1 float mask instead of bool",
            "`lib` refuses non-bool masks (TypeError): a 1 = keep float mask, or an additive -inf one, "
            "is the classic source of silent bugs. Did you build it with dtype=torch.bool?",
            lambda n: torch.ones(n, n).tril(),
        ),
        Mistake(
            "0/1 integer mask instead of bool",
            "`lib` refuses non-bool masks (TypeError). Did you build it with dtype=torch.bool, or call .bool()?",
            lambda n: torch.ones(n, n, dtype=torch.long).tril(),
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
    """Pad ids 0, 1, 3 and 9; left and right padding; real ids above AND below the pad
    id (GPT-2 pads with its largest id, 50256): a comparison `tokens > pad_id` is
    right only when every real id is larger than the pad id."""
    return [
        Case((torch.tensor([[5, 7, 2, 9, 0], [4, 8, 0, 0, 0]]), 0), label="pad_id = 0"),
        Case((torch.tensor([[1, 1, 2, 3]]), 1), label="pad_id = 1, left padding"),
        Case((torch.tensor([[3, 5, 6], [4, 3, 3], [7, 8, 9]]), 3), label="pad_id = 3"),
        Case((torch.tensor([[4, 1, 9, 9], [0, 12, 2, 9]]), 9),
             label="pad_id = 9, real ids below and above it"),
    ]


def check_padding_mask(padding_mask) -> Verdict:
    """Chapter 2, exercise: `padding_mask(tokens, pad_id)`, (B, 1, 1, n), False at padding.

    Input classes that separate right from plausible wrong masks, each in a case:
    a batch of several rows (the axes (B, 1, 1, n), not (B, n) or (B, 1, n, 1));
    a pad id other than 0 (pad hard-coded); real ids below the pad id (`>`
    instead of `!=`); left and right padding; the result's dtype (bool exactly,
    not 0/1 integers or floats).
    """
    mistakes = [
        Mistake(
            "ids compared with > pad_id instead of !=",
            "The pad id need not be the smallest id (GPT-2 pads with its largest, 50256): did you "
            "compare tokens > pad_id? A real token is any id that is not pad_id: tokens != pad_id.",
            lambda t, p: (t > p)[:, None, None, :],
        ),
        Mistake(
            "True on the padding instead of the real tokens",
            "In `lib` True means MAY attend: did you compare with != pad_id rather than == pad_id?",
            lambda t, p: (t == p)[:, None, None, :],
        ),
        Mistake(
            "0/1 integer mask instead of bool",
            "`lib` refuses non-bool masks (TypeError). Did you return the comparison tokens != pad_id "
            "itself, a bool tensor, without .long() or .int()?",
            lambda t, p: (t != p).long()[:, None, None, :],
        ),
        Mistake(
            "0/1 float mask instead of bool",
            "`lib` refuses non-bool masks (TypeError): a 1 = keep float mask is the classic source of "
            "silent bugs. Did you return the bool comparison tokens != pad_id, without .float()?",
            lambda t, p: (t != p).float()[:, None, None, :],
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


# --- exercise 2 on paper: Var(q·k) with entries of variance σ² ---------------------------


def _positive(name: str, value) -> float:
    value = real_number(name, value)
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def check_score_variance(my_variance, sigma2: float = 4.0, d_k: int = 16) -> CheckResult:
    """Chapter 2, exercise 2: Var(q·k) = d_k σ⁴ for independent mean-0 entries of variance σ²."""
    sigma2, d_k = _positive("sigma2", sigma2), _positive("d_k", d_k)
    return check_number(my_variance, d_k * sigma2**2, atol=0.5, what="variance of q·k",
                        name="my_variance", slips={
        "σ² not squared (d_k σ²)": (
            d_k * sigma2,
            "What is the variance of one product q_c k_c when each factor has variance σ²?"),
        "one product's variance σ⁴, not the sum over d_k": (
            sigma2**2,
            "q·k adds d_k independent products: how do their variances combine? (If you took a "
            "square root, σ²√d_k: the question asks for the variance.)"),
        "the standard deviation σ²√d_k, not the variance": (
            sigma2 * math.sqrt(d_k), "Did you take a square root? The question asks for the "
            "variance."),
        "the variances of q_c and k_c added, not multiplied": (
            d_k * 2 * sigma2,
            "For independent mean-0 factors, is Var(q_c k_c) the sum or the product of their "
            "variances?"),
    })


def check_score_divisor(my_divisor, sigma2: float = 4.0, d_k: int = 16) -> CheckResult:
    """Chapter 2, exercise 2: the divisor σ²√d_k that brings Var(q·k) = d_k σ⁴ back to 1."""
    sigma2, d_k = _positive("sigma2", sigma2), _positive("d_k", d_k)
    return check_number(my_divisor, sigma2 * math.sqrt(d_k), atol=0.01, what="divisor",
                        name="my_divisor", slips={
        "√d_k alone, σ² left out": (
            math.sqrt(d_k),
            "√d_k undoes a variance of d_k. What is the variance here?"),
        "σ√d_k: σ² not squared in the variance": (
            math.sqrt(sigma2 * d_k),
            "Is the variance of each product q_c k_c σ², or something else?"),
        "the variance itself, not its square root": (
            d_k * sigma2**2,
            "Dividing by c divides the variance by c²: should c be the variance, or its square "
            "root?"),
    })
