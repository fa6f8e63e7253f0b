"""The KV cache (lib/model/kv_cache.py): cached decoding computes what the full re-run computes.

Greedy tokens with the cache must equal (torch.equal) the uncached ones, for the
decoder-only model (`lib.generate`) and lib.Transformer's decoder
(`lib.greedy_decode(..., use_cache=True)`), on many prompts and lengths, up to the
model's max_len; going beyond it is a ValueError.
"""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import lib


def decoder_only(positional="learned", norm_first=True, max_len=48, vocab=37, seed=0):
    torch.manual_seed(seed)
    return lib.DecoderOnlyModel(vocab, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.1,
                                norm_first=norm_first, max_len=max_len, positional=positional).eval()


def encoder_decoder(positional="sinusoidal", norm_first=False, max_len=24, seed=0):
    torch.manual_seed(seed)
    return lib.Transformer(29, 29, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.1,
                           norm_first=norm_first, max_len=max_len, positional=positional).eval()


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_cached_logits_equal_the_full_pass_for_any_split(positional, norm_first):
    model = decoder_only(positional, norm_first)
    tokens = torch.randint(0, 37, (3, 20), generator=torch.Generator().manual_seed(1))
    full = model(tokens)
    for split in (1, 5, 19):
        cache = lib.KVCache(2)
        chunks = [model(tokens[:, :split], cache=cache)]  # a prompt of `split` tokens at once
        chunks += [model(tokens[:, t : t + 1], cache=cache) for t in range(split, 20)]
        assert cache.length == 20
        torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=1e-5, atol=1e-5)


def test_cached_chunks_of_several_tokens_see_the_cache_and_each_other():
    model = decoder_only()
    tokens = torch.randint(0, 37, (2, 30), generator=torch.Generator().manual_seed(2))
    cache = lib.KVCache(2)
    got = torch.cat([model(tokens[:, s : s + 7], cache=cache) for s in range(0, 28, 7)], dim=1)
    torch.testing.assert_close(got, model(tokens[:, :28]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_greedy_generation_is_token_identical_with_and_without_the_cache(positional):
    model = decoder_only(positional, max_len=48)
    g = torch.Generator().manual_seed(3)
    n_checked = 0
    for B in (1, 4):
        for P in (1, 7, 30, 47, 48):
            for new in sorted({n for n in (0, 1, 5, 48 - P) if n <= 48 - P}):
                prompt = torch.randint(0, 37, (B, P), generator=g)
                cached = lib.generate(model, prompt, new, greedy=True, use_cache=True)
                full = lib.generate(model, prompt, new, greedy=True, use_cache=False)
                assert cached.shape == (B, P + new)
                assert torch.equal(cached, full), (B, P, new)
                n_checked += 1
    assert n_checked >= 20  # many prompts and lengths, some reaching max_len exactly


def test_greedy_generation_with_the_cache_on_a_trained_model():
    """A model with peaked predictions (trained to continue a pattern): ties are rarer but
    the argmax must still never flip between the two paths."""
    model = decoder_only(max_len=64)
    text = torch.tensor([i % 11 for i in range(400)])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    lib.fit(model, lambda s: lib.random_windows(text, 32, 16, generator=g), 60, opt)
    for P in (1, 3, 10):
        prompt = text[:P][None]
        a = lib.generate(model, prompt, 64 - P, greedy=True)
        b = lib.generate(model, prompt, 64 - P, greedy=True, use_cache=False)
        assert torch.equal(a, b)


def test_sampled_generation_with_the_same_seed_gives_the_same_tokens():
    model = decoder_only()
    prompt = torch.tensor([[3, 4, 5]])
    a = lib.generate(model, prompt, 30, temperature=0.8, top_k=10, generator=torch.Generator().manual_seed(7))
    b = lib.generate(model, prompt, 30, temperature=0.8, top_k=10, generator=torch.Generator().manual_seed(7),
                     use_cache=False)
    assert torch.equal(a, b)


def test_generation_beyond_max_len_is_refused_before_it_starts():
    model = decoder_only(max_len=16)
    with pytest.raises(ValueError, match="max_new_tokens"):
        lib.generate(model, torch.zeros(1, 10, dtype=torch.long), 7, greedy=True)
    with pytest.raises(ValueError, match="prompt"):
        lib.generate(model, torch.zeros(1, 17, dtype=torch.long), 0, greedy=True)
    cache = lib.KVCache(2)
    model(torch.zeros(1, 16, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_greedy_decode_is_token_identical_with_the_cache(positional, norm_first):
    model = encoder_decoder(positional, norm_first, max_len=24)
    g = torch.Generator().manual_seed(4)
    for B, n in ((1, 3), (5, 9), (3, 24)):
        src = torch.randint(3, 29, (B, n), generator=g)
        src[0, -1] = 0  # some padding in the source
        for max_len in (1, 6, 24):  # 24: the model's max_len
            a = lib.greedy_decode(model, src, max_len, bos_id=1, eos_id=2, use_cache=False)
            b = lib.greedy_decode(model, src, max_len, bos_id=1, eos_id=2, use_cache=True)
            assert torch.equal(a, b), (B, n, max_len)


def test_transformer_cached_decode_logits_match():
    model = encoder_decoder()
    src = torch.randint(3, 29, (2, 6))
    tgt = torch.randint(3, 29, (2, 10))
    memory = model.encode(src)
    full = model.decode(tgt, memory, tgt_mask=lib.causal_mask(10))
    cache = lib.KVCache(2, cross_attention=True)
    steps = [model.decode(tgt[:, t : t + 1], memory, cache=cache) for t in range(10)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.cross_attn[0].length == 6 and cache.length == 10


def test_transformer_cached_decode_beyond_max_len_is_refused():
    model = encoder_decoder(max_len=8)
    src = torch.randint(3, 29, (1, 4))
    with pytest.raises(ValueError, match="max_len"):
        lib.greedy_decode(model, src, 9, bos_id=1, eos_id=2, use_cache=True)


def test_a_cache_of_the_wrong_kind_is_refused():
    model = decoder_only()
    tokens = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="cache"):
        model(tokens, cache=lib.KVCache(3))
    with pytest.raises(ValueError, match="cache"):
        model(tokens, cache=lib.KVCache(2, cross_attention=True))
    with pytest.raises(ValueError, match="pad_id"):
        model(tokens, pad_id=0, cache=lib.KVCache(2))
    t = encoder_decoder()
    memory = t.encode(torch.zeros(1, 3, dtype=torch.long) + 3)
    with pytest.raises(ValueError, match="cache"):
        t.decode(tokens, memory, cache=lib.KVCache(2))
    with pytest.raises(TypeError, match="use_cache"):
        lib.greedy_decode(model, tokens, 4, bos_id=1, eos_id=2, use_cache=True)
    with pytest.raises(TypeError, match="use_cache"):
        lib.greedy_decode(t, tokens + 3, 4, bos_id=1, eos_id=2, use_cache=1)
    with pytest.raises(ValueError, match="n_layers"):
        lib.KVCache(0)


def test_cache_bookkeeping():
    cache = lib.KVCache(2)
    assert cache.length == 0 and len(cache) == 2 and "length=0" in repr(cache)
    k = torch.randn(3, 4, 5, 8)
    c = cache.self_attn[0]
    c.update(k, k)
    c.update(k[:, :, :2], k[:, :, :2])
    assert c.length == 7
    cache.reorder(torch.tensor([2, 0]))
    assert c.k.shape == (2, 4, 7, 8) and torch.equal(c.k[0, :, :5], k[2])
    with pytest.raises(ValueError, match="continue"):
        c.update(torch.randn(2, 4, 1, 4), torch.randn(2, 4, 1, 4))
    static = lib.AttentionCache(static=True)
    static.update(k, k)
    static.update(k[:, :, :1], k[:, :, :1])  # replaces, never grows
    assert static.length == 1


def step_flops(model, tokens, cache=None) -> int:
    with FlopCounterMode(display=False) as counter:
        model(tokens, cache=cache) if cache is not None else model(tokens)
    return counter.get_total_flops()


def test_cached_step_costs_grow_linearly_and_uncached_ones_faster():
    model = decoder_only(max_len=256)
    tokens = torch.randint(0, 37, (1, 256))
    uncached = {t: step_flops(model, tokens[:, :t]) for t in (32, 64, 128)}
    cached = {}
    for t in (32, 64, 128):
        cache = lib.KVCache(2)
        model(tokens[:, : t - 1], cache=cache)
        cached[t] = step_flops(model, tokens[:, t - 1 : t], cache)
    # Uncached: one step re-runs t positions: at least doubling with t.
    assert uncached[64] >= 2 * uncached[32] and uncached[128] >= 2 * uncached[64]
    # Cached: one position per step; only attention over the t cached keys grows, linearly
    # (FLOP counts are exact, so the increments compare exactly).
    assert cached[128] - cached[64] == 2 * (cached[64] - cached[32]) > 0
    assert cached[128] < 2 * cached[32]
    assert cached[128] * 50 < uncached[128]
