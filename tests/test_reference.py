"""lib.interop.torch_nn: after copying, lib's layers and PyTorch's own layers compute the same function."""

import pytest
import torch
from torch import nn

import lib
from lib import copy_decoder_layer_to_torch, copy_encoder_layer_to_torch, copy_mha_to_torch

D, H, FF = 16, 4, 40


def _pad(tokens):  # lib's (B, 1, 1, n) True = keep  ->  torch's (B, n) True = ignore
    return ~lib.padding_mask(tokens, 0)[:, 0, 0, :]


def test_mha_matches_torch():
    torch.manual_seed(0)
    ours = lib.MultiHeadAttention(D, H).eval()
    theirs = copy_mha_to_torch(ours, nn.MultiheadAttention(D, H, batch_first=True).eval())
    q, kv = torch.randn(2, 3, D), torch.randn(2, 5, D)
    keep = torch.rand(2, 1, 3, 5) > 0.3
    keep[..., 0] = True
    expected, _ = theirs(q, kv, kv, attn_mask=~keep.expand(2, H, 3, 5).reshape(2 * H, 3, 5), need_weights=False)
    assert torch.allclose(ours(q, kv, kv, keep), expected, atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    torch.manual_seed(1)
    ours = lib.EncoderLayer(D, H, FF, dropout=0.1, norm_first=norm_first).eval()
    theirs = nn.TransformerEncoderLayer(D, H, FF, 0.1, batch_first=True, norm_first=norm_first).eval()
    copy_encoder_layer_to_torch(ours, theirs)
    x = torch.randn(2, 5, D)
    tokens = torch.tensor([[4, 2, 7, 0, 0], [1, 2, 3, 4, 5]])
    got = ours(x, lib.padding_mask(tokens, 0))
    expected = theirs(x, src_key_padding_mask=_pad(tokens))
    assert torch.allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    torch.manual_seed(2)
    ours = lib.DecoderLayer(D, H, FF, dropout=0.1, norm_first=norm_first).eval()
    theirs = nn.TransformerDecoderLayer(D, H, FF, 0.1, batch_first=True, norm_first=norm_first).eval()
    copy_decoder_layer_to_torch(ours, theirs)
    y, memory = torch.randn(2, 4, D), torch.randn(2, 5, D)
    tgt = torch.tensor([[3, 2, 0, 0], [1, 2, 3, 4]])
    src = torch.tensor([[4, 2, 7, 0, 0], [1, 2, 3, 4, 5]])
    got = ours(y, memory, tgt_mask=lib.causal_mask(4) & lib.padding_mask(tgt, 0), memory_mask=lib.padding_mask(src, 0))
    expected = theirs(y, memory, tgt_mask=~lib.causal_mask(4), tgt_key_padding_mask=_pad(tgt),
                      memory_key_padding_mask=_pad(src))
    assert torch.allclose(got, expected, atol=1e-5)


def test_uncopied_layers_differ():
    # guards against a comparison that would pass whatever the weights
    torch.manual_seed(3)
    ours = lib.EncoderLayer(D, H, FF).eval()
    theirs = nn.TransformerEncoderLayer(D, H, FF, batch_first=True).eval()
    x = torch.randn(1, 3, D)
    assert not torch.allclose(ours(x), theirs(x), atol=1e-3)


def test_mismatches_are_refused_before_copying():
    ours = lib.EncoderLayer(D, H, FF, norm_first=False)
    with pytest.raises(ValueError, match="norm_first"):
        copy_encoder_layer_to_torch(ours, nn.TransformerEncoderLayer(D, H, FF, batch_first=True, norm_first=True))
    theirs = nn.TransformerEncoderLayer(D, H, FF + 1, batch_first=True)
    before = theirs.self_attn.in_proj_weight.clone()
    with pytest.raises(ValueError, match="linear1"):
        copy_encoder_layer_to_torch(ours, theirs)
    assert torch.equal(theirs.self_attn.in_proj_weight, before)  # nothing was written
    with pytest.raises(ValueError, match="batch_first"):
        copy_encoder_layer_to_torch(ours, nn.TransformerEncoderLayer(D, H, FF))
    with pytest.raises(ValueError, match="activation"):
        copy_encoder_layer_to_torch(ours, nn.TransformerEncoderLayer(D, H, FF, activation="gelu", batch_first=True))
    with pytest.raises(ValueError, match="num_heads"):
        copy_mha_to_torch(lib.MultiHeadAttention(D, H), nn.MultiheadAttention(D, 2, batch_first=True))
    with pytest.raises(TypeError, match="DecoderLayer"):
        copy_decoder_layer_to_torch(ours, nn.TransformerDecoderLayer(D, H, FF, batch_first=True))
