"""The Llama architecture in `lib`'s terms: a `ModernDecoder` whose blocks attend with
`LlamaAttention` (the chapter "A real pretrained model").

Reading a GGUF file into it is `lib.interop.llama_gguf` (`load_llama_gguf`,
`load_smollm2`, `llama_config`): `lib.model` imports nothing from the layers above
it (tests/test_layering.py). The old names ``lib.model.llama.load_smollm2`` etc.
still work: `__getattr__` below hands them over from there when asked for.

Rotary pairing. llama.cpp rotates the feature pairs (2i, 2i+1) of each head, the
course's own convention, and the GGUF file stores the rows of W_Q and W_K for
it: loaded as they are, with ``pairing="interleaved"``, they give the model's
logits. Hugging Face's Llama rotates the pairs (i, i + d_head/2) and its
checkpoints store the same rows in another order; `interleaved_to_half` is that
permutation (per head, rows 0, 2, 4, ... then 1, 3, 5, ...). With
``pairing="half"`` the loader permutes the rows (``permute=True``); a half-split
rotation of unpermuted rows is a different model, whose predictions the chapter
shows going wrong.

Tests: tests/test_llama.py (logits against Hugging Face's LlamaForCausalLM
loaded from the same file).
"""

from __future__ import annotations

import torch

from lib._checks import require_float, shape
from lib.model.kv_cache import AttentionCache
import torch.nn.functional as F
from torch import nn

from lib.model.hooks import HookPoint
from lib.model.modern import (
    GroupedQueryAttention,
    ModernBlock,
    ModernConfig,
    ModernDecoder,
    RMSNorm,
    SwiGLU,
    _rms_norm,
    _rotate,
    apply_rotary,
    rotary_tables,
)

__all__ = [
    "LlamaAttention",
    "LlamaDecoder",
    "half_to_interleaved",
    "interleaved_to_half",
    "llama_decoder",
    "set_fast_attention",
]

# Moved to lib.interop.llama_gguf (issue 34 item 7); the old names stay valid, looked up
# only when someone asks for them, so that importing this module loads nothing above it.
MOVED_TO_INTEROP = ("llama_config", "load_llama_gguf", "load_smollm2")


def __getattr__(name: str):
    if name in MOVED_TO_INTEROP:
        import importlib

        return getattr(importlib.import_module("lib.interop.llama_gguf"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def interleaved_to_half(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of W_Q or W_K (n_heads·d_head, d_in) from the interleaved-pairs order (GGUF's)
    to the half-split order (Hugging Face's): in each head, rows 0, 2, 4, ..., d_head - 2,
    then 1, 3, ..., d_head - 1. Rotating pairs (i, i + d_head/2) of the permuted rows is
    then the same as rotating pairs (2i, 2i+1) of the original ones."""
    rows, d_in = weight.shape
    d_head = rows // n_heads
    return weight.reshape(n_heads, d_head // 2, 2, d_in).transpose(1, 2).reshape(rows, d_in)


def half_to_interleaved(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of `interleaved_to_half` (Hugging Face's row order to GGUF's)."""
    rows, d_in = weight.shape
    d_head = rows // n_heads
    return weight.reshape(n_heads, 2, d_head // 2, d_in).transpose(1, 2).reshape(rows, d_in)


class _RotaryTable:
    """cos and sin of `rotary_tables` for positions 0..L-1, computed once and shared by
    every layer; L doubles when a longer prefix is needed. A slice [offset, offset + T)
    equals ``rotary_tables(T, d_head, base, offset)`` bit for bit (the same float64
    angles p · ω_i, rounded once)."""

    def __init__(self, d_head: int, base: float, max_len: int):
        self.d_head, self.base, self.max_len = d_head, base, max_len
        self.tables: dict = {}  # (dtype, device) -> (cos, sin)

    def get(self, offset: int, T: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.tables.get((dtype, device), (None, None))
        if cos is None or offset + T > cos.shape[0]:
            length = min(max(512, 2 * (offset + T)), max(self.max_len, offset + T))
            cos, sin = rotary_tables(length, self.d_head, self.base, dtype=dtype)
            cos, sin = cos.to(device), sin.to(device)
            self.tables[(dtype, device)] = (cos, sin)
        return cos[offset : offset + T], sin[offset : offset + T]


class LlamaAttention(GroupedQueryAttention):
    """`GroupedQueryAttention` with two costs of the decoding step removed, the same
    numbers out (bit for bit): the rotary cos/sin are sliced from a table computed once
    and shared by the layers (not recomputed in every layer at every step), and the
    KV cache grows in place (`AttentionCache.update_in_place`, not ``torch.cat`` of
    the whole cache). `load_llama_gguf` builds its blocks with it; with a hook on
    ``hook_pattern`` (chapter 16) or ``fast = False`` it runs `GroupedQueryAttention`'s
    own forward. Measured in bench/smollm2.py.
    """

    def __init__(self, *args, rope_table: _RotaryTable | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.rope_table = rope_table
        self.fast = True

    def forward(self, x: torch.Tensor, cache: AttentionCache | None = None) -> torch.Tensor:
        if not self.fast or self.hook_pattern.active or self.rope_table is None:
            return super().forward(x, cache)
        require_float("x", x)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), got {shape(x)}")
        if x.dtype != self.w_q.weight.dtype or x.device != self.w_q.weight.device:
            return super().forward(x, cache)  # its checks name the mismatch
        if cache is not None and not isinstance(cache, AttentionCache):
            raise TypeError(f"cache must be a lib.AttentionCache, got {type(cache).__name__}")
        B, T, _ = x.shape
        offset = 0 if cache is None else cache.length
        q, k, v = self._project(x)
        cos, sin = self.rope_table.get(offset, T, torch.promote_types(q.dtype, torch.float32),
                                       x.device)
        q = apply_rotary(q, cos, sin, self.pairing)
        k = apply_rotary(k, cos, sin, self.pairing)
        if cache is not None:
            k, v = cache.update_in_place(k, v)  # (B, g, offset + T, d), not repeated
        return self._output(self._fused(q, k, v, offset, T, k.shape[-2]))


_LEAF_TYPES = (nn.Linear, HookPoint)


def _plain_block(block: nn.Module) -> bool:
    """Is `block` the standard pre-RMSNorm block (`LlamaAttention` on its fast path, a
    bias-free or biased SwiGLU), with no forward hook on it or on any module it calls?"""
    if type(block) is not ModernBlock or not block.norm_first:
        return False
    parts = block._modules  # direct access: no nn.Module.__getattr__ on the hot path
    attn, mlp = parts["attn"], parts["mlp"]
    if (type(attn) is not LlamaAttention or not attn.fast or attn.rope_table is None
            or type(mlp) is not SwiGLU or type(parts["norm1"]) is not RMSNorm
            or type(parts["norm2"]) is not RMSNorm):
        return False
    for m in (block, *parts.values(), *attn._modules.values(), *mlp._modules.values()):
        if m._forward_hooks or m._forward_pre_hooks:
            return False
    return all(type(m) in _LEAF_TYPES for m in (*attn._modules.values(), *mlp._modules.values()))


def _block_step(block: ModernBlock, x: torch.Tensor, cache: AttentionCache | None) -> torch.Tensor:
    """One standard block (`_plain_block`) as a flat sequence of tensor operations: the
    operations `ModernBlock.forward` runs, in the same order (so the same numbers, bit
    for bit), without the per-module checks and hook points that cost a decoding step
    about a tenth of its time (bench/smollm2.py). x (B, T, d_model) -> (B, T, d_model)."""
    parts = block._modules
    n1, attn, n2, mlp = parts["norm1"], parts["attn"], parts["norm2"], parts["mlp"]
    lin = attn._modules
    B, T, _ = x.shape
    offset = 0 if cache is None else cache.length
    h = _rms_norm(x, n1.weight, n1.bias, n1.eps)  # 1. pre-norm
    q = F.linear(h, lin["w_q"].weight, lin["w_q"].bias)  # 2. projections, (B, T, h·d)
    k = F.linear(h, lin["w_k"].weight, lin["w_k"].bias)  # (B, T, g·d)
    v = F.linear(h, lin["w_v"].weight, lin["w_v"].bias)
    q = q.view(B, T, attn.n_heads, attn.d_head).transpose(1, 2)  # (B, h, T, d)
    k = k.view(B, T, attn.n_kv_heads, attn.d_head).transpose(1, 2)  # (B, g, T, d)
    v = v.view(B, T, attn.n_kv_heads, attn.d_head).transpose(1, 2)
    cos, sin = attn.rope_table.get(offset, T, torch.promote_types(q.dtype, torch.float32),
                                   x.device)
    q, k = _rotate(q, cos, sin, attn.pairing), _rotate(k, cos, sin, attn.pairing)  # 3. rotary
    if cache is not None:
        k, v = cache.update_in_place(k, v)  # (B, g, offset + T, d)
    z = attn._fused(q, k, v, offset, T, k.shape[-2])  # 4. attention, (B, h, T, d)
    z = z.transpose(1, 2).reshape(B, T, attn.n_heads * attn.d_head)
    x = x + F.linear(z, lin["w_o"].weight, lin["w_o"].bias)  # 5. W^O and the residual
    h = _rms_norm(x, n2.weight, n2.bias, n2.eps)  # 6. SwiGLU on the second pre-norm
    ff = mlp._modules
    gate = F.silu(F.linear(h, ff["w_gate"].weight, ff["w_gate"].bias))
    up = gate * F.linear(h, ff["w_up"].weight, ff["w_up"].bias)
    return x + F.linear(up, ff["w_down"].weight, ff["w_down"].bias)


class LlamaDecoder(ModernDecoder):
    """A `ModernDecoder` whose blocks, when nothing watches them, run as `_block_step`.

    `ModernDecoder.forward` checks its inputs once; then each block checks its input again
    and calls about twenty modules (norms, linears, hook points), each through
    ``nn.Module.__call__``. For SmolLM2's decoding step (one token, 30 blocks) that is
    about a tenth of the time. Here a standard block (`_plain_block`) runs the same
    tensor operations directly, and gives the same numbers bit for bit
    (tests/test_llama_speed_paths.py). Any forward hook on a block or inside it (chapter
    16's `run_with_cache`, `lib.compare_layers`), a global module hook, a replaced
    sub-module or ``fast = False`` (`set_fast_attention`) sends the block through its
    own forward instead."""

    def __init__(self, config: ModernConfig):
        super().__init__(config)
        self.fast = True

    def _run_blocks(self, x: torch.Tensor, cache) -> torch.Tensor:
        from torch.nn.modules import module as _module

        if not self.fast or _module._global_forward_hooks or _module._global_forward_pre_hooks:
            return super()._run_blocks(x, cache)
        for i, block in enumerate(self.blocks):
            c = None if cache is None else cache.self_attn[i]
            x = _block_step(block, x, c) if _plain_block(block) else block(x, c)
        return x


def set_fast_attention(model: ModernDecoder, fast: bool) -> ModernDecoder:
    """Switch the fast paths on or off: `LlamaAttention`'s in every block and, in a
    `LlamaDecoder`, the flat block step (the same outputs; bench/smollm2.py times both).
    Returns the model."""
    if not isinstance(fast, bool):
        raise TypeError(f"fast: expected True or False, got {fast!r}")
    found = False
    for module in model.modules():
        if isinstance(module, (LlamaAttention, LlamaDecoder)):
            module.fast, found = fast, True
    if not found:
        raise ValueError("model: no LlamaAttention inside (build it with load_llama_gguf)")
    return model


def llama_decoder(config: ModernConfig) -> LlamaDecoder:
    """A `LlamaDecoder` of a rotary `config` whose blocks attend with `LlamaAttention`
    (the same parameters, names and outputs as ``ModernDecoder(config)``; a faster
    decoding step). `load_llama_gguf` builds its model with it."""
    if not isinstance(config, ModernConfig):
        raise TypeError(f"config: expected a lib.ModernConfig, got {type(config).__name__}")
    if config.position != "rotary":
        raise ValueError(f"config: position must be 'rotary', got {config.position!r}")
    model = LlamaDecoder(config)
    table = _RotaryTable(config.d_model // config.n_heads, config.rope_base, config.max_len)
    for block in model.blocks:  # the same attention, with the decoding step's costs removed
        old = block.attn
        block.attn = LlamaAttention(config.d_model, config.n_heads, config.n_kv_heads,
                                    bias=config.bias, rope_base=config.rope_base,
                                    pairing=config.rope_pairing, rope_table=table)
        block.attn.load_state_dict(old.state_dict())  # keep the initialisation
    return model
