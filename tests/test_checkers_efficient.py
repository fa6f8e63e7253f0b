"""The efficient-attention chapter's checkers: the solution passes, each named mistake is named.

Every wrong version here is written independently of the `Mistake` functions in
lib/teach/checkers/efficient.py, the way a learner would write it.
"""

from __future__ import annotations

import math

import torch

import lib


def stats_solution(scores, block_size):
    m = torch.full(scores.shape[:-1], -math.inf, dtype=scores.dtype)
    total = torch.zeros(scores.shape[:-1], dtype=scores.dtype)
    for start in range(0, scores.shape[-1], block_size):
        block = scores[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        total = total * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, total


def stats_no_rescale(scores, block_size):
    m = torch.full(scores.shape[:-1], -math.inf, dtype=scores.dtype)
    total = torch.zeros_like(m)
    for start in range(0, scores.shape[-1], block_size):
        block = scores[..., start:start + block_size]
        m = torch.maximum(m, block.amax(dim=-1))
        total = total + torch.exp(block - m[..., None]).sum(dim=-1)
    return m, total


def stats_upside_down(scores, block_size):
    m = None
    for start in range(0, scores.shape[-1], block_size):
        block = scores[..., start:start + block_size]
        if m is None:
            m = block.amax(dim=-1)
            total = torch.exp(block - m[..., None]).sum(dim=-1)
            continue
        m_new = torch.maximum(m, block.amax(dim=-1))
        total = total * torch.exp(m_new - m) + torch.exp(block - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, total


def stats_block_max(scores, block_size):
    m = None
    for start in range(0, scores.shape[-1], block_size):
        block = scores[..., start:start + block_size]
        b = block.amax(dim=-1)
        total = torch.exp(block - b[..., None]).sum(dim=-1) + (0 if m is None else total * torch.exp(m - b))
        m = b
    return m, total


def stats_no_shift(scores, block_size):
    return scores.max(dim=-1).values, scores.exp().sum(dim=-1)


def test_online_softmax_stats_checker():
    def stub(scores, block_size):
        raise NotImplementedError

    assert lib.check_online_softmax_stats(stats_solution)
    verdict = lib.check_online_softmax_stats(stub)
    assert not verdict and "not implemented yet" in str(verdict)
    expected = {
        stats_no_rescale: "the running sum is not rescaled when the maximum grows",
        stats_upside_down: "the rescaling factor is upside down",
        stats_block_max: "the block's maximum replaces the running maximum",
        stats_no_shift: "no maximum subtracted (exp overflows)",
    }
    for wrong, name in expected.items():
        verdict = lib.check_online_softmax_stats(wrong)
        assert not verdict and verdict.mistake == name, (wrong.__name__, str(verdict))


def merge_solution(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a, b = l1 * (m1 - m).exp(), l2 * (m2 - m).exp()
    return m, a + b, (a.unsqueeze(-1) * o1 + b.unsqueeze(-1) * o2) / (a + b).unsqueeze(-1)


def merge_average(m1, l1, o1, m2, l2, o2):
    return torch.max(m1, m2), l1 + l2, 0.5 * o1 + 0.5 * o2


def merge_without_maxima(m1, l1, o1, m2, l2, o2):
    share = (l1 / (l1 + l2)).unsqueeze(-1)
    return torch.max(m1, m2), l1 + l2, share * o1 + (1 - share) * o2


def merge_unnormalised(m1, l1, o1, m2, l2, o2):
    m = torch.max(m1, m2)
    a, b = l1 * (m1 - m).exp(), l2 * (m2 - m).exp()
    return m, a + b, a.unsqueeze(-1) * o1 + b.unsqueeze(-1) * o2


def test_merge_partials_checker():
    def stub(*parts):
        raise NotImplementedError

    assert lib.check_merge_partials(merge_solution)
    assert "not implemented yet" in str(lib.check_merge_partials(stub))
    expected = {
        merge_average: "the two outputs are simply averaged",
        merge_without_maxima: "the normalisers are compared without their maxima",
        merge_unnormalised: "the combined output is not renormalised",
    }
    for wrong, name in expected.items():
        verdict = lib.check_merge_partials(wrong)
        assert not verdict and verdict.mistake == name, (wrong.__name__, str(verdict))


def test_merging_two_halves_gives_full_attention():
    """The reference itself, checked against F.scaled_dot_product_attention."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 4, 8, generator=g, dtype=torch.float64) for _ in range(3))
    k, v = torch.randn(1, 10, 8, generator=g, dtype=torch.float64), torch.randn(1, 10, 8, generator=g, dtype=torch.float64)

    def part(ks, vs):
        s = q @ ks.transpose(-2, -1) / math.sqrt(8)
        m = s.amax(-1)
        p = (s - m[..., None]).exp()
        return m, p.sum(-1), p @ vs / p.sum(-1)[..., None]

    _, _, out = merge_solution(*part(k[:, :4], v[:, :4]), *part(k[:, 4:], v[:, 4:]))
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))
