"""The SmolLM2 decoding path's speed-ups (lib.model.llama.LlamaAttention and
AttentionCache.update_in_place, measured in bench/smollm2.py) compute exactly what the
plain path computes: checked on tiny random Llama configurations (grouped-query
attention included, both rotary pairings) against `ModernDecoder`'s own attention
with and without the cache, and `update_in_place` against `update` (torch.cat)."""

from __future__ import annotations

import pytest
import torch

import lib
from lib.model.kv_cache import AttentionCache
from lib.model.llama import LlamaAttention, llama_decoder, set_fast_attention
from lib.model.modern import ModernConfig, ModernDecoder


def _tiny(pairing: str, n_kv_heads: int, seed: int = 0):
    torch.manual_seed(seed)
    config = ModernConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=n_kv_heads,
                          d_ff=48, max_len=64, rope_base=500.0, rope_pairing=pairing)
    plain = ModernDecoder(config).eval()
    fast = llama_decoder(config).eval()
    fast.load_state_dict(plain.state_dict())
    return plain, fast


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_fast_path_generates_the_uncached_plain_models_tokens(pairing, n_kv_heads):
    plain, fast = _tiny(pairing, n_kv_heads)
    assert all(isinstance(b.attn, LlamaAttention) for b in fast.blocks)
    prompt = torch.randint(0, 50, (3, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = lib.generate(plain, prompt, 40, greedy=True, use_cache=False)
        assert torch.equal(lib.generate(fast, prompt, 40, greedy=True, use_cache=True), reference)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_fast_cached_logits_equal_the_plain_cached_and_uncached_logits(n_kv_heads):
    plain, fast = _tiny("interleaved", n_kv_heads, seed=3)
    tokens = torch.randint(0, 50, (2, 30), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = plain(tokens)  # no cache: every position at once
        c_plain, c_fast = lib.KVCache(2), lib.KVCache(2)
        steps = [(0, 7), (7, 8), (8, 20), (20, 21), (21, 30)]  # prefill, single and multi-token
        for start, end in steps:
            a = plain(tokens[:, start:end], cache=c_plain)
            b = fast(tokens[:, start:end], cache=c_fast)
            assert torch.equal(a, b)  # same operations, same order: bit for bit
            assert torch.allclose(b, full[:, start:end], atol=1e-5)
    for p, f in zip(c_plain.self_attn, c_fast.self_attn):
        assert f.k.shape == (2, n_kv_heads, 30, 8)  # key/value heads not repeated
        assert torch.equal(p.k, f.k) and torch.equal(p.v, f.v)
    assert lib.kv_cache_bytes(c_fast) == 2 * 2 * 2 * n_kv_heads * 30 * 8 * 4


def test_hooks_and_the_switch_fall_back_to_the_plain_attention():
    plain, fast = _tiny("interleaved", 2)
    tokens = torch.randint(0, 50, (1, 9), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _, cache = lib.run_with_cache(fast, tokens)
    assert cache["blocks.1.attn.hook_pattern"].shape == (1, 4, 9, 9)  # the textbook path ran
    set_fast_attention(fast, False)
    assert not any(b.attn.fast for b in fast.blocks)
    with torch.no_grad():
        assert torch.equal(fast(tokens), plain(tokens))
    with pytest.raises(TypeError, match="fast"):
        set_fast_attention(fast, 1)
    with pytest.raises(ValueError, match="LlamaAttention"):
        set_fast_attention(plain, True)
    with pytest.raises(ValueError, match="rotary"):
        llama_decoder(ModernConfig(position="learned"))
    with pytest.raises(TypeError, match="config"):
        llama_decoder({"d_model": 32})


def test_update_in_place_equals_update_across_buffer_growth_and_reorder():
    g = torch.Generator().manual_seed(5)
    grown, concatenated = AttentionCache(), AttentionCache()
    for m in (3, 1, 1, 4, 1, 9, 1):  # reserve=2: the buffer is outgrown several times
        k, v = torch.randn(2, 3, m, 4, generator=g), torch.randn(2, 3, m, 4, generator=g)
        kg, vg = grown.update_in_place(k, v, reserve=2)
        kc, vc = concatenated.update(k, v)
        assert torch.equal(kg, kc) and torch.equal(vg, vc) and grown.length == concatenated.length
    rows = torch.tensor([1, 0])
    grown.reorder(rows)
    concatenated.reorder(rows)
    k, v = torch.randn(2, 3, 1, 4, generator=g), torch.randn(2, 3, 1, 4, generator=g)
    kg, vg = grown.update_in_place(k, v, reserve=2)
    kc, vc = concatenated.update(k, v)
    assert torch.equal(kg, kc) and torch.equal(vg, vc)
    earlier = kg.clone()
    grown.update_in_place(k, v)  # a later step does not change the keys returned before
    assert torch.equal(kg, earlier)
    with pytest.raises(ValueError, match="continue"):
        grown.update_in_place(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4))
    with pytest.raises(ValueError, match="reserve"):
        grown.update_in_place(k, v, reserve=0)
