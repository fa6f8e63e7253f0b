"""The SmolLM2 decoding path's speed-ups (lib.model.llama.LlamaAttention, the flat block
step, the batch-1 `_TokenPlan`, the split and fused products, and
AttentionCache.update_in_place, measured in bench/smollm2.py) compute exactly what the
plain path computes: checked on tiny random Llama configurations (grouped-query
attention included, both rotary pairings) against `ModernDecoder`'s own attention
with and without the cache, and `update_in_place` against `update` (torch.cat)."""

from __future__ import annotations

import copy

import pytest
import torch

import lib
from lib.model.kv_cache import AttentionCache
from lib.model.llama import LlamaAttention, fuse_projections, llama_decoder, set_fast_attention
from lib.model.modern import ModernConfig, ModernDecoder


def _tiny(pairing: str, n_kv_heads: int, seed: int = 0):
    torch.manual_seed(seed)
    config = ModernConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=n_kv_heads,
                          d_ff=48, max_len=64, rope_base=500.0, rope_pairing=pairing)
    plain = _random_norms(ModernDecoder(config).eval())
    fast = llama_decoder(config).eval()
    fast.load_state_dict(plain.state_dict())
    return plain, fast


def _random_norms(model: ModernDecoder) -> ModernDecoder:
    """Gains (and biases) of every norm away from their initial ones and zeros, so that a
    path using one norm's parameters for another's gives other numbers."""
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.5 * torch.randn(p.shape, generator=g))
    return model


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
    concatenated.update(k, v)
    for cache in (grown, concatenated):  # keys replaced from outside: not the buffer's
        cache.k, cache.v = cache.k * 2, cache.v - 1
    kg, vg = grown.update_in_place(k, v)
    kc, vc = concatenated.update(k, v)
    assert torch.equal(kg, kc) and torch.equal(vg, vc)
    with pytest.raises(ValueError, match="continue"):
        grown.update_in_place(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4))
    with pytest.raises(ValueError, match="reserve"):
        grown.update_in_place(k, v, reserve=0)


# --------------------------------------------------------------------------- LlamaDecoder's flat block step


def _counted(monkeypatch, owner, name: str) -> list:
    """Patch ``owner.name`` with a wrapper that records each call's first argument (a
    block for `_block_step`, the plan for `_TokenPlan.run`); returns the record."""
    calls = []
    original = getattr(owner, name)

    def counted(first, *args):
        calls.append(first)
        return original(first, *args)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _count_block_steps(monkeypatch):
    """Count the blocks lib.model.llama._block_step runs."""
    import lib.model.llama as llama

    return _counted(monkeypatch, llama, "_block_step")


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_block_step_runs_and_equals_the_blocks_own_forward(monkeypatch, bias, pairing):
    torch.manual_seed(11)
    config = ModernConfig(vocab_size=50, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2,
                          d_ff=48, max_len=64, rope_base=500.0, rope_pairing=pairing, bias=bias)
    plain = _random_norms(ModernDecoder(config).eval())
    fast = llama_decoder(config).eval()
    fast.load_state_dict(plain.state_dict())
    calls = _count_block_steps(monkeypatch)
    tokens = torch.randint(0, 50, (3, 12), generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        assert torch.equal(fast(tokens), plain(tokens))  # no cache
        assert len(calls) == 3  # the flat step ran, once a block
        c_plain, c_fast = lib.KVCache(3), lib.KVCache(3)
        for start, end in [(0, 5), (5, 6), (6, 11), (11, 12)]:
            a = plain(tokens[:, start:end], cache=c_plain)
            b = fast(tokens[:, start:end], cache=c_fast)
            assert torch.equal(a, b)
    assert len(calls) == 3 + 4 * 3
    for p, f in zip(c_plain.self_attn, c_fast.self_attn):
        assert torch.equal(p.k, f.k) and torch.equal(p.v, f.v)


def test_a_hook_anywhere_in_a_block_sends_it_through_its_own_forward(monkeypatch):
    plain, fast = _tiny("interleaved", 2, seed=13)
    calls = _count_block_steps(monkeypatch)
    tokens = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(14))

    def double(module, args, output):
        return 2 * output

    with torch.no_grad():
        unhooked = fast(tokens)
        assert len(calls) == 2
        calls.clear()
        for model in (plain, fast):  # a hook on a linear deep inside block 1
            model.blocks[1].mlp.w_up.register_forward_hook(double)
        hooked = fast(tokens)
        assert calls == [fast.blocks[0]]  # block 0 stays flat, block 1 ran its forward
        assert torch.equal(hooked, plain(tokens))
        assert not torch.allclose(hooked, unhooked, atol=1e-3)  # the hook changed the output
        calls.clear()
        handle = torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: None)
        try:
            assert torch.equal(fast(tokens), plain(tokens))
            assert calls == []  # a global hook: every block through its own forward
        finally:
            handle.remove()


def test_a_replaced_module_or_the_switch_falls_back(monkeypatch):
    from lib.model.modern import FeedForward

    plain, fast = _tiny("half", 4, seed=15)
    calls = _count_block_steps(monkeypatch)
    tokens = torch.randint(0, 50, (1, 10), generator=torch.Generator().manual_seed(16))
    torch.manual_seed(17)
    ffn = FeedForward(32, 48, activation="relu", bias=False)
    plain.blocks[0].mlp = ffn
    fast.blocks[0].mlp = copy.deepcopy(ffn)
    with torch.no_grad():
        assert torch.equal(fast(tokens), plain(tokens))
        assert calls == [fast.blocks[1]]  # block 0 is no longer a SwiGLU block
        calls.clear()
        set_fast_attention(fast, False)
        assert fast.fast is False
        assert torch.equal(fast(tokens), plain(tokens))
        assert calls == []


# ------------------------------------------------- batch-1 products: split rows, fused matrices


def _bmm_calls(monkeypatch):
    calls = []
    original = torch.bmm

    def counted(a, b, *args, **kwargs):
        calls.append(tuple(b.shape))
        return original(a, b, *args, **kwargs)

    monkeypatch.setattr(torch, "bmm", counted)
    return calls


def test_split_product_is_the_linear_product_and_runs_only_where_it_should(monkeypatch):
    from lib.model.llama import SPLIT_ROWS, _linear

    g = torch.Generator().manual_seed(21)
    calls = _bmm_calls(monkeypatch)
    w = torch.randn(1536, 576, generator=g)
    x = torch.randn(1, 1, 576, generator=g)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    out = _linear(x, w, None)
    assert calls == [(SPLIT_ROWS, 576, 1536 // SPLIT_ROWS)]  # the split ran
    assert out.shape == (1, 1, 1536)
    # the same K-long dot products: equal to float32 rounding (bit for bit on this machine)
    assert torch.allclose(out, torch.nn.functional.linear(x, w), rtol=0, atol=2e-5)
    # a wrong split (rows of the transpose, or blocks taken in the wrong order) is far off
    assert not torch.allclose(out.flip(-1), torch.nn.functional.linear(x, w), atol=1e-2)
    calls.clear()
    _linear(torch.randn(2, 1, 576, generator=g), w, None)  # two rows
    _linear(x, w, torch.zeros(1536))  # a bias
    _linear(x.bfloat16(), w.bfloat16(), None)  # bfloat16 got slower when split
    _linear(torch.randn(1, 1, 32, generator=g), torch.randn(48, 32, generator=g), None)  # small
    _linear(x, torch.randn(1538, 576, generator=g)[:1537], None)  # rows not a multiple
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    _linear(x, w, None)  # one thread: nothing to split for
    assert calls == []


def _mid(seed: int):
    """A Llama configuration whose matrices are large enough to be split (>= 2**16)."""
    torch.manual_seed(seed)
    config = ModernConfig(vocab_size=300, d_model=256, n_layers=2, n_heads=4, n_kv_heads=2,
                          d_ff=512, max_len=64, rope_base=500.0)
    plain = _random_norms(ModernDecoder(config).eval())
    fast = llama_decoder(config).eval()
    fast.load_state_dict(plain.state_dict())
    return plain, fuse_projections(fast)


def test_fused_projections_are_views_and_decode_as_the_plain_model(monkeypatch):
    plain, fast = _mid(22)
    attn, mlp = fast.blocks[0].attn, fast.blocks[0].mlp
    assert attn.w_k.weight.data_ptr() == attn._qkv[256:384].data_ptr()  # views of its rows
    assert mlp.w_up.weight.data_ptr() == mlp._gate_up[512:].data_ptr()
    assert set(fast.state_dict()) == set(plain.state_dict())  # nothing new saved
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    calls = _bmm_calls(monkeypatch)
    prompt = torch.randint(0, 300, (1, 6), generator=torch.Generator().manual_seed(23))
    with torch.no_grad():
        reference = lib.generate(plain, prompt, 20, greedy=True, use_cache=False)
        assert torch.equal(lib.generate(fast, prompt, 20, greedy=True), reference)
        fused_shapes = {(8, 256, (256 + 2 * 128) // 8), (8, 256, 2 * 512 // 8)}
        assert fused_shapes <= set(calls)  # the fused products ran
        c_plain, c_fast = lib.KVCache(2), lib.KVCache(2)
        plain(prompt, cache=c_plain)
        fast(prompt, cache=c_fast)
        step = prompt[:, :1]
        assert torch.allclose(fast(step, cache=c_fast), plain(step, cache=c_plain),
                              rtol=0, atol=1e-5)


def test_fused_matrices_follow_in_place_edits_and_are_dropped_when_storage_changes(monkeypatch):
    plain, fast = _mid(24)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    step = torch.tensor([[5]])
    with torch.no_grad():
        for model in (plain, fast):  # an in-place edit (chapter 16 ablates this way)
            model.blocks[1].attn.w_v.weight[:, :8].zero_()
            model.blocks[0].mlp.w_up.weight.mul_(3)
        assert torch.allclose(fast(step, cache=lib.KVCache(2)), plain(step), rtol=0, atol=1e-5)
        calls = _bmm_calls(monkeypatch)
        new = torch.randn(128, 256, generator=torch.Generator().manual_seed(25))
        for model in (plain, fast):  # new storage: the fused matrix is stale
            model.blocks[1].attn.w_k.weight.data = new.clone()
        assert torch.allclose(fast(step, cache=lib.KVCache(2)), plain(step), rtol=0, atol=1e-5)
        assert calls.count((8, 256, 512 // 8)) == 1  # only block 0's Q, K, V in one product
        assert "_qkv" not in fast.blocks[1].attn.__dict__  # the stale copy is gone
        assert calls.count((8, 256, 1024 // 8)) == 2  # both gate/up pairs are still fused
        double = copy.deepcopy(fast).double()  # .to(): every parameter new storage
        assert double.blocks[0].mlp._gate_up.dtype == torch.float64  # fused again
        assert torch.allclose(double(step), plain.double()(step), rtol=0, atol=1e-10)
    with pytest.raises(TypeError, match="model"):
        fuse_projections(torch.nn.Linear(2, 2))


# ------------------------------------------- the batch-1 decoding step (_TokenPlan)


def _plan_runs(monkeypatch):
    """Count the steps `_TokenPlan.run` takes."""
    import lib.model.llama as llama

    return _counted(monkeypatch, llama._TokenPlan, "run")


def _steps(model, prompt, tokens):
    """Prefill `prompt` (1, P), then feed `tokens` one at a time: the logits of each call
    and the cache."""
    cache = lib.KVCache(len(model.blocks))
    out = [model(prompt, cache=cache)]
    for t in tokens:
        out.append(model(torch.tensor([[t]]), cache=cache))
    return out, cache


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_token_plan_equals_the_plain_models_cached_steps_bit_for_bit(monkeypatch, pairing,
                                                                     n_kv_heads):
    plain, fast = _tiny(pairing, n_kv_heads, seed=31)
    fuse_projections(fast)
    runs = _plan_runs(monkeypatch)
    prompt = torch.randint(0, 50, (1, 5), generator=torch.Generator().manual_seed(32))
    with torch.no_grad():
        a, c_plain = _steps(plain, prompt, [3, 17, 42, 0, 9])
        b, c_fast = _steps(fast, prompt, [3, 17, 42, 0, 9])
        assert len(runs) == 5  # every one-token step took the plan
        for x, y in zip(a, b):
            assert torch.equal(x, y)
        for p, f in zip(c_plain.self_attn, c_fast.self_attn):
            assert torch.equal(p.k, f.k) and torch.equal(p.v, f.v)
        # from an empty cache too (position 0), and at batch 2 the plan does not run
        assert torch.equal(fast(prompt[:, :1], cache=lib.KVCache(2)), plain(prompt[:, :1]))
        two = prompt[:, :2].reshape(2, 1)
        assert torch.equal(fast(two, cache=lib.KVCache(2)), plain(two))
        assert len(runs) == 6


def test_token_plan_with_split_products_equals_the_block_steps(monkeypatch):
    import lib.model.llama as llama

    _, fast = _mid(33)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    reference = copy.deepcopy(fast)
    fuse_projections(reference)
    runs = _plan_runs(monkeypatch)
    calls = _bmm_calls(monkeypatch)
    prompt = torch.randint(0, 300, (1, 7), generator=torch.Generator().manual_seed(34))
    tokens = [5, 250, 17, 99]
    with torch.no_grad():
        b, c_fast = _steps(fast, prompt, tokens)
        assert len(runs) == 4 and (8, 256, 512 // 8) in calls  # the plan, split products
        monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
        calls.clear()
        fast(prompt[:, :1], cache=lib.KVCache(2))
        assert len(runs) == 5 and calls == []  # one thread: a new plan, nothing split
        monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
        monkeypatch.setattr(llama._TokenPlan, "build", classmethod(lambda cls, model: None))
        a, c_ref = _steps(reference, prompt, tokens)  # block by block, `_block_step`
    assert len(runs) == 5
    for x, y in zip(a, b):
        assert torch.equal(x, y)  # the same operations: bit for bit
    for p, f in zip(c_ref.self_attn, c_fast.self_attn):
        assert torch.equal(p.k, f.k) and torch.equal(p.v, f.v)


def test_token_plan_is_left_or_rebuilt_when_the_model_changes(monkeypatch):
    plain, fast = _tiny("interleaved", 2, seed=35)
    fuse_projections(fast)
    runs = _plan_runs(monkeypatch)
    step = torch.tensor([[7]])
    with torch.no_grad():
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 1
        seen = []
        hooks = [m.blocks[1].mlp.w_down.register_forward_hook(
            lambda mod, inp, out: (seen.append(1), out * 0.5)[1]) for m in (plain, fast)]
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 1 and len(seen) == 2  # the hook ran in both models, no plan
        for h in hooks:
            h.remove()
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 2  # hook gone: the plan again
        for model in (plain, fast):  # an in-place edit: seen through the plan's views
            model.blocks[0].attn.w_o.weight.mul_(-2)
            model.blocks[1].norm2.weight.add_(1)
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 3
        old = fast.__dict__["_plan"]
        new = torch.randn(32, 48, generator=torch.Generator().manual_seed(36))
        for model in (plain, fast):  # new storage for W_down: a new plan, the new values
            model.blocks[0].mlp.w_down.weight.data = new.clone()
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 4 and fast.__dict__["_plan"] is not old
        plain.blocks[1].norm1.eps = fast.blocks[1].norm1.eps = 0.25  # read at every step
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 5
        for model in (plain, fast):  # a new module in a block's place: a new plan
            torch.manual_seed(39)
            model.blocks[1].attn.w_o = torch.nn.Linear(32, 32, bias=False)
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 6
        gain = 1 + torch.rand(32, generator=torch.Generator().manual_seed(40))
        for model in (plain, fast):  # a new parameter in a module: a new plan
            model.blocks[0].norm1.weight = torch.nn.Parameter(gain.clone())
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 7
        fast.blocks[0].attn.fast = False  # one attention off: the blocks' own forwards
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        set_fast_attention(fast, False)
        assert torch.equal(fast(step, cache=lib.KVCache(2)), plain(step))
        assert len(runs) == 7  # the switch: no plan
        set_fast_attention(fast, True)
        double = fast.double()  # .to(): the plan (views of the float32 weights) is dropped
        assert "_plan" not in double.__dict__
        assert torch.allclose(double(step, cache=lib.KVCache(2)), plain.double()(step),
                              rtol=0, atol=1e-12)
        assert double.__dict__["_plan"].blocks[0][2].weight.dtype == torch.float64


def test_token_plan_rotates_positions_past_the_first_rotary_table():
    torch.manual_seed(37)
    config = ModernConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                          d_ff=48, max_len=1400, rope_base=500.0)
    plain = _random_norms(ModernDecoder(config).eval())
    fast = llama_decoder(config).eval()
    fast.load_state_dict(plain.state_dict())
    fuse_projections(fast)
    prompt = torch.randint(0, 50, (1, 1100), generator=torch.Generator().manual_seed(38))
    with torch.no_grad():  # the tables start at 512 positions and grow (1100 -> 2200, capped)
        a, _ = _steps(plain, prompt[:, :600], prompt[0, 600:603].tolist())
        b, _ = _steps(fast, prompt[:, :600], prompt[0, 600:603].tolist())
        assert all(torch.equal(x, y) for x, y in zip(a, b))
        a, _ = _steps(plain, prompt, [1, 2])
        b, _ = _steps(fast, prompt, [1, 2])
        assert all(torch.equal(x, y) for x, y in zip(a, b))
