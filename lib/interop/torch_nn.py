"""Copy `lib` weights into PyTorch's own Transformer modules, to check one against the other.

Introduced in chapter 7 (the encoder, the decoder and the model families).

PyTorch's ``nn.MultiheadAttention`` packs the three input projections into
one ``in_proj_weight`` of shape (3 d_model, d_model), rows ordered [W_q; W_k; W_v]
(and ``in_proj_bias`` likewise), and calls the output projection ``out_proj``.
``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` name their parts
``self_attn``, ``multihead_attn`` (the decoder's cross-attention), ``linear1``,
``linear2``, ``norm1``, ``norm2`` (, ``norm3``).

One warning for whoever compares the two: PyTorch's bool masks mean
True = *not* allowed, the opposite of `lib` (True = may attend). Pass
``~mask`` to PyTorch, and a (B, n) key-padding mask rather than (B, 1, 1, n).
The functions here only copy weights; they do not touch masks.
"""

from __future__ import annotations

import torch
from torch import nn

from lib.model.attention import MultiHeadAttention
from lib.model.transformer import DecoderLayer, EncoderLayer

__all__ = ["copy_mha_to_torch", "copy_encoder_layer_to_torch", "copy_decoder_layer_to_torch"]


def _require_type(name: str, obj: object, cls: type) -> None:
    if not isinstance(obj, cls):
        raise TypeError(f"{name} must be a {cls.__module__}.{cls.__qualname__}, got {type(obj).__name__}")


def _check_linear(src: nn.Linear, dst: nn.Linear, what: str) -> None:
    if src.weight.shape != dst.weight.shape:
        raise ValueError(
            f"{what}: lib weight has shape {tuple(src.weight.shape)}, "
            f"torch weight has shape {tuple(dst.weight.shape)}"
        )
    if (src.bias is None) != (dst.bias is None):
        raise ValueError(f"{what}: one of the two layers has a bias and the other has not")


def _copy_linear(src: nn.Linear, dst: nn.Linear, what: str) -> None:
    _check_linear(src, dst, what)
    dst.weight.copy_(src.weight)
    if src.bias is not None:
        dst.bias.copy_(src.bias)


def _check_layer_norm(src: nn.LayerNorm, dst: nn.LayerNorm, what: str) -> None:
    if src.normalized_shape != dst.normalized_shape:
        raise ValueError(f"{what}: normalized shapes differ, {src.normalized_shape} vs {dst.normalized_shape}")
    if src.eps != dst.eps:
        raise ValueError(f"{what}: eps differs ({src.eps} in lib, {dst.eps} in torch), the outputs would too")
    if (src.weight is None) != (dst.weight is None) or (src.bias is None) != (dst.bias is None):
        raise ValueError(f"{what}: one LayerNorm has affine parameters (weight/bias) and the other has not")


def _copy_layer_norm(src: nn.LayerNorm, dst: nn.LayerNorm, what: str) -> None:
    _check_layer_norm(src, dst, what)
    if src.weight is not None:
        dst.weight.copy_(src.weight)
    if src.bias is not None:
        dst.bias.copy_(src.bias)


def _check_mha_pair(lib_mha, torch_mha) -> None:
    _require_type("lib_mha", lib_mha, MultiHeadAttention)
    _require_type("torch_mha", torch_mha, nn.MultiheadAttention)
    if torch_mha.embed_dim != lib_mha.d_model or torch_mha.num_heads != lib_mha.n_heads:
        raise ValueError(
            f"sizes differ: lib has d_model={lib_mha.d_model}, n_heads={lib_mha.n_heads}; "
            f"torch has embed_dim={torch_mha.embed_dim}, num_heads={torch_mha.num_heads}"
        )
    if not torch_mha._qkv_same_embed_dim:
        raise ValueError("torch_mha has separate q/k/v projection weights (kdim or vdim != embed_dim); lib packs none")
    lib_bias = lib_mha.w_q.bias is not None
    if lib_bias != (torch_mha.in_proj_bias is not None):
        raise ValueError(f"bias differs: lib has bias={lib_bias}, torch has bias={torch_mha.in_proj_bias is not None}")
    if torch_mha.bias_k is not None or torch_mha.add_zero_attn:
        raise ValueError("torch_mha uses add_bias_kv or add_zero_attn, which lib has no counterpart for")


@torch.no_grad()
def copy_mha_to_torch(lib_mha: MultiHeadAttention, torch_mha: nn.MultiheadAttention) -> nn.MultiheadAttention:
    """Copy a `lib.MultiHeadAttention`'s weights into an ``nn.MultiheadAttention``; returns ``torch_mha``.

    ``torch_mha`` must have the same ``embed_dim`` (d_model) and ``num_heads``,
    packed projections (kdim = vdim = embed_dim) and a bias exactly when
    ``lib_mha`` has one. Raises TypeError/ValueError before copying anything
    if they do not match.
    """
    _check_mha_pair(lib_mha, torch_mha)
    lib_bias = lib_mha.w_q.bias is not None
    torch_mha.in_proj_weight.copy_(torch.cat([lib_mha.w_q.weight, lib_mha.w_k.weight, lib_mha.w_v.weight]))
    if lib_bias:
        torch_mha.in_proj_bias.copy_(torch.cat([lib_mha.w_q.bias, lib_mha.w_k.bias, lib_mha.w_v.bias]))
    _copy_linear(lib_mha.w_o, torch_mha.out_proj, "w_o -> out_proj")
    return torch_mha


def _check_layer_pair(lib_layer, torch_layer, attention_pairs, norm_names) -> None:
    """Every check a layer copy needs, run before a single weight is written."""
    if bool(torch_layer.norm_first) != bool(lib_layer.norm_first):
        raise ValueError(
            f"norm order differs: lib layer has norm_first={lib_layer.norm_first}, "
            f"torch layer has norm_first={torch_layer.norm_first}"
        )
    if torch_layer.activation is not torch.nn.functional.relu and not isinstance(torch_layer.activation, nn.ReLU):
        raise ValueError(f"torch layer's activation is {torch_layer.activation!r}; lib's feed-forward uses ReLU")
    if not torch_layer.self_attn.batch_first:
        raise ValueError("torch layer must be built with batch_first=True: lib is batch-first")
    for lib_name, torch_name in attention_pairs:
        _check_mha_pair(getattr(lib_layer, lib_name), getattr(torch_layer, torch_name))
    for name in ("linear1", "linear2"):
        _check_linear(getattr(lib_layer.feed_forward, name), getattr(torch_layer, name), f"feed_forward.{name} -> {name}")
    for name in norm_names:
        _check_layer_norm(getattr(lib_layer, name), getattr(torch_layer, name), name)


@torch.no_grad()
def copy_encoder_layer_to_torch(lib_layer: EncoderLayer, torch_layer: nn.TransformerEncoderLayer) -> nn.TransformerEncoderLayer:
    """Copy a `lib.EncoderLayer` into an ``nn.TransformerEncoderLayer``; returns ``torch_layer``.

    Build the torch layer as ``nn.TransformerEncoderLayer(d_model, n_heads, d_ff,
    dropout, batch_first=True, norm_first=lib_layer.norm_first)`` (ReLU activation,
    LayerNorm eps 1e-5, the defaults). Mapping: self_attn -> self_attn,
    feed_forward.linear1/linear2 -> linear1/linear2, norm1/norm2 -> norm1/norm2.
    """
    _require_type("lib_layer", lib_layer, EncoderLayer)
    _require_type("torch_layer", torch_layer, nn.TransformerEncoderLayer)
    _check_layer_pair(lib_layer, torch_layer, [("self_attn", "self_attn")], ("norm1", "norm2"))
    copy_mha_to_torch(lib_layer.self_attn, torch_layer.self_attn)
    _copy_linear(lib_layer.feed_forward.linear1, torch_layer.linear1, "feed_forward.linear1 -> linear1")
    _copy_linear(lib_layer.feed_forward.linear2, torch_layer.linear2, "feed_forward.linear2 -> linear2")
    _copy_layer_norm(lib_layer.norm1, torch_layer.norm1, "norm1")
    _copy_layer_norm(lib_layer.norm2, torch_layer.norm2, "norm2")
    return torch_layer


@torch.no_grad()
def copy_decoder_layer_to_torch(lib_layer: DecoderLayer, torch_layer: nn.TransformerDecoderLayer) -> nn.TransformerDecoderLayer:
    """Copy a `lib.DecoderLayer` into an ``nn.TransformerDecoderLayer``; returns ``torch_layer``.

    Build the torch layer as ``nn.TransformerDecoderLayer(d_model, n_heads, d_ff,
    dropout, batch_first=True, norm_first=lib_layer.norm_first)``. Mapping:
    self_attn -> self_attn, cross_attn -> multihead_attn, feed_forward.linear1/2
    -> linear1/2, norm1/norm2/norm3 -> norm1/norm2/norm3.
    """
    _require_type("lib_layer", lib_layer, DecoderLayer)
    _require_type("torch_layer", torch_layer, nn.TransformerDecoderLayer)
    _check_layer_pair(
        lib_layer, torch_layer, [("self_attn", "self_attn"), ("cross_attn", "multihead_attn")], ("norm1", "norm2", "norm3")
    )
    copy_mha_to_torch(lib_layer.self_attn, torch_layer.self_attn)
    copy_mha_to_torch(lib_layer.cross_attn, torch_layer.multihead_attn)
    _copy_linear(lib_layer.feed_forward.linear1, torch_layer.linear1, "feed_forward.linear1 -> linear1")
    _copy_linear(lib_layer.feed_forward.linear2, torch_layer.linear2, "feed_forward.linear2 -> linear2")
    for name in ("norm1", "norm2", "norm3"):
        _copy_layer_norm(getattr(lib_layer, name), getattr(torch_layer, name), name)
    return torch_layer
