"""Samplers as transformations of a distribution: temperature, top-k, top-p, min-p.

Introduced in chapter 17 (generating text).

Each sampler is the formula it is, applied to one step's logits z (B, |V|):

    temperature T   pi = softmax(z / T); T = 0 is the limit: all mass on the argmax
                    (the first of tied maxima, as ``max`` gives it), i.e. greedy
    top-k           keep the tokens whose pi is at least the k-th largest pi
                    (every token tied with the k-th is kept; k >= |V| keeps all)
    top-p           sort pi in decreasing order; keep a token if the mass of the tokens
                    before it is < p, so the token that crosses p is kept (Holtzman et
                    al., 2020); tokens tied with the last one kept are kept too; p = 1
                    keeps every token
    min-p           keep the tokens with pi >= min_p * max(pi) (Nguyen et al., 2024)

Every cut is computed on the same tempered distribution pi, and the kept set (the
intersection of the cuts) is renormalised once, at the end:

    q(x) = pi(x) [x kept] / sum_y pi(y) [y kept].

(Hugging Face and vLLM renormalise after top-k and compute top-p's mass on that
renormalised distribution; with one cut at a time the two definitions agree.)
`sampler_probs` returns q in float64; `sample` draws from it. The exactness tests in
tests/test_sampling.py compare q with the formula written out per token, and the
draws' frequencies with q by a chi-square test.

`generate_sampled` continues a prompt with any `lib` decoder (`lib.DecoderOnlyModel`,
`lib.ModernDecoder`, SmolLM2's `lib.LlamaDecoder`) through a `lib.KVCache`.
"""

from __future__ import annotations

import math

import torch

from lib._checks import require_float, require_int, require_number, shape
from lib.model.kv_cache import KVCache
from lib.train.generate import _check_finite_logits, _has_last_only, _model_device, context_length

__all__ = ["sampler_probs", "sample", "generate_sampled", "chi_square_test"]


def _check_settings(temperature, top_k, top_p, min_p, vocab_size: int) -> tuple:
    temperature = require_number("temperature", temperature)
    if not (temperature >= 0.0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be >= 0 and finite (0 = greedy), got {temperature}")
    if top_k is not None:
        top_k = require_int("top_k", top_k)
        if top_k <= 0:
            raise ValueError(f"top_k must be a positive number of tokens (or None), got {top_k}")
    if top_p is not None:
        top_p = require_number("top_p", top_p)
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if min_p is not None:
        min_p = require_number("min_p", min_p)
        if not 0.0 <= min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {min_p}")
    return float(temperature), top_k, top_p, min_p


def _check_logits(logits) -> torch.Tensor:
    require_float("logits", logits)
    if logits.dim() != 2 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (B, |V|) with |V| > 0, got {shape(logits)}")
    _check_finite_logits(logits)
    return logits


def sampler_probs(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> torch.Tensor:
    """logits (B, |V|) -> the distribution the sampler draws from, q (B, |V|) float64.

    The module docstring gives the formula. NaN, +inf, or a row of only -inf logits
    is a ValueError (no distribution to draw from); a -inf logit is a token that
    cannot be drawn. Arguments are checked before any computation.
    """
    temperature, top_k, top_p, min_p = _check_settings(temperature, top_k, top_p, min_p, 0)
    logits = _check_logits(logits).double()  # (B, |V|)
    if temperature == 0.0:  # the limit T -> 0: greedy
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    pi = (logits / temperature).softmax(dim=-1)  # (B, |V|) the tempered distribution
    keep = pi > 0
    if top_k is not None and top_k < pi.shape[-1]:
        kth = pi.topk(top_k, dim=-1).values[:, -1:]  # (B, 1) the k-th largest
        keep &= pi >= kth
    if top_p is not None and top_p < 1.0:
        sorted_pi, _ = pi.sort(dim=-1, descending=True)  # (B, |V|)
        before = sorted_pi.cumsum(dim=-1) - sorted_pi  # mass of the tokens before each
        n_kept = (before < top_p).sum(dim=-1, keepdim=True)  # >= 1: the first has 0 before
        last = sorted_pi.gather(-1, n_kept - 1)  # (B, 1) the token that crosses p
        keep &= pi >= last  # and every token tied with it
    if min_p is not None:
        keep &= pi >= min_p * pi.max(dim=-1, keepdim=True).values
    q = pi * keep
    return q / q.sum(dim=-1, keepdim=True)


def sample(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits (B, |V|) -> one token id per row (B,) int64, drawn from `sampler_probs`.

    ``temperature=0`` returns the argmax (no random number is used)."""
    q = sampler_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    if temperature == 0:
        return q.argmax(dim=-1)
    return torch.multinomial(q, 1, generator=generator).squeeze(-1)


def chi_square_test(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, float, int]:
    """Pearson's chi-square goodness-of-fit test of `counts` (|V|,) against `probs` (|V|,).

    Returns (statistic, p-value, degrees of freedom). Tokens with probability 0 must have
    count 0 (else the p-value is 0); the others form the cells. The p-value is the upper
    tail of the chi-square distribution, ``torch.special.gammaincc(dof / 2, stat / 2)``.
    A test that rejects below a p-value of alpha raises a false alarm on a right sampler
    with probability alpha."""
    counts, probs = counts.double().flatten(), probs.double().flatten()
    if counts.shape != probs.shape:
        raise ValueError(f"counts {shape(counts)} and probs {shape(probs)} must match")
    n = float(counts.sum())
    if n <= 0:
        raise ValueError("counts: no draws")
    if bool((counts[probs == 0] > 0).any()):
        return math.inf, 0.0, int((probs > 0).sum()) - 1
    cells = probs > 0
    expected = n * probs[cells]
    stat = float(((counts[cells] - expected) ** 2 / expected).sum())
    dof = int(cells.sum()) - 1
    if dof == 0:
        return stat, 1.0, 0
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                            torch.tensor(stat / 2, dtype=torch.float64)))
    return stat, p_value, dof


@torch.no_grad()
def generate_sampled(
    model,
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue ``prompt`` (B, P) or (P,) by ``max_new_tokens`` tokens drawn by `sample`,
    with a `lib.KVCache`, for any `lib` decoder-only model. ``temperature=0`` is greedy
    decoding (the same tokens as ``lib.generate(..., greedy=True)``)."""
    _check_settings(temperature, top_k, top_p, min_p, 0)
    max_len = context_length(model)
    if not isinstance(prompt, torch.Tensor) or prompt.is_floating_point() or prompt.dtype == torch.bool:
        raise TypeError(f"prompt must be a tensor of integer token ids, got {prompt!r:.60}")
    one_row = prompt.dim() == 1
    tokens = prompt[None] if one_row else prompt
    if tokens.dim() != 2 or 0 in tokens.shape:
        raise ValueError(f"prompt must have shape (B, P) or (P,) with B, P > 0, got {shape(prompt)}")
    require_int("max_new_tokens", max_new_tokens, minimum=0)
    if tokens.shape[1] + max_new_tokens > max_len:
        raise ValueError(f"max_new_tokens: {tokens.shape[1]} + {max_new_tokens} positions is more "
                         f"than the model's max_len={max_len}")
    model.eval()
    tokens = tokens.to(_model_device(model)).long()
    cache = KVCache(len(model.layers))
    step_input = tokens
    last_only = {"last_only": True} if _has_last_only(model) else {}
    for step in range(max_new_tokens):
        logits = model(step_input, cache=cache, **(last_only if step == 0 else {}))[:, -1]
        next_id = sample(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                         min_p=min_p, generator=generator)
        tokens = torch.cat([tokens, next_id[:, None]], dim=1)
        step_input = next_id[:, None]
    return tokens[0] if one_row else tokens
