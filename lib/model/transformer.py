"""Encoder and decoder layers and the full encoder-decoder Transformer.

Introduced in chapter 7 (the encoder, the decoder and the model families).

Each sub-layer (attention or feed-forward) is wrapped in a residual
connection and a LayerNorm, in one of two orders:

    post-LN (the paper, ``norm_first=False``):  x = LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN  (``norm_first=True``):              x = x + Dropout(Sublayer(LayerNorm(x)))

Dropout: the paper drops each sub-layer's output (the ``Dropout`` above) and
the sums of embeddings and positional encodings. Like ``nn.Transformer``, the
Annotated Transformer and tensor2tensor's later defaults (``transformer_base_v2``,
which also moved to pre-LN), `lib` also drops the attention weights and the
feed-forward network's hidden activations (same rate); tensor2tensor's
``transformer_base_v1``, the paper's setting, does neither.

A pre-LN stack leaves its output un-normalized, so `Transformer` adds a final
LayerNorm after the last encoder and the last decoder layer in that case
(as GPT-2 and ``nn.TransformerEncoder(norm=...)`` do).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from lib._checks import (
    require_bool,
    require_float,
    require_mask,
    require_matches_module,
    require_positive_int,
    require_probability,
    require_token_ids,
    shape,
)
from lib.model.attention import MultiHeadAttention
from lib.model.hooks import HookPoint
from lib.model.kv_cache import _check_offset
from lib.model.layers import (
    LearnedPositionalEmbedding,
    PositionwiseFeedForward,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    require_activation,
    require_layer_norm_eps,
)

__all__ = ["TransformerConfig", "EncoderLayer", "DecoderLayer", "Transformer"]


@dataclass
class TransformerConfig:
    """Sizes of a `Transformer`. The defaults are the paper's base model (Table 3)."""

    src_vocab_size: int = 37000  # the paper's shared English-German BPE vocabulary
    tgt_vocab_size: int = 37000
    d_model: int = 512  # width of every token vector between sub-layers
    n_heads: int = 8  # attention heads; d_k = d_v = d_model / n_heads = 64
    n_layers: int = 6  # encoder layers, and as many decoder layers
    d_ff: int = 2048  # inner width of the feed-forward network, 4 d_model
    # P_drop: on every sub-layer output and on the embedding + position sums (the
    # paper), and also on the attention weights and FFN activations (as nn.Transformer does)
    dropout: float = 0.1
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN
    share_embeddings: bool = False  # tie source, target embeddings and output projection
    max_len: int = 5000  # longest sequence the positional encoding covers
    positional: str = "sinusoidal"  # "sinusoidal" (paper) or "learned" (BERT, GPT)
    # Options of other model families (the defaults are the paper's; see lib.interop):
    activation: str = "relu"  # the FFN's non-linearity: "relu", "gelu", "gelu_tanh", "silu"
    layer_norm_eps: float = 1e-5  # the ε of every LayerNorm
    scale_embedding: bool = True  # multiply token embeddings by √d_model
    output_bias: bool = False  # a bias on the output projection (Marian's final_logits_bias)

    def build(self) -> "Transformer":
        return Transformer(**asdict(self))


def _check_stack_sizes(d_model, n_heads, n_layers, d_ff, dropout, max_len, positional, norm_first,
                       activation="relu", layer_norm_eps=1e-5) -> None:
    """The checks every stack of layers needs (`Transformer`, and the models of `lib.families`)."""
    require_bool("norm_first", norm_first)
    require_activation("activation", activation)
    require_layer_norm_eps("layer_norm_eps", layer_norm_eps)
    for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_layers", n_layers),
                        ("d_ff", d_ff), ("max_len", max_len)):
        require_positive_int(name, value)
    require_probability("dropout", dropout)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    if positional not in ("sinusoidal", "sinusoidal_concat", "learned"):
        raise ValueError(f"positional must be 'sinusoidal', 'sinusoidal_concat' or 'learned', got {positional!r}")


def _make_positional(positional: str, d_model: int, max_len: int, dropout: float) -> nn.Module:
    """The module that adds positions: the paper's sinusoids, or learned vectors.

    "sinusoidal_concat" is the paper's table with all sines first, then all
    cosines (Marian's order; see `sinusoidal_positional_encoding`)."""
    if positional == "learned":
        return LearnedPositionalEmbedding(d_model, max_len=max_len, dropout=dropout)
    layout = "concat" if positional == "sinusoidal_concat" else "interleaved"
    return SinusoidalPositionalEncoding(d_model, max_len=max_len, dropout=dropout, layout=layout)


def add_positions(pos: nn.Module, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """``pos(x)`` for embeddings x (B, L, d_model) that sit at positions offset..offset+L-1
    (a decoder fed one new token at a time with a KV cache, chapter 11)."""
    if offset == 0:
        return pos(x)
    _check_offset(offset, x.shape[1], pos.max_len)
    if isinstance(pos, SinusoidalPositionalEncoding):
        table = pos.pe[offset : offset + x.shape[1]].to(x.dtype)  # (L, d_model)
    else:
        table = pos.embedding(torch.arange(offset, offset + x.shape[1], device=x.device))
    return pos.dropout(x + table)  # (B, L, d_model)


def _init_parameters(model: nn.Module, d_model: int) -> None:
    """Initialise every weight matrix, chosen by the module that owns it.

    - ``nn.Embedding`` tables get N(0, 1/d_model), rows of norm about 1. For token
      embeddings (`TokenEmbedding` wraps an ``nn.Embedding``) with
      ``scale_embedding=True`` the × √d_model of the forward pass brings each entry
      to unit scale. Learned positional tables (`LearnedPositionalEmbedding`, also an
      ``nn.Embedding``) get the same N(0, 1/d_model) and are added *without* that
      factor: √d_model times smaller than scaled token embeddings, the same size as
      unscaled ones (``scale_embedding=False``, chapter 11's model and
      `lib.ModernDecoder`, both tables' rows of norm about 1).
    - Every other matrix (the ``nn.Linear`` weights) is Xavier-uniform, as in
      ``nn.Transformer``. Biases and LayerNorm keep PyTorch's defaults.

    A tied matrix is initialised once, by the first module that registers it.
    """
    embedding_tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    for p in model.parameters():  # registration order, each tied matrix once
        if p.dim() > 1:
            if id(p) in embedding_tables:
                nn.init.normal_(p, mean=0.0, std=d_model**-0.5)
            else:
                nn.init.xavier_uniform_(p)


def _add_hook_points(layer: nn.Module, *sublayers: str) -> None:
    """The layer's `HookPoint`s (chapter 16): the residual stream before and after it and
    each sub-layer's output (after its dropout, before the residual sum)."""
    names = ("resid_pre", *sublayers, "mlp_out", "resid_post")
    for name in names:
        setattr(layer, f"hook_{name}", HookPoint())
    # A plain tuple (not registered twice): forward asks it whether any hook is attached.
    object.__setattr__(layer, "_hook_points", tuple(getattr(layer, f"hook_{n}") for n in names))


def _check_layer_input(name: str, x: torch.Tensor, layer: nn.Module) -> None:
    require_float(name, x)
    if x.dim() != 3 or x.shape[-1] != layer.d_model:
        raise ValueError(f"{name} must have shape (B, L, d_model={layer.d_model}), got {shape(x)}")
    require_matches_module(name, x, layer)


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each inside residual + LayerNorm.

    ``activation`` (the FFN's) and ``layer_norm_eps`` serve other model families;
    the defaults are the paper's ReLU and PyTorch's ε = 1e-5.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False,
                 *, activation: str = "relu", layer_norm_eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.norm_first = require_bool("norm_first", norm_first)
        eps = require_layer_norm_eps("layer_norm_eps", layer_norm_eps)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        _add_hook_points(self, "attn_out")

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, cache=None) -> torch.Tensor:
        """x (B, n, d_model) -> (B, n, d_model); mask broadcastable to (B, h, n, n).

        cache: an optional `lib.AttentionCache` for the self-attention (a decoder-only
        model generating token by token, chapter 11); the mask then spans the cached keys too.
        """
        _check_layer_input("x", x, self)
        # Hook points (chapter 16) are called only while a hook is attached to one of them.
        hooked = any(p._forward_hooks for p in self._hook_points)
        if hooked:
            x = self.hook_resid_pre(x)
        if self.norm_first:
            y = self.norm1(x)
            a = self.dropout1(self.self_attn(y, y, y, mask, cache=cache))
            x = x + (self.hook_attn_out(a) if hooked else a)
            f = self.dropout2(self.feed_forward(self.norm2(x)))
            x = x + (self.hook_mlp_out(f) if hooked else f)
        else:
            a = self.dropout1(self.self_attn(x, x, x, mask, cache=cache))
            x = self.norm1(x + (self.hook_attn_out(a) if hooked else a))
            f = self.dropout2(self.feed_forward(x))
            x = self.norm2(x + (self.hook_mlp_out(f) if hooked else f))
        return self.hook_resid_post(x) if hooked else x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output (``memory``), feed-forward.

    ``activation`` and ``layer_norm_eps`` as in `EncoderLayer`.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False,
                 *, activation: str = "relu", layer_norm_eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.norm_first = require_bool("norm_first", norm_first)
        eps = require_layer_norm_eps("layer_norm_eps", layer_norm_eps)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.norm3 = nn.LayerNorm(d_model, eps=eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        _add_hook_points(self, "attn_out", "cross_attn_out")

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        *,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        self_cache=None,
        cross_cache=None,
    ) -> torch.Tensor:
        """x (B, m, d_model), memory (B, n, d_model) -> (B, m, d_model).

        tgt_mask broadcastable to (B, h, m, m) (causal, and padding of the target);
        memory_mask broadcastable to (B, h, m, n) (padding of the source).
        Both are keyword-only: two bool masks passed in the wrong order would
        broadcast without complaint. ``self_cache`` and ``cross_cache``: optional
        `lib.AttentionCache`s for incremental decoding (chapter 11).
        """
        _check_layer_input("x", x, self)
        _check_layer_input("memory", memory, self)
        if x.shape[0] != memory.shape[0]:
            raise ValueError(f"x {shape(x)} and memory {shape(memory)} must share the batch size B")
        # Name the mask in the error (the attention modules only know "mask"); with a
        # cache the keys include cached positions, and the attention checks them.
        (B, m, _), n, h = x.shape, memory.shape[1], self.self_attn.n_heads
        if tgt_mask is not None and self_cache is None:
            require_mask(tgt_mask, torch.Size((B, h, m, m)), "self-attention scores (B, n_heads, m, m)",
                         device=x.device, name="tgt_mask")
        if memory_mask is not None and cross_cache is None:
            require_mask(memory_mask, torch.Size((B, h, m, n)), "cross-attention scores (B, n_heads, m, n)",
                         device=x.device, name="memory_mask")
        hooked = any(p._forward_hooks for p in self._hook_points)
        if hooked:
            x = self.hook_resid_pre(x)
        if self.norm_first:
            y = self.norm1(x)
            a = self.dropout1(self.self_attn(y, y, y, tgt_mask, cache=self_cache))
            x = x + (self.hook_attn_out(a) if hooked else a)
            y = self.norm2(x)
            c = self.dropout2(self.cross_attn(y, memory, memory, memory_mask, cache=cross_cache))
            x = x + (self.hook_cross_attn_out(c) if hooked else c)
            f = self.dropout3(self.feed_forward(self.norm3(x)))
            x = x + (self.hook_mlp_out(f) if hooked else f)
        else:
            a = self.dropout1(self.self_attn(x, x, x, tgt_mask, cache=self_cache))
            x = self.norm1(x + (self.hook_attn_out(a) if hooked else a))
            c = self.dropout2(self.cross_attn(x, memory, memory, memory_mask, cache=cross_cache))
            x = self.norm2(x + (self.hook_cross_attn_out(c) if hooked else c))
            f = self.dropout3(self.feed_forward(x))
            x = self.norm3(x + (self.hook_mlp_out(f) if hooked else f))
        return self.hook_resid_post(x) if hooked else x


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    1. Embed tokens (× √d_model) and add positions (sinusoidal or learned), dropout.
    2. Encoder: ``n_layers`` `EncoderLayer`s over the source.
    3. Decoder: ``n_layers`` `DecoderLayer`s over the target; each one's
       cross-attention reads the *last* encoder layer's output.
    4. A linear map from d_model to target-vocabulary logits (no softmax here).

    ``share_embeddings=True`` uses one matrix for the source embedding, the
    target embedding and the output projection (paper, section 3.4); the two
    vocabularies must then be one.

    The options after ``positional`` let the same class hold other
    encoder-decoder models (Marian, see `lib.marian_to_lib`): the FFN's
    ``activation``, the LayerNorms' ``layer_norm_eps``, ``scale_embedding``
    (the × √d_model of step 1) and ``output_bias`` (a bias on the logits).
    Their defaults are the paper's.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        share_embeddings: bool = False,
        max_len: int = 5000,
        positional: str = "sinusoidal",
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        scale_embedding: bool = True,
        output_bias: bool = False,
    ):
        super().__init__()
        require_positive_int("src_vocab_size", src_vocab_size)
        require_positive_int("tgt_vocab_size", tgt_vocab_size)
        _check_stack_sizes(d_model, n_heads, n_layers, d_ff, dropout, max_len, positional, norm_first,
                           activation, layer_norm_eps)
        require_bool("share_embeddings", share_embeddings)
        require_bool("scale_embedding", scale_embedding)
        require_bool("output_bias", output_bias)
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True ties one embedding matrix across source, target and output, "
                f"so the vocabularies must match: src_vocab_size={src_vocab_size}, tgt_vocab_size={tgt_vocab_size}"
            )
        self.config = TransformerConfig(  # by keyword: a new field cannot shift the others
            src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, d_model=d_model,
            n_heads=n_heads, n_layers=n_layers, d_ff=d_ff, dropout=dropout, norm_first=norm_first,
            share_embeddings=share_embeddings, max_len=max_len, positional=positional,
            activation=activation, layer_norm_eps=layer_norm_eps, scale_embedding=scale_embedding,
            output_bias=output_bias,
        )
        self.d_model = d_model
        layer_options = dict(activation=activation, layer_norm_eps=layer_norm_eps)

        self.src_embed = TokenEmbedding(src_vocab_size, d_model, scale=scale_embedding)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, scale=scale_embedding)
        self.src_pos = _make_positional(positional, d_model, max_len, dropout)
        self.tgt_pos = _make_positional(positional, d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, **layer_options) for _ in range(n_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, **layer_options) for _ in range(n_layers)
        )
        # Pre-LN leaves the residual stream un-normalized: close each stack with a LayerNorm.
        self.encoder_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=output_bias)
        _init_parameters(self, d_model)
        if output_bias:
            nn.init.zeros_(self.generator.bias)
        if share_embeddings:
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.weight = self.src_embed.embedding.weight

    # The public entry points check the token ids once (reading their values is a
    # device->host sync); `_encode` and `_decode` then run without re-checking.

    def encode(self, src: torch.Tensor, *, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (B, n) token ids -> memory (B, n, d_model); src_mask broadcastable to (B, h, n, n)."""
        require_token_ids("src", src, self.config.src_vocab_size)
        return self._encode(src, src_mask)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        *,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        cache=None,
    ) -> torch.Tensor:
        """tgt (B, m) token ids, memory (B, n, d_model) -> logits (B, m, tgt_vocab_size).

        tgt_mask broadcastable to (B, h, m, m); src_mask broadcastable to (B, h, m, n)
        (a `padding_mask` of the source, (B, 1, 1, n), fits both encoder and decoder).

        cache: an optional `lib.KVCache(n_layers, cross_attention=True)` (chapter 11).
        ``tgt`` then holds only the tokens not yet seen, at positions cache.length
        onwards, and tgt_mask (if given) covers all cached + new keys: (B, h, m, cached + m).
        """
        require_token_ids("tgt", tgt, self.config.tgt_vocab_size)
        if cache is not None:
            return self._decode_cached(tgt, memory, src_mask, tgt_mask, cache)
        return self._decode(tgt, memory, src_mask, tgt_mask)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        *,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """src (B, n), tgt (B, m) token ids -> logits (B, m, tgt_vocab_size).

        The masks are keyword-only: both are bool and both broadcast, so a swap
        by position would go unnoticed.
        """
        require_token_ids("src", src, self.config.src_vocab_size)
        require_token_ids("tgt", tgt, self.config.tgt_vocab_size)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src {shape(src)} and tgt {shape(tgt)} must share the batch size B")
        return self._decode(tgt, self._encode(src, src_mask), src_mask, tgt_mask)

    def _encode(self, src, src_mask):
        x = self.src_pos(self.src_embed(src, check_ids=False))  # (B, n, d_model)
        for layer in self.encoder_layers:
            x = layer(x, mask=src_mask)
        return self.encoder_norm(x)

    def _decode(self, tgt, memory, src_mask, tgt_mask):
        y = self.tgt_pos(self.tgt_embed(tgt, check_ids=False))  # (B, m, d_model)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask=tgt_mask, memory_mask=src_mask)
        return self.generator(self.decoder_norm(y))  # (B, m, tgt_vocab_size)

    def _decode_cached(self, tgt, memory, src_mask, tgt_mask, cache):
        if len(cache) != len(self.decoder_layers) or cache.cross_attn is None:
            raise ValueError(
                f"cache must be a KVCache({len(self.decoder_layers)}, cross_attention=True), got {cache!r}"
            )
        offset = cache.length
        y = add_positions(self.tgt_pos, self.tgt_embed(tgt, check_ids=False), offset)  # (B, m, d_model)
        for layer, self_c, cross_c in zip(self.decoder_layers, cache.self_attn, cache.cross_attn):
            y = layer(y, memory, tgt_mask=tgt_mask, memory_mask=src_mask, self_cache=self_c, cross_cache=cross_c)
        return self.generator(self.decoder_norm(y))  # (B, m, tgt_vocab_size)

    def count_parameters(self) -> int:
        """Trainable parameters, each tied matrix counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
