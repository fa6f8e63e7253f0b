"""Today's decoder: the 2017 block with the changes open models made since.

Introduced in chapter 14 ("From GPT-2's decoder to today's models"), which
switches the changes on one at a time; chapter 15 loads a real pretrained
model (SmolLM2, a Llama-architecture model) into `ModernDecoder`.

    RMSNorm       y = x / sqrt(mean(x²) + ε) · g      (no mean subtracted, no bias)
    rotary        rotate each (query, key) pair of features by position · ω_i
    SwiGLU        FFN(x) = W_down (silu(W_gate x) ⊙ W_up x)
    grouped-query n_heads query heads share n_kv_heads key/value heads
                  (query head j reads key/value head j // (n_heads / n_kv_heads))
    no biases     every linear map without its bias

Rotary pairing. ``pairing="interleaved"`` rotates features (2i, 2i+1) of each
head, the convention of chapter 6 and of llama.cpp for the Llama architecture's GGUF
files (other architectures in GGUF, such as GPT-NeoX's, rotate halves);
``pairing="half"`` rotates (i, i + d_head/2), Hugging Face's ``rotate_half``.
Both turn pair i by θ = p · ω_i, ω_i = base^(-2i/d_head), with RoFormer's and
LLaMA's sign: [a, b] -> [a cos θ - b sin θ, a sin θ + b cos θ]. The two
pairings give the same attention when W_Q's and W_K's rows of each head are
permuted accordingly (tests/test_modern.py checks it against Hugging Face).

The KV cache is `lib.KVCache(n_layers)` (chapter 11): each layer's
`AttentionCache` holds the keys and values of the n_kv_heads key/value heads,
(B, n_kv_heads, t, d_head), *not* repeated to n_heads, so grouped-query
attention shrinks the cache by n_heads / n_kv_heads. Keys are stored already
rotated; ``cache.length`` is the position of the next token.

Hook points (`lib.model.hooks`): ``blocks.{i}.hook_resid_pre``,
``blocks.{i}.attn.hook_pattern``, ``blocks.{i}.attn.hook_z``,
``blocks.{i}.hook_attn_out``, ``blocks.{i}.hook_mlp_out``,
``blocks.{i}.hook_resid_post``. With a hook on ``hook_pattern`` the attention
computes its weights explicitly (the textbook path); otherwise it calls
PyTorch's fused ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lib._checks import (
    require_bool,
    require_float,
    require_matches_module,
    require_number,
    require_positive_int,
    require_tensor,
    require_token_ids,
    shape,
)
from lib.model.hooks import HookPoint
from lib.model.kv_cache import AttentionCache, KVCache, _check_offset
from lib.model.layers import sinusoidal_positional_encoding
from lib.model.transformer import _add_hook_points

__all__ = [
    "RMSNorm",
    "rotary_tables",
    "apply_rotary",
    "SwiGLU",
    "GroupedQueryAttention",
    "ModernBlock",
    "ModernConfig",
    "ModernDecoder",
]

PAIRINGS = ("interleaved", "half")
NORMS = ("layer", "rms")
POSITIONS = ("learned", "sinusoidal", "rotary", "none")
FFNS = ("relu", "gelu", "swiglu")


def _require_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def _require_last_dim(name: str, x: torch.Tensor, d: int, what: str = "d_model") -> None:
    if x.dim() == 0 or x.shape[-1] != d:
        raise ValueError(f"{name} must have last dimension {what}={d}, got {shape(x)}")


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / sqrt(mean(x²) + ε) · g (+ b), over the last axis (Zhang & Sennrich 2019).

    LayerNorm without the mean subtraction (and, by default, without the bias):
    it rescales each vector to unit root-mean-square, then by a learned gain g
    (``weight``, initialised to ones). Equal to ``F.rms_norm(x, (d,), weight, eps)``.
    For half-precision inputs the statistic is computed in float32.
    """

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = False):
        super().__init__()
        self.d = require_positive_int("d", d)
        self.eps = require_number("eps", eps, positive=True)
        require_bool("bias", bias)
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_float("x", x)
        _require_last_dim("x", x, self.d, "d")
        require_matches_module("x", x, self)
        return _rms_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d}, eps={self.eps}, bias={self.bias is not None}"


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
              eps: float) -> torch.Tensor:
    """`RMSNorm`'s arithmetic without its checks (`lib.model.llama`'s decoding step runs
    it too, and must give the same numbers bit for bit)."""
    acc = torch.promote_types(x.dtype, torch.float32)
    x32 = x if x.dtype == acc else x.to(acc)  # (no call for a no-op: a decoding step runs 61)
    y = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)  # unit RMS
    y = (y if y.dtype == x.dtype else y.to(x.dtype)) * weight
    return y if bias is None else y + bias


def rotary_tables(length: int, d_head: int, base: float = 10000.0, offset: int = 0,
                  *, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles θ[p, i] = p · base^(-2i/d_head), each
    (length, d_head // 2), for positions p = offset .. offset + length - 1.

    The angles are computed in float64 and rounded once to ``dtype`` (float32 by default).
    """
    require_positive_int("length", length)
    require_positive_int("d_head", d_head)
    if d_head % 2:
        raise ValueError(f"d_head must be even (features are rotated in pairs), got {d_head}")
    base = require_number("base", base, positive=True)
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int, got {offset!r} ({type(offset).__name__})")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    i = torch.arange(d_head // 2, dtype=torch.float64)
    omega = base ** (-2.0 * i / d_head)  # (d_head/2,)
    p = torch.arange(offset, offset + length, dtype=torch.float64)
    theta = p[:, None] * omega  # (length, d_head/2)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    return theta.cos().to(dtype), theta.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 pairing: str = "interleaved") -> torch.Tensor:
    """Rotate the feature pairs of x (..., T, d_head) by the angles of `rotary_tables`.

    cos, sin: (T, d_head // 2). ``pairing="interleaved"``: pair i is features
    (2i, 2i+1); ``"half"``: features (i, i + d_head/2). Each pair [a, b] becomes
    [a cos θ - b sin θ, a sin θ + b cos θ]. Returns x's shape and dtype.
    """
    require_float("x", x)
    _require_choice("pairing", pairing, PAIRINGS)
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., T, d_head), got {shape(x)}")
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"x: d_head must be even (features are rotated in pairs), got {shape(x)}")
    for name, t in (("cos", cos), ("sin", sin)):
        require_float(name, t)
        if tuple(t.shape) != (T, d // 2):
            raise ValueError(f"{name} must have shape (T, d_head // 2) = ({T}, {d // 2}) for x {shape(x)}, "
                             f"got {shape(t)}")
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    return _rotate(x, cos, sin, pairing)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str) -> torch.Tensor:
    """`apply_rotary`'s arithmetic without its checks."""
    if cos.dtype != x.dtype:
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if pairing == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class SwiGLU(nn.Module):
    """SwiGLU(x) = W_down (silu(W_gate x) ⊙ W_up x) (Shazeer 2020), the FFN of Llama-style models.

    Three matrices instead of two: at d_ff = (2/3) · 4 d_model it has the
    parameters of the 2017 FFN with d_ff = 4 d_model.
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        self.d_model = require_positive_int("d_model", d_model)
        self.d_ff = require_positive_int("d_ff", d_ff)
        require_bool("bias", bias)
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_float("x", x)
        _require_last_dim("x", x, self.d_model)
        require_matches_module("x", x, self)
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))  # (..., d_model)


class FeedForward(nn.Module):
    """The 2017 FFN, w_down(act(w_up x)), with "relu" or "gelu" and optional biases."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu", bias: bool = True):
        super().__init__()
        self.d_model = require_positive_int("d_model", d_model)
        self.d_ff = require_positive_int("d_ff", d_ff)
        self.activation = _require_choice("activation", activation, ("relu", "gelu"))
        require_bool("bias", bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_float("x", x)
        _require_last_dim("x", x, self.d_model)
        require_matches_module("x", x, self)
        h = self.w_up(x)
        return self.w_down(torch.relu(h) if self.activation == "relu" else F.gelu(h))


class GroupedQueryAttention(nn.Module):
    """Causal self-attention where n_heads query heads share n_kv_heads key/value heads
    (Ainslie et al. 2023). n_kv_heads = n_heads is multi-head attention; 1 is multi-query.

    Linears: ``w_q`` d_model -> n_heads·d_head, ``w_k`` and ``w_v`` d_model ->
    n_kv_heads·d_head, ``w_o`` n_heads·d_head -> d_model, d_head = d_model / n_heads.
    Query head j reads key/value head j // (n_heads / n_kv_heads) (consecutive
    query heads form a group: ``repeat_interleave``, as Hugging Face's ``repeat_kv``).
    ``rope_base`` (a float) applies rotary embeddings to queries and keys with
    ``pairing``; None leaves them unrotated (positions added to the input instead).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False,
                 rope_base: float | None = None, pairing: str = "interleaved"):
        super().__init__()
        self.d_model = require_positive_int("d_model", d_model)
        self.n_heads = require_positive_int("n_heads", n_heads)
        self.n_kv_heads = require_positive_int("n_kv_heads", n_kv_heads)
        require_bool("bias", bias)
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads} "
                             "(each key/value head serves the same number of query heads)")
        self.d_head = d_model // n_heads
        self.rope_base = None if rope_base is None else require_number("rope_base", rope_base, positive=True)
        self.pairing = _require_choice("pairing", pairing, PAIRINGS)
        if self.rope_base is not None and self.d_head % 2:
            raise ValueError(f"rotary embeddings need an even d_head, got d_model / n_heads = {self.d_head}")
        self.w_q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.w_o = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.hook_pattern = HookPoint()  # (B, h, T_q, T_k)
        self.hook_z = HookPoint()  # (B, T, h, d_head)

    def forward(self, x: torch.Tensor, cache: AttentionCache | None = None) -> torch.Tensor:
        """x (B, T, d_model) -> (B, T, d_model), causal.

        cache: an optional `lib.AttentionCache`; x then holds the T new positions
        that follow the cache.length cached ones, whose keys and values
        (B, n_kv_heads, t, d_head) it extends.
        """
        require_float("x", x)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), got {shape(x)}")
        require_matches_module("x", x, self)
        if cache is not None and not isinstance(cache, AttentionCache):
            raise TypeError(f"cache must be a lib.AttentionCache, got {type(cache).__name__}")
        B, T, _ = x.shape
        offset = 0 if cache is None else cache.length
        q, k, v = self._project(x)
        if self.rope_base is not None:
            cos, sin = rotary_tables(T, self.d_head, self.rope_base, offset,
                                     dtype=torch.promote_types(q.dtype, torch.float32))
            cos, sin = cos.to(x.device), sin.to(x.device)
            q = apply_rotary(q, cos, sin, self.pairing)
            k = apply_rotary(k, cos, sin, self.pairing)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, g, offset + T, d): n_kv_heads heads, not repeated
        n_keys = k.shape[-2]
        if self.hook_pattern.active:
            z = self._textbook(q, k, v, offset, n_keys)
        else:
            z = self._fused(q, k, v, offset, T, n_keys)
        return self._output(z)

    def _project(self, x: torch.Tensor):
        """q (B, h, T, d_head); k and v (B, n_kv_heads, T, d_head), before rotary."""
        B, T, _ = x.shape
        q = self.w_q(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T, d)
        k = self.w_k(x).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, g, T, d)
        v = self.w_v(x).view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)
        return q, k, v

    def _output(self, z: torch.Tensor) -> torch.Tensor:
        """The heads' outputs z (B, h, T, d_head), through hook_z, joined and W^O."""
        B, _, T, _ = z.shape
        z = z.transpose(1, 2)  # (B, T, h, d_head)
        if self.hook_z._forward_hooks:  # skipped with no hook: no module call at all
            z = self.hook_z(z)
        return self.w_o(z.reshape(B, T, self.n_heads * self.d_head))

    def _mask(self, T: int, n_keys: int, offset: int, device) -> torch.Tensor:
        # new position i sits at offset + i and sees keys 0 .. offset + i
        return torch.ones(T, n_keys, dtype=torch.bool, device=device).tril(offset)

    def _fused(self, q, k, v, offset, T, n_keys):
        gqa = self.n_kv_heads != self.n_heads
        if offset == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        if T == 1:  # one new token sees every cached key
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
        mask = self._mask(T, n_keys, offset, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)

    def _textbook(self, q, k, v, offset, n_keys):
        group = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(group, dim=1)  # (B, h, n, d): head j reads kv head j // group
        v = v.repeat_interleave(group, dim=1)
        acc = torch.promote_types(q.dtype, torch.float32)
        scores = (q.to(acc) / math.sqrt(self.d_head)) @ k.to(acc).transpose(-2, -1)  # (B, h, T, n)
        mask = self._mask(q.shape[-2], n_keys, offset, q.device)
        weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1).to(v.dtype)
        weights = self.hook_pattern(weights)  # (B, h, T, n)
        return weights @ v  # (B, h, T, d)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, "
                f"d_head={self.d_head}, rope_base={self.rope_base}, pairing={self.pairing!r}")


@dataclass
class ModernConfig:
    """Sizes and choices of a `ModernDecoder`.

    The defaults are a small Llama-style model; chapter 11's decoder is
    ``norm="layer", position="learned", ffn="gelu", bias=True, n_kv_heads=n_heads``.
    ``rope_pairing`` (not part of the 2017/Llama choice list) says which
    feature pairs rotary embeddings rotate: "interleaved" (llama.cpp's, for Llama-architecture
    GGUF files) or "half" (Hugging Face's).
    ``position="none"`` gives the model no position signal but the causal mask (NoPE,
    chapter 14's control; Kazemnejad et al. 2023).
    """

    vocab_size: int = 256
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int = 172
    norm: str = "rms"  # "layer" (LayerNorm) or "rms" (RMSNorm)
    norm_first: bool = True  # pre-norm; False: the 2017 post-norm
    position: str = "rotary"  # "learned", "sinusoidal" (added to the input), "rotary", "none"
    rope_base: float = 10000.0
    ffn: str = "swiglu"  # "relu", "gelu" (two matrices) or "swiglu" (three)
    bias: bool = False  # biases in every linear map and norm
    tie_embeddings: bool = True  # the output head is the embedding matrix
    norm_eps: float = 1e-5
    max_len: int = 512
    rope_pairing: str = "interleaved"
    # factor on the added sinusoidal table (position="sinusoidal" only); 1 is chapter 6's
    # table, whose rows have norm sqrt(d_model / 2); chapter 14's fair control uses
    # 1 / sqrt(d_model / 2), the norm of the token rows at initialisation
    position_scale: float = 1.0

    def build(self) -> "ModernDecoder":
        return ModernDecoder(self)


def _check_config(c: ModernConfig) -> None:
    if not isinstance(c, ModernConfig):
        raise TypeError(f"config must be a lib.ModernConfig, got {type(c).__name__}")
    for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_len"):
        require_positive_int(name, getattr(c, name))
    for name in ("norm_first", "bias", "tie_embeddings"):
        require_bool(name, getattr(c, name))
    _require_choice("norm", c.norm, NORMS)
    _require_choice("position", c.position, POSITIONS)
    _require_choice("ffn", c.ffn, FFNS)
    _require_choice("rope_pairing", c.rope_pairing, PAIRINGS)
    require_number("rope_base", c.rope_base, positive=True)
    require_number("norm_eps", c.norm_eps, positive=True)
    require_number("position_scale", c.position_scale, positive=True)
    if c.position_scale != 1.0 and c.position != "sinusoidal":
        raise ValueError(f"position_scale scales the added sinusoidal table; position="
                         f"{c.position!r} has none, so it must stay 1.0, got {c.position_scale}")
    if c.d_model % c.n_heads:
        raise ValueError(f"d_model={c.d_model} is not divisible by n_heads={c.n_heads}")
    if c.n_heads % c.n_kv_heads:
        raise ValueError(f"n_kv_heads={c.n_kv_heads} must divide n_heads={c.n_heads}")
    if c.position == "rotary" and (c.d_model // c.n_heads) % 2:
        raise ValueError(f"position='rotary' needs an even d_head, got d_model / n_heads = "
                         f"{c.d_model // c.n_heads}")
    if c.position == "sinusoidal" and c.d_model % 2:
        raise ValueError(f"position='sinusoidal' needs an even d_model, got {c.d_model}")


def _make_norm(c: ModernConfig) -> nn.Module:
    if c.norm == "rms":
        return RMSNorm(c.d_model, eps=c.norm_eps, bias=c.bias)
    return nn.LayerNorm(c.d_model, eps=c.norm_eps, bias=c.bias)


class ModernBlock(nn.Module):
    """One decoder block: ``norm1``, ``attn`` (a `GroupedQueryAttention`), ``norm2``, ``mlp``.

    Pre-norm (``norm_first``): x + attn(norm1(x)), then + mlp(norm2(·)).
    Post-norm (2017): norm1(x + attn(x)), then norm2(· + mlp(·)).
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        _check_config(config)
        c = config
        self.d_model = c.d_model
        self.norm_first = c.norm_first
        self.norm1 = _make_norm(c)
        self.attn = GroupedQueryAttention(c.d_model, c.n_heads, c.n_kv_heads, bias=c.bias,
                                          rope_base=c.rope_base if c.position == "rotary" else None,
                                          pairing=c.rope_pairing)
        self.norm2 = _make_norm(c)
        if c.ffn == "swiglu":
            self.mlp = SwiGLU(c.d_model, c.d_ff, bias=c.bias)
        else:
            self.mlp = FeedForward(c.d_model, c.d_ff, activation=c.ffn, bias=c.bias)
        _add_hook_points(self, "attn_out")

    def forward(self, x: torch.Tensor, cache: AttentionCache | None = None) -> torch.Tensor:
        """x (B, T, d_model) -> (B, T, d_model); cache as in `GroupedQueryAttention`."""
        # Hook points (chapter 16) are called only while a hook is attached to one of them.
        hooked = any(p._forward_hooks for p in self._hook_points)
        if hooked:
            x = self.hook_resid_pre(x)
        if self.norm_first:
            a = self.attn(self.norm1(x), cache)
            x = x + (self.hook_attn_out(a) if hooked else a)
            f = self.mlp(self.norm2(x))
            x = x + (self.hook_mlp_out(f) if hooked else f)
        else:
            a = self.attn(x, cache)
            x = self.norm1(x + (self.hook_attn_out(a) if hooked else a))
            f = self.mlp(x)
            x = self.norm2(x + (self.hook_mlp_out(f) if hooked else f))
        return self.hook_resid_post(x) if hooked else x


class _AddedPositions(nn.Module):
    """Learned or sinusoidal vectors added to the token embeddings at positions offset..offset+T-1."""

    def __init__(self, kind: str, d_model: int, max_len: int, scale: float = 1.0):
        super().__init__()
        self.kind, self.max_len = kind, max_len
        if kind == "learned":
            self.embedding = nn.Embedding(max_len, d_model)
        else:
            table = sinusoidal_positional_encoding(max_len, d_model)
            self.register_buffer("pe", table * scale if scale != 1.0 else table, persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.shape[1]
        if self.kind == "learned":
            return x + self.embedding(torch.arange(offset, offset + T, device=x.device))
        return x + self.pe[offset : offset + T].to(x.dtype)


class _RotaryPositions(nn.Module):
    """Nothing is added to the input: positions enter inside attention (rotary), or
    nowhere (position="none": only the causal mask tells the model where it is)."""

    def __init__(self, max_len: int):
        super().__init__()
        self.max_len = max_len

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return x


class ModernDecoder(nn.Module):
    """A decoder-only language model built from a `ModernConfig`.

    ``embed`` (nn.Embedding, no √d_model scale), ``pos`` (added positions, or
    nothing with rotary), ``blocks`` (`ModernBlock`s), ``final_norm`` (pre-norm
    only), ``head`` (tied to ``embed`` with ``tie_embeddings``).
    ``forward(tokens, cache=None)`` -> logits (B, T, vocab_size); with a
    ``lib.KVCache(n_layers)`` the tokens are the new ones, at positions
    cache.length onwards. Initialisation as `lib.DecoderOnlyModel`'s.
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        _check_config(config)
        c = self.config = config
        self.vocab_size = c.vocab_size
        self.d_model = c.d_model
        self.n_heads = c.n_heads
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = (_RotaryPositions(c.max_len) if c.position in ("rotary", "none")
                    else _AddedPositions(c.position, c.d_model, c.max_len, c.position_scale))
        self.blocks = nn.ModuleList(ModernBlock(c) for _ in range(c.n_layers))
        self.final_norm = _make_norm(c) if c.norm_first else nn.Identity()
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        from lib.model.transformer import _init_parameters  # the course's initialisation

        if c.tie_embeddings:
            self.head.weight = self.embed.weight
        _init_parameters(self, c.d_model)

    @property
    def layers(self) -> nn.ModuleList:
        """The blocks, under the name `lib.generate` and `lib.KVCache` users expect."""
        return self.blocks

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, *,
                last_only: bool = False) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, vocab_size), causal.

        ``last_only=True`` returns the logits of the last position only, (B, 1, vocab_size):
        what `lib.generate` needs from the prompt (the head of the other positions, T × |V|
        dot products each, is skipped; Hugging Face's ``logits_to_keep=1``)."""
        require_token_ids("tokens", tokens, self.vocab_size)
        require_bool("last_only", last_only)
        if tokens.shape[1] == 0:
            raise ValueError(f"tokens must hold at least one position, got {shape(tokens)}")
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a lib.KVCache, got {type(cache).__name__}")
            if len(cache) != len(self.blocks) or cache.cross_attn is not None:
                raise ValueError(f"cache must be a KVCache({len(self.blocks)}), got {cache!r}")
        offset = 0 if cache is None else cache.length
        _check_offset(offset, tokens.shape[1], self.config.max_len)
        if tokens.device != self.embed.weight.device:
            raise ValueError(f"tokens are on {tokens.device} but the model is on {self.embed.weight.device}")
        x = self.pos(self.embed(tokens.long()), offset)  # (B, T, d_model)
        x = self._run_blocks(x, cache)
        if last_only:
            x = x[:, -1:]  # (B, 1, d_model)
        return self._logits(x)  # (B, T, vocab_size), or (B, 1, vocab_size)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        """The final norm and the head (`lib.model.llama` runs them faster)."""
        return self.head(self.final_norm(x))

    def _run_blocks(self, x: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """The residual stream through every block (`lib.model.llama` runs it faster)."""
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache.self_attn[i])
        return x

    def count_parameters(self) -> int:
        """Trainable parameters, a tied matrix counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def kv_cache_bytes(cache: KVCache) -> int:
    """Bytes held by a `lib.KVCache`'s key and value tensors (every layer)."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a lib.KVCache, got {type(cache).__name__}")
    total = 0
    for c in cache.self_attn:
        for t in (c.k, c.v):
            if t is not None:
                total += require_tensor("cache tensor", t).numel() * t.element_size()
    return total


__all__ += ["kv_cache_bytes", "FeedForward"]
