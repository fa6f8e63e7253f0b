"""Interop: copying `lib`'s weights into PyTorch's own modules, and converting
whole models to and from Hugging Face's Marian, BERT and GPT-2, so that each
pair can be compared number for number; reading GGUF files (SmolLM2's weights and
tokenizer, the chapter "A real pretrained model")."""

from lib.interop.huggingface import (
    bert_to_lib,
    gpt2_to_lib,
    lib_to_bert,
    lib_to_gpt2,
    lib_to_marian,
    marian_to_lib,
)
from lib.interop.gguf import (
    GGUFFile,
    GGUFTensor,
    dequantize_q4_1,
    dequantize_q8_0,
    dequantize_tensor,
    read_gguf,
    smollm2_path,
)
from lib.interop.llama_gguf import llama_config, load_llama_gguf, load_smollm2
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
    "GGUFFile",
    "GGUFTensor",
    "dequantize_q4_1",
    "dequantize_q8_0",
    "dequantize_tensor",
    "read_gguf",
    "smollm2_path",
    "llama_config",
    "load_llama_gguf",
    "load_smollm2",
]
