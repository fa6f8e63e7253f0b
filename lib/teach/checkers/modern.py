"""Checkers for chapter 14's exercises (RMSNorm, the grouped-query key/value repeat,
the KV cache's bytes per token) and its prediction prompt.

Each `check_*` takes the learner's function (or value) and returns a `Verdict`: pass, or
the most likely mistake by name. Tests feed each checker the solution and one wrong
version per named mistake (tests/test_checkers_modern.py).
"""

from __future__ import annotations

import torch

from lib.model.modern import RMSNorm
from lib.teach.checkers._dtypes import with_exact_dtype
from lib.teach.checkers.efficient import _changes_its_input, _in_place_verdict
from lib.teach.checkers.feed_forward import _integral_as_int
from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = [
    "LADDER_CHANGES",
    "check_kv_bytes_per_token",
    "check_ladder_prediction",
    "check_repeat_kv",
    "check_rms_norm",
    "reveal_ladder_prediction",
]


# ---------------------------------------------------------------- RMSNorm


def _rms_cases() -> list[Case]:
    """Inputs with a non-zero mean (so mean-centering shows), a large ε on some (so
    where ε goes shows), rows and columns of different sizes (so the axis shows)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, eps, dtype in (((3, 5), 1e-5, torch.float64), ((2, 4, 6), 0.5, torch.float32),
                              ((4, 8), 2.0, torch.float64), ((2, 3, 7), 1e-6, torch.float32)):
        x = torch.randn(shape, generator=g, dtype=dtype) * 2 + 1.5
        weight = 1 + 0.5 * torch.randn(shape[-1], generator=g, dtype=dtype)
        cases.append(Case((x, weight, eps), label=f"x {shape}, eps={eps}, "
                                                  f"{str(dtype).replace('torch.', '')}"))
    return cases


def _reference_rms_norm(x, weight, eps):
    """`lib.RMSNorm` with the given gain (the reader's random state untouched)."""
    with torch.random.fork_rng(devices=[]):
        norm = RMSNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


def check_rms_norm(rms_norm) -> Verdict:
    """Chapter 14, exercise: `rms_norm(x, weight, eps)` = x / sqrt(mean(x², last axis) + ε) · weight.

    x (..., d), weight (d,), eps a float; the result has x's shape and dtype.

    Input classes that separate right from plausible-wrong code, each in the cases:
    vectors whose mean is far from 0 (centring, as LayerNorm; the variance instead of
    the mean square); ε of 0.5 and 2 beside 1e-5 and 1e-6 (ε outside the root, ε
    squared, ε left out, sqrt(ms)·(1 + ε)); 2-D and 3-D x whose axes all differ in size
    (the mean over another axis or over everything, sum / shape[0], d − 1, a forgotten
    keepdim); a gain far from 1 and different per feature (the gain left out, added,
    or inside the statistic); float64 and float32 (the dtype, exact, and float64
    computed in float32 and cast back, named); the caller's x left unchanged.
    """
    def rms(x, axis):
        return x.pow(2).mean(dim=axis, keepdim=True)

    mistakes = [
        Mistake(
            "ε outside the square root",
            "ε is added to the mean square, inside the root: sqrt(mean(x²) + ε), "
            "not sqrt(mean(x²)) + ε.",
            lambda x, w, eps: x / (rms(x, -1).sqrt() + eps) * w,
        ),
        Mistake(
            "the mean subtracted, as LayerNorm does",
            "RMSNorm does not centre: it divides x itself by its root mean square. "
            "Subtracting the mean (and dividing by the standard deviation) is LayerNorm.",
            lambda x, w, eps: (x - x.mean(-1, keepdim=True))
            / (x.var(-1, unbiased=False, keepdim=True) + eps).sqrt() * w,
        ),
        Mistake(
            "the mean taken over the wrong axis",
            "Each token vector is normalised on its own: the mean runs over the last axis "
            "(the d features), dim=-1.",
            lambda x, w, eps: x / (rms(x, 0) + eps).sqrt() * w,
        ),
        Mistake(
            "the mean taken over the wrong axis",
            "Each token vector is normalised on its own: the mean runs over the last axis "
            "(the d features), dim=-1, not over every element of x.",
            lambda x, w, eps: x / (x.pow(2).mean() + eps).sqrt() * w,
        ),
        Mistake(
            "the square root left out",
            "Divide by the root of the mean square, sqrt(mean(x²) + ε), not by the mean "
            "square itself.",
            lambda x, w, eps: x / (rms(x, -1) + eps) * w,
        ),
        Mistake(
            "float64 input computed in float32",
            "float64 input: compute in float64. Converting x to float32 (and back) loses "
            "about 1e-7 of relative precision; only half-precision inputs are worth "
            "computing in float32.",
            lambda x, w, eps: (x.float() / (rms(x.float(), -1) + eps).sqrt()
                               * w.float()).to(x.dtype),
        ),
        Mistake(
            "the gain (weight) not applied",
            "After normalising, multiply by weight, the learned gain g of each feature.",
            lambda x, w, eps: x / (rms(x, -1) + eps).sqrt(),
        ),
    ]
    cases = _rms_cases()
    verdict = check_function(rms_norm, _reference_rms_norm, cases, mistakes, name="rms_norm")
    verdict = with_exact_dtype(verdict, rms_norm, _reference_rms_norm, cases, "rms_norm",
                               "return x's dtype")
    if verdict and any(_changes_its_input(rms_norm, case.args) for case in cases):
        return _in_place_verdict("rms_norm", "x")
    return verdict


# ---------------------------------------------------------------- GQA repeat


def _repeat_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    cases = []
    for (B, g_heads, T, d), h, dtype in (((2, 2, 3, 4), 4, torch.float32),
                                         ((1, 3, 5, 2), 6, torch.float32),
                                         ((2, 2, 4, 3), 6, torch.float32),
                                         ((1, 1, 3, 4), 3, torch.float32),
                                         ((2, 4, 2, 2), 4, torch.float32),
                                         ((3, 2, 2, 5), 8, torch.float64)):
        k = torch.randn(B, g_heads, T, d, generator=g, dtype=dtype)
        cases.append(Case((k, h), label=f"k {(B, g_heads, T, d)}, n_heads={h}, "
                                        f"{str(dtype)[6:]}"))
    return cases


def _reference_repeat_kv(k, n_heads):
    """Query head j reads key/value head j // (n_heads / n_kv_heads), written as a loop."""
    group = n_heads // k.shape[1]
    return torch.stack([k[:, j // group] for j in range(n_heads)], dim=1)


def check_repeat_kv(repeat_kv) -> Verdict:
    """Chapter 14, exercise: `repeat_kv(k, n_heads)`: k (B, n_kv_heads, T, d_head) ->
    (B, n_heads, T, d_head), where query head j gets key/value head j // (n_heads / n_kv_heads):
    consecutive query heads share a key/value head (lib's and Hugging Face's layout).

    Input classes that separate right from plausible-wrong code, each in the cases:
    group sizes 2, 3 and 4 with several key/value heads (tiled order 0, 1, 0, 1 by
    repeat, cat or j % g; a factor 2 written in; the group read from another axis);
    one key/value head (multi-query) and as many as the queries (no repeat needed);
    batch, length and width all different from the head counts (the wrong axis);
    float32 and float64 (the dtype, exact).
    """
    mistakes = [
        Mistake(
            "the heads tiled (repeat) instead of grouped (repeat_interleave)",
            "k.repeat(1, group, 1, 1) gives the order 0, 1, 0, 1, so query head 1 reads "
            "key/value head 1. The weights are laid out in groups: heads 0 and 1 share "
            "key/value head 0. Use k.repeat_interleave(group, dim=1).",
            lambda k, h: k.repeat(1, h // k.shape[1], 1, 1),
        ),
        Mistake(
            "no repeat at all",
            "k has n_kv_heads heads and the queries have n_heads: each key/value head must "
            "be copied to the n_heads / n_kv_heads query heads of its group.",
            lambda k, h: k,
        ),
        Mistake(
            "repeated along the position axis",
            "The heads are axis 1 of (B, heads, T, d_head); repeating along axis 2 copies "
            "positions instead.",
            lambda k, h: k.repeat_interleave(h // k.shape[1], dim=2),
        ),
        Mistake(
            "each key/value head repeated n_heads times",
            "The factor is the group size n_heads / n_kv_heads, not n_heads: the result "
            "must have n_heads heads in all.",
            lambda k, h: k.repeat_interleave(h, dim=1),
        ),
    ]
    cases = _repeat_cases()
    verdict = check_function(repeat_kv, _reference_repeat_kv, cases, mistakes, name="repeat_kv")
    return with_exact_dtype(verdict, repeat_kv, _reference_repeat_kv, cases, "repeat_kv",
                            "return k's dtype")


# ---------------------------------------------------------------- KV-cache bytes


_KV_SIZES = ((3, 4, 2, 16, 4), (30, 9, 3, 64, 2), (32, 32, 8, 128, 2), (2, 8, 1, 8, 4),
             (12, 12, 12, 64, 4))  # (n_layers, n_heads, n_kv_heads, d_head, bytes_per_value)


def _reference_kv_bytes(n_layers, n_heads, n_kv_heads, d_head, bytes_per_value):
    """Counted from a real cache: lib.GroupedQueryAttention's keys and values for one token."""
    from lib.model.kv_cache import AttentionCache
    from lib.model.modern import GroupedQueryAttention

    dtype = {2: torch.float16, 4: torch.float32, 8: torch.float64}[bytes_per_value]
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        attn = GroupedQueryAttention(n_heads * d_head, n_heads, n_kv_heads).to(dtype)
        cache = AttentionCache()
        attn(torch.zeros(1, 1, n_heads * d_head, dtype=dtype), cache)
    per_layer = sum(t.numel() * t.element_size() for t in (cache.k, cache.v))
    return n_layers * per_layer


def check_kv_bytes_per_token(kv_bytes_per_token) -> Verdict:
    """Chapter 14, exercise: `kv_bytes_per_token(n_layers, n_heads, n_kv_heads, d_head,
    bytes_per_value)`, an int: the bytes a KV cache adds for each token of a sequence.
    Any integer type is accepted; a float is not.

    Input classes that separate right from plausible-wrong code, each in the cases:
    n_kv_heads below n_heads with group sizes 2, 3, 4 and 8 (query heads counted,
    divided by the group, d_model per head), and equal to it; 2 and 4 bytes per value
    (bytes left out, bits); several layer counts (one layer only, layers added); sizes
    whose product is not a multiple of 1024 (KiB instead of bytes)."""
    cases = [Case(s, label="n_layers={}, n_heads={}, n_kv_heads={}, d_head={}, bytes={}".format(*s))
             for s in _KV_SIZES]
    mistakes = [
        Mistake(
            "the keys counted but not the values",
            "The cache holds a key AND a value vector per key/value head: the factor 2.",
            lambda L, h, g, d, b: L * g * d * b,
        ),
        Mistake(
            "the query heads counted instead of the key/value heads",
            "Only keys and values are cached, and there are n_kv_heads of each per layer; "
            "the n_heads queries are recomputed for the new token only.",
            lambda L, h, g, d, b: 2 * L * h * d * b,
        ),
        Mistake(
            "one layer only",
            "Every layer has its own attention and its own cache: multiply by n_layers.",
            lambda L, h, g, d, b: 2 * g * d * b,
        ),
        Mistake(
            "bits instead of bytes",
            "bytes_per_value is already in bytes (4 for float32, 2 for float16): no factor 8.",
            lambda L, h, g, d, b: 2 * L * g * d * b * 8,
        ),
    ]
    return check_function(_integral_as_int(kv_bytes_per_token), _reference_kv_bytes, cases,
                          mistakes, name="kv_bytes_per_token")


# ---------------------------------------------------------------- the prediction prompt


LADDER_CHANGES = ("RMSNorm", "rotary", "SwiGLU", "GQA", "no biases")


def check_ladder_prediction(prediction) -> Verdict:
    """Chapter 14, prediction prompt: which change lowers the held-out bits per byte the
    most at this scale? One of `LADDER_CHANGES`. Checks the form only: the runs answer.
    None is the prompt's empty default: not yet a prediction, said as such."""
    if prediction is None:
        return Verdict(False, f"no prediction yet: set my_biggest_gain to one of "
                              f"{list(LADDER_CHANGES)} before you run the ladder.",
                       mistake="no prediction yet")
    if not isinstance(prediction, str) or prediction not in LADDER_CHANGES:
        return Verdict(False, f"✗ my_biggest_gain must be one of {list(LADDER_CHANGES)}, "
                              f"got {prediction!r}.", mistake="not one of the changes")
    return Verdict(True, f"✓ recorded: you predict {prediction!r}. The ladder below answers.")


def reveal_ladder_prediction(prediction, gains: dict) -> str:
    """Compare the prediction with the runs. gains: change name -> list of per-seed
    gains in bits per byte (positive = the change lowered the loss). The answer
    counts only if the same change gains most on every seed."""
    verdict = check_ladder_prediction(prediction)
    if prediction is None:
        return "No prediction was recorded (my_biggest_gain is None): the gains above answer."
    if not verdict:
        return verdict.message
    if set(gains) != set(LADDER_CHANGES):
        raise ValueError(f"gains must have one entry per change {list(LADDER_CHANGES)}, got {sorted(gains)}")
    n_seeds = {len(v) for v in gains.values()}
    if len(n_seeds) != 1:
        raise ValueError("gains: every change needs one value per seed, the same seeds")
    n = n_seeds.pop()
    best = {max(LADDER_CHANGES, key=lambda c: gains[c][s]) for s in range(n)}
    if len(best) > 1:
        return (f"You predicted {prediction!r}. The seeds disagree on the biggest gain "
                f"({', '.join(sorted(best))}): at this scale no single answer holds.")
    (truth,) = best
    verdict = "right" if prediction == truth else "not what the runs show"
    return f"You predicted {prediction!r}: {verdict}. On every seed it is {truth!r}."
