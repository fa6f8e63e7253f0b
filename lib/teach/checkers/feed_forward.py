"""Checkers for chapter 5's coding exercises (the position-wise feed-forward network).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one
wrong version per named mistake (tests/test_checkers_feed_forward.py).
"""

from __future__ import annotations

import functools
import numbers

import torch

from lib.model.layers import PositionwiseFeedForward
from lib.teach.checkers._dtypes import with_exact_dtype
from lib.teach.checking import Case, Mistake, Verdict, check_function
from lib.teach.exercises import CheckResult, check_answer

__all__ = ["check_feed_forward", "check_ffn_parameter_count", "check_ffn_row", "check_big_ffn",
           "big_ffn_figures"]


def _feed_forward_cases() -> list[Case]:
    """Random x, W_1, b_1, W_2, b_2; d_ff never equals d_model, so transposed weights fail loudly."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for x_shape, d_ff, dtype in (
        ((3, 4), 6, torch.float64),  # (n, d_model)
        ((2, 5, 3), 8, torch.float32),  # (B, n, d_model)
        ((4, 8), 2, torch.float32),  # a bottleneck: d_ff < d_model
        ((2, 3, 6), 24, torch.float64),  # d_ff = 4 d_model, as in the paper
    ):
        d_model = x_shape[-1]

        def rand(*shape):
            return torch.randn(*shape, generator=g, dtype=dtype)

        args = (rand(*x_shape), rand(d_model, d_ff), rand(d_ff), rand(d_ff, d_model), rand(d_model))
        label = f"x {x_shape}, d_ff={d_ff}, {str(dtype).replace('torch.', '')}"
        cases.append(Case(args, label=label))
    return cases


def _reference_feed_forward(x, w1, b1, w2, b2):
    """`lib.PositionwiseFeedForward` with the given weights (nn.Linear stores W^T)."""
    d_model, d_ff = w1.shape
    with torch.random.fork_rng(devices=[]):  # the reader's random state stays as it was
        ffn = PositionwiseFeedForward(d_model, d_ff).to(x.dtype).eval()
    with torch.no_grad():
        ffn.linear1.weight.copy_(w1.T)
        ffn.linear1.bias.copy_(b1)
        ffn.linear2.weight.copy_(w2.T)
        ffn.linear2.bias.copy_(b2)
        return ffn(x)


def check_feed_forward(feed_forward) -> Verdict:
    """Chapter 5, exercise: `feed_forward(x, w1, b1, w2, b2)` = max(0, x W_1 + b_1) W_2 + b_2.

    x is (..., d_model), w1 (d_model, d_ff), b1 (d_ff,), w2 (d_ff, d_model),
    b2 (d_model,); the result has x's shape.
    """
    mistakes = [
        Mistake(
            "no ReLU",
            "Without max(0, ·) the two layers collapse into one linear map. "
            "Did you apply torch.relu to x @ w1 + b1?",
            lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2,
        ),
        Mistake(
            "a ReLU after the second layer too",
            "The output must be able to go negative: is there a ReLU around "
            "the final (...) @ w2 + b2? The formula has one ReLU, between the layers.",
            lambda x, w1, b1, w2, b2: torch.relu(torch.relu(x @ w1 + b1) @ w2 + b2),
        ),
        Mistake(
            "the ReLU before the bias b1",
            "max(0, x W_1 + b_1) adds b_1 first: did you write relu(x @ w1) + b1?",
            lambda x, w1, b1, w2, b2: (torch.relu(x @ w1) + b1) @ w2 + b2,
        ),
        Mistake(
            "the output bias b2 left out",
            "Did you add b2 after the second matrix product?",
            lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2,
        ),
    ]
    cases = _feed_forward_cases()
    verdict = check_function(
        feed_forward, _reference_feed_forward, cases, mistakes, name="feed_forward"
    )
    return with_exact_dtype(verdict, feed_forward, _reference_feed_forward, cases,
                            "feed_forward", "return x's dtype")


_SIZES = ((512, 2048), (1024, 4096), (64, 100), (6, 10), (32, 8))  # (d_model, d_ff)


def _reference_parameter_count(d_model: int, d_ff: int) -> int:
    """Counted from `lib.PositionwiseFeedForward` itself (the global random state untouched)."""
    with torch.random.fork_rng(devices=[]):
        return sum(p.numel() for p in PositionwiseFeedForward(d_model, d_ff).parameters())


def _integral_as_int(fn):
    """`fn`, with an integer of another type (numpy's np.int64, say) returned as a Python int.

    A count computed with numpy is a right answer; a float or a bool is not an int."""
    if not callable(fn):
        return fn  # check_function reports it

    @functools.wraps(fn)
    def as_int(*args, **kwargs):
        value = fn(*args, **kwargs)
        if isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
            return int(value)
        return value

    return as_int


def check_ffn_parameter_count(ffn_parameter_count) -> Verdict:
    """Chapter 5, exercise: `ffn_parameter_count(d_model, d_ff)`, an int: weights and biases.

    Any integer type is accepted (a numpy integer too); a float is not."""
    cases = [Case((d_model, d_ff), label=f"d_model={d_model}, d_ff={d_ff}") for d_model, d_ff in _SIZES]
    mistakes = [
        Mistake(
            "the biases left out",
            "Each nn.Linear also has a bias: b_1 has d_ff entries, b_2 has d_model. Did you add them?",
            lambda d_model, d_ff: 2 * d_model * d_ff,
        ),
        Mistake(
            "only one of the two layers counted",
            "There are two matrices, W_1 (d_model × d_ff) and W_2 (d_ff × d_model), "
            "each with its bias. Did you count W_2 and b_2?",
            lambda d_model, d_ff: d_model * d_ff + d_ff,
        ),
        Mistake(
            "d_ff taken as 4 d_model instead of the argument",
            "4 d_model is the paper's choice, not a rule: use the d_ff you are given.",
            lambda d_model, d_ff: 2 * d_model * 4 * d_model + 4 * d_model + d_model,
        ),
        Mistake(
            "both biases given width d_ff",
            "b_2 is added to the output, which has d_model features: its width is d_model, not d_ff.",
            lambda d_model, d_ff: 2 * d_model * d_ff + 2 * d_ff,
        ),
    ]
    return check_function(
        _integral_as_int(ffn_parameter_count), _reference_parameter_count, cases, mistakes,
        name="ffn_parameter_count",
    )


# ---------------------------------------------------------------------------
# The on-paper questions (exercises 3 and 5): the exact values stay in lib, so
# that the chapter's cell shows neither the answer nor the slips that imply it.
# ---------------------------------------------------------------------------


def _not_answered(name: str, exact) -> CheckResult:
    return CheckResult(False, f"Not answered yet: replace None in {name} with your answer.",
                       torch.as_tensor(exact, dtype=torch.float64).reshape(1, -1))


def check_ffn_row(my_row, w1, b1, w2, b2, x=(2.0, -1.0)) -> CheckResult:
    """Chapter 5, exercise 3: FFN(x) by hand with the worked example's weights.

    Slips named: b_2 left out, b_1 left out, W_1 used by its columns. ``None`` is
    "not answered yet".
    """
    w1, b1, w2, b2 = (torch.as_tensor(t, dtype=torch.float64) for t in (w1, b1, w2, b2))
    row = torch.tensor([x], dtype=torch.float64)
    if w1.dim() != 2 or w1.shape[0] != row.shape[1] or w1.shape[1] != w2.shape[0]:
        raise ValueError(f"w1 must be ({row.shape[1]}, d_ff) and w2 (d_ff, d_model), got "
                         f"{tuple(w1.shape)} and {tuple(w2.shape)}")
    exact = torch.relu(row @ w1 + b1) @ w2 + b2
    if my_row is None:
        return _not_answered("my_ffn_row", exact)
    return check_answer(my_row, exact, what=f"FFN({list(x)})", slips={
        "b_2 left out": (exact - b2, "Did you add b_2 last?"),
        "b_1 left out": (torch.relu(row @ w1) @ w2 + b2, "Did you add b_1 before the ReLU?"),
        "W_1 applied as a column-vector matrix": (
            torch.relu(row @ w1.T + b1) @ w2 + b2,
            "x is a row: x W_1 sums x_i times row i of W_1. Did you use W_1's columns?"),
    })


def big_ffn_figures(d_model: int = 1024, d_ff: int = 4096, n_heads: int = 16) -> tuple[int, int]:
    """Chapter 5, exercise 5: (parameters of one FFN sub-layer, of one encoder layer), counted
    from `lib`'s modules."""
    from lib.model.transformer import EncoderLayer

    def count(module):
        return sum(p.numel() for p in module.parameters())

    with torch.random.fork_rng(devices=[]):
        return (count(PositionwiseFeedForward(d_model, d_ff)),
                count(EncoderLayer(d_model, n_heads, d_ff)))


def check_big_ffn(my_count, my_share, d_model: int = 1024, d_ff: int = 4096,
                  n_heads: int = 16) -> tuple[CheckResult, CheckResult]:
    """Chapter 5, exercise 5: the big model's FFN parameter count and its share of an
    encoder layer. Slips named: biases left out, one bias only; FFN over attention, a
    decoder layer's share (0.5). ``None`` is "not answered yet"."""
    ffn, layer = big_ffn_figures(d_model, d_ff, n_heads)
    no_bias = 2 * d_model * d_ff
    count = _not_answered("my_big_ffn", ffn) if my_count is None else check_answer(
        my_count, ffn, 0.5, "count", slips={
            "biases left out": (no_bias, "Each Linear has a bias: how many entries each?"),
            "one bias only": (no_bias + d_ff, "Both Linears have a bias, b_1 and b_2."),
        })
    share = _not_answered("my_big_share", ffn / layer) if my_share is None else check_answer(
        my_share, ffn / layer, 0.005, "share", slips={
            "FFN over attention": (ffn / (layer - ffn - 4 * d_model),  # 2 LayerNorms
                                   "The fraction is of the whole layer, FFN included."),
            "a decoder layer's share": (0.5, "An encoder layer has one attention, not two."),
        })
    return count, share
