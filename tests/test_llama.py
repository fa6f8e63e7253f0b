"""lib.interop.llama_gguf + lib.model.llama: SmolLM2-135M-Instruct loaded from the course's GGUF file into `lib`'s
`ModernDecoder` gives the logits of Hugging Face's LlamaForCausalLM loaded from the same
file (offline), generates the same greedy chat answer with and without the KV cache, and
the tests fail on a wrong dequantizer, a wrong rotary pairing and a wrong GQA repeat."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from smollm2_reference import gguf_path, hf_model, lib_model

import lib
from lib.interop.llama_gguf import llama_config, load_llama_gguf
from lib.model.llama import half_to_interleaved, interleaved_to_half
from lib.model.modern import GroupedQueryAttention

TOL = 5e-4  # max |Δ logit| against the reference (logits reach about 33)
PROMPTS = [
    "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer",
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n",
]


@pytest.fixture(scope="module")
def prompts():
    _, tokenizer = lib_model()
    return [torch.tensor([tokenizer.encode(p)]) for p in PROMPTS]


@pytest.fixture(scope="module")
def reference_logits(prompts):
    with torch.no_grad():
        return [hf_model()(x).logits for x in prompts]


def _max_diff(model, prompts, reference_logits):
    with torch.no_grad():
        return max(float((model(x) - r).abs().max()) for x, r in zip(prompts, reference_logits))


def _argmax_equal(model, prompts, reference_logits):
    with torch.no_grad():
        return all(torch.equal(model(x).argmax(-1), r.argmax(-1))
                   for x, r in zip(prompts, reference_logits))


def test_config_and_parameters():
    model, _ = lib_model()
    c = model.config
    assert (c.vocab_size, c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.d_ff) == (
        49152, 576, 30, 9, 3, 1536)
    assert (c.rope_base, c.max_len, c.norm, c.ffn, c.position) == (
        100000.0, 8192, "rms", "swiglu", "rotary")
    assert model.head.weight is model.embed.weight
    assert model.count_parameters() == sum(p.numel() for p in hf_model().parameters())
    assert model.count_parameters() == 134_515_008
    modules = dict(model.named_modules())
    for name in ("blocks.29.attn.hook_pattern", "blocks.0.attn.hook_z", "blocks.0.hook_resid_pre",
                 "blocks.3.hook_attn_out", "blocks.3.hook_mlp_out", "blocks.29.hook_resid_post"):
        assert name in modules


def test_logits_equal_the_reference(prompts, reference_logits):
    model, _ = lib_model()
    assert _max_diff(model, prompts, reference_logits) <= TOL
    assert _argmax_equal(model, prompts, reference_logits)


def test_loss_equals_the_reference(prompts):
    model, _ = lib_model()
    x = prompts[0]
    with torch.no_grad():
        ours = F.cross_entropy(model(x)[0, :-1], x[0, 1:])
        theirs = hf_model()(x, labels=x).loss
    assert abs(float(ours) - float(theirs)) < 1e-4


def test_rotary_pairing_needs_the_row_permutation(prompts, reference_logits):
    """Half-split rotation of the file's rows is another model (predictions change); with
    the rows permuted it is the same model again, and the permuted rows are HF's exactly."""
    model, _ = lib_model()
    blocks = model.blocks
    try:
        for block in blocks:
            block.attn.pairing = "half"
        assert _max_diff(model, prompts[:1], reference_logits[:1]) > 1.0
        assert not _argmax_equal(model, prompts[:1], reference_logits[:1])
        with torch.no_grad():
            for block in blocks:
                a = block.attn
                a.w_q.weight.copy_(interleaved_to_half(a.w_q.weight, a.n_heads))
                a.w_k.weight.copy_(interleaved_to_half(a.w_k.weight, a.n_kv_heads))
        hf_layer = hf_model().model.layers[7].self_attn
        assert torch.equal(blocks[7].attn.w_q.weight, hf_layer.q_proj.weight)
        assert torch.equal(blocks[7].attn.w_k.weight, hf_layer.k_proj.weight)
        assert _max_diff(model, prompts[:1], reference_logits[:1]) <= TOL
    finally:
        with torch.no_grad():
            for block in blocks:
                a = block.attn
                if a.pairing == "half":
                    a.w_q.weight.copy_(half_to_interleaved(a.w_q.weight, a.n_heads))
                    a.w_k.weight.copy_(half_to_interleaved(a.w_k.weight, a.n_kv_heads))
                a.pairing = "interleaved"
    assert _max_diff(model, prompts[:1], reference_logits[:1]) <= TOL


def test_permutations_are_inverse_and_mix_halves():
    w = torch.arange(2 * 8 * 3, dtype=torch.float32).reshape(16, 3)  # 2 heads of d_head 8
    half = interleaved_to_half(w, 2)
    assert torch.equal(half_to_interleaved(half, 2), w)
    assert torch.equal(half[:4], w[[0, 2, 4, 6]]) and torch.equal(half[4:8], w[[1, 3, 5, 7]])
    assert torch.equal(half[8:12], w[[8, 10, 12, 14]])


def _tiled_gqa(self, q, k, v, offset, T, n_keys):
    """The bug: key/value heads tiled (head j reads kv head j mod n_kv) instead of grouped."""
    group = self.n_heads // self.n_kv_heads
    k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    mask = torch.ones(T, n_keys, dtype=torch.bool).tril(offset)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _first_kv_head_only(self, q, k, v, offset, T, n_keys):
    """The bug: no repeat at all, every query head broadcast against key/value head 0."""
    mask = torch.ones(T, n_keys, dtype=torch.bool).tril(offset)
    return F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], attn_mask=mask)


@pytest.mark.parametrize("bug", [_tiled_gqa, _first_kv_head_only])
def test_a_wrong_gqa_repeat_is_detected(monkeypatch, prompts, reference_logits, bug):
    model, _ = lib_model()
    monkeypatch.setattr(GroupedQueryAttention, "_fused", bug)
    assert _max_diff(model, prompts[:1], reference_logits[:1]) > 1.0


def test_a_wrong_dequantizer_is_detected(prompts, reference_logits):
    """Q4_1 with its nibbles read byte by byte: a different (and broken) model."""
    import numpy as np

    def byte_by_byte(blocks):
        d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        q = np.stack([blocks[:, 4:] & 15, blocks[:, 4:] >> 4], -1).reshape(len(blocks), 32)
        return d * q.astype(np.float32) + m

    wrong = load_llama_gguf(gguf_path(), q4_1=byte_by_byte)
    assert _max_diff(wrong, prompts[:1], reference_logits[:1]) > 1.0


def test_greedy_chat_answer_equals_the_reference_with_and_without_cache():
    model, tokenizer = lib_model()
    prompt = torch.tensor(tokenizer.apply_chat(
        [{"role": "user", "content": "What is the capital of France?"}]))
    n = 8  # the reference's answer, <|im_end|> included
    cached = lib.generate(model, prompt, n, greedy=True, use_cache=True)
    uncached = lib.generate(model, prompt, n, greedy=True, use_cache=False)
    assert torch.equal(cached, uncached)
    with torch.no_grad():
        reference = hf_model().generate(prompt[None], max_new_tokens=n, do_sample=False)[0]
    new = cached[len(prompt):].tolist()
    new = new[: new.index(tokenizer.eos_id) + 1] if tokenizer.eos_id in new else new
    assert new == reference[len(prompt):].tolist()
    assert "Paris" in tokenizer.decode(new)


def test_batched_cache_keeps_the_kv_heads_unrepeated():
    model, tokenizer = lib_model()
    rows = torch.tensor([tokenizer.encode("Once upon a time"), tokenizer.encode("The king said:")[:4]])
    cache = lib.KVCache(len(model.blocks))
    with torch.no_grad():
        step = model(rows, cache=cache)
        full = model(torch.cat([rows, step[:, -1:].argmax(-1)], 1))
        nxt = model(step[:, -1:].argmax(-1), cache=cache)
    assert cache.self_attn[0].k.shape == (2, 3, 5, 64)  # (B, n_kv_heads, t, d_head)
    assert torch.allclose(nxt[:, -1], full[:, -1], atol=1e-4)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="pairing"):
        load_llama_gguf(gguf_path(), pairing="rotate_half")
    with pytest.raises(TypeError, match="dtype"):
        load_llama_gguf(gguf_path(), dtype=torch.int8)
    with pytest.raises(ValueError, match="architecture"):
        llama_config({"general.architecture": "gpt2"})
    with pytest.raises(TypeError, match="metadata"):
        llama_config([("general.architecture", "llama")])
