"""Chapters 13-14: a catalogue of plausible wrong solutions every checker must refuse.

Each exercise's list holds the wrong solutions of the 2026-11-28 review (its section 3,
`../shared/reviews/2026-11-28/chapters-13-14.md`) and at least three more of our own,
written from the exercise's text (for chapter 13 before reading the checker's cases; for
chapter 14 after, which the report of this change says). A wrong solution must get a
failing verdict; where the second entry names a mistake, the verdict must name it.
"""

import math

import pytest
import torch

import lib

# ------------------------------------------------------------ ch 13, online_softmax_stats


def _stats(scores, block_size, *, update=None, rows=True, dtype=None, start=-math.inf,
           blocks=None):
    """A block loop with knobs for the wrong versions below."""
    x = scores if dtype is None else scores.to(dtype)
    m = torch.full(x.shape[:-1], start, dtype=x.dtype)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype)
    n = x.shape[-1]
    for begin in (blocks(n, block_size) if blocks else range(0, n, block_size)):
        block = x[..., begin:begin + block_size]
        m, l = (update or _guarded)(m, l, block)
    if dtype is not None:
        m, l = m.to(scores.dtype), l.to(scores.dtype)
    return m, l


def _guarded(m, l, block):
    m_new = torch.maximum(m, block.amax(dim=-1))
    shift = torch.where(torch.isinf(m_new), 0.0, m_new)
    return m_new, l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(-1)


def _unguarded(m, l, block):
    m_new = torch.maximum(m, block.amax(dim=-1))
    return m_new, l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(-1)


def _guard_new_block_only(m, l, block):
    m_new = torch.maximum(m, block.amax(dim=-1))
    shift = torch.where(torch.isinf(m_new), 0.0, m_new)
    return m_new, l * torch.exp(m - m_new) + torch.exp(block - shift[..., None]).sum(-1)


def _old_max_for_new_block(m, l, block):
    """Ours: the new block's exponentials taken against the old maximum."""
    m_new = torch.maximum(m, block.amax(dim=-1))
    shift_old = torch.where(torch.isinf(m), 0.0, m)
    shift = torch.where(torch.isinf(m_new), 0.0, m_new)
    return m_new, l * torch.exp(m - shift) + torch.exp(block - shift_old[..., None]).sum(-1)


def _one_max_for_all_rows(m, l, block):
    """Ours: block.amax() without dim: one maximum for the whole batch of rows."""
    m_new = torch.maximum(m, block.amax())
    shift = torch.where(torch.isinf(m_new), 0.0, m_new)
    return m_new, l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(-1)


def _whole_row_cummax(scores, block_size):
    """The review's P14: a whole-row maximum read off cummax's last column."""
    m = scores.cummax(dim=-1).values[..., -1]
    shift = torch.where(torch.isinf(m), 0.0, m)
    return m, torch.exp(scores - shift[..., None]).sum(-1)


def _whole_row_sort(scores, block_size):
    """Ours: the maximum as the last entry of the sorted row (a whole-row pass)."""
    m = scores.sort(dim=-1).values[..., -1]
    shift = torch.where(torch.isinf(m), 0.0, m)
    return m, torch.exp(scores - shift[..., None]).sum(-1)


def _whole_row_max(scores, block_size):
    m = scores.max(dim=-1).values
    shift = torch.where(torch.isinf(m), 0.0, m)
    return m, torch.exp(scores - shift[..., None]).sum(-1)


def _nan_to_num_at_the_end(scores, block_size):
    m, l = _stats(scores, block_size, update=_unguarded)
    return m, torch.nan_to_num(l)


def _swapped(scores, block_size):
    """Ours: (l, m) returned in the wrong order."""
    m, l = _stats(scores, block_size)
    return l, m


def _in_place(scores, block_size):
    """Ours: subtracts the running maximum from the caller's scores in place."""
    m = torch.full(scores.shape[:-1], -math.inf, dtype=scores.dtype)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype)
    for begin in range(0, scores.shape[-1], block_size):
        block = scores[..., begin:begin + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        shift = torch.where(torch.isinf(m_new), 0.0, m_new)
        block -= shift[..., None]  # writes into scores
        l = l * torch.exp(m - shift) + torch.exp(block).sum(-1)
        m = m_new
    return m, l


STATS_WRONG = {
    # the review's
    "running max starts at 0": (lambda s, b: _stats(s, b, start=0.0), "starts at 0"),
    "no guard for masked blocks": (lambda s, b: _stats(s, b, update=_unguarded), None),
    "guard in one exponential only": (
        lambda s, b: _stats(s, b, update=_guard_new_block_only), None),
    "nan_to_num(l) at the end": (_nan_to_num_at_the_end, None),
    "whole-row max(dim) first": (_whole_row_max, "whole"),
    "whole-row max through cummax": (_whole_row_cummax, None),
    # our own
    "new block against the old maximum": (
        lambda s, b: _stats(s, b, update=_old_max_for_new_block), None),
    "one maximum for all rows": (lambda s, b: _stats(s, b, update=_one_max_for_all_rows), None),
    "(l, m) in the wrong order": (_swapped, None),
    "whole-row max through sort": (_whole_row_sort, None),
    "last partial block skipped": (
        lambda s, b: _stats(s, b, blocks=lambda n, k: range(0, n - n % k or n, k)), None),
    "computed in float32": (lambda s, b: _stats(s, b, dtype=torch.float32), None),
    "scores changed in place": (_in_place, None),
}


@pytest.mark.parametrize("name", sorted(STATS_WRONG))
def test_online_softmax_stats_refuses(name):
    wrong, mistake = STATS_WRONG[name]
    verdict = lib.check_online_softmax_stats(wrong)
    assert not verdict, (name, verdict.message)
    if mistake:
        assert mistake in (verdict.mistake or "") + verdict.message, (name, verdict.message)


def test_online_softmax_stats_accepts_the_solution():
    assert lib.check_online_softmax_stats(lambda s, b: _stats(s, b))


# ------------------------------------------------------------ ch 13, merge_partials


def _merge(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = l1 * torch.exp(m1 - m), l2 * torch.exp(m2 - m)
    return m, w1 + w2, (w1[..., None] * o1 + w2[..., None] * o2) / (w1 + w2)[..., None]


def _merge_average(m1, l1, o1, m2, l2, o2):
    m, l, _ = _merge(m1, l1, o1, m2, l2, o2)
    return m, l, (o1 + o2) / 2


def _merge_l_unscaled(m1, l1, o1, m2, l2, o2):
    m, _, o = _merge(m1, l1, o1, m2, l2, o2)
    return m, l1 + l2, o


def _merge_normalised_by_l(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = l1 * torch.exp(m1 - m), l2 * torch.exp(m2 - m)
    return m, w1 + w2, (w1[..., None] * o1 + w2[..., None] * o2) / (l1 + l2)[..., None]


def _merge_weights_without_l(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = torch.exp(m1 - m), torch.exp(m2 - m)
    o = (w1[..., None] * o1 + w2[..., None] * o2) / (w1 + w2)[..., None]
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m), o


def _merge_as_unnormalised(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = torch.exp(m1 - m), torch.exp(m2 - m)
    l = l1 * w1 + l2 * w2
    return m, l, (w1[..., None] * o1 + w2[..., None] * o2) / l[..., None]


def _merge_m_first(m1, l1, o1, m2, l2, o2):
    _, l, o = _merge(m1, l1, o1, m2, l2, o2)
    return m1, l, o


def _merge_upside_down(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = l1 * torch.exp(m - m1), l2 * torch.exp(m - m2)
    return m, w1 + w2, (w1[..., None] * o1 + w2[..., None] * o2) / (w1 + w2)[..., None]


MERGE_WRONG = {
    # the review's
    "o treated as unnormalised": (_merge_as_unnormalised, None),
    "l ignored in the output weights": (_merge_weights_without_l, None),
    "m = m1": (_merge_m_first, None),
    # our own
    "plain average of the outputs": (_merge_average, None),
    "l1 + l2 without rescaling": (_merge_l_unscaled, None),
    "output divided by l1 + l2": (_merge_normalised_by_l, None),
    "exp(m - m_i) upside down": (_merge_upside_down, None),
    "float32 result": (lambda *a: tuple(t.float() for t in _merge(*a)), "float"),
    # ours, written after reading the cases (they had no maxima far apart, no empty part)
    "rescaled against m2": (
        lambda m1, l1, o1, m2, l2, o2: (
            torch.maximum(m1, m2), l1 * torch.exp(m1 - torch.maximum(m1, m2)) + l2
            * torch.exp(m2 - torch.maximum(m1, m2)),
            ((l1 * torch.exp(m1 - m2))[..., None] * o1 + l2[..., None] * o2)
            / (l1 * torch.exp(m1 - m2) + l2)[..., None]), None),
}


@pytest.mark.parametrize("name", sorted(MERGE_WRONG))
def test_merge_partials_refuses(name):
    wrong, mistake = MERGE_WRONG[name]
    verdict = lib.check_merge_partials(wrong)
    assert not verdict, (name, verdict.message)
    if mistake:
        assert mistake in verdict.message, (name, verdict.message)


def test_merge_partials_accepts_the_solution():
    assert lib.check_merge_partials(_merge)


# ------------------------------------------------------------ ch 14, rms_norm


def _ms(x):
    return x.pow(2).mean(dim=-1, keepdim=True)


RMS_WRONG = {
    # the review's
    "L2 norm instead of RMS": (lambda x, w, e: x / (x.norm(dim=-1, keepdim=True) + e) * w, None),
    "eps left out": (lambda x, w, e: x / _ms(x).sqrt() * w, None),
    "centred variance, x not centred": (
        lambda x, w, e: x / (x.var(-1, unbiased=False, keepdim=True) + e).sqrt() * w, None),
    "mean over dim=1": (lambda x, w, e: x / (x.pow(2).mean(1, keepdim=True) + e).sqrt() * w,
                        None),
    "gain added": (lambda x, w, e: x / (_ms(x) + e).sqrt() + w, None),
    "float32 throughout": (lambda x, w, e: (x.float() / (_ms(x.float()) + e).sqrt() * w.float()),
                           "dtype"),
    "float32 inside, cast back": (
        lambda x, w, e: (x.float() / (_ms(x.float()) + e).sqrt() * w.float()).to(x.dtype),
        "float32"),
    "sqrt(ms) (1 + eps)": (lambda x, w, e: x / (_ms(x).sqrt() * (1 + e)) * w, None),
    "sum / shape[0]": (lambda x, w, e: x / (x.pow(2).sum(-1, keepdim=True) / x.shape[0]
                                            + e).sqrt() * w, None),
    # our own
    "d - 1 in the mean": (lambda x, w, e: x / (x.pow(2).sum(-1, keepdim=True)
                                               / (x.shape[-1] - 1) + e).sqrt() * w, None),
    "gain inside the statistic": (lambda x, w, e: (x * w) / (_ms(x * w) + e).sqrt(), None),
    "eps squared": (lambda x, w, e: x / (_ms(x) + e * e).sqrt() * w, None),
    "keepdim forgotten": (lambda x, w, e: x / (x.pow(2).mean(-1) + e).sqrt() * w, None),
    "the caller's x changed in place": (lambda x, w, e: x.mul_(torch.rsqrt(_ms(x) + e)).mul_(w),
                                        None),
}


@pytest.mark.parametrize("name", sorted(RMS_WRONG))
def test_rms_norm_refuses(name):
    wrong, mistake = RMS_WRONG[name]
    verdict = lib.check_rms_norm(wrong)
    assert not verdict, (name, verdict.message)
    if mistake:
        assert mistake in verdict.message, (name, verdict.message)


def test_rms_norm_accepts_right_versions():
    assert lib.check_rms_norm(lambda x, w, e: x * torch.rsqrt(_ms(x) + e) * w)
    assert lib.check_rms_norm(lambda x, w, e: torch.nn.functional.rms_norm(
        x, (x.shape[-1],), w, e))


# ------------------------------------------------------------ ch 14, repeat_kv


def _group(k, h):
    return h // k.shape[1]


REPEAT_WRONG = {
    # the review's
    "expand with the group axis first": (
        lambda k, h: k[:, None].expand(k.shape[0], _group(k, h), *k.shape[1:]).reshape(
            k.shape[0], h, *k.shape[2:]), "tiled"),
    "cat([k] * group)": (lambda k, h: torch.cat([k] * _group(k, h), 1), "tiled"),
    "index j % g": (lambda k, h: k[:, torch.arange(h) % k.shape[1]], "tiled"),
    "group from the batch axis": (lambda k, h: k.repeat_interleave(h // k.shape[0], 1), None),
    "group left a float": (lambda k, h: k.repeat_interleave(h / k.shape[1], 1), None),
    "group rounded up, truncated": (
        lambda k, h: k.repeat_interleave(-(-h // k.shape[1]) + 1, 1)[:, :h], None),
    # our own
    "group from d_head": (lambda k, h: k.repeat_interleave(max(1, h // k.shape[-1]), 1), None),
    "factor 2 written in": (lambda k, h: k.repeat_interleave(2, 1), None),
    "float32 result": (lambda k, h: k.repeat_interleave(_group(k, h), 1).float(), "dtype"),
    "heads read from the end": (lambda k, h: k.flip(1).repeat_interleave(_group(k, h), 1), None),
}


@pytest.mark.parametrize("name", sorted(REPEAT_WRONG))
def test_repeat_kv_refuses(name):
    wrong, mistake = REPEAT_WRONG[name]
    verdict = lib.check_repeat_kv(wrong)
    assert not verdict, (name, verdict.message)
    if mistake:
        assert mistake in verdict.message, (name, verdict.message)


def test_repeat_kv_accepts_right_versions():
    assert lib.check_repeat_kv(lambda k, h: k.repeat_interleave(_group(k, h), 1))
    assert lib.check_repeat_kv(lambda k, h: k[:, :, None].expand(
        k.shape[0], k.shape[1], _group(k, h), *k.shape[2:]).reshape(k.shape[0], h, *k.shape[2:]))


# ------------------------------------------------------------ ch 14, kv_bytes_per_token


KV_WRONG = {
    # the review's
    "float result": (lambda L, h, g, d, b: float(2 * L * g * d * b), "int"),
    "bytes_per_value left out": (lambda L, h, g, d, b: 2 * L * g * d, None),
    "K, V and Q counted": (lambda L, h, g, d, b: 2 * L * g * d * b + L * h * d * b, None),
    "divided by the group size": (lambda L, h, g, d, b: 2 * L * g * d * b // (h // g), None),
    "h d per kv head": (lambda L, h, g, d, b: 2 * L * g * h * d * b, None),
    # our own
    "d_model per kv head, h d": (lambda L, h, g, d, b: 2 * L * g * (h * d) * b, None),
    "KiB instead of bytes": (lambda L, h, g, d, b: 2 * L * g * d * b // 1024, None),
    "layers added, not multiplied": (lambda L, h, g, d, b: 2 * (L + g) * d * b, None),
    "group ratio as a float": (lambda L, h, g, d, b: 2 * L * h * d * b * (g / h), "int"),
}


@pytest.mark.parametrize("name", sorted(KV_WRONG))
def test_kv_bytes_refuses(name):
    wrong, mistake = KV_WRONG[name]
    verdict = lib.check_kv_bytes_per_token(wrong)
    assert not verdict, (name, verdict.message)
    if mistake:
        assert mistake in verdict.message, (name, verdict.message)
