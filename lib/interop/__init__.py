"""Interop: copying `lib`'s weights into PyTorch's own modules, so the two can be
compared number for number."""

from lib.interop.torch_nn import copy_decoder_layer_to_torch, copy_encoder_layer_to_torch, copy_mha_to_torch

__all__ = [
    "copy_decoder_layer_to_torch",
    "copy_encoder_layer_to_torch",
    "copy_mha_to_torch",
]
