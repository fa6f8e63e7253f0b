"""Scaled dot-product attention, masks and multi-head attention.

Introduced in chapter 2 (attention math) and chapter 4 (multi-head attention).

Shape notation, used in every comment of `lib`:
    B batch, h heads, m queries, n keys, d_model model width,
    d_k = d_model / h query/key width per head, d_v value width per head.

Masks are bool tensors with True = "this query may attend to this key",
broadcastable to the scores' shape (..., m, n).
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from lib._checks import (
    require_bool,
    require_device,
    require_float,
    require_mask,
    require_matches_module,
    require_positive_int,
    require_probability,
    require_same_kind,
    require_tensor,
    shape,
)
from lib.model.hooks import HookPoint

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "MultiHeadAttention",
]


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_float(name, t)
        if t.dim() < 2:
            raise ValueError(f"{name} needs at least 2 dimensions (..., length, features), got {shape(t)}")
    require_same_kind(q=q, k=k, v=v)
    if q.shape[-1] == 0:
        raise ValueError(f"q and k need at least one feature (d_k > 0) to score with: q is {shape(q)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share their last (feature) size d_k: q is {shape(q)}, k is {shape(k)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions n: k is {shape(k)}, v is {shape(v)}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch) dimensions of q {shape(q)}, k {shape(k)} and v {shape(v)} do not broadcast"
        ) from None


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, the textbook way.

    q: (..., m, d_k), k: (..., n, d_k), v: (..., n, d_v), one float dtype and device;
    mask: bool, broadcastable to (..., m, n), True = may attend.
    Returns ``(output, weights)``: output (..., m, d_v) and weights (..., m, n).

    Before dropout, each row of weights sums to 1, except a query whose every
    key is masked: it gets all-zero weights and so a zero output, never NaN.
    ``softmax`` subtracts each row's maximum, so huge scores do not overflow.

    With ``dropout_p > 0`` the weights are dropped out (and the returned weights
    are the dropped-out ones, whose rows no longer sum to 1), whatever the mode
    of the calling module: this function has no train/eval mode. The paper describes
    dropout only on each sub-layer's output and on the embedding + position
    sums. Dropping the attention weights too is what ``nn.MultiheadAttention``,
    the Annotated Transformer and tensor2tensor's later defaults
    (``transformer_base_v2``) do, and `lib` follows them; tensor2tensor's
    ``transformer_base_v1``, the paper's setting, does not.
    """
    check_qkv(q, k, v)
    dropout_p = require_probability("dropout_p", dropout_p)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    scores_shape = torch.Size((*batch, q.shape[-2], k.shape[-2]))
    if mask is not None:
        mask = require_mask(mask, scores_shape, "scores (..., m, n)", device=q.device)

    d_k = q.shape[-1]
    # q is scaled *before* the matmul, as PyTorch does: Q Kᵀ sums d_k products and
    # would overflow float16 (largest value 65504) sooner than (Q/√d_k) Kᵀ. For
    # float16/bfloat16 inputs the scores and the softmax are computed in float32,
    # as PyTorch's fused kernels accumulate, so attention stays finite where theirs does.
    acc = torch.promote_types(q.dtype, torch.float32)  # float32 for half inputs
    scores = (q.to(acc) / math.sqrt(d_k)) @ k.to(acc).transpose(-2, -1)  # (..., m, n)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        # A row with no allowed key would be softmax(-inf, ..., -inf) = 0/0 = NaN.
        # Give it finite scores here and zero its weights after the softmax.
        empty_rows = ~mask.any(dim=-1, keepdim=True)  # (..., m, 1)
        scores = scores.masked_fill(empty_rows, 0.0)
    weights = scores.softmax(dim=-1).to(v.dtype)  # (..., m, n)
    if mask is not None:
        weights = weights.masked_fill(empty_rows, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return weights @ v, weights  # (..., m, d_v), (..., m, n)


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(size, size) bool mask, True on and below the diagonal.

    Query i may attend to keys 0..i: the decoder cannot look at future tokens.
    """
    require_positive_int("size", size)
    device = require_device("device", device)
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, 1, 1, n) bool mask, False where ``tokens`` (B, n) holds ``pad_id``.

    The two singleton dimensions broadcast over heads and queries, so the
    same mask serves a (B, h, m, n) score tensor for any m.
    """
    require_tensor("tokens", tokens)
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (batch, length), got {shape(tokens)}")
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must hold integer ids, got dtype {tokens.dtype}")
    if isinstance(pad_id, torch.Tensor) and pad_id.dim() == 0 and not (
        pad_id.is_floating_point() or pad_id.dtype == torch.bool
    ):
        pad_id = int(pad_id)
    if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
        raise TypeError(
            f"pad_id must be one integer token id, got {pad_id!r} ({type(pad_id).__name__})"
        )
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, n)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The h per-head projections W_i^Q (d_model × d_k) sit side by side in one
    ``nn.Linear(d_model, d_model)`` per role: ``w_q``, ``w_k``, ``w_v``, and
    ``w_o`` maps the concatenated heads back to d_model.

    In eval mode (or with ``fused=False``) the forward pass runs the textbook
    `scaled_dot_product_attention` above and keeps the weights in
    ``.attention_weights`` (B, h, m, n) for plotting. In train mode it calls
    PyTorch's ``F.scaled_dot_product_attention``, the same function, computed by
    a kernel PyTorch picks by device, dtype, mask and dropout. With torch 2.13,
    float inputs without dropout go to a fused, tiled FlashAttention-style
    kernel that never stores the (m, n) weights, on a CPU too
    (``_scaled_dot_product_flash_attention_for_cpu``, with or without a bool
    mask; GPUs also have memory-efficient attention). Only ``dropout > 0`` or a
    forced ``sdpa_kernel(SDPBackend.MATH)`` takes the plain "math" path, which
    builds and stores the weights (chapter 9 shows both). A bool mask costs
    memory of its own: PyTorch turns it into a float mask of its shape, (m, n) for
    a causal one. ``.attention_weights`` is None in train mode.
    ``dropout`` applies to the attention weights (see `scaled_dot_product_attention`).

    Hook points (chapter 16, `lib.run_with_cache`): ``hook_pattern`` sees the
    weights (B, h, m, n) and ``hook_z`` each head's output (B, m, h, d_k) before
    W^O. With a hook on ``hook_pattern`` the textbook path runs in train mode too.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, fused: bool = True):
        super().__init__()
        require_positive_int("d_model", d_model)
        require_positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: each head needs "
                f"d_k = d_model / n_heads features (try n_heads in "
                f"{[h for h in range(1, d_model + 1) if d_model % h == 0][:8]}...)"
            )
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = require_probability("dropout", dropout)
        self.fused = require_bool("fused", fused)
        require_bool("bias", bias)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.attention_weights: torch.Tensor | None = None
        self.hook_pattern = HookPoint()  # (B, h, m, n) attention weights
        self.hook_z = HookPoint()  # (B, m, h, d_k) each head's output, before W^O

    def _check(self, query, key, value, mask):
        for name, t in (("query", query), ("key", key), ("value", value)):
            require_float(name, t)
            if t.dim() != 3:
                raise ValueError(f"{name} must have shape (B, length, d_model={self.d_model}), got {shape(t)}")
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} has last dimension {t.shape[-1]}, but this layer has d_model={self.d_model}: "
                    f"{name} is {shape(t)}"
                )
            require_matches_module(name, t, self)
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"key and value must have the same length n: key is {shape(key)}, value is {shape(value)}"
            )
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError(
                f"query {shape(query)}, key {shape(key)} and value {shape(value)} must share the batch size B"
            )
        if mask is not None:
            target = torch.Size((query.shape[0], self.n_heads, query.shape[1], key.shape[1]))
            require_mask(mask, target, "scores (B, n_heads, m, n)", device=query.device)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, L, d_k)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None, *, cache=None) -> torch.Tensor:
        """query (B, m, d_model), key and value (B, n, d_model) -> (B, m, d_model).

        mask: bool, broadcastable to (B, h, m, n); True = may attend.
        cache: an optional `lib.AttentionCache` (chapter 11). The new keys and values
        are appended to it and the queries attend over all cached ones (n = cached +
        new; the mask then covers them all); a filled static cache (cross-attention)
        is reused without projecting key and value again.
        """
        self._check(query, key, value, mask if cache is None else None)
        B, m, _ = query.shape
        # 1. Project, then split d_model into h heads of d_k features.
        q = self._split(self.w_q(query))  # (B, h, m, d_k)
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v  # the encoder's keys and values, projected once
        else:
            k = self._split(self.w_k(key))  # (B, h, n, d_k)
            v = self._split(self.w_v(value))  # (B, h, n, d_k)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, h, cached + n, d_k)
        if cache is not None and mask is not None:
            target = torch.Size((B, self.n_heads, m, k.shape[-2]))
            require_mask(mask, target, "scores (B, n_heads, m, cached + n)", device=query.device)
        # 2. Attend within each head.
        if self.training and self.fused and not self.hook_pattern._forward_hooks:
            heads = self._fused_attention(q, k, v, mask)  # (B, h, m, d_k)
            self.attention_weights = None
        elif self.hook_pattern._forward_hooks:  # a hook reads (or replaces) the weights
            heads = self._hooked_attention(q, k, v, mask)  # (B, h, m, d_k)
        else:
            p = self.dropout if self.training else 0.0
            heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=p)
            self.attention_weights = weights.detach()  # (B, h, m, n)
        # 3. Concatenate the heads and mix them with W^O.
        z = heads.transpose(1, 2)  # (B, m, h, d_k)
        if self.hook_z._forward_hooks:  # skipped with no hook: no module call at all
            z = self.hook_z(z)
        concat = z.reshape(B, m, self.d_model)  # (B, m, d_model)
        return self.w_o(concat)

    def _hooked_attention(self, q, k, v, mask):
        """The textbook path with the weights passed through ``hook_pattern``."""
        _, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, h, m, n)
        weights = self.hook_pattern(weights)
        if self.training and self.dropout > 0.0:
            weights = F.dropout(weights, p=self.dropout, training=True)
        self.attention_weights = weights.detach()
        return weights @ v  # (B, h, m, d_k)

    def _fused_attention(self, q, k, v, mask):
        p = self.dropout if self.training else 0.0
        # is_causal=True would let PyTorch pick FlashAttention on a GPU, but telling a
        # purely causal mask from any other bool mask means reading its values (a
        # device->host sync on every call), so the mask is always passed as given.
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        # A query with no allowed key: some backends return NaN for it (torch 2.13's
        # CPU path returns 0). Opening such rows for the kernel and zeroing their
        # output afterwards makes the result backend-independent and equal to the
        # textbook path's. Done unconditionally: testing `empty_rows.any()` first
        # would force a device->host sync on every call.
        empty_rows = ~mask.any(dim=-1, keepdim=True)  # broadcastable to (B, h, m, 1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty_rows, dropout_p=p)
        return out.masked_fill(empty_rows, 0.0)  # (B, h, m, d_k)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}"
