"""Loading a Llama-architecture GGUF file into `lib`'s decoder (the chapter "A real
pretrained model"): the file's metadata gives a `ModernConfig`, its tensors the
weights of a `lib.model.llama.LlamaDecoder`.

    GGUF tensor                 ModernDecoder parameter
    token_embd.weight           embed.weight (= head.weight: tied embeddings)
    blk.N.attn_norm.weight      blocks.N.norm1.weight        (RMSNorm gain)
    blk.N.attn_q / k / v        blocks.N.attn.w_q / w_k / w_v
    blk.N.attn_output           blocks.N.attn.w_o
    blk.N.ffn_norm.weight       blocks.N.norm2.weight
    blk.N.ffn_gate / up / down  blocks.N.mlp.w_gate / w_up / w_down
    output_norm.weight          final_norm.weight

The file's rows of W_Q and W_K are stored for the interleaved rotary pairs
(see `lib.model.llama`); ``pairing="half"`` permutes them for Hugging Face's
convention. This module sits in `interop` because it needs the file reader
(`lib.interop.gguf`) and the tokenizer (`lib.train.gguf_tokenizer`); the model it
fills (`lib.model`) imports neither.

Tests: tests/test_llama.py (logits against Hugging Face's LlamaForCausalLM loaded
from the same file), tests/test_layering.py.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from lib._checks import require_device

from lib.interop.gguf import dequantize_q4_1, dequantize_q8_0, dequantize_tensor, read_gguf, smollm2_path
from lib.model.llama import fuse_projections, interleaved_to_half, llama_decoder
from lib.model.modern import ModernConfig, ModernDecoder

__all__ = ["llama_config", "load_llama_gguf", "load_smollm2"]

_BLOCK_TENSORS = {  # GGUF name inside blk.N -> parameter inside blocks.N
    "attn_norm.weight": "norm1.weight",
    "attn_q.weight": "attn.w_q.weight",
    "attn_k.weight": "attn.w_k.weight",
    "attn_v.weight": "attn.w_v.weight",
    "attn_output.weight": "attn.w_o.weight",
    "ffn_norm.weight": "norm2.weight",
    "ffn_gate.weight": "mlp.w_gate.weight",
    "ffn_up.weight": "mlp.w_up.weight",
    "ffn_down.weight": "mlp.w_down.weight",
}


def llama_config(metadata: dict, *, pairing: str = "interleaved") -> ModernConfig:
    """The `ModernConfig` of a Llama-architecture GGUF file, from its metadata."""
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata: expected a dict, got {type(metadata).__name__}")
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise ValueError(f"metadata: general.architecture is {arch!r}, not 'llama'")
    get = lambda key: metadata[f"llama.{key}"]  # noqa: E731
    d_model, n_heads = int(get("embedding_length")), int(get("attention.head_count"))
    if int(metadata.get("llama.rope.dimension_count", d_model // n_heads)) != d_model // n_heads:
        raise ValueError("metadata: rotary embeddings on part of each head are not supported")
    vocab = metadata.get("llama.vocab_size", len(metadata.get("tokenizer.ggml.tokens", ())))
    return ModernConfig(
        vocab_size=int(vocab),
        d_model=d_model,
        n_layers=int(get("block_count")),
        n_heads=n_heads,
        n_kv_heads=int(metadata.get("llama.attention.head_count_kv", n_heads)),
        d_ff=int(get("feed_forward_length")),
        norm="rms",
        norm_first=True,
        position="rotary",
        rope_base=float(metadata.get("llama.rope.freq_base", 10000.0)),
        ffn="swiglu",
        bias=False,
        tie_embeddings=True,
        norm_eps=float(get("attention.layer_norm_rms_epsilon")),
        max_len=int(get("context_length")),
        rope_pairing=pairing,
    )



def load_llama_gguf(path: str | os.PathLike, *, dtype: torch.dtype = torch.float32,
                    device: str | torch.device | None = None, pairing: str = "interleaved",
                    permute: bool | None = None, q8_0=None, q4_1=None) -> ModernDecoder:
    """A `ModernDecoder` with the weights of the Llama-architecture GGUF file at `path`.

    pairing  the rotary convention of the model built ("interleaved": the file's rows
             as stored; "half": Hugging Face's)
    permute  reorder the rows of W_Q and W_K for `pairing` (default: True exactly when
             pairing is "half"); False with "half" builds the mismatched model on purpose
    q8_0, q4_1  block dequantizers to use instead of `lib`'s (the chapter's exercise)
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype: expected a floating-point torch.dtype, got {dtype!r}")
    if pairing not in ("interleaved", "half"):
        raise ValueError(f"pairing: expected 'interleaved' or 'half', got {pairing!r}")
    device = require_device("device", device)  # before the file is read
    permute = (pairing == "half") if permute is None else permute
    if not isinstance(permute, bool):
        raise TypeError(f"permute: expected a bool or None, got {type(permute).__name__}")
    file = read_gguf(path)
    config = llama_config(file.metadata, pairing=pairing)
    with torch.device("meta"):  # no random initialisation of 135 M weights to overwrite
        model = llama_decoder(config)
    model = model.to_empty(device=device).to(dtype)
    model.head.weight = model.embed.weight  # to_empty made two tensors of the tied one
    params = dict(model.named_parameters())  # a tied matrix appears once, as embed.weight
    names = {"token_embd.weight": "embed.weight", "output_norm.weight": "final_norm.weight"}
    for i in range(config.n_layers):
        names.update({f"blk.{i}.{k}": f"blocks.{i}.{v}" for k, v in _BLOCK_TENSORS.items()})
    missing = sorted(set(names) - set(file.tensors))
    extra = sorted(set(file.tensors) - set(names))
    if missing or extra:
        raise ValueError(f"path: tensors missing {missing[:3]}, unexpected {extra[:3]} "
                         "(output.weight would mean untied embeddings, not supported)")
    q8_0, q4_1 = q8_0 or dequantize_q8_0, q4_1 or dequantize_q4_1
    with torch.no_grad():
        for gguf_name, name in names.items():
            weight = torch.from_numpy(np.require(  # a writable copy only if needed
                dequantize_tensor(file.tensors[gguf_name], q8_0, q4_1), requirements=["C", "W"]))
            if permute and gguf_name.endswith(("attn_q.weight", "attn_k.weight")):
                heads = config.n_heads if "attn_q" in gguf_name else config.n_kv_heads
                weight = interleaved_to_half(weight, heads)
            if tuple(weight.shape) != tuple(params[name].shape):
                raise ValueError(f"path: {gguf_name} has shape {tuple(weight.shape)}, "
                                 f"{name} needs {tuple(params[name].shape)}")
            params[name].copy_(weight)
    assert model.head.weight is model.embed.weight  # tied, as in the file
    return fuse_projections(model).eval()


def load_smollm2(dtype: torch.dtype = torch.float32, device: str | torch.device | None = None,
                 **kwargs):
    """SmolLM2-135M-Instruct (HuggingFaceTB; Apache-2.0) from the course's GGUF file:
    ``(model, tokenizer)``, a `lib.ModernDecoder` (30 blocks, d_model 576, 9 query heads
    sharing 3 key/value heads, RoPE base 100000, SwiGLU, RMSNorm, tied embeddings) and a
    `lib.GGUFTokenizer` (``encode``, ``decode``, ``apply_chat``). Keyword arguments go to
    `load_llama_gguf`."""
    from lib.train.gguf_tokenizer import GGUFTokenizer  # here: `regex` is needed only now

    device = require_device("device", device)  # before the 98 MB file is read
    path = smollm2_path()
    model = load_llama_gguf(path, dtype=dtype, device=device, **kwargs)
    return model, GGUFTokenizer.from_gguf(read_gguf(path))
