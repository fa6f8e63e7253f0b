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

from lib.model import native
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
    "fuse_projections",
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

    def pairs(self, offset: int, pairing: str, dtype: torch.dtype,
              device) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotation of position ``offset`` laid out like a head's feature pairs, for
        `_TokenPlan.run`: ``c`` holds cos θ_i at both features of pair i and ``s`` holds
        -sin θ_i at the first and +sin θ_i at the second, so that with x's pairs
        swapped ([a, b] -> [b, a]) the rotation is ``x * c + swapped * s``:
        [a cos - b sin, b cos + a sin], the same two products and one sum per feature
        as `_rotate` (bit for bit). Shape (d_head/2, 2) for "interleaved", (2, d_head/2)
        for "half"; cos and sin rounded as `_rotate` rounds them (to ``dtype`` from the
        float32 table)."""
        key = (pairing, dtype, device)
        c, s = self.tables.get(key, (None, None))
        if c is None or offset >= c.shape[0]:
            acc = torch.promote_types(dtype, torch.float32)
            self.get(offset, 1, acc, device)  # the float32 table, grown to hold offset
            cos, sin = self.tables[(acc, device)]
            cos, sin = cos.to(dtype), sin.to(dtype)
            axis = -1 if pairing == "interleaved" else -2  # (L, d/2, 2) or (L, 2, d/2)
            c = torch.stack([cos, cos], dim=axis)
            s = torch.stack([-sin, sin], dim=axis)
            self.tables[key] = (c, s)
        return c[offset], s[offset]


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


def _global_hooks() -> bool:
    """Is a forward hook registered for every module (``register_module_forward_hook``)?"""
    from torch.nn.modules import module as _module

    return bool(_module._global_forward_hooks or _module._global_forward_pre_hooks)


def _hooked(*modules: nn.Module) -> bool:
    """Does any of ``modules`` carry a forward hook or pre-hook of its own?"""
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)

# Batch-1 decoding multiplies one row x (1, K) by each weight W (N, K). On the 2-core AMD
# machine this course is built on, PyTorch's float32 matrix-vector product runs on one
# core and reads about 10 GB/s, while two cores read about 27 GB/s
# (bench/bandwidth.py). Split into SPLIT_ROWS blocks of W's rows, the same dot products
# are one batched product (torch.bmm), which PyTorch hands to both cores: 17-19 GB/s over
# SmolLM2's matrices, and a decoding step about 1.3 times as fast (measured 2026-11-28;
# bench/smollm2_formats.py). Only for float32, one row, no bias, and a matrix of at
# least SPLIT_MIN_WEIGHTS weights; bfloat16 products got slower when split (measured).
SPLIT_ROWS = 8
SPLIT_MIN_WEIGHTS = 1 << 16


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``F.linear(x, weight, bias)``; for a single row of float32 x (a batch-1 decoding
    step) the product of W's row blocks as one `torch.bmm` (`SPLIT_ROWS`). Each output is
    the same K-long dot product either way: bit for bit the same on the AMD machine it was
    measured on (tests/test_llama_speed_paths.py holds them to float32 rounding)."""
    N, K = weight.shape
    if x.numel() != K or x.dtype != torch.float32 or not _splits(weight, bias):
        return F.linear(x, weight, bias)
    return _split_product(x, _row_blocks(weight)).view(*x.shape[:-1], N)


def _row_blocks(weight: torch.Tensor) -> torch.Tensor:
    """W (N, K) as SPLIT_ROWS blocks (S, K, N/S): block j is W's rows j·N/S .. (j+1)·N/S - 1."""
    N, K = weight.shape
    return weight.view(SPLIT_ROWS, N // SPLIT_ROWS, K).transpose(1, 2)


def _split_product(x: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    """One row x (K numbers) times the row blocks of `_row_blocks`, as one `torch.bmm`:
    (S, 1, N/S), W's N outputs in order."""
    K = blocks.shape[1]
    return torch.bmm(x.reshape(1, 1, K).expand(SPLIT_ROWS, 1, K), blocks)


def _splits(weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Does `_linear` split a one-row float32 product by this weight into row blocks?"""
    N, K = weight.shape
    return (bias is None and N % SPLIT_ROWS == 0 and N * K >= SPLIT_MIN_WEIGHTS
            and weight.dtype == torch.float32 and weight.is_contiguous()
            and torch.get_num_threads() >= 2)


class _Row:
    """A one-row product by one weight, as `_linear` computes it (the same numbers bit
    for bit), with the row-block view of the weight taken once: `_TokenPlan` keeps one
    per projection."""

    __slots__ = ("weight", "bias", "blocks")

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.weight, self.bias = weight, bias
        self.blocks = _row_blocks(weight) if _splits(weight, bias) else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x (1, 1, K) -> (1, 1, N)."""
        if self.blocks is None or x.dtype != torch.float32:
            return F.linear(x, self.weight, self.bias)
        return _split_product(x, self.blocks).view(1, 1, self.weight.shape[0])


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
    if _hooked(block, *parts.values(), *attn._modules.values(), *mlp._modules.values()):
        return False
    return all(type(m) in _LEAF_TYPES for m in (*attn._modules.values(), *mlp._modules.values()))


_FUSED = (("attn", ("w_q", "w_k", "w_v"), "_qkv"), ("mlp", ("w_gate", "w_up"), "_gate_up"))


def fuse_projections(model: ModernDecoder) -> ModernDecoder:
    """Lay each block's W_Q, W_K, W_V (and W_gate, W_up) out as consecutive rows of one
    matrix, and keep that matrix beside them (``attn._qkv``, ``mlp._gate_up``): the
    parameters stay what they were, each a view of its rows, so nothing else changes
    (names, state_dict, hooks, in-place edits). A batch-1 decoding step of a
    `LlamaDecoder` then makes one matrix-vector product where it made three (and two):
    fewer calls and longer reads (bench/smollm2_formats.py). Anything that gives a
    parameter new storage (``.data = ...``, ``copy.deepcopy``) ends the sharing, and the
    step goes back to the separate products (`_fused_weight` checks, and drops the stale
    copy); a `LlamaDecoder`'s ``.to(dtype)`` fuses again. Biased projections are left
    as they are. Returns the model."""
    if not isinstance(model, ModernDecoder):
        raise TypeError(f"model: expected a lib.ModernDecoder, got {type(model).__name__}")
    with torch.no_grad():
        for block in model.blocks:
            for part, names, attr in _FUSED:
                module = getattr(block, part)
                linears = [getattr(module, n, None) for n in names]
                if not all(type(m) is nn.Linear and m.bias is None for m in linears):
                    continue
                fused = torch.cat([m.weight.detach() for m in linears])
                start = 0
                for m in linears:
                    rows = m.weight.shape[0]
                    m.weight.data = fused[start : start + rows]
                    start += rows
                setattr(module, attr, fused)
    return model


def drop_fused(model: nn.Module) -> bool:
    """Forget the matrices `fuse_projections` kept (the parameters keep their values).
    Returns whether there were any."""
    found = False
    model.__dict__.pop("_plan", None)  # a LlamaDecoder's _TokenPlan holds views of them
    for module in model.modules():
        for _, _, attr in _FUSED:
            if module.__dict__.pop(attr, None) is not None:
                found = True
    return found


def _fused_weight(module: nn.Module, names: tuple[str, ...], attr: str) -> torch.Tensor | None:
    """``module``'s fused matrix if the parameters ``names`` are still its consecutive
    rows (same storage, same dtype, no bias), else None; a stale one (after
    ``copy.deepcopy`` or ``.data = ...``) is dropped, its memory freed."""
    fused = module.__dict__.get(attr)
    if fused is None:
        return None
    ptr, step = fused.data_ptr(), fused.shape[1] * fused.element_size()
    mods = module._modules
    for n in names:
        lin = mods[n]
        w = lin.weight
        if (w.data_ptr() != ptr or lin.bias is not None or w.dtype != fused.dtype
                or w.shape[1] != fused.shape[1] or not w.is_contiguous()):
            del module.__dict__[attr]
            return None
        ptr += w.shape[0] * step
    if ptr != fused.data_ptr() + fused.shape[0] * step:
        del module.__dict__[attr]
        return None
    return fused


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
    one_row = B * T == 1  # a batch-1 decoding step: the fused matrices, if kept
    qkv = _fused_weight(attn, _FUSED[0][1], "_qkv") if one_row else None
    if qkv is not None:  # 2. projections, one product: (B, T, h·d + 2 g·d)
        sizes = [lin[n].weight.shape[0] for n in ("w_q", "w_k", "w_v")]
        q, k, v = _linear(h, qkv, None).split(sizes, dim=-1)
    else:
        q = _linear(h, lin["w_q"].weight, lin["w_q"].bias)  # 2. projections, (B, T, h·d)
        k = _linear(h, lin["w_k"].weight, lin["w_k"].bias)  # (B, T, g·d)
        v = _linear(h, lin["w_v"].weight, lin["w_v"].bias)
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
    x = x + _linear(z, lin["w_o"].weight, lin["w_o"].bias)  # 5. W^O and the residual
    h = _rms_norm(x, n2.weight, n2.bias, n2.eps)  # 6. SwiGLU on the second pre-norm
    ff = mlp._modules
    gate_up = _fused_weight(mlp, _FUSED[1][1], "_gate_up") if one_row else None
    if gate_up is not None:
        gate, up = _linear(h, gate_up, None).split(ff["w_gate"].weight.shape[0], dim=-1)
        up = F.silu(gate) * up
    else:
        gate = F.silu(_linear(h, ff["w_gate"].weight, ff["w_gate"].bias))
        up = gate * _linear(h, ff["w_up"].weight, ff["w_up"].bias)
    return x + _linear(up, ff["w_down"].weight, ff["w_down"].bias)


class _TokenPlan:
    """What a batch-1 decoding step of a `LlamaDecoder` needs from its blocks, gathered
    once: per block the norms, the four one-row products (`_Row`: Q, K and V as one,
    W^O, gate and up as one, down) and the attention. Built only when every block is a
    `_plain_block` with its fused matrices (`fuse_projections`); `LlamaDecoder` keeps
    it while `still_valid` (about 0.25 ms a step for SmolLM2, where asking `_plain_block`
    of every block took 0.9 ms): the same modules in the same places, no forward hook on any,
    every parameter on the storage it had (in-place edits are seen through the views;
    ``.data = ...``, ``.to(dtype)`` or a new parameter make a new plan), the attention
    fast, the same number of threads."""

    def __init__(self, blocks: list, same: list, storage: list, modules: list, attns: list):
        self.blocks, self.same, self.storage = blocks, same, storage
        self.modules, self.attns = modules, attns
        self.threads = torch.get_num_threads()
        self._native_weights: list | None | bool = False  # native_weights() not asked yet

    @classmethod
    def build(cls, model: "LlamaDecoder") -> "_TokenPlan | None":
        """The plan for `model` now, or None if a block is not a `_plain_block` or has
        no (or a stale) fused matrix: then the blocks run one by one (`_block_step`)."""
        if not all(_plain_block(block) for block in model.blocks):
            return None  # (checked first: a hook on a late block stops it at once)
        blocks, same, storage, modules, attns = [], [], [], [], []
        for block in model.blocks:
            parts = block._modules
            attn, mlp = parts["attn"], parts["mlp"]
            qkv = _fused_weight(attn, _FUSED[0][1], "_qkv")
            gate_up = _fused_weight(mlp, _FUSED[1][1], "_gate_up")
            if qkv is None or gate_up is None:
                return None
            lin, ff = attn._modules, mlp._modules
            blocks.append((parts["norm1"], attn, _Row(qkv, None),
                           _Row(lin["w_o"].weight, lin["w_o"].bias), parts["norm2"],
                           _Row(gate_up, None), ff["w_gate"].weight.shape[0],
                           _Row(ff["w_down"].weight, ff["w_down"].bias)))
            owners = (block, attn, mlp)
            children = [m for owner in owners for m in owner._modules.values()]
            modules += [block, *children]
            attns.append(attn)
            same += [(owner._modules, name, m) for owner in owners
                     for name, m in owner._modules.items()]
            same += [(attn.__dict__, "_qkv", qkv), (mlp.__dict__, "_gate_up", gate_up),
                     (attn.__dict__, "rope_table", attn.rope_table)]
            for m in children:
                same += [(m._parameters, name, p) for name, p in m._parameters.items()]
                storage += [(p, p.data_ptr()) for p in m._parameters.values() if p is not None]
            storage += [(qkv, qkv.data_ptr()), (gate_up, gate_up.data_ptr())]
        return cls(blocks, same, storage, modules, attns)

    def still_valid(self) -> bool:
        if torch.get_num_threads() != self.threads:
            return False
        for where, name, obj in self.same:
            if where.get(name) is not obj:
                return False
        for tensor, ptr in self.storage:
            if tensor.data_ptr() != ptr:
                return False
        return not _hooked(*self.modules) and all(a.fast for a in self.attns)

    def native_weights(self) -> list[torch.Tensor] | None:
        """The tensors `lib.model.native`'s step reads, 6 a block (norm1's weight, the
        QKV, W^O, gate-up and down row blocks of `_Row`, norm2's weight), or None if a
        block is not one it computes: a bias anywhere, a dtype other than float32,
        blocks of different shapes, eps or rotary tables. A product `_Row` does not split
        (one thread) is one block, W transposed (1, K, N).
        ``shapes`` holds (H, G, D, d_ff, eps). Gathered once per plan."""
        if self._native_weights is False:
            self._native_weights = self._gather_native()
        return self._native_weights

    def _gather_native(self) -> list[torch.Tensor] | None:
        flat, shapes, tables = [], set(), set()
        for n1, attn, qkv, w_o, n2, gate_up, d_ff, down in self.blocks:
            rows = (qkv, w_o, gate_up, down)
            if (any(r.bias is not None or r.weight.dtype != torch.float32
                    or not r.weight.is_contiguous() for r in rows)
                    or n1.bias is not None or n2.bias is not None or n1.eps != n2.eps
                    or n1.weight.dtype != torch.float32 or n2.weight.dtype != torch.float32):
                return None
            shapes.add((attn.n_heads, attn.n_kv_heads, attn.d_head, d_ff, n1.eps))
            tables.add((id(attn.rope_table), attn.pairing))
            q, o, gu, dn = (r.blocks if r.blocks is not None else r.weight.t().unsqueeze(0)
                            for r in rows)  # split into row blocks, or one block (1, K, N)
            flat += [n1.weight, q, o, n2.weight, gu, dn]
        if len(shapes) != 1 or len(tables) != 1:
            return None
        self.shapes = shapes.pop()
        return [t.detach() for t in flat]

    def run(self, x: torch.Tensor, cache, native_module=None) -> torch.Tensor:
        """x (1, 1, d_model), one new token -> (1, 1, d_model), the cache grown by one:
        `_block_step`'s operations in the same order (bit for bit the same numbers,
        tests/test_llama_speed_paths.py), in about half as many tensor calls. Q's and
        K's heads are rotated at once, as one tensor, with `_RotaryTable.pairs` (no
        strided halves, no stack). With ``native_module`` (what `lib.model.native` built),
        the whole step runs there when it can (`lib.model.native._step`)."""
        if native_module is not None and not any("_fused" in a.__dict__ for a in self.attns):
            out = native._step(native_module, self, x, cache)
            if out is not None:
                return out
        for (n1, attn, qkv, w_o, n2, gate_up, d_ff, down), c in zip(self.blocks, cache.self_attn):
            H, G, D = attn.n_heads, attn.n_kv_heads, attn.d_head
            offset = c.length
            h = _rms_norm(x, n1.weight, n1.bias, n1.eps)  # 1. pre-norm
            heads = qkv(h).view(H + 2 * G, D)  # 2. Q, K, V: one product, H + 2G heads
            cos, sin = attn.rope_table.pairs(offset, attn.pairing, heads.dtype, x.device)
            if attn.pairing == "interleaved":  # 3. rotary, Q's and K's heads at once
                pairs = heads[: H + G].view(H + G, D // 2, 2)
                swapped = pairs.flip(-1)
            else:
                pairs = heads[: H + G].view(H + G, 2, D // 2)
                swapped = pairs.flip(-2)
            qk = (pairs * cos).add_(swapped * sin).view(1, H + G, 1, D)
            k, v = c.update_in_place(qk[:, H:], heads[H + G :].view(1, G, 1, D))
            z = attn._fused(qk[:, :H], k, v, offset, 1, k.shape[-2])  # 4. (1, H, 1, D)
            x = x + w_o(z.reshape(1, 1, H * D))  # 5. W^O and the residual
            h = _rms_norm(x, n2.weight, n2.bias, n2.eps)  # 6. SwiGLU
            gate, up = gate_up(h).split(d_ff, dim=-1)
            x = x + down(F.silu(gate) * up)
        return x


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
    own forward instead. A batch-1 decoding step (one new token of one sequence, with
    the KV cache) runs all blocks from a `_TokenPlan`, the same operations again with
    about half the tensor calls (SmolLM2, 64 greedy tokens, 2 threads, median of 5
    interleaved runs: about 47 ms a token against 55 block by block, of which the
    matrix-vector products alone take about 29; measured 2026-11-29). With
    `lib.native_decoding` the plan's step runs in compiled code (`lib.model.native`)
    whenever it can."""

    def __init__(self, config: ModernConfig):
        super().__init__(config)
        self.fast = True

    def _run_blocks(self, x: torch.Tensor, cache) -> torch.Tensor:
        if not self.fast or _global_hooks():
            return super()._run_blocks(x, cache)
        if cache is not None and x.shape[0] * x.shape[1] == 1:  # a batch-1 decoding step
            plan = self.__dict__.get("_plan")
            if plan is None or not plan.still_valid():
                plan = self.__dict__["_plan"] = _TokenPlan.build(self)
            if plan is not None:
                return plan.run(x, cache, native._module if self.__dict__.get("_native") else None)
        for i, block in enumerate(self.blocks):
            c = None if cache is None else cache.self_attn[i]
            x = _block_step(block, x, c) if _plain_block(block) else block(x, c)
        return x

    def _apply(self, fn, recurse=True):
        """``.to(dtype)``, ``.double()``, ...: every parameter gets new storage, so the
        fused matrices (`fuse_projections`) would be stale copies holding memory; they
        are dropped first and rebuilt from the new parameters after."""
        fused = drop_fused(self)
        out = super()._apply(fn, recurse)
        return fuse_projections(self) if fused else out

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        norm, head = self.final_norm, self.head
        if (not self.fast or _global_hooks() or type(norm) is not RMSNorm
                or type(head) is not nn.Linear or _hooked(norm, head)):
            return super()._logits(x)
        return _linear(_rms_norm(x, norm.weight, norm.bias, norm.eps), head.weight, head.bias)


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
