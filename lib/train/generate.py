"""Generating text with a decoder-only language model: sampling and the KV cache.

Introduced in chapter 11 (a language model trained on real text).

`sample_next` turns one step's logits into next tokens: divide by a temperature,
keep the ``top_k`` most probable tokens, sample from the softmax. `generate`
extends a prompt token by token, greedily or by sampling, with or without a
`lib.KVCache`:

    without a cache   step t runs the model on the whole prefix (t tokens) and keeps
                      only the last position's logits: O(t) work per step, O(t²) in all;
    with a cache      the prompt runs once, then each step runs the model on the one
                      new token, reading the earlier keys and values from the cache.

Both paths compute the same function, so greedy generation gives the same tokens
(tests/test_kv_cache.py checks this with ``torch.equal``). A learned positional table
has no row beyond the model's ``max_len``: generation that would go past it is
refused before it starts (nanoGPT instead crops the context to its last
``max_len`` tokens; we keep the error, so the two paths stay comparable).
"""

from __future__ import annotations

import contextlib
import contextvars

import torch

from lib._checks import require_bool, require_float, require_int, require_number, require_positive_int, shape
from lib.model.kv_cache import KVCache

__all__ = ["sample_next", "generate", "context_length", "continuation_log_prob", "lm_beam_search"]


# Chapter 11's sampling-loop checker compares the learner's loop with `sample_next`:
# while it runs, `sample_next` and `generate` raise the checker's error, whatever name
# or alias they are called by (lib.sample_next, lib.train.sample_next, an earlier import).
_SAMPLER_REFUSAL: contextvars.ContextVar = contextvars.ContextVar("lib_sampler_refusal", default=None)


@contextlib.contextmanager
def sampler_refused(error: type[Exception]):
    """Inside the block, `sample_next` and `generate` raise ``error(message)`` on entry."""
    if not (isinstance(error, type) and issubclass(error, Exception)):
        raise TypeError(f"error must be an Exception class, got {error!r}")
    token = _SAMPLER_REFUSAL.set(error)
    try:
        yield
    finally:
        _SAMPLER_REFUSAL.reset(token)


def _refuse_if_checking(name: str) -> None:
    error = _SAMPLER_REFUSAL.get()
    if error is not None:
        raise error(
            f"the loop calls lib's {name}, which the checker compares it with: "
            "write the temperature, the top-k filter and the draw yourself"
        )


def _check_sampling(temperature, top_k, vocab_size: int | None) -> tuple[float, int | None]:
    temperature = require_number("temperature", temperature)
    if not temperature > 0.0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}: for the most probable token use greedy=True "
            "(the limit temperature -> 0)"
        )
    if top_k is not None:
        top_k = require_int("top_k", top_k)
        if top_k <= 0:
            raise ValueError(f"top_k must be a positive number of tokens (or None for all), got {top_k}")
        if vocab_size is not None and top_k > vocab_size:
            raise ValueError(f"top_k={top_k} is larger than the vocabulary (|V| = {vocab_size})")
    return temperature, top_k


def _check_finite_logits(logits: torch.Tensor) -> None:
    """Refuse NaN, +inf, and rows where every logit is -inf (no distribution to draw from)."""
    nan = torch.isnan(logits)
    if bool(nan.any()):
        row = int(nan.any(dim=-1).nonzero()[0])
        raise ValueError(
            f"logits: {int(nan.sum())} NaN values (the first in row {row}): no distribution to "
            "sample from; a model whose loss diverged produces NaN logits"
        )
    if bool((logits == float("inf")).any()):
        raise ValueError("logits: +inf values; the softmax of +inf is undefined (inf / inf)")
    dead = (logits == float("-inf")).all(dim=-1)
    if bool(dead.any()):
        raise ValueError(f"logits: row {int(dead.nonzero()[0])} is -inf everywhere: no token can be drawn")


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits (B, |V|) of the next token -> sampled ids (B,) int64.

    1. Divide the logits by ``temperature`` (> 0): below 1 sharpens the distribution
       towards the most probable token, above 1 flattens it towards uniform.
    2. With ``top_k``, keep the k largest logits of each row and set the others to
       -inf, so only those tokens can be drawn (1 <= top_k <= |V|). Every logit tied
       with the k-th largest is kept too (as nanoGPT and Hugging Face's top-k do), so a
       row may keep more than k tokens; top_k=1 is greedy up to exact ties.
    3. Draw one token per row from softmax(logits) with ``torch.multinomial``,
       using ``generator`` (seed it for a reproducible draw).

    NaN or +inf logits, or a row of only -inf, are refused with a ValueError (a model
    that diverged produces them; torch's own error would not name the argument).
    """
    _refuse_if_checking("sample_next")
    require_float("logits", logits)
    if logits.dim() != 2 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (B, |V|) with |V| > 0, got {shape(logits)}")
    temperature, top_k = _check_sampling(temperature, top_k, logits.shape[-1])
    _check_finite_logits(logits)
    logits = logits.float() / temperature  # (B, |V|)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1) the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(dim=-1)  # (B, |V|)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


def context_length(model) -> int:
    """The longest sequence `model` accepts: its positional table's ``max_len``."""
    pos = getattr(model, "pos", None)
    max_len = getattr(pos, "max_len", None)
    if max_len is None:
        raise TypeError(f"model: expected a lib.DecoderOnlyModel (with .pos.max_len), got {type(model).__name__}")
    return max_len


def _has_last_only(model) -> bool:
    """Does ``model(tokens, cache=..., last_only=True)`` exist (a `lib.ModernDecoder`)?"""
    from lib.model.modern import ModernDecoder

    return isinstance(model, ModernDecoder)


def _model_device(model) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


@torch.no_grad()
def generate(
    model,
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Continue ``prompt`` by ``max_new_tokens`` tokens with a `lib.DecoderOnlyModel`.

    prompt: (B, P) or (P,) integer ids, P >= 1 -> (B, P + max_new_tokens) or
    (P + max_new_tokens,): the prompt followed by the new tokens.
    ``greedy=True`` takes the most probable token at every step (argmax; then
    temperature and top_k are not used); otherwise tokens are drawn by `sample_next`
    with ``temperature``, ``top_k`` and ``generator``. ``use_cache`` chooses the
    KV-cached path (the default) or the full re-run of the prefix at every step.
    P + max_new_tokens must not exceed the model's ``max_len``.
    The model is put in eval mode (no dropout).
    """
    _refuse_if_checking("generate")
    max_len = context_length(model)
    require_bool("greedy", greedy)
    require_bool("use_cache", use_cache)
    if not greedy:
        _check_sampling(temperature, top_k, model.vocab_size)
    if not isinstance(prompt, torch.Tensor):
        raise TypeError(f"prompt must be a tensor of token ids, got {type(prompt).__name__}")
    if prompt.is_floating_point() or prompt.dtype == torch.bool:
        raise TypeError(f"prompt must hold integer token ids, got dtype {prompt.dtype}")
    one_row = prompt.dim() == 1
    tokens = prompt[None] if one_row else prompt
    if tokens.dim() != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"prompt must have shape (B, P) or (P,) with B, P > 0, got {shape(prompt)}")
    require_int("max_new_tokens", max_new_tokens, minimum=0)
    P = tokens.shape[1]
    if P > max_len:
        raise ValueError(f"prompt: {P} tokens is longer than the model's context (max_len={max_len})")
    if P + max_new_tokens > max_len:
        raise ValueError(
            f"max_new_tokens: {P} prompt tokens + {max_new_tokens} new ones = {P + max_new_tokens} positions, "
            f"more than the model's max_len={max_len}"
        )
    model.eval()
    tokens = tokens.to(_model_device(model)).long()
    cache = KVCache(len(model.layers)) if use_cache else None
    step_input = tokens  # the cached path feeds the whole prompt once, then one token a step
    # a lib.ModernDecoder can skip the head of the prompt's other positions (the same
    # last-position logits); other models compute every position's
    last_only = {"last_only": True} if _has_last_only(model) else {}
    for step in range(max_new_tokens):
        if cache is not None:
            logits = model(step_input, cache=cache, **(last_only if step == 0 else {}))[:, -1]
        else:
            logits = model(tokens)[:, -1]  # the whole prefix, every step
        if greedy:
            best, next_id = logits.max(dim=-1)  # (B,) each: the argmax, first of ties
            # max is NaN if a row holds a NaN, +inf if one holds +inf, -inf if the row is
            # -inf everywhere: finite maxima mean _check_finite_logits has nothing to
            # refuse, and the full check (several passes over B × |V|) runs only otherwise
            if not bool(torch.isfinite(best).all()):
                _check_finite_logits(logits)
        else:
            next_id = sample_next(logits, temperature, top_k, generator)
        tokens = torch.cat([tokens, next_id[:, None]], dim=1)
        step_input = next_id[:, None]  # (B, 1)
    return tokens[0] if one_row else tokens


def _one_row_ids(name: str, ids) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a tensor of token ids, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.dtype == torch.bool or ids.is_complex():
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.dim() != 1:
        raise ValueError(f"{name} must have shape (P,), one sequence, got {shape(ids)}")
    return ids.long()


@torch.no_grad()
def continuation_log_prob(model, prompt: torch.Tensor, continuation: torch.Tensor) -> float:
    """log p(continuation | prompt) under `model`, in nats: the sum over the new tokens.

    prompt (P,) with P >= 1 and continuation (N,) integer ids; P + N <= the model's
    ``max_len``. The model scores x_{t+1} from its output at position t (chapter 11):
    one forward pass on prompt + continuation[:-1]. Summed in float64.
    """
    max_len = context_length(model)
    prompt = _one_row_ids("prompt", prompt)
    continuation = _one_row_ids("continuation", continuation)
    if prompt.numel() == 0:
        raise ValueError("prompt must hold at least one token: the first token has no prediction")
    if prompt.numel() + continuation.numel() > max_len:
        raise ValueError(
            f"continuation: {prompt.numel()} + {continuation.numel()} tokens is more than the "
            f"model's max_len={max_len}"
        )
    if continuation.numel() == 0:
        return 0.0
    model.eval()
    device = _model_device(model)
    full = torch.cat([prompt, continuation]).to(device)
    log_p = model(full[None, :-1])[0].double().log_softmax(dim=-1)  # (P + N - 1, |V|)
    scored = log_p[prompt.numel() - 1 :]  # the predictions of the N new tokens
    return float(scored.gather(-1, continuation.to(device)[:, None]).sum())


@torch.no_grad()
def lm_beam_search(
    model, prompt: torch.Tensor, max_new_tokens: int, width: int
) -> tuple[torch.Tensor, float]:
    """The most probable continuation beam search finds: (tokens (P + N,), log-probability).

    Chapter 11 compares it with greedy decoding. At each of ``max_new_tokens`` steps every
    kept sequence is extended by every token, and the ``width`` most probable extensions
    (by their summed log-probability, float64) are kept; no length penalty is needed, as
    all candidates have the same length. ``width=1`` is greedy decoding. The returned
    log-probability is log p(new tokens | prompt) in nats. Runs the whole prefix at every
    step (no cache): meant for short continuations.
    """
    max_len = context_length(model)
    prompt = _one_row_ids("prompt", prompt)
    require_int("max_new_tokens", max_new_tokens, minimum=0)
    require_positive_int("width", width)
    if prompt.numel() == 0:
        raise ValueError("prompt must hold at least one token")
    if prompt.numel() + max_new_tokens > max_len:
        raise ValueError(
            f"max_new_tokens: {prompt.numel()} prompt tokens + {max_new_tokens} new ones is more "
            f"than the model's max_len={max_len}"
        )
    model.eval()
    beams = prompt.to(_model_device(model))[None]  # (1, P): one beam to start with
    scores = torch.zeros(1, dtype=torch.float64, device=beams.device)  # (beams,)
    for _ in range(max_new_tokens):
        log_p = model(beams)[:, -1].double().log_softmax(dim=-1)  # (beams, |V|)
        _check_finite_logits(log_p)
        V = log_p.shape[-1]
        total = (scores[:, None] + log_p).flatten()  # (beams * |V|,)
        scores, best = total.topk(min(width, total.numel()))  # sorted, highest first
        beams = torch.cat([beams[best // V], (best % V)[:, None]], dim=1)
    return beams[0], float(scores[0])
