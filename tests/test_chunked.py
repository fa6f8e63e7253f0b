"""Chunked prefill and the offset causal mask (chapter 17): chunks through a KV cache give
the full pass's logits for every lib decoder; the top-left mask (is_causal=True) does not."""

from __future__ import annotations

import pytest
import torch

import lib


def _models():
    torch.manual_seed(0)
    return [
        lib.DecoderOnlyModel(vocab_size=30, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=96),
        lib.ModernConfig(vocab_size=30, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2,
                         d_ff=64, max_len=96).build(),
    ]


def test_offset_mask_by_its_definition():
    for c, p in ((1, 0), (1, 6), (4, 3), (5, 0), (3, 10)):
        m = lib.offset_causal_mask(c, p)
        assert m.dtype == torch.bool and m.shape == (c, p + c)
        for i in range(c):
            for j in range(p + c):
                assert bool(m[i, j]) == (j <= p + i)


@pytest.mark.parametrize("index", [0, 1], ids=["DecoderOnlyModel", "ModernDecoder"])
@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_chunks_give_the_full_pass(index, chunk):
    model = _models()[index].eval()
    tokens = torch.randint(0, 30, (2, 90), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)
    assert (lib.chunked_logits(model, tokens, chunk) - full).abs().max() < 1e-5


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_top_left_mask_changes_the_logits_and_is_undone(chunk):
    model = _models()[1].eval()
    tokens = torch.randint(0, 30, (1, 90), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(tokens)
    with lib.top_left_mask(model):
        wrong = lib.chunked_logits(model, tokens, chunk)
        assert torch.allclose(wrong[:, :chunk], full[:, :chunk], atol=1e-5)  # p = 0: right
    assert (wrong - full).abs().max() > 0.1  # later chunks see the wrong keys
    assert (lib.chunked_logits(model, tokens, chunk) - full).abs().max() < 1e-5  # restored


def test_bad_arguments():
    with pytest.raises(ValueError, match="c"):
        lib.offset_causal_mask(0, 3)
    with pytest.raises(ValueError, match="p"):
        lib.offset_causal_mask(2, -1)
    with pytest.raises(ValueError, match="chunk"):
        lib.chunked_logits(_models()[1], torch.tensor([[1, 2]]), 0)
    with pytest.raises(TypeError, match="model"):
        with lib.top_left_mask(_models()[0]):
            pass
