"""int8 weights in blocks (chapter 17): the blocks reproduce the weights within half a
step, the model is the float model up to that rounding, and the bytes are the formula's."""

from __future__ import annotations

import pytest
import torch

import lib


def _model():
    torch.manual_seed(0)
    return lib.ModernConfig(vocab_size=40, d_model=64, n_heads=4, n_kv_heads=2, n_layers=2,
                            d_ff=128, max_len=64).build().eval()


@pytest.mark.parametrize("block_size", [32, None])
def test_blocks_round_to_half_a_step(block_size):
    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    q, s = lib.int8_blocks(w, block_size)
    assert q.dtype == torch.int8 and s.shape == (8, 2 if block_size else 1)
    step = s.repeat_interleave(64 // s.shape[1], dim=1)
    assert ((q.float() * step - w).abs() <= step / 2 + 1e-7).all()
    assert q.abs().max() == 127  # each block's largest weight uses the full range


@pytest.mark.parametrize("block_size", [32, None])
def test_int8_model_close_to_the_float_model(block_size):
    model = _model()
    q = lib.quantize_int8(model, block_size)
    tokens = torch.randint(0, 40, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = model(tokens), q(tokens).float()
    assert (a - b).abs().max() < 0.1 * a.abs().max()
    assert torch.equal(lib.generate(q, tokens[0, :3], 5, greedy=True)[:3], tokens[0, :3])
    assert not any(isinstance(m, torch.nn.Linear) for m in q.modules())
    assert q.head.q is q.embed.weight  # still tied, one int8 table


def test_weight_bytes_are_the_formula():
    model = _model()
    n = sum(p.numel() for p in model.parameters())
    assert lib.weight_bytes(model) == 4 * n
    q = lib.quantize_int8(model, 32)
    linear = sum(m.q.numel() for m in q.modules() if isinstance(m, lib.Int8Linear))
    norms = n - linear
    assert lib.weight_bytes(q) == linear * 1 + (linear // 32) * 2 + norms * 2


def test_bad_input():
    with pytest.raises(ValueError, match="block_size"):
        lib.int8_blocks(torch.zeros(2, 10), 4)
    with pytest.raises(TypeError, match="weight"):
        lib.int8_blocks(torch.zeros(2, 10, dtype=torch.long), 5)
    with pytest.raises(TypeError, match="model"):
        lib.quantize_int8(torch.nn.Linear(2, 2))
