"""Tiled attention with an online softmax: attention that never stores the (m × n) weights.

Introduced in the "Beyond the paper" chapter on efficient attention.

The textbook path (`scaled_dot_product_attention`) builds the whole score
matrix S = Q Kᵀ / √d_k, (m × n) numbers per head, then its softmax. Here the
queries are cut into blocks of ``block_q`` rows and the keys into blocks of
``block_k`` rows. For one query block we visit the key blocks in turn and keep,
per query, only three running quantities:

    m_i  the largest score seen so far            (..., block_q)
    l_i  Σ_j exp(s_ij − m_i) over the keys seen   (..., block_q)
    acc  Σ_j exp(s_ij − m_i) v_j                  (..., block_q, d_v)

When a new key block raises the maximum from m_i to m_new, everything
accumulated so far was computed relative to the old maximum; multiplying
l_i and acc by exp(m_i − m_new) rescales it exactly. After the last block,
output = acc / l_i. This is the online softmax of FlashAttention
(Dao et al., 2022); the memory held at any time is O(block_q × block_k) for
the scores, not O(m × n).

Backward: a custom `torch.autograd.Function` saves only the inputs, the output
and the per-query log-normaliser L_i = m_i + log l_i, and recomputes each
block's weights α_ij = exp(s_ij − L_i) in the backward pass. Letting autograd
differentiate through the loop would be correct too, but it would keep every
block's weights for the backward pass: O(m × n) memory again, the very thing
tiling avoids.

Masks follow `lib`'s convention (True = may attend). A query with no allowed
key gets a zero output (and zero gradients), as in the textbook path.
"""

from __future__ import annotations

import math

import torch

from lib._checks import shape

__all__ = ["tiled_attention"]


def _require_block(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return value


def _check_inputs(q, k, v, key_mask, causal) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
        if t.dim() < 2:
            raise ValueError(f"{name} needs at least 2 dimensions (..., length, features), got {shape(t)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share their last size d_k: q is {shape(q)}, k is {shape(k)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions n: k is {shape(k)}, v is {shape(v)}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k and v must have the same leading (batch, head) dimensions: "
            f"q is {shape(q)}, k is {shape(k)}, v is {shape(v)}"
        )
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__} {causal!r}")
    if key_mask is not None:
        if not isinstance(key_mask, torch.Tensor) or key_mask.dtype != torch.bool:
            kind = key_mask.dtype if isinstance(key_mask, torch.Tensor) else type(key_mask).__name__
            raise TypeError(f"key_mask must be a bool tensor (True = may attend), got {kind}")
        if key_mask.device != q.device:
            raise ValueError(f"key_mask is on {key_mask.device}, q on {q.device}")
        want = torch.Size((*q.shape[:-2], 1, k.shape[-2]))
        try:
            ok = torch.broadcast_shapes(key_mask.shape, want) == want
        except RuntimeError:
            ok = False
        if key_mask.dim() < 2 or key_mask.shape[-2] != 1 or not ok:
            raise ValueError(
                f"key_mask must broadcast to (..., 1, n) = {tuple(want)} (one row per sequence, "
                f"like lib.padding_mask), got {shape(key_mask)}"
            )


def _block_allowed(key_mask, causal, q0, q1, k0, k1, device) -> torch.Tensor | None:
    """Which (query, key) pairs of this block may attend; None when all may."""
    allowed = None
    if causal:
        rows = torch.arange(q0, q1, device=device)[:, None]
        cols = torch.arange(k0, k1, device=device)[None, :]
        allowed = cols <= rows  # (bq, bk), query i sees keys 0..i
    if key_mask is not None:
        keys = key_mask[..., k0:k1]  # (..., 1, bk)
        allowed = keys if allowed is None else allowed & keys
    return allowed


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """Blocks of float16/bfloat16 inputs are computed in float32, as fused kernels
    accumulate: a float16 score near 1e3 has steps of 0.5, too coarse for exp."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _key_blocks(n: int, block_k: int, causal: bool, q1: int):
    """Start and end of each key block a query block [.., q1) needs."""
    end = min(n, q1) if causal else n  # under a causal mask, later keys are all hidden
    for k0 in range(0, end, block_k):
        yield k0, min(k0 + block_k, end)


class _TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, key_mask, causal, block_q, block_k):
        m, n, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
        scale = 1.0 / math.sqrt(d_k)
        work = _work_dtype(q.dtype)
        out = q.new_zeros((*q.shape[:-1], v.shape[-1]))  # (..., m, d_v)
        lse = q.new_zeros(q.shape[:-1], dtype=work)  # (..., m): log Σ_j exp(s_ij)
        for q0 in range(0, m, block_q):
            q1 = min(q0 + block_q, m)
            qb = q[..., q0:q1, :].to(work) * scale  # (..., bq, d_k)
            m_i = qb.new_full(qb.shape[:-1], -math.inf)  # (..., bq) running maximum
            l_i = qb.new_zeros(qb.shape[:-1])  # (..., bq) running normaliser
            acc = qb.new_zeros((*qb.shape[:-1], v.shape[-1]))  # (..., bq, d_v)
            for k0, k1 in _key_blocks(n, block_k, causal, q1):
                s = qb @ k[..., k0:k1, :].to(work).transpose(-2, -1)  # (..., bq, bk)
                allowed = _block_allowed(key_mask, causal, q0, q1, k0, k1, q.device)
                if allowed is not None:
                    s = s.masked_fill(~allowed, -math.inf)
                m_new = torch.maximum(m_i, s.amax(dim=-1))  # (..., bq)
                # A row with nothing allowed yet has m_new = -inf; shift it by 0 instead.
                shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                p = torch.exp(s - shift[..., None])  # (..., bq, bk); masked entries give 0
                rescale = torch.exp(m_i - shift)  # (..., bq): old sums to the new maximum
                l_i = l_i * rescale + p.sum(dim=-1)
                acc = acc * rescale[..., None] + p @ v[..., k0:k1, :].to(work)
                m_i = m_new
            empty = l_i == 0  # no allowed key at all: output 0, as in the textbook path
            out[..., q0:q1, :] = (acc / torch.where(empty, torch.ones_like(l_i), l_i)[..., None]).to(q.dtype)
            shift = torch.where(torch.isinf(m_i), torch.zeros_like(m_i), m_i)
            lse[..., q0:q1] = torch.where(empty, torch.zeros_like(l_i), shift + torch.log(l_i))
        ctx.save_for_backward(q, k, v, out, lse, key_mask)
        ctx.causal, ctx.block_q, ctx.block_k = causal, block_q, block_k
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, lse, key_mask = ctx.saved_tensors
        causal, block_q, block_k = ctx.causal, ctx.block_q, ctx.block_k
        m, n = q.shape[-2], k.shape[-2]
        scale = 1.0 / math.sqrt(q.shape[-1])
        work = _work_dtype(q.dtype)
        # float16/bfloat16 inputs: float32 copies of q, k, v, out and dO, O(n·d) like the inputs
        q, k, v, out, d_out = (t.to(work) for t in (q, k, v, out, d_out))
        d_q, d_k, d_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        delta = (d_out * out).sum(dim=-1)  # (..., m): Σ_c dO_ic O_ic, the softmax's correction term
        for q0 in range(0, m, block_q):
            q1 = min(q0 + block_q, m)
            qb, dob = q[..., q0:q1, :], d_out[..., q0:q1, :]
            for k0, k1 in _key_blocks(n, block_k, causal, q1):
                kb, vb = k[..., k0:k1, :], v[..., k0:k1, :]
                s = (qb * scale) @ kb.transpose(-2, -1)  # (..., bq, bk), recomputed
                allowed = _block_allowed(key_mask, causal, q0, q1, k0, k1, q.device)
                if allowed is not None:
                    s = s.masked_fill(~allowed, -math.inf)
                p = torch.exp(s - lse[..., q0:q1, None])  # the weights α of this block
                d_v[..., k0:k1, :] += p.transpose(-2, -1) @ dob
                dp = dob @ vb.transpose(-2, -1)  # (..., bq, bk)
                ds = p * (dp - delta[..., q0:q1, None])  # softmax backward, row by row
                d_q[..., q0:q1, :] += ds @ kb * scale
                d_k[..., k0:k1, :] += ds.transpose(-2, -1) @ qb * scale
        dtype = ctx.saved_tensors[0].dtype
        return d_q.to(dtype), d_k.to(dtype), d_v.to(dtype), None, None, None, None


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_mask: torch.Tensor | None = None,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """softmax(Q Kᵀ / √d_k) V computed block by block, without the (m × n) weights.

    q (..., m, d_k), k (..., n, d_k), v (..., n, d_v), one dtype and device,
    the same leading dimensions. key_mask: bool, broadcastable to (..., 1, n),
    True on keys that may be attended (``lib.padding_mask`` has this form).
    causal: query i sees keys 0..i (top-left aligned, as
    ``F.scaled_dot_product_attention(is_causal=True)``). Block sizes need not
    divide m or n: the last block is simply shorter. Returns (..., m, d_v).
    """
    _check_inputs(q, k, v, key_mask, causal)
    block_q = _require_block("block_q", block_q)
    block_k = _require_block("block_k", block_k)
    return _TiledAttention.apply(q, k, v, key_mask, causal, block_q, block_k)
