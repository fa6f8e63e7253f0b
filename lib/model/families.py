"""Encoder-only (BERT-like) and decoder-only (GPT-like) models from `lib`'s blocks.

Introduced in chapter 7 (the encoder, the decoder and the model families).

The third family, encoder-decoder (the paper's model, BART, T5), is `lib.Transformer`.
Both classes here are one stack of `EncoderLayer`s over token embeddings + positions;
they differ only in the mask:

    encoder-only: every token sees every (non-padding) token   -> a representation per token
    decoder-only: token t sees tokens 0..t (a causal mask)      -> next-token logits

A decoder-only block is the paper's decoder layer without cross-attention (there is
no encoder to attend to), which is exactly an `EncoderLayer` run with a causal mask.
"""

from __future__ import annotations

import torch
from torch import nn

from lib._checks import require_bool, require_int, require_positive_int, require_token_id, require_token_ids, shape
from lib.model.attention import causal_mask
from lib.model.layers import TokenEmbedding, require_layer_norm_eps
from lib.model.transformer import (
    EncoderLayer,
    _check_stack_sizes,
    _init_parameters,
    _make_positional,
    add_positions,
)

__all__ = ["EncoderOnlyModel", "DecoderOnlyModel"]


class _TokenStack(nn.Module):
    """Embeddings × √d_model + positions, ``n_layers`` `EncoderLayer`s, a vocabulary head.

    Options for the published families (defaults: the paper's block, no extra parameters):
    ``activation`` and ``layer_norm_eps`` as in `EncoderLayer`; ``scale_embedding``
    (False for BERT and GPT-2, which do not multiply by √d_model); ``type_vocab_size``
    > 0 adds BERT's token-type (segment) embeddings; ``embedding_norm`` a LayerNorm
    on the embedding sum, before its dropout (BERT).
    """

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, dropout, norm_first, max_len, positional,
                 activation="relu", layer_norm_eps=1e-5, scale_embedding=True, type_vocab_size=0,
                 embedding_norm=False):
        super().__init__()
        require_positive_int("vocab_size", vocab_size)
        _check_stack_sizes(d_model, n_heads, n_layers, d_ff, dropout, max_len, positional, norm_first,
                           activation, layer_norm_eps)
        require_int("type_vocab_size", type_vocab_size, minimum=0)
        require_bool("embedding_norm", embedding_norm)
        eps = require_layer_norm_eps("layer_norm_eps", layer_norm_eps)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.n_heads = n_heads
        self.embed = TokenEmbedding(vocab_size, d_model, scale=scale_embedding)
        if type_vocab_size:
            self.token_type_embed = nn.Embedding(type_vocab_size, d_model)
        # With embedding_norm the dropout moves after the LayerNorm (BERT's order).
        self.pos = _make_positional(positional, d_model, max_len, 0.0 if embedding_norm else dropout)
        if embedding_norm:
            self.embed_norm = nn.LayerNorm(d_model, eps=eps)
            self.embed_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, activation=activation, layer_norm_eps=eps)
            for _ in range(n_layers)
        )
        self.final_norm = nn.LayerNorm(d_model, eps=eps) if norm_first else nn.Identity()
        # The output head shares the embedding matrix (weight tying, as BERT and GPT do).
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.embed.embedding.weight
        _init_parameters(self, d_model)  # as `lib.Transformer` is

    def _run(self, tokens: torch.Tensor, mask: torch.Tensor | None, cache=None, token_type_ids=None) -> torch.Tensor:
        offset = 0 if cache is None else cache.length
        x = self.embed(tokens, check_ids=False)  # (B, L, d_model)
        if hasattr(self, "token_type_embed"):  # BERT: + a vector per segment (type 0 if not given)
            x = x + self.token_type_embed(torch.zeros_like(tokens) if token_type_ids is None else token_type_ids)
        x = add_positions(self.pos, x, offset)  # (B, L, d_model)
        if hasattr(self, "embed_norm"):  # BERT: LayerNorm, then dropout
            x = self.embed_dropout(self.embed_norm(x))
        for i, layer in enumerate(self.layers):
            x = layer(x, mask=mask, cache=None if cache is None else cache.self_attn[i])
        return self.head(self.final_norm(x))  # (B, L, vocab_size)

    def _check_token_types(self, tokens: torch.Tensor, token_type_ids) -> None:
        if token_type_ids is None:
            return
        if not hasattr(self, "token_type_embed"):
            raise ValueError("token_type_ids given, but this model has no token-type embeddings (type_vocab_size=0)")
        require_token_ids("token_type_ids", token_type_ids, self.token_type_embed.num_embeddings)
        if token_type_ids.shape != tokens.shape:
            raise ValueError(f"token_type_ids {shape(token_type_ids)} must have the shape of tokens {shape(tokens)}")

    def _padding(self, tokens: torch.Tensor, pad_id: int | None) -> torch.Tensor | None:
        if pad_id is None:
            return None
        require_token_id("pad_id", pad_id, self.vocab_size)
        return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, L)


class EncoderOnlyModel(_TokenStack):
    """A BERT-like model (Devlin et al. 2019): bidirectional self-attention over the whole input.

    ``forward(tokens)`` returns logits (B, L, vocab_size) for every position, the
    shape a masked-language-model loss needs (predict the tokens hidden behind
    [MASK] from both sides). BERT uses learned positions, hence the default.
    The keyword options (GELU, ε, token types, embedding LayerNorm) hold BERT
    itself: see `_TokenStack` and `lib.bert_to_lib`.

    The head is the embedding matrix, tied, applied to the last layer's output.
    BERT's pre-training head (``BertForMaskedLM``) has a dense layer, a GELU, a
    LayerNorm and a bias before that matrix, which this model lacks: a BERT
    converted with `lib.bert_to_lib` gives the encoder's output times the
    embedding, not BERT's masked-token predictions (chapter 7).
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2, d_ff: int = 256,
                 dropout: float = 0.1, norm_first: bool = False, max_len: int = 512, positional: str = "learned",
                 *, activation: str = "relu", layer_norm_eps: float = 1e-5, scale_embedding: bool = True,
                 type_vocab_size: int = 0, embedding_norm: bool = False):
        super().__init__(vocab_size, d_model, n_heads, n_layers, d_ff, dropout, norm_first, max_len, positional,
                         activation, layer_norm_eps, scale_embedding, type_vocab_size, embedding_norm)

    def forward(self, tokens: torch.Tensor, pad_id: int | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """tokens (B, L) -> logits (B, L, vocab_size); keys equal to ``pad_id`` are masked out.

        ``token_type_ids`` (B, L), for a model with ``type_vocab_size`` > 0, says
        which segment each token belongs to (0 for all if not given)."""
        require_token_ids("tokens", tokens, self.vocab_size)
        self._check_token_types(tokens, token_type_ids)
        return self._run(tokens, self._padding(tokens, pad_id), token_type_ids=token_type_ids)


class DecoderOnlyModel(_TokenStack):
    """A GPT-like model (Radford et al. 2018): causal self-attention, next-token prediction.

    ``forward(tokens)`` returns logits (B, L, vocab_size); position t's logits
    depend on tokens 0..t only, and are trained to predict token t + 1.
    The keyword options (GELU, ε, no √d_model) hold GPT-2 itself with
    ``norm_first=True``: see `lib.gpt2_to_lib`.
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2, d_ff: int = 256,
                 dropout: float = 0.1, norm_first: bool = False, max_len: int = 512, positional: str = "learned",
                 *, activation: str = "relu", layer_norm_eps: float = 1e-5, scale_embedding: bool = True):
        super().__init__(vocab_size, d_model, n_heads, n_layers, d_ff, dropout, norm_first, max_len, positional,
                         activation, layer_norm_eps, scale_embedding)

    def forward(self, tokens: torch.Tensor, pad_id: int | None = None, *, cache=None) -> torch.Tensor:
        """tokens (B, L) -> logits (B, L, vocab_size), causally masked (and padding-masked if ``pad_id``).

        cache: an optional `lib.KVCache(n_layers)` (chapter 11). ``tokens`` then holds
        only the new tokens, at positions cache.length onwards; their keys and values
        join the cache, and each new token attends to every cached one and to itself
        and the new ones before it.
        """
        require_token_ids("tokens", tokens, self.vocab_size)
        if tokens.shape[1] == 0:  # both paths: the cached one would return (B, 0, |V|) silently
            raise ValueError(
                f"tokens: an empty sequence, shape {tuple(tokens.shape)}; give at least one token per row"
            )
        if cache is not None:
            return self._forward_cached(tokens, pad_id, cache)
        mask = causal_mask(tokens.shape[1], device=tokens.device)  # (L, L)
        padding = self._padding(tokens, pad_id)
        if padding is not None:
            mask = mask & padding  # (B, 1, L, L)
        return self._run(tokens, mask)

    def _forward_cached(self, tokens, pad_id, cache):
        if pad_id is not None:
            raise ValueError("pad_id: padding masks are not supported with a cache (pad on the right)")
        if len(cache) != len(self.layers) or cache.cross_attn is not None:
            raise ValueError(f"cache must be a KVCache({len(self.layers)}), got {cache!r}")
        offset, m = cache.length, tokens.shape[1]
        # New token i sits at position offset + i: it sees keys 0..offset + i.
        mask = None
        if m > 1:
            mask = torch.ones(m, offset + m, dtype=torch.bool, device=tokens.device).tril(offset)
        return self._run(tokens, mask, cache)  # (B, m, vocab_size)
