"""Checkers for chapter 4's coding exercises (multi-head attention; see lib.teach.checking).

- `check_split_heads`: ``split_heads(x, n_heads)`` cuts (B, n, d_model) into
  (B, h, n, d_k), head i taking features i·d_k ... (i+1)·d_k - 1;
- `check_multi_head_attention`: the whole layer's forward pass with the four
  projection matrices given, masks with True = may attend. Its cases (float32
  and float64; no mask, causal and padding masks; m = n and m != n) separate the
  classic slips: no scaling, d_k for √d_k, the softmax over the queries, the mask
  left out, inverted (with -inf or -1e9) or added, the weights transposed.

And the numbers of the exercises on paper: `check_mha_parameters` (the layer's
parameters, for any h), `check_attention_flops` and `check_flops_crossover` (the
floating-point operations of its matrix products, and the n from which the n²
term dominates), and `check_previous_word` and `check_same_word_position` (the
hand-built two-head layer's output on "the cat sat on the mat").

The references are written here with plain torch operations; the chapter shows
that `lib.MultiHeadAttention` computes the same function.
Tests: tests/test_checkers_heads.py.
"""

from __future__ import annotations

import math

import torch

from lib.teach.checkers._dtypes import with_exact_dtype
from lib.teach.checkers._numbers import check_number, real_number, real_vector
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.teach.exercises import CheckResult, check_answer

__all__ = ["check_split_heads", "check_multi_head_attention", "check_mha_parameters",
           "check_attention_flops", "check_flops_crossover", "check_previous_word",
           "check_same_word_position"]


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
    """Chapter 4, exercise: ``split_heads(x, n_heads)``: (B, n, d_model) -> (B, h, n, d_k).

    Input classes that separate right from plausible wrong code, each in a case:
    B > 1 and n ≠ h ≠ d_k (a straight view, heads after the positions, the
    features cut as (d_k, h), d_k taken from n); n_heads = 1; float64 (the
    dtype kept exactly).
    """
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

    Input classes that separate right from plausible wrong code, each in a case:
    self-attention with no mask; a causal (m, n) mask and a padding mask
    (B, 1, 1, n) (the mask passed on, read the right way, filled not added);
    cross-attention with m ≠ n (scale from d_k, not the key length; softmax over
    the keys); h > 1 with d_k > 1 (heads merged as (h, d_k)); non-symmetric
    weights (x W, not x Wᵀ); float32 and float64.
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


# ---------------------------------------------------------------------------
# On paper: the layer's parameters and operations


def _whole(name: str, value) -> int:
    value = real_number(name, value)
    if value != int(value) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value}")
    return int(value)


def check_mha_parameters(my_count, d_model: int = 768, n_heads: int = 12,
                         compared_with: int | None = None) -> CheckResult:
    """Chapter 4, exercise 1: the parameters of one multi-head attention layer, 4d² + 4d.

    W^Q, W^K, W^V, W^O, each d_model × d_model with a bias of d_model, whatever h
    is. ``compared_with``: the h of the learner's previous answer, whose count
    scaled by h / compared_with is a slip.
    """
    d, h = _whole("d_model", d_model), _whole("n_heads", n_heads)
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by n_heads={h}")
    full = 4 * d * d + 4 * d
    slips = {
        "biases left out": (4 * d * d, "Each of the four projections has a bias of d_model."),
        "W^O left out": (3 * d * d + 3 * d,
                         "The heads' concatenation goes through W^O (and its bias) too."),
        "W^O and the biases left out": (3 * d * d, "Count W^O, and a bias for each projection."),
    }
    if h > 1:
        slips["a full d_model × d_model W^Q, W^K, W^V per head"] = (
            h * 3 * (d * d + d) + d * d + d,
            "Each head uses d_k = d_model / h columns of W^Q, W^K, W^V, not a matrix of its own.")
        slips["one head's share"] = (full / h, "The question asks for the whole layer, all heads.")
    if compared_with is not None and _whole("compared_with", compared_with) != h:
        slips["the count scaled with the number of heads"] = (
            full * h / compared_with,
            "Does the size of W^Q depend on h, or do the heads only split its columns?")
    return check_number(my_count, full, atol=0.5, what=f"number of parameters for h = {h}",
                        name="my_count", slips=slips)


def check_attention_flops(my_flops, n: int = 100, d_model: int = 512,
                          n_heads: int = 8) -> CheckResult:
    """Chapter 4, exercise 2: floating-point operations of one self-attention layer's products.

    Four projections, 2·n·d² each, plus QKᵀ and αV, 2·n²·d each over all heads:
    8nd² + 4n²d, as FlopCounterMode counts them (biases and softmax left out).
    """
    n, d, h = _whole("n", n), _whole("d_model", d_model), _whole("n_heads", n_heads)
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by n_heads={h}")
    proj, mix = 8 * n * d * d, 4 * n * n * d
    slips = {
        "multiply-adds, not operations": (
            (proj + mix) / 2, "A multiply-add is two floating-point operations."),
        "the projections only": (proj, "QKᵀ and αV are matrix products too."),
        "QKᵀ and αV only": (mix, "The four projections are matrix products too."),
        "W^O left out": (6 * n * d * d + mix, "The concatenated heads go through W^O too."),
        "QKᵀ and αV of one head only": (
            proj + mix / h, "Every head computes its own scores and sum: h · d_k = d_model."),
    }
    return check_number(my_flops, proj + mix, atol=0.5, what="number of operations",
                        name="my_flops", slips=slips)


def check_flops_crossover(my_n, d_model: int = 512) -> CheckResult:
    """Chapter 4, exercise 2: the n from which 4n²d exceeds 8nd² (n > 2 d_model)."""
    d = _whole("d_model", d_model)
    return check_number(my_n, 2 * d, atol=1, what="length where the n² term takes over",
                        name="my_n", slips={
        "n = d_model: the factors 8 and 4 dropped": (
            d, "Solve 8nd² = 4n²d for n, keeping both factors."),
        "8 and 4 swapped": (d / 2, "The projections cost 8nd², the scores and sum 4n²d."),
    })


def _hand_output(output) -> torch.Tensor:
    if not isinstance(output, torch.Tensor) or tuple(output.shape) != (1, 6, 8):
        raise TypeError("output must be the hand-built layer's output, a (1, 6, 8) tensor")
    return output.detach().to(torch.float64)


def check_previous_word(my_features, output) -> CheckResult:
    """Chapter 4, exercise 3: features 0-3 of the hand-built layer's output at "mat" (position 5).

    Head 0 attends to the previous token, "the", and passes on its word part.
    ``output``: the chapter's ``hand_out``, (1, 6, 8); the sentence's words are
    "the" = e_0, "mat" = -e_0, "on" = e_3.
    """
    exact = _hand_output(output)[0, 5, :4]
    return check_answer(None if my_features is None else real_vector("my_features", my_features, 4), exact, atol=0.05, what="features 0-3 at 'mat'", slips={
        "the word of 'mat' itself": (
            [-1.0, 0.0, 0.0, 0.0], "Head 0's query at position 5 points one position back."),
        "the word two back, 'on'": (
            [0.0, 0.0, 0.0, 1.0], "The query is rotated back by one step of 45°, not two."),
    })


def check_same_word_position(my_position, output) -> CheckResult:
    """Chapter 4, exercise 3: features 4-5 of the hand-built layer's output at the second "the".

    Head 1 splits the weight of position 4 evenly between the two "the"s
    (positions 0 and 4) and passes on their position parts (cos iθ, sin iθ), θ = 45°.
    """
    exact = _hand_output(output)[0, 4, 4:6]
    return check_answer(None if my_position is None else real_vector("my_position", my_position, 2), exact, atol=0.05, what="features 4-5 at the second 'the'",
                        slips={
        "its own position only": (
            [-1.0, 0.0], "Both 'the's have the same word vector, so the same score."),
        "the first 'the''s position only": (
            [1.0, 0.0], "Position 4 scores its own key as high as position 0's."),
    })
