"""Chunked prefill and the causal mask of a chunk that continues a cache.

Introduced in chapter 17 (generating text).

With a KV cache holding p positions, a chunk of c new queries sits at positions
p .. p+c-1 and attends over p + c keys. Query i (position p + i) may see keys
0 .. p + i: the mask is ``tril(ones(c, p + c), diagonal=p)``, the causal triangle
aligned to the bottom-right corner (`offset_causal_mask`). ``is_causal=True`` in
``F.scaled_dot_product_attention`` aligns it to the top-left instead (query i sees keys
0 .. i), which is right only when p = 0: on a continuing chunk the early queries lose
almost all of the context. `lib`'s decoders build the offset mask; `top_left_mask`
swaps in the mistake for a demonstration, and `chunked_logits` runs a prompt through a
model chunk by chunk with a `lib.KVCache`.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from lib._checks import require_device, require_int, require_positive_int
from lib.model.kv_cache import KVCache

__all__ = ["offset_causal_mask", "chunked_logits", "top_left_mask"]


def offset_causal_mask(c: int, p: int, device=None) -> torch.Tensor:
    """The bool mask (c, p + c) of c new queries at positions p .. p+c-1 against the
    p + c keys 0 .. p+c-1: True where query i may attend key j, i.e. j <= p + i."""
    require_positive_int("c", c)
    require_int("p", p, minimum=0)
    device = require_device("device", device)
    return torch.ones(c, p + c, dtype=torch.bool, device=device).tril(diagonal=p)


@torch.no_grad()
def chunked_logits(model, tokens: torch.Tensor, chunk: int) -> torch.Tensor:
    """tokens (B, T) -> logits (B, T, |V|), the model run on chunks of ``chunk`` tokens
    one after another through a `lib.KVCache` (the last chunk may be shorter). For any
    `lib` decoder-only model; equals ``model(tokens)`` up to rounding."""
    require_positive_int("chunk", chunk)
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must be a (B, T) tensor of ids with T > 0, got {tokens!r:.60}")
    cache = KVCache(len(model.layers))
    out = [model(tokens[:, s : s + chunk], cache=cache) for s in range(0, tokens.shape[1], chunk)]
    return torch.cat(out, dim=1)


@contextlib.contextmanager
def top_left_mask(model):
    """Inside the block, every grouped-query attention layer of the `lib.ModernDecoder`
    `model` attends with ``is_causal=True`` whatever the cache holds: the top-left
    alignment, the bug this chapter measures. Restored on exit (even on an error)."""
    from lib.model.modern import GroupedQueryAttention

    layers = [m for m in model.modules() if isinstance(m, GroupedQueryAttention)]
    if not layers:
        raise TypeError(f"model: no lib.GroupedQueryAttention inside {type(model).__name__} "
                        "(a lib.ModernDecoder or SmolLM2's LlamaDecoder is needed)")

    def wrong(layer):
        gqa = layer.n_kv_heads != layer.n_heads

        def fused(q, k, v, offset, T, n_keys):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        return fused

    for layer in layers:
        layer._fused = wrong(layer)  # an instance attribute hides the method
    try:
        yield model
    finally:
        for layer in layers:
            del layer._fused
