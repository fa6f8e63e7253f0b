"""The position-wise feed-forward network, embeddings and positional encodings.

Introduced in chapter 5 (feed-forward) and chapter 6 (positional encoding).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lib._checks import (
    require_bool,
    require_float,
    require_matches_module,
    require_number,
    require_positive_int,
    require_probability,
    require_token_ids,
    shape,
)

__all__ = [
    "PositionwiseFeedForward",
    "sinusoidal_positional_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "TokenEmbedding",
]

# The FFN's non-linearity. The paper's is ReLU; BERT uses the exact GELU
# (Hendrycks and Gimpel 2016), GPT-2 GELU's tanh approximation, Marian's opus-mt
# models SiLU (called "swish" in their configurations).
def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {"relu": torch.relu, "gelu": F.gelu, "gelu_tanh": _gelu_tanh, "silu": F.silu}


def require_activation(name: str, activation: object) -> str:
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"{name} must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    return activation


def require_layer_norm_eps(name: str, eps: object) -> float:
    """LayerNorm's ε, added to the variance before the square root: a positive number."""
    return require_number(name, eps, positive=True)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same small MLP at every position.

    ``linear1`` is (d_model -> d_ff), ``linear2`` is (d_ff -> d_model); the
    paper's base model uses d_ff = 4 d_model = 2048. Dropout, when asked for,
    sits after the ReLU. The paper drops only the sub-layer's *output* (which
    the surrounding layer does). Dropping the hidden activations too, after the
    ReLU, is what ``nn.TransformerEncoderLayer``, the Annotated Transformer and
    tensor2tensor's later defaults (``transformer_base_v2``) do;
    tensor2tensor's ``transformer_base_v1``, the paper's setting, does not.

    ``activation`` replaces the ReLU (the paper's, the default) for the model
    families that use another: "gelu" (BERT), "gelu_tanh" (GPT-2), "silu" (Marian).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.d_model = require_positive_int("d_model", d_model)
        self.d_ff = require_positive_int("d_ff", d_ff)
        self.activation = require_activation("activation", activation)
        self.relu_or_other = ACTIVATIONS[self.activation]  # max(0, .) unless another is asked for
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(require_probability("dropout", dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_float("x", x)
        if x.dim() == 0:
            raise ValueError(f"x must have a feature axis (..., d_model={self.d_model}), got a 0-d tensor")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has last dimension {x.shape[-1]}, expected d_model={self.d_model}: x is {shape(x)}")
        require_matches_module("x", x, self)
        hidden = self.relu_or_other(self.linear1(x))  # max(0, x W_1 + b_1), (..., d_ff)
        return self.linear2(self.dropout(hidden))  # (..., d_model)


def sinusoidal_positional_encoding(length: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """The paper's fixed encoding, a (length, d_model) float32 tensor:

        PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
        PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))

    Dimension pair i is a sinusoid of wavelength 2π·10000^(2i/d_model): the
    wavelengths form a geometric progression from 2π to (almost) 10000·2π.

    ``layout="concat"`` puts the same values in another order: all sines first,
    then all cosines (PE[pos, i] = sin, PE[pos, d_model/2 + i] = cos), as
    tensor2tensor and Marian (and so Hugging Face's ``MarianMTModel``) do.
    """
    require_positive_int("length", length)
    require_positive_int("d_model", d_model)
    if layout not in ("interleaved", "concat"):
        raise ValueError(f"layout must be 'interleaved' or 'concat', got {layout!r}")
    if d_model % 2:
        raise ValueError(f"d_model must be even so that sines and cosines pair up, got {d_model}")
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (length, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,)
    angle = pos / 10000.0 ** (two_i / d_model)  # (length, d_model/2)
    if layout == "concat":  # Marian's order: every sine, then every cosine
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).float()
    pe = torch.empty(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding to (B, L, d_model) embeddings, then dropout
    (the paper's dropout on the sums of embeddings and positional encodings).

    ``layout`` is the table's order of sines and cosines (see `sinusoidal_positional_encoding`)."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0, layout: str = "interleaved"):
        super().__init__()
        self.d_model = require_positive_int("d_model", d_model)
        self.max_len = require_positive_int("max_len", max_len)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model, layout), persistent=False)
        self.layout = layout  # validated by the table above
        self.dropout = nn.Dropout(require_probability("dropout", dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_embedded(x, self.d_model, self.max_len)
        if x.device != self.pe.device:
            raise ValueError(f"x is on {x.device} but this module is on {self.pe.device}; move one of them")
        return self.dropout(x + self.pe[: x.shape[1]].to(x.dtype))  # (B, L, d_model)


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned vector per position (BERT's and GPT's choice), then dropout.

    Unlike the sinusoidal encoding it has no value at all for positions
    beyond ``max_len``: such inputs are refused.
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.d_model = require_positive_int("d_model", d_model)
        self.max_len = require_positive_int("max_len", max_len)
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(require_probability("dropout", dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_embedded(x, self.d_model, self.max_len)
        require_matches_module("x", x, self)
        positions = torch.arange(x.shape[1], device=x.device)
        return self.dropout(x + self.embedding(positions))  # (B, L, d_model)


def _check_embedded(x: torch.Tensor, d_model: int, max_len: int) -> None:
    require_float("x", x)
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (B, L, d_model={d_model}), got {shape(x)}")
    if x.shape[1] > max_len:
        raise ValueError(f"sequence length {x.shape[1]} exceeds max_len={max_len} of this positional encoding")


class TokenEmbedding(nn.Module):
    """Token ids (B, L) -> vectors (B, L, d_model), multiplied by √d_model (paper, section 3.4).

    ``scale=False`` leaves out the √d_model (BERT and GPT-2 do not scale).

    Ids outside [0, vocab_size) are refused with a ValueError naming the id,
    rather than torch's opaque "index out of range". Ids of a narrow integer
    dtype (int8, int16, uint8) are accepted and converted to int64, the index
    type ``nn.Embedding`` needs.
    """

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True):
        super().__init__()
        self.vocab_size = require_positive_int("vocab_size", vocab_size)
        self.d_model = require_positive_int("d_model", d_model)
        self.scale = require_bool("scale", scale)
        self.embedding = nn.Embedding(vocab_size, d_model)

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, tokens: torch.Tensor, *, check_ids: bool = True) -> torch.Tensor:
        """``check_ids=False`` skips the range check (a device->host sync) when the
        caller has already checked the ids, as `lib.Transformer` does once per call."""
        if check_ids:
            require_token_ids("tokens", tokens, self.vocab_size)
        if tokens.device != self.weight.device:
            raise ValueError(f"tokens are on {tokens.device} but the embedding is on {self.weight.device}")
        if tokens.dtype not in (torch.int64, torch.int32):
            tokens = tokens.long()  # nn.Embedding indexes with int32/int64 only
        if not self.scale:
            return self.embedding(tokens)  # (B, L, d_model)
        return self.embedding(tokens) * math.sqrt(self.d_model)  # (B, L, d_model)
