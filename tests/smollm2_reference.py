"""The independent references for SmolLM2's tests, loaded once per test session.

Hugging Face's tokenizer and LlamaForCausalLM are built from the course's GGUF file
itself (``from_pretrained(folder, gguf_file=name)`` with ``HF_HUB_OFFLINE=1``):
nothing is downloaded. Loading takes about 20 s, so every test module shares these
cached loaders (tests/test_gguf.py, tests/test_llama.py).
"""

from __future__ import annotations

import functools
import os

import pytest


def gguf_path():
    from lib.interop.gguf import smollm2_path

    try:
        return smollm2_path()
    except FileNotFoundError as err:  # `make data` not run: say so, do not fail every test
        pytest.skip(str(err))


@functools.lru_cache(maxsize=1)
def hf_tokenizer():
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = pytest.importorskip("transformers")
    path = gguf_path()
    return transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


@functools.lru_cache(maxsize=1)
def hf_model():
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = pytest.importorskip("transformers")
    import torch

    path = gguf_path()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32)
    return model.eval()


@functools.lru_cache(maxsize=1)
def lib_model():
    """`lib.load_smollm2()` once per session: (model, tokenizer)."""
    from lib.model.llama import load_smollm2

    gguf_path()
    return load_smollm2()
