"""Checkers for the chapter "Generating text" (chapter 17): top-p, the offset causal mask,
the bytes one decoding step reads.

Each checker runs the learner's function on cases chosen to separate right code from
plausible wrong code, compares with a reference (`check_function`), names the mistake
when a written-out wrong solution gives the same outputs, and then holds the result to
a contract (exact dtype, no NaN). Tests: tests/test_checkers_generating.py.
"""

from __future__ import annotations

import torch

from lib.teach.checking import Case, Mistake, Verdict, check_function

__all__ = ["check_top_p", "check_offset_causal_mask", "check_bytes_per_token"]


# ---------------------------------------------------------------- top-p
def _top_p_reference(probs: torch.Tensor, p: float) -> torch.Tensor:
    sorted_p, _ = probs.sort(dim=-1, descending=True)
    before = sorted_p.cumsum(dim=-1) - sorted_p
    n_kept = (before < p).sum(dim=-1, keepdim=True)
    last = sorted_p.gather(-1, n_kept - 1)
    kept = probs * (probs >= last)
    return kept / kept.sum(dim=-1, keepdim=True)


def _crossing_dropped(probs, p):
    sorted_p, order = probs.sort(dim=-1, descending=True)
    keep_sorted = sorted_p.cumsum(dim=-1) <= p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _not_renormalised(probs, p):
    return probs * (_top_p_reference(probs, p) > 0)


def _ties_broken(probs, p):
    sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
    before = sorted_p.cumsum(dim=-1) - sorted_p
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < p)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _unsorted_cumsum(probs, p):
    before = probs.cumsum(dim=-1) - probs  # the vocabulary's order, not the probabilities'
    kept = probs * (before < p)
    return kept / kept.sum(dim=-1, keepdim=True)


_TOP_P_MISTAKES = [
    Mistake("the token that crosses p dropped",
            "Keep a token while the mass BEFORE it is < p: the token that takes the total past "
            "p is kept (the smallest set whose mass reaches p).", _crossing_dropped),
    Mistake("not renormalised",
            "The kept probabilities must sum to 1 again: divide by their sum.", _not_renormalised),
    Mistake("a tie at the cut broken by position",
            "Tokens as probable as the last one kept are kept too: compare each probability with "
            "the last kept one (probs >= last), not its position in the sorted order.", _ties_broken),
    Mistake("mass summed in vocabulary order",
            "Sort the probabilities in decreasing order before the running sum; in token-id order "
            "the cut falls on arbitrary tokens.", _unsorted_cumsum),
]


def _top_p_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    random = torch.rand(3, 11, generator=g, dtype=torch.float64).pow(3)
    random = random / random.sum(-1, keepdim=True)
    ties = torch.tensor([[0.3, 0.2, 0.2, 0.2, 0.1]], dtype=torch.float64)
    crossing = torch.tensor([[0.05, 0.5, 0.25, 0.15, 0.05]], dtype=torch.float64)
    return [
        Case((crossing, 0.6), label="the token crossing p (0.5 + 0.25 > 0.6), unsorted ids"),
        Case((ties, 0.4), label="three tokens tied at the cut"),
        Case((crossing, 1.0), label="p = 1: every token kept"),
        Case((crossing, 0.01), label="p below the top probability: the top token alone"),
        Case((random, 0.8), label="3 random rows"),
        Case((random.float(), 0.5), label="float32 rows"),
        Case((torch.tensor([[0.0, 0.7, 0.0, 0.3]], dtype=torch.float64), 0.75),
             label="tokens of probability 0"),
    ]


def check_top_p(top_p_filter) -> Verdict:
    """The chapter's exercise: ``top_p_filter(probs, p)``, probs (B, |V|) float rows summing
    to 1, 0 < p <= 1 -> the top-p distribution (B, |V|), same dtype, renormalised.

    Input classes that separate right from plausible-wrong code: a row where the token
    crossing p decides (and whose ids are not in probability order), a tie at the cut,
    p = 1, p below the largest probability, several random rows, float32 rows, tokens
    of probability 0. Mistakes named: crossing token dropped, not renormalised, ties
    broken by position, mass summed in vocabulary order."""
    verdict = check_function(top_p_filter, _top_p_reference, _top_p_cases(), _TOP_P_MISTAKES,
                             name="top_p_filter")
    if not verdict:
        return verdict
    for case in _top_p_cases():
        out = top_p_filter(*case.args)
        if out.dtype != case.args[0].dtype or bool(torch.isnan(out).any()):
            return Verdict(False, f"✗ top_p_filter returned {out.dtype} (or NaN) on "
                           f"{case.label}; keep the input's dtype.", mistake="dtype")
    return Verdict(True, f"✓ top_p_filter matches the formula on all {len(_top_p_cases())} "
                   "cases (the crossing token, ties at the cut, p = 1, zeros).")


# ---------------------------------------------------------------- offset causal mask
def _mask_reference(c: int, p: int) -> torch.Tensor:
    return torch.ones(c, p + c, dtype=torch.bool).tril(diagonal=p)


_MASK_MISTAKES = [
    Mistake("top-left alignment (is_causal=True's)",
            "Query i sits at position p + i, not i: it sees keys 0 .. p + i. tril(..., diagonal=p) "
            "aligns the triangle to the bottom-right corner; diagonal=0 lets the early queries "
            "see only the first keys.", lambda c, p: torch.ones(c, p + c, dtype=torch.bool).tril()),
    Mistake("one key short",
            "A query sees its own key: key p + i is allowed for query i (diagonal=p, not p - 1).",
            lambda c, p: torch.ones(c, p + c, dtype=torch.bool).tril(diagonal=p - 1)),
    Mistake("one key too many",
            "Key p + i + 1 is the next token: query i must not see it (diagonal=p, not p + 1).",
            lambda c, p: torch.ones(c, p + c, dtype=torch.bool).tril(diagonal=p + 1)),
    Mistake("the mask of the chunk alone",
            "The queries attend over the p cached keys as well: the mask is (c, p + c).",
            lambda c, p: torch.ones(c, c, dtype=torch.bool).tril()),
    Mistake("True where masked",
            "Here True means 'may attend' (as in F.scaled_dot_product_attention's boolean "
            "attn_mask): invert your mask.",
            lambda c, p: ~torch.ones(c, p + c, dtype=torch.bool).tril(diagonal=p)),
]


def _mask_cases() -> list[Case]:
    return [Case((c, p), label=f"c={c}, p={p}") for c, p in
            ((1, 5), (3, 2), (4, 0), (7, 9), (1, 0), (2, 30))]


def check_offset_causal_mask(offset_causal_mask) -> Verdict:
    """The chapter's exercise: ``offset_causal_mask(c, p)`` -> bool (c, p + c), True where
    query i (position p + i) may attend key j.

    Input classes: one new token after a cache (c = 1, p > 0: decoding), a chunk after a
    cache (c, p > 0, c < p and c > p), no cache (p = 0, where top-left and bottom-right
    agree), one token and no cache. Mistakes named: top-left, diagonal p - 1, p + 1, the
    chunk's square mask, inverted; the dtype must be bool."""
    cases = _mask_cases()
    verdict = check_function(offset_causal_mask, _mask_reference, cases, _MASK_MISTAKES,
                             name="offset_causal_mask")
    if not verdict:
        return verdict
    for case in cases:
        if offset_causal_mask(*case.args).dtype != torch.bool:
            return Verdict(False, "✗ offset_causal_mask must return dtype torch.bool.",
                           mistake="dtype")
    return Verdict(True, f"✓ offset_causal_mask is the bottom-right mask on all {len(cases)} "
                   "cases (decoding, chunks after a cache, no cache).")


# ---------------------------------------------------------------- bytes per token
def _real_bytes(config, context: int, weight_bytes: int, kv_bytes: int) -> int:
    """From the tensors themselves: a model built on the meta device, its parameters
    counted once (a tied matrix once), and a cache of the real shape."""
    with torch.device("meta"):
        model = config.build()
        n_weights = sum(p.numel() for p in model.parameters())
        d_head = config.d_model // config.n_heads
        k = torch.empty(1, config.n_kv_heads, context, d_head)
    return n_weights * weight_bytes + 2 * config.n_layers * k.numel() * kv_bytes


def _params(c, *, tied_twice=False):
    d, f, dh = c.d_model, c.d_ff, c.d_model // c.n_heads
    block = 2 * d * d + 2 * d * c.n_kv_heads * dh + 3 * d * f + 2 * d
    head = 0 if c.tie_embeddings and not tied_twice else c.vocab_size * d
    return c.vocab_size * d + c.n_layers * block + d + head


def _kv(c, context, *, heads=None, factor=2):
    return factor * c.n_layers * (heads or c.n_kv_heads) * (c.d_model // c.n_heads) * context


_BYTES_MISTAKES = [
    Mistake("the query heads counted in the cache",
            "Only the n_kv_heads key/value heads are cached (grouped-query attention): "
            "2 · n_layers · n_kv_heads · d_head bytes-per-number per position.",
            lambda c, t, w, b: _params(c) * w + _kv(c, t, heads=c.n_heads) * b),
    Mistake("keys or values only",
            "The cache holds keys AND values: a factor 2.",
            lambda c, t, w, b: _params(c) * w + _kv(c, t, factor=1) * b),
    Mistake("the KV cache forgotten",
            "A step also reads the keys and values of every earlier position.",
            lambda c, t, w, b: _params(c) * w),
    Mistake("the tied head counted twice",
            "With tie_embeddings the head IS the embedding matrix: it is one tensor, read once.",
            lambda c, t, w, b: _params(c, tied_twice=True) * w + _kv(c, t) * b),
    Mistake("one byte width for both",
            "The cache's numbers may be stored narrower or wider than the weights: weights "
            "× weight_bytes, cache × kv_bytes.",
            lambda c, t, w, b: (_params(c) + _kv(c, t)) * w),
]


def _bytes_cases() -> list[Case]:
    from lib.model.modern import ModernConfig

    smollm2 = ModernConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3,
                           d_ff=1536, max_len=8192)
    untied = ModernConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4, n_kv_heads=1,
                          d_ff=64, tie_embeddings=False)
    mha = ModernConfig(vocab_size=50, d_model=16, n_layers=3, n_heads=2, n_kv_heads=2, d_ff=40)
    return [
        Case((smollm2, 1000, 4, 4), label="SmolLM2 in float32, 1,000 positions"),
        Case((smollm2, 1, 2, 2), label="SmolLM2 in bfloat16, 1 position"),
        Case((untied, 10, 1, 2), label="untied head, int8 weights, bf16 cache"),
        Case((mha, 7, 4, 4), label="no grouping (n_kv_heads = n_heads)"),
        Case((untied, 0, 4, 4), label="an empty cache"),
    ]


def check_bytes_per_token(bytes_per_token) -> Verdict:
    """The chapter's exercise: ``bytes_per_token(config, context, weight_bytes, kv_bytes)``,
    a bias-free `lib.ModernConfig` (SwiGLU, RMSNorm) -> the bytes one decoding step reads:
    every weight once (a tied head once) plus the keys and values of ``context`` positions.
    The reference counts real tensors (a model built on the meta device).

    Input classes: SmolLM2's config (tied, grouped) at two byte widths, an untied head with
    different widths for weights and cache, no grouping (where the query-heads mistake is
    invisible), an empty cache. Mistakes named: query heads in the cache, no factor 2, no
    cache, tied head twice, one byte width."""
    verdict = check_function(bytes_per_token, _real_bytes, _bytes_cases(), _BYTES_MISTAKES,
                             name="bytes_per_token")
    if not verdict:
        return verdict
    for case in _bytes_cases():
        if not isinstance(bytes_per_token(*case.args), int):
            return Verdict(False, "✗ bytes_per_token must return an int (a count of bytes).",
                           mistake="not an int")
    return Verdict(True, f"✓ bytes_per_token equals the tensors' real sizes on all "
                   f"{len(_bytes_cases())} cases.")
