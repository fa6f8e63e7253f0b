"""The KV cache: the keys and values of the tokens already seen, kept between decoding steps.

Introduced in chapter 11 (a language model trained on real text).

Generating token t+1 with a causal model needs the query of token t only, but the
keys and values of tokens 0..t. Without a cache the model recomputes all of them
(and every other position's query, feed-forward and logits, which it then throws
away) at every step: step t costs O(t) token-passes through the stack, and t
steps cost O(t²). With a cache each step pushes one new token through the stack,
appends its key and value to the cache of every layer, and attends over the
cached ones: O(1) token-passes per step (plus attention over t keys), O(t) in all.

A `KVCache` holds one `AttentionCache` per attention sub-layer:

    cache.self_attn[i]   layer i's self-attention: grows by the new tokens each step
    cache.cross_attn[i]  layer i's cross-attention (encoder-decoder models only):
                         the projected encoder output, computed at the first step
                         and reused unchanged ("static")

Tensors are (B, h, t, d_k), the layout `MultiHeadAttention` attends in.
`AttentionCache.update` appends with ``torch.cat``, which copies the cache at
every step (O(t) copying per step): simple to read, and fine at this course's
lengths; production caches allocate the full length once and write in place.
`AttentionCache.update_in_place` is that variant (a buffer that doubles when full),
used by the SmolLM2 path of chapter 15.
"""

from __future__ import annotations

import torch

from lib._checks import require_int, require_positive_int

__all__ = ["AttentionCache", "KVCache"]


class AttentionCache:
    """Keys and values (B, h, t, d_k) of one attention sub-layer.

    ``static=False`` (self-attention): `update` appends the new keys and values
    along the position axis and returns everything cached so far.
    ``static=True`` (cross-attention): the first `update` stores them; later
    calls are not needed (`MultiHeadAttention` reuses ``k`` and ``v``).
    """

    def __init__(self, static: bool = False):
        self.static = bool(static)
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self._buffers: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)  # update_in_place
        self._views: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)  # its last k, v

    @property
    def length(self) -> int:
        """How many positions are cached (0 when empty)."""
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v (B, h, m, d_k) and return all cached keys and values (B, h, t + m, d_k)."""
        if self.k is None or self.static:
            self.k, self.v = k, v
        else:
            if k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1]:
                raise ValueError(
                    f"the new keys {tuple(k.shape)} do not continue the cached ones "
                    f"{tuple(self.k.shape)}: same batch, heads and d_k needed"
                )
            self.k = torch.cat([self.k, k], dim=-2)  # (B, h, t + m, d_k)
            self.v = torch.cat([self.v, v], dim=-2)
        return self.k, self.v

    def update_in_place(self, k: torch.Tensor, v: torch.Tensor,
                        reserve: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
        """`update` without the copy of the whole cache at every step: the same result
        (keys and values (B, h, t + m, d_k), equal to `update`'s), but written into a
        buffer allocated with room for at least ``reserve`` more positions (its
        length doubles when full), so a step copies only its m new positions.

        ``self.k`` and ``self.v`` are then views of the first t + m positions of the
        buffers: the same shapes and values as `update` gives, and `reorder` or
        replacing them still works (the next call starts a new buffer from them).
        Used by the SmolLM2 decoding path (`lib.model.llama`, bench/smollm2.py).
        """
        require_positive_int("reserve", reserve)
        t, m = self.length, k.shape[-2]
        room = self.room(m)
        if (room is not None and k.dtype == room[0].dtype and k.device == room[0].device
                and k.shape[:2] == room[0].shape[:2] and k.shape[-1] == room[0].shape[-1]):
            # self.k and self.v are still the views this method made last time (nothing
            # replaced them), and the new positions fit: write them, no other check
            room[0][:, :, t : t + m] = k
            room[1][:, :, t : t + m] = v
            self.advance(m)
            return self.k, self.v
        if self.static:
            return self.update(k, v)
        if self.k is not None and (k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1]):
            raise ValueError(
                f"the new keys {tuple(k.shape)} do not continue the cached ones "
                f"{tuple(self.k.shape)}: same batch, heads and d_k needed"
            )
        # a new buffer (the first, a full one, or self.k replaced from outside): the
        # cached positions copied once, room to grow
        B, h, _, d = k.shape
        size = t + m + max(reserve, t + m)
        buf_k = k.new_empty(B, h, size, d)
        buf_v = v.new_empty(B, h, size, v.shape[-1])
        if t:
            buf_k[:, :, :t] = self.k
            buf_v[:, :, :t] = self.v
        self._buffers = (buf_k, buf_v)
        buf_k[:, :, t : t + m] = k
        buf_v[:, :, t : t + m] = v
        self.advance(m)
        return self.k, self.v

    def room(self, m: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The buffers `update_in_place` made, (B, h, capacity, d_k) each, if ``self.k``
        and ``self.v`` are still its views and m more positions fit; else None. For a
        step that writes positions t .. t + m - 1 itself (`lib.model.native`), then
        calls `advance`."""
        buf_k, buf_v = self._buffers
        if (self.static or buf_k is None or self.k is not self._views[0] or self.v is not self._views[1]
                or self.length + m > buf_k.shape[-2]):
            return None
        return buf_k, buf_v

    def advance(self, m: int) -> None:
        """After a step wrote m new positions into the buffers of `room`: the cache holds
        them (``self.k`` and ``self.v`` are views of the first t + m positions)."""
        buf_k, buf_v = self._buffers
        t = self.length
        self.k, self.v = self._views = (buf_k[:, :, : t + m], buf_v[:, :, : t + m])

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the batch rows `rows` (in that order), e.g. the surviving beams."""
        if self.k is not None:
            self.k, self.v = self.k[rows], self.v[rows]

    def __repr__(self) -> str:
        kind = "static" if self.static else "growing"
        return f"AttentionCache({kind}, length={self.length})"


class KVCache:
    """One `AttentionCache` per layer (and per cross-attention, for an encoder-decoder).

    Make one per generation with ``KVCache(n_layers)`` (decoder-only) or
    ``KVCache(n_layers, cross_attention=True)`` (`lib.Transformer`'s decoder), and
    pass it to every call of ``model(tokens, cache=cache)`` /
    ``model.decode(tokens, memory, cache=cache, ...)`` with only the new tokens.
    ``length`` says how many positions the model has already seen: the position
    of the next token.
    """

    def __init__(self, n_layers: int, cross_attention: bool = False):
        require_positive_int("n_layers", n_layers)
        self.self_attn = [AttentionCache() for _ in range(n_layers)]
        self.cross_attn = [AttentionCache(static=True) for _ in range(n_layers)] if cross_attention else None

    @property
    def length(self) -> int:
        """Positions seen so far (the same in every layer)."""
        return self.self_attn[0].length

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the batch rows `rows` in every layer (beam search re-ranks its hypotheses)."""
        for c in self.self_attn + (self.cross_attn or []):
            c.reorder(rows)

    def __len__(self) -> int:
        return len(self.self_attn)

    def __repr__(self) -> str:
        cross = ", with cross-attention" if self.cross_attn is not None else ""
        return f"KVCache({len(self)} layers{cross}, length={self.length})"


def _check_offset(offset: int, new: int, max_len: int, name: str = "tokens") -> None:
    """The positions offset..offset+new-1 must exist in a positional table of max_len rows."""
    require_int("offset", offset, minimum=0)
    if offset + new > max_len:
        raise ValueError(
            f"{name}: positions {offset}..{offset + new - 1} go beyond the model's "
            f"max_len={max_len} (the cache already holds {offset} positions)"
        )
