"""`lib`: the small PyTorch Transformer that every chapter of the course imports.

Batch-first tensors throughout; masks are bool with True = "may attend".
Each module's docstring names the chapter that introduces it. The widgets
(`lib.widgets`, `lib.widgets_heads`, ...) are imported from their modules, so
that `import lib` does not load ipywidgets or anywidget.
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
from lib.training import fit, label_smoothed_nll, noam_lambda, noam_lr, noam_optimizer
from lib.data import CharVocab, make_batch, make_date_split
from lib.decoding import beam_search, greedy_decode
from lib.rnn_attention import additive_score, multiplicative_score
from lib.exercises import check_attention, check_attention_weights
from lib.reference import copy_decoder_layer_to_torch, copy_encoder_layer_to_torch, copy_mha_to_torch
from lib.families import DecoderOnlyModel, EncoderOnlyModel

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
    "noam_optimizer",
    "label_smoothed_nll",
    "fit",
    "CharVocab",
    "make_batch",
    "make_date_split",
    "greedy_decode",
    "beam_search",
    "additive_score",
    "multiplicative_score",
    "check_attention",
    "check_attention_weights",
    "copy_mha_to_torch",
    "copy_encoder_layer_to_torch",
    "copy_decoder_layer_to_torch",
    "EncoderOnlyModel",
    "DecoderOnlyModel",
]
