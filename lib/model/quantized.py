"""Weights kept in int8 blocks with a scale each (chapter 17: what one token costs).

At batch 1, decoding reads every weight once per token: fewer bytes per weight, fewer
bytes per token. `Int8Linear` keeps W (N, K) as int8 values q and one scale s per block
of ``block_size`` consecutive weights of a row (symmetric: s = max|w| / 127 over the
block, q = round(w / s), w ~ s * q). The weights are never stored as a float copy:
each call expands only the matrix it multiplies, into the activations' dtype, right
before the product (``block_size = None``: one scale per row, and the product runs on
the int8 values directly with ``torch._weight_int8pack_mm``, a private PyTorch op, when
the activations are bfloat16). `Int8Embedding` reads the same int8 table for the token
lookup, so a tied head stays tied. `quantize_int8` converts a `lib.ModernDecoder`
(SmolLM2 included); `weight_bytes` counts what a decoding step reads.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from lib._checks import require_positive_int

__all__ = ["Int8Linear", "Int8Embedding", "quantize_int8", "weight_bytes", "int8_blocks"]


def int8_blocks(weight: torch.Tensor, block_size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """W (N, K) float -> (q (N, K) int8, scales (N, K // block_size) float32)."""
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
        raise TypeError(f"weight: expected a float (N, K) tensor, got {weight!r:.60}")
    N, K = weight.shape
    bs = K if block_size is None else require_positive_int("block_size", block_size)
    if K % bs:
        raise ValueError(f"block_size: {bs} does not divide the row length {K}")
    blocks = weight.detach().float().reshape(N, K // bs, bs)
    scales = blocks.abs().amax(dim=-1) / 127  # (N, K / bs)
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    q = torch.round(blocks / safe[..., None]).clamp(-127, 127).to(torch.int8)
    return q.reshape(N, K), scales


class Int8Linear(nn.Module):
    """A bias-free linear layer with int8 weights in blocks (the module docstring)."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype):
        super().__init__()
        self.register_buffer("q", q)  # (N, K) int8
        self.register_buffer("scales", scales.to(dtype))  # (N, K / block)
        self.block_size = q.shape[1] // scales.shape[1]
        self.in_features, self.out_features = q.shape[1], q.shape[0]

    @property
    def weight(self) -> torch.Tensor:
        """The stored int8 values (N, K): what is read, not a float matrix."""
        return self.q

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        N, K = self.q.shape
        blocks = self.q.view(N, -1, self.block_size).to(dtype) * self.scales.to(dtype)[..., None]
        return blocks.view(N, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.scales.shape[1] == 1 and x.dtype == torch.bfloat16 == self.scales.dtype:
            flat = x.reshape(-1, self.in_features)  # (B·T, K)
            out = torch._weight_int8pack_mm(flat, self.q, self.scales[:, 0])
            return out.view(*x.shape[:-1], self.out_features)
        return F.linear(x, self.dequantized(x.dtype))

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"block_size={self.block_size}")


class Int8Embedding(nn.Module):
    """Token lookup from an `Int8Linear`'s int8 table (a tied embedding): rows q[ids] * s."""

    def __init__(self, table: Int8Linear):
        super().__init__()
        self.table = table

    @property
    def weight(self) -> torch.Tensor:
        return self.table.q

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = self.table
        rows = t.q[ids].view(*ids.shape, -1, t.block_size).to(t.scales.dtype)
        return (rows * t.scales[ids][..., None]).flatten(-2)  # (..., K)


def quantize_int8(model: nn.Module, block_size: int | None = 32,
                  dtype: torch.dtype = torch.bfloat16) -> nn.Module:
    """A copy of the `lib.ModernDecoder` `model` with every bias-free nn.Linear (and a tied
    embedding) in int8 blocks; the rest (norm gains, activations) in ``dtype``."""
    from lib.model.llama import drop_fused
    from lib.model.modern import ModernDecoder

    if not isinstance(model, ModernDecoder):
        raise TypeError(f"model: expected a lib.ModernDecoder, got {type(model).__name__}")
    tied = model.head.weight is model.embed.weight
    new = copy.deepcopy(model)
    drop_fused(new)  # the int8 blocks replace the products the fused matrices served
    new = new.to(dtype)
    for name, module in list(new.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is nn.Linear and child.bias is None:
                if child is new.head and tied:
                    continue
                setattr(module, child_name, Int8Linear(*int8_blocks(child.weight, block_size), dtype))
    if tied:
        head = Int8Linear(*int8_blocks(new.embed.weight, block_size), dtype)
        new.head, new.embed = head, Int8Embedding(head)
    return new.eval()


def weight_bytes(model: nn.Module) -> int:
    """Bytes of every parameter and buffer, each tensor counted once (a tied matrix once)."""
    seen, total = set(), 0
    for t in [*model.parameters(), *model.buffers()]:
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total
