"""Interop: copying `lib`'s weights into PyTorch's own modules, and converting
whole models to and from Hugging Face's Marian, BERT and GPT-2, so that each
pair can be compared number for number."""

from lib.interop.huggingface import (
    bert_to_lib,
    gpt2_to_lib,
    lib_to_bert,
    lib_to_gpt2,
    lib_to_marian,
    marian_to_lib,
)
from lib.interop.torch_nn import copy_decoder_layer_to_torch, copy_encoder_layer_to_torch, copy_mha_to_torch

__all__ = [
    "bert_to_lib",
    "gpt2_to_lib",
    "lib_to_bert",
    "lib_to_gpt2",
    "lib_to_marian",
    "marian_to_lib",
    "copy_decoder_layer_to_torch",
    "copy_encoder_layer_to_torch",
    "copy_mha_to_torch",
]
