"""The efficient-attention chapter's checkers: the solution passes, each named mistake is named.

Every wrong version here is written independently of the `Mistake` functions in
lib/teach/checkers/efficient.py, the way a learner would write it.
"""

from __future__ import annotations

import math

import pytest
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


def stats_guarded(scores, block_size):
    """The solution with the guard of by-hand exercise 1: masked blocks give no nan."""
    m = torch.full(scores.shape[:-1], -math.inf, dtype=scores.dtype)
    total = torch.zeros(scores.shape[:-1], dtype=scores.dtype)
    for start in range(0, scores.shape[-1], block_size):
        block = scores[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        total = total * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)
        m = m_new
    return m, total


def stats_zero_start(scores, block_size):
    m = torch.zeros(scores.shape[:-1], dtype=scores.dtype)  # the slip: 0 instead of -inf
    total = torch.zeros(scores.shape[:-1], dtype=scores.dtype)
    for start in range(0, scores.shape[-1], block_size):
        block = scores[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        total = total * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, total


def stats_skip_last(scores, block_size):
    n = scores.shape[-1]
    m = torch.full(scores.shape[:-1], -math.inf, dtype=scores.dtype)
    total = torch.zeros(scores.shape[:-1], dtype=scores.dtype)
    for start in range(0, n - block_size + 1, block_size):  # full blocks only
        block = scores[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        total = total * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, total


def stats_float32(scores, block_size):
    m, total = stats_solution(scores.float(), block_size)
    return m, total


def stats_whole_row(scores, block_size):
    m = scores.max(dim=-1).values  # no blocks: the row's maximum up front
    shift = torch.where(torch.isinf(m), 0.0, m)
    return m, torch.exp(scores - shift[..., None]).sum(dim=-1)


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

    verdict = lib.check_online_softmax_stats(stats_guarded)
    assert verdict and "masked keys included" in str(verdict), str(verdict)
    verdict = lib.check_online_softmax_stats(stub)
    assert not verdict and "not implemented yet" in str(verdict)
    expected = {
        stats_solution: "a masked block gives exp(−∞ − (−∞)) = nan",
        stats_zero_start: "the running maximum starts at 0",
        stats_no_rescale: "the running sum is not rescaled when the maximum grows",
        stats_upside_down: "the rescaling factor is upside down",
        stats_block_max: "the block's maximum replaces the running maximum",
        stats_no_shift: "no maximum subtracted (exp overflows)",
        stats_skip_last: "the last, shorter block is skipped",
        stats_float32: "computed in float32",
        stats_whole_row: "the maximum is taken over the whole row up front",
    }
    for wrong, name in expected.items():
        verdict = lib.check_online_softmax_stats(wrong)
        assert not verdict and verdict.mistake == name, (wrong.__name__, str(verdict))


def test_online_softmax_cases_separate_the_classic_slips():
    """All-negative rows in float64 and float32 (a maximum that starts at 0 fails there)."""
    from lib.teach.checkers.efficient import _masked_cases, _stats_cases

    negative = [c for c in _stats_cases() if bool((c.args[0].amax(-1) < 0).all())]
    assert {c.args[0].dtype for c in negative} == {torch.float32, torch.float64}
    masked = [c.args[0] for c in _masked_cases()]
    assert all(bool(torch.isinf(s).all(-1).any()) for s in masked)  # a row with no allowed key
    assert {s.dtype for s in masked} == {torch.float32, torch.float64}


def test_online_softmax_nan_answer_is_never_right():
    def nan_l(scores, block_size):
        m, total = stats_guarded(scores, block_size)
        return m, total * math.nan

    verdict = lib.check_online_softmax_stats(nan_l)
    assert not verdict and "NaN" in str(verdict)


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


def merge_upside_down(m1, l1, o1, m2, l2, o2):
    m = torch.max(m1, m2)
    a, b = l1 * (m - m1).exp(), l2 * (m - m2).exp()
    return m, a + b, (a.unsqueeze(-1) * o1 + b.unsqueeze(-1) * o2) / (a + b).unsqueeze(-1)


def merge_plain_sum_of_normalisers(m1, l1, o1, m2, l2, o2):
    m, _, o = merge_solution(m1, l1, o1, m2, l2, o2)
    return m, l1 + l2, o


def test_merge_partials_checker():
    def stub(*parts):
        raise NotImplementedError

    assert lib.check_merge_partials(merge_solution)
    assert "not implemented yet" in str(lib.check_merge_partials(stub))
    expected = {
        merge_average: "the two outputs are simply averaged",
        merge_without_maxima: "the normalisers are compared without their maxima",
        merge_unnormalised: "the combined output is not renormalised",
        merge_upside_down: "the normalisers' factor is upside down",
        merge_plain_sum_of_normalisers: "the merged normaliser is l1 + l2",
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


def _token_weights(tokens):
    """d(loss)/d(each token's loss) for DDP's mean of shard means, over the token mean's:
    by autograd, not by the formula."""
    losses = torch.ones(sum(tokens), dtype=torch.float64, requires_grad=True)
    shards = losses.split(list(tokens))
    ddp = torch.stack([s.mean() for s in shards]).mean()
    (ddp_grad,) = torch.autograd.grad(ddp, losses)
    (mean_grad,) = torch.autograd.grad(losses.mean(), losses)
    return [float(g[0]) for g in (ddp_grad / mean_grad).split(list(tokens))]


def test_ddp_token_weight_checker():
    tokens = (100, 100, 100, 300)
    weights = _token_weights(tokens)
    assert abs(weights[0] - 1.5) < 1e-12 and abs(weights[3] - 0.5) < 1e-12
    for shard in (0, 3):
        assert lib.check_ddp_token_weight(weights[shard], shard=shard)
        own = weights[shard] / sum(tokens)  # the token's weight in DDP's average itself
        slips = {
            "DDP's average taken for the token mean (every token 1/N)": 1.0,
            "the token's own weight 1/(P·t), not compared with the token mean": own,
            "the ratio upside down": 1 / weights[shard],
            "the shard's weight 1/P, not spread over its tokens": own * tokens[shard] * 600,
        }
        for name, value in slips.items():
            verdict = lib.check_ddp_token_weight(value, shard=shard)
            assert not verdict and verdict.slip == name, (shard, name, verdict.message)
        wrong = lib.check_ddp_token_weight(0.75, shard=shard)
        assert not wrong and wrong.slip is None
        assert not lib.check_ddp_token_weight(float("nan"), shard=shard)
    assert lib.check_ddp_token_weight(torch.tensor(1.5))
    assert not lib.check_ddp_token_weight(1.5, shard=3)


@pytest.mark.parametrize("bad", ["1.5", True, [1.5]])  # None: not answered
def test_ddp_token_weight_refuses_what_is_not_a_number(bad):
    with pytest.raises(TypeError, match="my_weight"):
        lib.check_ddp_token_weight(bad)


@pytest.mark.parametrize("kwargs", [dict(shard=4), dict(shard=True), dict(tokens=(100, 0))])
def test_ddp_token_weight_refuses_bad_settings(kwargs):
    with pytest.raises(ValueError):
        lib.check_ddp_token_weight(1.5, **kwargs)
