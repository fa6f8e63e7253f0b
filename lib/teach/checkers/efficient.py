"""Checkers for the efficient-attention chapter's coding exercises (see lib.teach.checking)."""

from __future__ import annotations

import math

import torch

from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_online_softmax_stats", "check_merge_partials"]


def _stats_reference(scores: torch.Tensor, block_size: int):
    m = scores.amax(dim=-1)
    return m, torch.exp(scores - m[..., None]).sum(dim=-1)


def _stats_blockwise(scores, block_size, update):
    """Visit the keys in blocks; `update(m, l, block)` returns the new (m, l)."""
    m = torch.full(scores.shape[:-1], -math.inf, dtype=scores.dtype)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype)
    for start in range(0, scores.shape[-1], block_size):
        m, l = update(m, l, scores[..., start:start + block_size])
    return m, l


def _no_rescale(scores, block_size):
    def update(m, l, block):
        m_new = torch.maximum(m, block.amax(dim=-1))
        return m_new, l + torch.exp(block - m_new[..., None]).sum(dim=-1)

    return _stats_blockwise(scores, block_size, update)


def _rescale_upside_down(scores, block_size):
    def update(m, l, block):
        m_new = torch.maximum(m, block.amax(dim=-1))
        factor = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp(m_new - m))
        return m_new, l * factor + torch.exp(block - m_new[..., None]).sum(dim=-1)

    return _stats_blockwise(scores, block_size, update)


def _block_max_only(scores, block_size):
    def update(m, l, block):
        m_block = block.amax(dim=-1)
        return m_block, l * torch.exp(torch.nan_to_num(m - m_block, neginf=-math.inf)) + torch.exp(
            block - m_block[..., None]
        ).sum(dim=-1)

    m, l = _stats_blockwise(scores, block_size, update)
    return m, l


def _stats_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, block, dtype in (((3, 10), 4, torch.float64), ((2, 2, 16), 5, torch.float32), ((4, 7), 7, torch.float64)):
        scores = torch.randn(shape, generator=g, dtype=dtype) * 3
        cases.append(Case((scores, block), label=f"scores {shape}, block_size {block}"))
    rising = torch.arange(12, dtype=torch.float64).repeat(2, 1)  # the maximum grows in every block
    cases.append(Case((rising, 3), label="scores that rise block after block"))
    cases.append(Case((torch.tensor([[800.0, 805.0, 790.0, 810.0]], dtype=torch.float64), 2), label="large scores"))
    return cases


def check_online_softmax_stats(online_softmax_stats) -> Verdict:
    """Exercise: (m, l) = (max_j s_j, Σ_j exp(s_j − m)) in one pass over blocks of keys."""
    mistakes = [
        Mistake(
            "the running sum is not rescaled when the maximum grows",
            "When m rises to m_new, every term already in l was exp(s − m): did you multiply l by exp(m − m_new)?",
            _no_rescale,
        ),
        Mistake(
            "the rescaling factor is upside down",
            "The old terms must shrink when the maximum grows: the factor is exp(m_old − m_new) ≤ 1.",
            _rescale_upside_down,
        ),
        Mistake(
            "the block's maximum replaces the running maximum",
            "m must be the largest score seen so far: m_new = max(m_old, max of the block), not the block's own max.",
            _block_max_only,
        ),
        Mistake(
            "no maximum subtracted (exp overflows)",
            "exp(800) is inf in any float: keep l relative to the running maximum, l = Σ exp(s − m).",
            lambda s, b: (s.amax(dim=-1), torch.exp(s).sum(dim=-1)),
        ),
    ]
    return check_function(
        online_softmax_stats, _stats_reference, _stats_cases(), mistakes, name="online_softmax_stats"
    )


def _partial(q, k, v):
    """(m, l, o) of attention restricted to these keys: o is already normalised."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = s.amax(dim=-1)
    p = torch.exp(s - m[..., None])
    l = p.sum(dim=-1)
    return m, l, (p @ v) / l[..., None]


def _merge_reference(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = l1 * torch.exp(m1 - m), l2 * torch.exp(m2 - m)
    return m, w1 + w2, (w1[..., None] * o1 + w2[..., None] * o2) / (w1 + w2)[..., None]


def _merge_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    cases = []
    for b, m_q, n, split, d, dtype in ((1, 3, 8, 3, 4, torch.float64), (2, 5, 12, 7, 6, torch.float32), (1, 2, 6, 1, 3, torch.float64)):
        q = torch.randn(b, m_q, d, generator=g, dtype=dtype) * 2
        k = torch.randn(b, n, d, generator=g, dtype=dtype) * 2
        v = torch.randn(b, n, d, generator=g, dtype=dtype)
        first, second = _partial(q, k[:, :split], v[:, :split]), _partial(q, k[:, split:], v[:, split:])
        cases.append(Case((*first, *second), label=f"{m_q} queries, keys split {split} + {n - split}"))
    return cases


def check_merge_partials(merge_partials) -> Verdict:
    """Exercise: combine two partial attention results over disjoint keys into one."""
    mistakes = [
        Mistake(
            "the two outputs are simply averaged",
            "Each part stands for a different share of the total weight: weight o1 and o2 by their normalisers.",
            lambda m1, l1, o1, m2, l2, o2: (torch.maximum(m1, m2), l1 + l2, (o1 + o2) / 2),
        ),
        Mistake(
            "the normalisers are compared without their maxima",
            "l1 counts exp(s − m1) and l2 counts exp(s − m2): bring both to m = max(m1, m2) first.",
            lambda m1, l1, o1, m2, l2, o2: (
                torch.maximum(m1, m2), l1 + l2, (l1[..., None] * o1 + l2[..., None] * o2) / (l1 + l2)[..., None]
            ),
        ),
        Mistake(
            "the combined output is not renormalised",
            "After weighting o1 and o2 by w1 and w2, divide by w1 + w2.",
            lambda m1, l1, o1, m2, l2, o2: (
                torch.maximum(m1, m2),
                l1 * torch.exp(m1 - torch.maximum(m1, m2)) + l2 * torch.exp(m2 - torch.maximum(m1, m2)),
                (l1 * torch.exp(m1 - torch.maximum(m1, m2)))[..., None] * o1
                + (l2 * torch.exp(m2 - torch.maximum(m1, m2)))[..., None] * o2,
            ),
        ),
    ]
    return check_function(merge_partials, _merge_reference, _merge_cases(), mistakes, name="merge_partials")
