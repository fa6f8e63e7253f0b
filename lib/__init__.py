"""`lib`: the small PyTorch Transformer that every chapter of the course imports.

Batch-first tensors throughout; masks are bool with True = "may attend".
Each module's docstring names the chapter that introduces it.
"""

from lib.attention import MultiHeadAttention, causal_mask, padding_mask, scaled_dot_product_attention
from lib.layers import (
    LearnedPositionalEmbedding,
    PositionwiseFeedForward,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_positional_encoding,
)
from lib.model import DecoderLayer, EncoderLayer, Transformer, TransformerConfig
from lib.training import noam_lambda, noam_lr

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "MultiHeadAttention",
    "PositionwiseFeedForward",
    "sinusoidal_positional_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "TokenEmbedding",
    "EncoderLayer",
    "DecoderLayer",
    "Transformer",
    "TransformerConfig",
    "noam_lr",
    "noam_lambda",
]
