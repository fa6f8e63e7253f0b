"""`lib.generate`'s two shortcuts for a `lib.ModernDecoder` (measured in bench/smollm2.py)
change no token:

- the prompt's forward pass computes the head of the last position only
  (``model(prompt, cache=..., last_only=True)``), not of every prompt position;
- greedy decoding takes ``logits.max(dim=-1)`` (the argmax, first of ties) and runs the
  full NaN / inf check only when a row's maximum is not finite.

The reference is the loop `lib.generate` ran before: every prompt position's logits, the
last one taken, argmax, on tiny random models (both rotary pairings, grouped-query
attention, `llama_decoder`'s fast attention) and on SmolLM2 at batch 1 and 8."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import lib
from lib.model.llama import llama_decoder
from lib.model.modern import ModernConfig, ModernDecoder


def _full_logits_generate(model, prompt: torch.Tensor, n: int, position: int = -1) -> torch.Tensor:
    """Greedy decoding with the KV cache, the head run on every prompt position and the
    logits of ``position`` taken (-1: the right one)."""
    tokens = prompt
    cache = lib.KVCache(len(model.blocks))
    step_input = prompt
    with torch.no_grad():
        for _ in range(n):
            logits = model(step_input, cache=cache)  # (B, T, |V|): every position
            assert logits.shape[1] == step_input.shape[1]
            next_id = logits[:, position].argmax(dim=-1)
            tokens = torch.cat([tokens, next_id[:, None]], dim=1)
            step_input = next_id[:, None]
    return tokens


def _tiny(pairing: str, n_kv_heads: int, seed: int, fast: bool = False) -> ModernDecoder:
    torch.manual_seed(seed)
    config = ModernConfig(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=n_kv_heads,
                          d_ff=48, max_len=64, rope_base=500.0, rope_pairing=pairing)
    return (llama_decoder(config) if fast else ModernDecoder(config)).eval()


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
@pytest.mark.parametrize("n_kv_heads", [1, 4])
@pytest.mark.parametrize("fast", [False, True])
def test_generate_gives_the_tokens_of_the_every_position_loop(pairing, n_kv_heads, fast):
    model = _tiny(pairing, n_kv_heads, seed=n_kv_heads, fast=fast)
    for batch, length in ((1, 7), (3, 12)):
        prompt = torch.randint(0, 61, (batch, length), generator=torch.Generator().manual_seed(5))
        reference = _full_logits_generate(model, prompt, 30)
        assert torch.equal(lib.generate(model, prompt, 30, greedy=True), reference)
        # the comparison can fail: the prompt's first position instead of its last
        # gives other tokens
        wrong = _full_logits_generate(model, prompt, 30, position=0)
        assert not torch.equal(wrong, reference)


def test_last_only_is_the_last_position_of_the_full_logits():
    model = _tiny("interleaved", 2, seed=7)
    tokens = torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        full = model(tokens)
        last = model(tokens, last_only=True)
        cache = lib.KVCache(2)
        cached = model(tokens, cache=cache, last_only=True)
    assert last.shape == (2, 1, 61) and cache.length == 9  # every position cached
    assert torch.allclose(last, full[:, -1:], atol=1e-6)
    assert torch.equal(cached, last)
    assert not torch.allclose(last, full[:, -2:-1], atol=1e-2)  # not another position
    with pytest.raises(TypeError, match="last_only"):
        model(tokens, last_only=1)


class _Crafted(nn.Module):
    """An output head whose logits are set by hand (rows of `values` at every position)."""

    def __init__(self, values: torch.Tensor):
        super().__init__()
        self.values = values

    def forward(self, x):
        return self.values[:, None].expand(x.shape[0], x.shape[1], -1).clone()


@pytest.mark.parametrize("row, match", [
    ([1.0, float("nan"), 3.0], "NaN"),
    ([float("inf"), 1.0, 2.0], r"\+inf"),
    ([float("-inf")] * 3, "-inf everywhere"),
])
def test_greedy_still_refuses_nan_inf_and_dead_rows_in_any_row(row, match):
    model = _tiny("interleaved", 2, seed=1)
    logits = torch.zeros(3, model.vocab_size)
    logits[:, 5] = 1.0
    logits[2, :3] = torch.tensor(row)  # only the last batch row is bad
    if row[0] == float("-inf"):
        logits[2] = float("-inf")
    model.head = _Crafted(logits)
    with pytest.raises(ValueError, match=match):
        lib.generate(model, torch.zeros(3, 4, dtype=torch.long), 2, greedy=True)


def test_greedy_takes_the_first_of_tied_maxima_and_allows_minus_inf():
    model = _tiny("interleaved", 2, seed=1)
    logits = torch.full((2, model.vocab_size), float("-inf"))  # masked tokens are fine
    logits[0, [9, 4, 30]] = torch.tensor([2.0, 2.0, 1.0])
    logits[1, [50, 60]] = 3.0
    model.head = _Crafted(logits)
    out = lib.generate(model, torch.zeros(2, 3, dtype=torch.long), 2, greedy=True)
    assert out[:, 3:].tolist() == [[4, 4], [50, 50]]


@pytest.mark.parametrize("batch", [1, 8])
def test_smollm2_tokens_equal_the_every_position_loop(batch):
    from smollm2_reference import lib_model

    model, tokenizer = lib_model()
    texts = ["What is the capital of France?", "Write a haiku about the sea.",
             "Name three prime numbers.", "What is 2 + 2?"]
    rows = [tokenizer.apply_chat([{"role": "user", "content": t}]) for t in texts]
    width = min(len(r) for r in rows)
    prompt = torch.tensor([rows[i % len(rows)][:width] for i in range(batch)])
    expected = _full_logits_generate(model, prompt, 12)
    assert torch.equal(lib.generate(model, prompt, 12, greedy=True), expected)
