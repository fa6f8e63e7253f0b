"""Speculative decoding: a small draft proposes k tokens, the target checks them in one pass.

Introduced in chapter 17 (generating text).

A round: the draft samples k tokens d_1..d_k from its distributions p_1..p_k (each the
`lib.sampler_probs` transformation of its logits); the target runs once on the k
tokens and gives its distributions q_1..q_{k+1}. `speculative_accept` (Leviathan et
al., 2023; Chen et al., 2023) accepts d_i with probability min(1, q_i(d_i) / p_i(d_i));
at the first rejection it draws a replacement from norm(max(0, q_i - p_i)) and the round
ends; if all k are accepted it draws one more token from q_{k+1}. Every token of the
output is then distributed exactly as the target's sampler would draw it, whatever
the draft (tests/test_speculative.py checks the frequencies). With ``temperature=0``
both distributions are one-hot and the rule accepts d_i exactly when it is the target's
argmax: the output is plain greedy decoding, token for token.

The caches of both models are cut back to the accepted tokens after every round
(`truncate_cache`). One sequence (batch 1); any `lib` decoder-only model as target or
draft, provided they share the vocabulary. `early_exit_draft` makes a draft from a
model's own first blocks and head.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable, NamedTuple

import torch
from torch import nn

from lib._checks import require_int, require_positive_int, shape
from lib.model.kv_cache import KVCache
from lib.train.generate import _model_device, context_length
from lib.train.sampling import _check_settings, sampler_probs

__all__ = ["speculative_accept", "speculative_generate", "SpeculativeResult",
           "truncate_cache", "early_exit_draft"]


class SpeculativeResult(NamedTuple):
    """tokens (P + N,): prompt and new tokens; drafted / accepted: draft tokens proposed
    and accepted in all; rounds: target passes (one per round)."""

    tokens: torch.Tensor
    drafted: int
    accepted: int
    rounds: int

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else float("nan")


def truncate_cache(cache: KVCache, length: int) -> None:
    """Keep the first ``length`` positions of every layer's keys and values."""
    require_int("length", length, minimum=0)
    if length > cache.length:
        raise ValueError(f"length: the cache holds {cache.length} positions, not {length}")
    for c in cache.self_attn:
        if c.k is not None:
            c.k, c.v = c.k[:, :, :length], c.v[:, :, :length]


def _draw(probs: torch.Tensor, generator) -> int:
    return int(torch.multinomial(probs, 1, generator=generator))


def speculative_accept(q: torch.Tensor, p: torch.Tensor, drafts: torch.Tensor,
                       generator: torch.Generator | None = None) -> tuple[int, int]:
    """The accept/reject rule: q (k+1, |V|) the target's distributions, p (k, |V|) the
    draft's, drafts (k,) the draft's tokens (drawn from p). Returns (a, token): the first
    a drafts are accepted and ``token`` follows them."""
    for i in range(drafts.shape[0]):
        x = int(drafts[i])
        u = float(torch.rand((), dtype=torch.float64, generator=generator))
        if u < float(q[i, x]) / float(p[i, x]):
            continue
        residual = (q[i] - p[i]).clamp(min=0)
        return i, _draw(residual / residual.sum(), generator)
    return drafts.shape[0], _draw(q[-1], generator)


def early_exit_draft(model: nn.Module, n_layers: int) -> nn.Module:
    """A draft from `model`'s own first ``n_layers`` blocks, its final norm and head (the
    same tensors, shared, nothing copied): a `lib.ModernDecoder` or `lib.DecoderOnlyModel`
    that stops early. Same tokenizer and vocabulary by construction."""
    name = "blocks" if hasattr(model, "blocks") else "layers"
    blocks = getattr(model, name, None)
    if not isinstance(blocks, nn.ModuleList):
        raise TypeError(f"model: expected a lib decoder with .blocks or .layers, got {type(model).__name__}")
    require_positive_int("n_layers", n_layers)
    if n_layers > len(blocks):
        raise ValueError(f"n_layers: the model has {len(blocks)} blocks, not {n_layers}")
    draft = copy.copy(model)
    draft._modules = dict(model._modules)
    draft._parameters = dict(model._parameters)
    draft._buffers = dict(model._buffers)
    setattr(draft, name, nn.ModuleList(list(blocks)[:n_layers]))
    if dataclasses.is_dataclass(getattr(model, "config", None)) and hasattr(model.config, "n_layers"):
        draft.config = dataclasses.replace(model.config, n_layers=n_layers)
    return draft


def _logits(model, tokens: torch.Tensor, cache: KVCache, last: int) -> torch.Tensor:
    """Feed the tokens the cache has not seen; the logits (last, |V|) of the last positions."""
    new = tokens[cache.length :][None]  # (1, m)
    return model(new, cache=cache)[0, -last:]


@torch.no_grad()
def speculative_generate(
    target,
    draft,
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    k: int = 4,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    generator: torch.Generator | None = None,
    accept: Callable = speculative_accept,
) -> SpeculativeResult:
    """Continue ``prompt`` (P,) by ``max_new_tokens`` tokens, the draft proposing up to ``k``
    at a time. The sampler settings are `lib.sampler_probs`'s, applied to both models;
    ``temperature=0`` (the default) is greedy. ``accept`` is the rule (replaceable, so a
    test can show a wrong one fails)."""
    settings = dict(zip(("temperature", "top_k", "top_p", "min_p"),
                        _check_settings(temperature, top_k, top_p, min_p, 0)))
    require_positive_int("k", k)
    require_int("max_new_tokens", max_new_tokens, minimum=0)
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 1 or prompt.numel() == 0 \
            or prompt.is_floating_point():
        raise ValueError(f"prompt must be a (P,) tensor of token ids with P > 0, got {shape(prompt)}")
    if target.vocab_size != draft.vocab_size:
        raise ValueError(f"draft: vocabulary {draft.vocab_size} differs from the target's "
                         f"{target.vocab_size}")
    P = prompt.numel()
    if P + max_new_tokens > min(context_length(target), context_length(draft)):
        raise ValueError(f"max_new_tokens: {P} + {max_new_tokens} positions is beyond a model's max_len")
    target.eval(), draft.eval()
    tokens = prompt.to(_model_device(target)).long()
    t_cache, d_cache = KVCache(len(target.layers)), KVCache(len(draft.layers))
    drafted = accepted = rounds = 0
    while tokens.numel() < P + max_new_tokens:
        kk = min(k, P + max_new_tokens - tokens.numel() - 1)  # the round adds kk + 1 at most
        proposal, p_rows = tokens, []
        for _ in range(kk):  # 1. the draft proposes kk tokens
            p_i = sampler_probs(_logits(draft, proposal, d_cache, 1), **settings)[0]
            x = p_i.argmax() if temperature == 0 else torch.multinomial(p_i, 1, generator=generator)[0]
            p_rows.append(p_i)
            proposal = torch.cat([proposal, x.view(1).to(tokens.device)])
        drafts = proposal[tokens.numel() :]  # (kk,)
        # 2. the target scores the last token and the kk drafts in one pass
        q = sampler_probs(_logits(target, proposal, t_cache, kk + 1), **settings)  # (kk+1, |V|)
        p = torch.stack(p_rows) if p_rows else q[:0]
        a, nxt = accept(q, p, drafts, generator)  # 3. accept a drafts, then one more token
        tokens = torch.cat([tokens, drafts[:a], torch.tensor([nxt], device=tokens.device)])
        drafted, accepted, rounds = drafted + kk, accepted + a, rounds + 1
        seen = tokens.numel() - 1  # 4. the caches keep the accepted positions only
        truncate_cache(t_cache, min(t_cache.length, seen))
        truncate_cache(d_cache, min(d_cache.length, seen))
    return SpeculativeResult(tokens, drafted, accepted, rounds)
