"""The independent references for SmolLM2's tests, loaded once per test session.

Hugging Face's tokenizer and LlamaForCausalLM are built from the course's GGUF file
itself (``from_pretrained(folder, gguf_file=name)`` with ``HF_HUB_OFFLINE=1``):
nothing is downloaded. Loading takes about 20 s, so every test module shares these
cached loaders (tests/test_gguf.py, tests/test_llama.py).

The token ids are compared with `smollm2_tokenizer` instead: Hugging Face's GGUF
loader turns ``tokenizer.ggml.pre = 'smollm'`` into plain ``ByteLevel`` and drops
SmolLM2's digit split, so a reference built by it shares the very conversion step
that `lib` once got wrong. `smollm2_tokenizer` is put together with `tokenizers`
from its parts: the vocabulary and merges as the `gguf` package reads them, and
the pre-tokenizer SmolLM2 publishes (``Digits(individual_digits=True)``, then
``ByteLevel``).
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


def _gguf_strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


@functools.lru_cache(maxsize=1)
def smollm2_tokenizer():
    """SmolLM2's tokenizer built with `tokenizers` (byte-level BPE, no unknown token,
    merges in the file's order; control tokens (type 3) matched whole)."""
    gguf = pytest.importorskip("gguf")
    tk = pytest.importorskip("tokenizers")
    reader = gguf.GGUFReader(str(gguf_path()))
    tokens = _gguf_strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in _gguf_strings(reader, "tokenizer.ggml.merges")]
    field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(field.parts[i][0]) for i in field.data]
    assert _gguf_strings(reader, "tokenizer.ggml.pre") == ["smollm"]
    tok = tk.Tokenizer(tk.models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = tk.pre_tokenizers.Sequence([
        tk.pre_tokenizers.Digits(individual_digits=True),
        tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens([tk.AddedToken(t, special=True, normalized=False)
                            for t, k in zip(tokens, types) if k == 3])
    return tok


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
    from lib.interop.llama_gguf import load_smollm2

    gguf_path()
    return load_smollm2()
