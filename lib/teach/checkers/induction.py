"""Checkers for chapter 16's coding exercises: the induction score of every head, and
zero-ablating one head's output (see lib.teach.checking).

Each `check_*` takes the learner's function and returns a `Verdict`: pass, or the
most likely mistake by name. Tests feed each checker the solution and one wrong
version per named mistake (tests/test_checkers_induction.py).
"""

from __future__ import annotations

import torch

from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_induction_score", "check_zero_head"]


def _patterns() -> list[Case]:
    """Random causal attention patterns (rows sum to 1), B != h so the axes cannot be confused."""
    g = torch.Generator().manual_seed(16)
    cases = []
    for B, h, prefix, length, dtype in ((3, 4, 0, 6, torch.float64), (2, 5, 1, 7, torch.float32),
                                        (5, 2, 3, 4, torch.float64)):
        T = prefix + 2 * length
        scores = 3 * torch.randn(B, h, T, T, generator=g, dtype=dtype)
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        pattern = scores.softmax(-1)
        label = f"pattern {tuple(pattern.shape)}, length {length}, {prefix} token(s) before the copies"
        cases.append(Case((pattern, length), label=label))
    return cases


def _score(pattern, length, shift=0, queries="second", over=(0, -1)):
    T = pattern.shape[-1]
    q = torch.arange(T)
    k = q - length + 1 + shift
    keep = (k >= 0) & (k <= q) if queries == "all" else (q >= T - length)
    q, k = q[keep], k[keep]
    return pattern[:, :, q, k].mean(dim=over)  # (h,) when averaged over batch and queries


def _reference(pattern, length):
    return _score(pattern, length)


def check_induction_score(induction_score) -> Verdict:
    """Chapter 16, exercise: ``induction_score(pattern, length)`` -> (h,).

    pattern (B, h, T, T): attention weights on sequences that end with a block of
    ``length`` tokens written twice. The score of a head is its mean attention from
    each query q of the second copy (q >= T - length) to key q - length + 1, the
    token after the query's earlier occurrence, over the batch and those queries.

    Input classes that separate right from plausible-wrong code, each in the cases:
    0, 1 and 3 tokens before the two copies (code that assumes no BOS, or counts
    queries from the start); B != h in every case (averaging over the heads instead
    of the batch); dense random causal patterns, so that every off-by-one diagonal
    (the duplicate-token diagonal, the previous-token one) and every query too many
    or too few moves the score; float32 and float64 patterns (the dtype must be
    kept). tests/test_checkers_catalogue_15_16.py feeds it 12 wrong solutions.
    """
    offset_hint = (
        "Query q repeats the token at q - length; the induction head looks one further, at the "
        "token that came *next* there: key q - length + 1 (pattern.diagonal(offset=-(length - 1)))."
    )
    mistakes = [
        Mistake("diagonal offset off by one", offset_hint, lambda p, n: _score(p, n, shift=-1)),
        Mistake("diagonal offset off by one", offset_hint, lambda p, n: _score(p, n, shift=+1)),
        Mistake(
            "averaged over the wrong axis",
            "Average over the batch (axis 0) and the queries, and keep the heads (axis 1): "
            "one score per head, shape (h,).",
            lambda p, n: _score(p, n, over=(1, -1)),
        ),
        Mistake(
            "averaged over the wrong axis",
            "Average over the batch and the queries too: the result has one number per head, shape (h,).",
            lambda p, n: _score(p, n, over=(-1,)),
        ),
        Mistake(
            "included the first half",
            "Only the second copy can be predicted by copying: keep the last `length` queries "
            "(q >= T - length); in the first copy the same diagonal points at unrelated tokens.",
            lambda p, n: _score(p, n, queries="all"),
        ),
    ]
    return check_function(induction_score, _reference, _patterns(), mistakes, name="induction_score")


def _z_cases() -> list[Case]:
    g = torch.Generator().manual_seed(61)
    cases = []
    for B, T, h, d, head, dtype in ((2, 5, 4, 3, 1, torch.float32), (3, 6, 3, 4, 2, torch.float64),
                                    (1, 4, 6, 6, 0, torch.float32)):
        z = torch.randn(B, T, h, d, generator=g, dtype=dtype)
        cases.append(Case((z, head), label=f"z {tuple(z.shape)}, head {head}"))
    return cases


def _zero(z, head, axis=2):
    out = z.clone()
    out.select(axis, head).zero_()
    return out


def check_zero_head(zero_head) -> Verdict:
    """Chapter 16, exercise: ``zero_head(z, head)`` -> z with that head's output set to zero.

    z (B, T, h, d_head) is what ``hook_z`` sees: every head's output before W_O.
    The result is a new tensor; the input is left as it was.

    Input classes, each in the cases: the first head (0: a 1-based index wraps to
    the last), a middle head and the last head (zeroing from `head` onwards); B, T,
    h and d_head of different sizes (the wrong axis); float32 and float64 (dtype
    kept); an input that must come back unchanged (zeroed in place).
    tests/test_checkers_catalogue_15_16.py feeds it 8 wrong solutions.
    """
    mistakes = [
        Mistake("zeroed a position instead of a head",
                "z is (B, T, h, d_head): the heads are axis 2, z[:, :, head].", lambda z, h: _zero(z, h, 1)),
        Mistake("zeroed a feature instead of a head",
                "The last axis holds a head's d_head features; the heads are axis 2, z[:, :, head].",
                lambda z, h: _zero(z, h, 3)),
        Mistake("zeroed every head but that one",
                "Zero-ablation switches *one* head off: set z[:, :, head] to zero, keep the others.",
                lambda z, h: z - _zero(z, h)),
    ]

    def learner(z, head):
        before = z.clone()
        out = zero_head(z, head)
        if not torch.equal(z, before):
            raise ValueError("zero_head changed its input z in place: work on z.clone()")
        return out

    verdict = check_function(learner, _zero, _z_cases(), mistakes, name="zero_head")
    return verdict
