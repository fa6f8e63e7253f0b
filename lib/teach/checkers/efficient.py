"""Checkers for the efficient-attention chapter's coding exercises (see lib.teach.checking)."""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lib.teach.checking import NOT_IMPLEMENTED, Case, Mistake, Verdict, check_function

__all__ = ["check_online_softmax_stats", "check_merge_partials"]


def _stats_reference(scores: torch.Tensor, block_size: int):
    m = scores.amax(dim=-1)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # a fully masked row: (-inf, 0)
    return m, torch.exp(scores - shift[..., None]).sum(dim=-1)


def _stats_blockwise(scores, block_size, update, *, m_start=-math.inf, dtype=None, stop=None):
    """Visit the keys in blocks; `update(m, l, block)` returns the new (m, l)."""
    dtype = dtype or scores.dtype
    scores = scores.to(dtype)
    m = torch.full(scores.shape[:-1], m_start, dtype=dtype)
    l = torch.zeros(scores.shape[:-1], dtype=dtype)
    for start in range(0, stop or scores.shape[-1], block_size):
        m, l = update(m, l, scores[..., start:start + block_size])
    return m, l


def _right_update(m, l, block):
    """The update of the chapter's math section, without a guard for masked blocks."""
    m_new = torch.maximum(m, block.amax(dim=-1))
    return m_new, l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)


def _guarded_update(m, l, block):
    """The same update, shifting by 0 while the maximum is still -inf (by-hand exercise 1)."""
    m_new = torch.maximum(m, block.amax(dim=-1))
    shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    return m_new, l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)


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
        old = l * torch.exp(torch.nan_to_num(m - m_block, neginf=-math.inf))
        return m_block, old + torch.exp(block - m_block[..., None]).sum(dim=-1)

    return _stats_blockwise(scores, block_size, update)


def _max_starts_at_zero(scores, block_size):
    return _stats_blockwise(scores, block_size, _right_update, m_start=0.0)


def _last_block_skipped(scores, block_size):
    n = scores.shape[-1]
    return _stats_blockwise(scores, block_size, _right_update, stop=n - n % block_size or n)


def _in_float32(scores, block_size):
    return _stats_blockwise(scores, block_size, _right_update, dtype=torch.float32)


def _no_guard(scores, block_size):
    return _stats_blockwise(scores, block_size, _right_update)


def _stats_cases() -> list[Case]:
    """Finite scores: random rows, rows that are all negative, rising rows, large scores."""
    g = torch.Generator().manual_seed(0)
    cases = []
    settings = (((3, 10), 4, torch.float64), ((2, 2, 16), 5, torch.float32), ((4, 7), 7, torch.float64))
    for shape, block, dtype in settings:
        scores = torch.randn(shape, generator=g, dtype=dtype) * 3
        cases.append(Case((scores, block), label=f"scores {shape}, block_size {block}"))
    for shape, block, dtype in (((3, 9), 4, torch.float64), ((2, 11), 3, torch.float32)):
        scores = torch.randn(shape, generator=g, dtype=dtype) - 10  # every maximum below 0
        label = f"rows whose scores are all negative, {str(dtype)[6:]}"
        cases.append(Case((scores, block), label=label))
    rising = torch.arange(12, dtype=torch.float64).repeat(2, 1)  # the maximum grows in every block
    cases.append(Case((rising, 3), label="scores that rise block after block"))
    large = torch.tensor([[800.0, 805.0, 790.0, 810.0]], dtype=torch.float64)
    cases.append(Case((large, 2), label="large scores"))
    return cases


def _masked_cases() -> list[Case]:
    """Masked keys (-inf): a row with no allowed key, and rows whose first block is all masked."""
    g = torch.Generator().manual_seed(3)
    cases = []
    for dtype in (torch.float64, torch.float32):
        scores = torch.randn(3, 8, generator=g, dtype=dtype) * 2
        scores[0] = -math.inf  # every key masked: (m, l) = (-inf, 0)
        scores[1, :3] = -math.inf  # the first block masked, the rest allowed
        scores[2, 5:] = -math.inf  # padding at the end
        cases.append(Case((scores, 3), label=f"masked keys (-inf), {str(dtype)[6:]}"))
    return cases


_FULL_ROW_OPS = ("amax", "max", "logsumexp", "_softmax", "_log_softmax", "sort", "topk", "argmax",
                 "cummax", "cummin", "kthvalue", "median")


class _FullRowReduction(TorchDispatchMode):
    """Records whether any reduction looks at a whole row of length n (> the block size)."""

    def __init__(self, n: int):
        super().__init__()
        self.n, self.seen = n, ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        first = args[0] if args else None
        name = func.overloadpacket.__name__
        if name in _FULL_ROW_OPS and isinstance(first, torch.Tensor) and first.dim():
            if first.shape[-1] == self.n and not self.seen:
                self.seen = f"torch.{name.lstrip('_')}"
        return func(*args, **(kwargs or {}))


def _reduces_whole_rows(fn) -> str:
    """The reduction `fn` runs over whole rows on a case with several blocks ("" if none)."""
    scores, block = torch.randn(3, 10, dtype=torch.float64) * 3, 4
    with _FullRowReduction(scores.shape[-1]) as mode:
        try:
            fn(scores, block)
        except Exception:  # noqa: BLE001  (the checker reports the learner's errors)
            return ""
    return mode.seen


def _changes_its_input(fn, args) -> bool:
    """Whether `fn(*args)` writes into one of its tensor arguments (run on copies)."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    try:
        fn(*copies)
    except Exception:  # noqa: BLE001  (the checker reports the learner's errors)
        return False
    return any(isinstance(a, torch.Tensor) and not torch.equal(a, c) for a, c in zip(args, copies))


def _in_place_verdict(name: str, what: str) -> Verdict:
    mistake = f"the caller's {what} changed in place"
    return Verdict(False, f"✗ {name} returns the right values but writes into its input. "
                          f"Likely mistake: {mistake}.\n  An in-place operation (-=, mul_, "
                          "a slice assigned) on a view changes the tensor the caller passed; "
                          "compute new tensors instead.", mistake=mistake)


def check_online_softmax_stats(online_softmax_stats) -> Verdict:
    """Exercise: (m, l) = (max_j s_j, Σ_j exp(s_j − m)) in one pass over blocks of keys.

    Checked in two steps: finite scores (the classic slips of the update), then
    masked keys (-inf), which need the guard of by-hand exercise 1. A solution
    that takes the maximum over the whole row first (no blocks) is named too.

    Input classes that separate right from plausible-wrong code, each in the cases:
    several rows with different maxima (one maximum for all rows); rows whose scores
    are all negative (a running maximum started at 0); scores that rise block after
    block (no rescaling, the factor upside down, the block's maximum kept alone);
    scores near 800 (no maximum subtracted: exp overflows); a block size that does not
    divide n (the last, shorter block skipped); float64 and float32 (the dtype, exact);
    2-D and 3-D scores; the caller's scores left as they were (no in-place update
    of a view); a row with every key masked, a first block all masked and
    padding at the end (the -inf guard, in both exponentials); and, on a case of
    several blocks, any whole-row reduction (max, amax, sort, topk, cummax, cummin,
    logsumexp, softmax), which is not one pass.
    """
    name = "online_softmax_stats"
    mistakes = [
        Mistake(
            "the running maximum starts at 0",
            "m must start at −∞: a row whose scores are all negative has a negative maximum, "
            "and torch.zeros makes it 0. Use torch.full(..., -math.inf).",
            _max_starts_at_zero,
        ),
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
        Mistake(
            "the last, shorter block is skipped",
            "When block_size does not divide n the last block is shorter: "
            "loop with range(0, n, block_size) and slice to start + block_size.",
            _last_block_skipped,
        ),
        Mistake(
            "computed in float32",
            "torch.zeros and torch.full make float32 unless told: "
            "create m and l with dtype=scores.dtype, and do not convert the scores.",
            _in_float32,
        ),
    ]
    finite = _stats_cases()
    verdict = check_function(online_softmax_stats, _stats_reference, finite, mistakes, name=name)
    # Right values, or wrong ones no listed mistake explains: was it done without blocks?
    if verdict or (verdict.mistake is None and NOT_IMPLEMENTED not in verdict.message):
        whole = _reduces_whole_rows(online_softmax_stats)
        if whole:
            return _whole_row_verdict(name, whole)
    if not verdict:
        return verdict
    guard = Mistake(
        "a masked block gives exp(−∞ − (−∞)) = nan",
        "While every score seen so far is −∞, m_new is −∞ too: subtract 0 instead of m_new "
        "(torch.where(torch.isinf(m_new), 0, m_new)), as in by-hand exercise 1.",
        _no_guard,
    )
    masked = _masked_cases()
    verdict = check_function(online_softmax_stats, _stats_reference, masked, [guard], name=name)
    if not verdict:
        return verdict
    if any(_changes_its_input(online_softmax_stats, case.args) for case in finite + masked):
        return _in_place_verdict(name, "scores")
    return Verdict(
        True,
        f"✓ {name} matches the reference on all {len(finite) + len(masked)} test cases "
        "(masked keys included).",
    )


def _whole_row_verdict(name: str, op: str) -> Verdict:
    mistake = "the maximum is taken over the whole row up front"
    return Verdict(
        False,
        f"✗ {name} does not work block by block. Likely mistake: {mistake}.\n"
        f"  It calls {op} on whole rows of scores. The point of the exercise is one pass: "
        "keep a running maximum and rescale l when it grows.",
        mistake=mistake,
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
    for dtype in (torch.float64, torch.float32):
        q = torch.randn(1, 4, 4, generator=g, dtype=dtype)
        k = torch.randn(1, 6, 4, generator=g, dtype=dtype)
        v = torch.randn(1, 6, 4, generator=g, dtype=dtype)
        k[:, :3] *= 200  # the first part's scores in the hundreds: maxima far apart
        first, second = _partial(q, k[:, :3], v[:, :3]), _partial(q, k[:, 3:], v[:, 3:])
        cases.append(Case((*first, *second), label=f"maxima far apart, {str(dtype)[6:]}"))
        m2, l2, o2 = second
        m2, l2, o2 = m2.clone(), l2.clone(), o2.clone()
        m2[:, :2], l2[:, :2], o2[:, :2] = -math.inf, 0.0, 0.0  # no allowed key there
        cases.append(Case((*first, m2, l2, o2),
                          label=f"a part with no allowed key (m = -inf, l = 0), {str(dtype)[6:]}"))
    return cases


def check_merge_partials(merge_partials) -> Verdict:
    """Exercise: combine two partial attention results over disjoint keys into one.

    Input classes that separate right from plausible-wrong code, each in the cases:
    parts of different sizes and maxima (a plain average, normalisers compared without
    their maxima, the factor upside down, l1 + l2 returned, no renormalisation); m1 > m2
    on some rows and m1 < m2 on others (m = m1); maxima more than 100 apart (a factor
    exp(m1 − m2) taken against one part instead of the larger maximum overflows); a part
    with no allowed key (m = −∞, l = 0, o = 0: it must weigh nothing, not give nan);
    batches of 1 and 2 and float64 and float32 (the dtype, exact).
    """
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
        Mistake(
            "the normalisers' factor is upside down",
            "Each part shrinks to the common maximum m = max(m1, m2): "
            "w1 = l1 · exp(m1 − m) ≤ l1, not l1 · exp(m − m1).",
            _merge_upside_down,
        ),
        Mistake(
            "rescaled against the second part's maximum, not the larger one",
            "exp(m1 − m2) overflows when m1 is far above m2 (and is nan when a part has no "
            "key): bring both parts to m = max(m1, m2), so each factor is at most 1.",
            _merge_against_m2,
        ),
        Mistake(
            "the merged normaliser is l1 + l2",
            "The output is right, but l must be relative to the returned m: "
            "l = l1 · exp(m1 − m) + l2 · exp(m2 − m).",
            _merge_sum_of_normalisers,
        ),
    ]
    return check_function(merge_partials, _merge_reference, _merge_cases(), mistakes, name="merge_partials")


def _merge_upside_down(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = l1 * torch.exp(m - m1), l2 * torch.exp(m - m2)
    return m, w1 + w2, (w1[..., None] * o1 + w2[..., None] * o2) / (w1 + w2)[..., None]


def _merge_against_m2(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = l1 * torch.exp(m1 - m2), l2
    o = (w1[..., None] * o1 + w2[..., None] * o2) / (w1 + w2)[..., None]
    return m, (w1 + w2) * torch.exp(m2 - m), o


def _merge_sum_of_normalisers(m1, l1, o1, m2, l2, o2):
    m, _, o = _merge_reference(m1, l1, o1, m2, l2, o2)
    return m, l1 + l2, o


def check_ddp_token_weight(my_weight, shard: int = 0, tokens=(100, 100, 100, 300), *,
                           name: str = "my_weight"):
    """Chapter 13, question 3 by hand: one token of shard `shard` in DDP's average,
    over its weight in the token mean: (1 / (P · t_shard)) / (1 / N) = N / (P · t_shard)."""
    from lib.teach.checkers._numbers import check_number

    if not isinstance(shard, int) or isinstance(shard, bool) or not 0 <= shard < len(tokens):
        raise ValueError(f"shard must be an index into tokens (0 to {len(tokens) - 1}), "
                         f"got {shard!r}")
    if any(not isinstance(t, int) or isinstance(t, bool) or t <= 0 for t in tokens):
        raise ValueError(f"tokens must be positive integers, got {tokens!r}")
    p, n, t = len(tokens), sum(tokens), tokens[shard]
    return check_number(my_weight, n / (p * t), atol=5e-3, name=name,
                        what=f"weight of a token of the {t}-token shard over the token mean's",
                        slips={
        "DDP's average taken for the token mean (every token 1/N)": (
            1.0, "DDP averages the four shards' mean losses: each shard weighs 1/P."),
        "the token's own weight 1/(P·t), not compared with the token mean": (
            1 / (p * t), "Divide it by the token mean's weight of a token, 1/N."),
        "the ratio upside down": (
            p * t / n, "Is a token of a short shard worth more or less in DDP's average?"),
        "the shard's weight 1/P, not spread over its tokens": (
            n / p, "The shard's 1/P is shared by its t tokens."),
    })


__all__ += ["check_ddp_token_weight"]
