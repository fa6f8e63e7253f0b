"""lib's optional compiled decoding step (lib.model.native, native_step.cpp) computes what
the plain model computes, to float32 rounding: checked on Llama configurations large
enough for the split products (both rotary pairings, 1, 2 and 4 key/value heads) against
`ModernDecoder`'s own cached steps and whole-sequence pass, which share no code with the
C++ loops (PyTorch's SDPA, `apply_rotary`, `RMSNorm`). Every step a test expects to be
native is counted as it runs; every case the Python plan must take instead is counted
too. The build itself is tested where a compiler and ninja are present."""

from __future__ import annotations

import shutil

import pytest
import torch

import lib
from lib.model import native
from lib.model.llama import fuse_projections, llama_decoder
from lib.model.modern import ModernConfig, ModernDecoder

HAVE_TOOLS = bool((shutil.which("c++") or shutil.which("g++")) and shutil.which("ninja"))


def test_the_native_step_builds_where_a_compiler_and_ninja_are():
    if not HAVE_TOOLS:
        pytest.skip("no C++ compiler or no ninja here: the native step is optional")
    assert native.native_available(), native._error


needs_native = pytest.mark.skipif(not HAVE_TOOLS or not native.native_available(),
                                  reason="the native step cannot be built here")


class _Counting:
    """Stands in for the compiled module: counts `decode_step` calls, then runs it."""

    def __init__(self, module):
        self.module, self.calls = module, 0

    def decode_step(self, *args):
        self.calls += 1
        return self.module.decode_step(*args)


def _count(monkeypatch) -> _Counting:
    """Count the compiled step's calls from here on (for the rest of the test)."""
    counter = _Counting(native._load())
    monkeypatch.setattr(native, "_module", counter)
    return counter


def _pair(monkeypatch, pairing: str = "interleaved", n_kv_heads: int = 2, seed: int = 0):
    """A plain `ModernDecoder` and the same weights as a fused `LlamaDecoder` running the
    native step (counted); matrices of at least 2**16 weights, so every product splits.
    Norm gains away from 1, so that a step reading the wrong norm gives other numbers."""
    torch.manual_seed(seed)
    config = ModernConfig(vocab_size=300, d_model=256, n_layers=2, n_heads=4,
                          n_kv_heads=n_kv_heads, d_ff=512, max_len=512, rope_base=500.0,
                          rope_pairing=pairing)
    plain = ModernDecoder(config).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in plain.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.5 * torch.randn(p.shape, generator=g))
    fast = llama_decoder(config).eval()
    fast.load_state_dict(plain.state_dict())
    fuse_projections(fast)
    lib.native_decoding(fast)
    return plain, fast, _count(monkeypatch)


def _steps(model, prompt, tokens):
    cache = lib.KVCache(len(model.blocks))
    out = [model(prompt, cache=cache)]
    for t in tokens:
        out.append(model(torch.tensor([[t]]), cache=cache))
    return out, cache


@needs_native
@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("threads", [1, 2])
def test_native_steps_give_the_plain_models_logits_and_cache(monkeypatch, pairing, n_kv_heads,
                                                              threads):
    plain, fast, counter = _pair(monkeypatch, pairing, n_kv_heads, seed=n_kv_heads)
    # 2: the products split into row blocks, as on 2 cores; 1: one block, W transposed
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    prompt = torch.randint(0, 300, (1, 6), generator=torch.Generator().manual_seed(5))
    tokens = [7, 299, 0, 41, 41, 150, 3, 88]
    with torch.no_grad():
        a, c_plain = _steps(plain, prompt, tokens)
        b, c_fast = _steps(fast, prompt, tokens)
        whole = plain(torch.cat([prompt, torch.tensor([tokens])], dim=1))
    assert counter.calls == len(tokens)  # every one-token step was native
    for x, y in zip(a, b):
        assert torch.allclose(x, y, rtol=0, atol=1e-4)
    assert torch.allclose(torch.cat(b, dim=1), whole, rtol=0, atol=1e-4)
    for p, f in zip(c_plain.self_attn, c_fast.self_attn):
        assert p.length == f.length == 6 + len(tokens)
        assert torch.allclose(p.k, f.k, rtol=0, atol=1e-5)
        assert torch.allclose(p.v, f.v, rtol=0, atol=1e-5)
    # the comparison can tell: the steps' logits are far from each other's neighbours
    assert not torch.allclose(b[-1], b[-2], atol=1e-2)


@needs_native
def test_native_steps_continue_across_the_caches_growth(monkeypatch):
    """The cache's buffer holds 256 more positions than the prompt: the step that finds it
    full runs in Python (which grows it), the next ones native again."""
    plain, fast, counter = _pair(monkeypatch, seed=7)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    prompt = torch.randint(0, 300, (1, 4), generator=torch.Generator().manual_seed(8))
    tokens = torch.randint(0, 300, (300,), generator=torch.Generator().manual_seed(9)).tolist()
    with torch.no_grad():
        b, c_fast = _steps(fast, prompt, tokens)
        whole = plain(torch.cat([prompt, torch.tensor([tokens])], dim=1))
    assert len(tokens) - 2 <= counter.calls < len(tokens)  # one or two Python steps
    assert torch.allclose(torch.cat(b, dim=1), whole, rtol=0, atol=1e-4)
    assert c_fast.self_attn[0].length == 304


@needs_native
def test_the_python_plan_runs_whatever_the_native_step_does_not_compute(monkeypatch):
    plain, fast, counter = _pair(monkeypatch, seed=11)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    prompt = torch.randint(0, 300, (1, 5), generator=torch.Generator().manual_seed(12))

    def step_logits(model, grad=False):
        cache = lib.KVCache(2)
        with torch.set_grad_enabled(grad):
            model(prompt, cache=cache)
            return model(torch.tensor([[17]]), cache=cache)

    with torch.no_grad():
        reference = step_logits(plain)
    cases = {
        "gradients on": lambda: step_logits(fast, grad=True),
        "a forward hook": lambda: _with_hook(fast, lambda: step_logits(fast)),
        "a replaced attention kernel": lambda: _with_fused(fast, lambda: step_logits(fast)),
        "batch 2": lambda: fast(prompt[:, :2].reshape(2, 1), cache=lib.KVCache(2))[:1],
    }
    for name, run in cases.items():
        before = counter.calls
        out = run()
        assert counter.calls == before, name
        if name != "batch 2":
            assert torch.allclose(out.detach(), reference, rtol=0, atol=1e-4), name
    lib.native_decoding(fast, False)
    with torch.no_grad():
        assert torch.allclose(step_logits(fast), reference, rtol=0, atol=1e-4)
    assert counter.calls == 0


@needs_native
def test_a_native_model_deep_copies_and_quantizes(monkeypatch):
    """The switch is a flag, not the compiled module: `copy.deepcopy` and
    `lib.quantize_int8` (which deep-copies) still work, and a copy, fused again (a deep
    copy's parameters are no longer views of its fused matrices), steps natively too."""
    import copy

    plain, fast, counter = _pair(monkeypatch, seed=15)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    twin = fuse_projections(copy.deepcopy(fast))
    lib.quantize_int8(fast, 32)
    prompt = torch.randint(0, 300, (1, 5), generator=torch.Generator().manual_seed(16))
    with torch.no_grad():
        a, _ = _steps(plain, prompt, [8, 9])
        b, _ = _steps(twin, prompt, [8, 9])
    assert counter.calls == 2
    for x, y in zip(a, b):
        assert torch.allclose(x, y, rtol=0, atol=1e-4)


def _with_hook(model, run):
    handle = model.blocks[1].mlp.register_forward_hook(lambda *args: None)
    try:
        return run()
    finally:
        handle.remove()


def _with_fused(model, run):
    attn = model.blocks[0].attn
    attn._fused = attn._fused  # an instance attribute, as lib.model.chunked sets one
    try:
        return run()
    finally:
        del attn._fused


@needs_native
def test_a_biased_projection_keeps_the_python_plan(monkeypatch):
    plain, fast, counter = _pair(monkeypatch, seed=13)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    with torch.no_grad():
        for model in (plain, fast):
            model.blocks[0].attn.w_o.bias = torch.nn.Parameter(torch.full((256,), 0.1))
        prompt = torch.randint(0, 300, (1, 5), generator=torch.Generator().manual_seed(14))
        a, _ = _steps(plain, prompt, [3, 4])
        b, _ = _steps(fast, prompt, [3, 4])
    assert counter.calls == 0
    for x, y in zip(a, b):
        assert torch.allclose(x, y, rtol=0, atol=1e-5)


@needs_native
def test_the_compiled_step_refuses_buffers_of_the_wrong_shape():
    module = native._load()
    x = torch.zeros(256)
    weights = [torch.zeros(1)] * 6
    buf = torch.zeros(1, 2, 4, 64)
    cs = torch.zeros(64)
    with pytest.raises(RuntimeError, match="cache buffer 0"):  # full: capacity 4, t = 4
        module.decode_step(x, weights, [buf], [buf], 4, cs, cs, 4, 2, 64, 512, 1e-5, True)
    with pytest.raises(RuntimeError, match="6 tensors"):
        module.decode_step(x, weights[:5], [buf], [buf], 0, cs, cs, 4, 2, 64, 512, 1e-5, True)
    with pytest.raises(RuntimeError, match="float32"):
        module.decode_step(x.double(), weights, [buf], [buf], 0, cs, cs, 4, 2, 64, 512, 1e-5,
                           True)


def test_native_decoding_checks_its_arguments():
    with pytest.raises(TypeError, match="model"):
        lib.native_decoding(torch.nn.Linear(2, 2))
    config = ModernConfig(vocab_size=20, d_model=16, n_layers=1, n_heads=2, d_ff=16, max_len=8)
    with pytest.raises(TypeError, match="model"):
        lib.native_decoding(ModernDecoder(config))
    with pytest.raises(TypeError, match="on"):
        lib.native_decoding(llama_decoder(config), on="yes")


@needs_native
@pytest.mark.parametrize("threads", [1, 2])
def test_smollm2_native_steps_give_hugging_faces_logits_and_greedy_tokens(monkeypatch, threads):
    """On SmolLM2 itself, against Hugging Face's LlamaForCausalLM built from the same GGUF
    file by transformers' own converter (tests/smollm2_reference.py): the logits of 12
    native one-token steps after each prompt within the tolerance tests/test_llama.py
    holds lib's whole pass to, and 12 greedy tokens equal to Hugging Face's."""
    from smollm2_reference import hf_model, lib_model
    from test_llama import PROMPTS, TOL

    model, tokenizer = lib_model()
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    counter = _count(monkeypatch)
    try:
        lib.native_decoding(model)
        for text in PROMPTS:
            prompt = torch.tensor(tokenizer.encode(text))
            out = lib.generate(model, prompt, 12, greedy=True)
            with torch.no_grad():
                reference = hf_model().generate(prompt[None], max_new_tokens=12, do_sample=False)
                assert out.tolist() == reference[0].tolist()
                full = hf_model()(reference).logits
                cache = lib.KVCache(len(model.blocks))
                steps = [model(reference[:, : len(prompt)], cache=cache)]
                for i in range(len(prompt), reference.shape[1]):
                    steps.append(model(reference[:, i : i + 1], cache=cache))
            assert float((torch.cat(steps, dim=1) - full).abs().max()) < TOL
    finally:
        lib.native_decoding(model, False)
    assert counter.calls == len(PROMPTS) * (11 + 12)


def test_the_source_ships_with_lib():
    """An install that is not editable (Colab, Binder) carries native_step.cpp: a pattern
    of pyproject.toml's package data for `lib.model` matches it."""
    import fnmatch
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    line = re.search(r'^"lib\.model" = \[(.*?)\]', (root / "pyproject.toml").read_text(), re.M)
    assert line is not None
    patterns = re.findall(r'"([^"]+)"', line.group(1))
    assert native._SOURCE.is_file()
    assert any(fnmatch.fnmatch(native._SOURCE.name, p) for p in patterns)
