"""lib.model.layers and lib.model.transformer against torch.nn's Transformer layers and the paper's formulas."""

import math

import pytest
import torch
from torch import nn

import lib
from conftest import copy_decoder_layer, copy_encoder_layer

D, H, FF = 32, 4, 64


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch(norm_first):
    ours = lib.EncoderLayer(D, H, FF, dropout=0.1, norm_first=norm_first).eval()
    theirs = nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    copy_encoder_layer(ours, theirs)
    x = torch.randn(3, 6, D)
    tokens = torch.tensor([[1, 2, 3, 4, 0, 0], [1, 2, 3, 4, 5, 6], [1, 2, 0, 0, 0, 0]])
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)
    got = ours(x, lib.padding_mask(tokens, 0))
    expected = theirs(x, src_key_padding_mask=(tokens == 0))
    # torch's fast path leaves padded *query* rows undefined (zeros); compare real positions only
    real = tokens != 0
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    ours = lib.DecoderLayer(D, H, FF, dropout=0.1, norm_first=norm_first).eval()
    theirs = nn.TransformerDecoderLayer(D, H, FF, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    copy_decoder_layer(ours, theirs)
    x, memory = torch.randn(2, 5, D), torch.randn(2, 8, D)
    src = torch.tensor([[1, 2, 3, 4, 5, 6, 0, 0], [1, 2, 3, 4, 5, 6, 7, 8]])
    got = ours(x, memory, tgt_mask=lib.causal_mask(5), memory_mask=lib.padding_mask(src, 0))
    expected = theirs(x, memory, tgt_mask=~lib.causal_mask(5), memory_key_padding_mask=(src == 0))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_layers_train_mode_without_dropout_equal_torch():
    ours = lib.EncoderLayer(D, H, FF, dropout=0.0).train()
    theirs = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True).train()
    copy_encoder_layer(ours, theirs)
    x = torch.randn(2, 5, D)
    mask = lib.causal_mask(5)
    torch.testing.assert_close(ours(x, mask), theirs(x, src_mask=~mask), atol=1e-5, rtol=1e-5)


def test_feed_forward_seed_004_example():
    # seed 004: x W1 + b1, ReLU, W2 + b2 gives [[6, 1], [5, 1], [8, 2]]
    ffn = lib.PositionwiseFeedForward(2, 2)
    with torch.no_grad():
        ffn.linear1.weight.copy_(torch.tensor([[1.0, 1.0], [0.0, 1.0]]).T)  # nn.Linear stores W1ᵀ
        ffn.linear1.bias.copy_(torch.tensor([0.0, 1.0]))
        ffn.linear2.weight.copy_(torch.tensor([[1.0, 0.0], [2.0, 1.0]]).T)
        ffn.linear2.bias.copy_(torch.tensor([1.0, -1.0]))
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert torch.equal(ffn(x), torch.tensor([[6.0, 1.0], [5.0, 1.0], [8.0, 2.0]]))


def test_feed_forward_is_position_wise():
    ffn = lib.PositionwiseFeedForward(8, 32).eval()
    x = torch.randn(2, 5, 8)
    rows = torch.stack([torch.stack([ffn(x[b, i]) for i in range(5)]) for b in range(2)])
    torch.testing.assert_close(ffn(x), rows)


def test_sinusoidal_encoding_matches_formula():
    pe = lib.sinusoidal_positional_encoding(50, 16)
    assert pe.shape == (50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_positional_modules_add_positions():
    x = torch.zeros(2, 10, 16)
    sin = lib.SinusoidalPositionalEncoding(16, max_len=20)
    torch.testing.assert_close(sin(x)[1], lib.sinusoidal_positional_encoding(10, 16))
    learned = lib.LearnedPositionalEmbedding(16, max_len=20)
    torch.testing.assert_close(learned(x)[0], learned.embedding.weight[:10])


def test_token_embedding_scaled_by_sqrt_d_model():
    emb = lib.TokenEmbedding(11, 16)
    tokens = torch.tensor([[3, 10, 0]])
    torch.testing.assert_close(emb(tokens)[0], emb.embedding.weight[[3, 10, 0]] * 4.0)


def test_transformer_forward_shapes_and_masks():
    model = lib.Transformer(13, 17, d_model=D, n_heads=H, n_layers=2, d_ff=FF).eval()
    src = torch.randint(1, 13, (3, 7))
    tgt = torch.randint(1, 17, (3, 5))
    logits = model(src, tgt, src_mask=lib.padding_mask(src, 0), tgt_mask=lib.causal_mask(5))
    assert logits.shape == (3, 5, 17)
    # causality: changing the last target token leaves earlier logits unchanged
    tgt2 = tgt.clone()
    tgt2[:, -1] = (tgt[:, -1] % 16) + 1
    logits2 = model(src, tgt2, src_mask=lib.padding_mask(src, 0), tgt_mask=lib.causal_mask(5))
    torch.testing.assert_close(logits[:, :-1], logits2[:, :-1])
    assert not torch.allclose(logits[:, -1], logits2[:, -1])


def test_transformer_forward_equals_encode_then_decode():
    model = lib.Transformer(13, 13, d_model=D, n_heads=H, n_layers=2, d_ff=FF, norm_first=True).eval()
    src, tgt = torch.randint(0, 13, (2, 6)), torch.randint(0, 13, (2, 4))
    memory = model.encode(src)
    torch.testing.assert_close(model(src, tgt, tgt_mask=lib.causal_mask(4)), model.decode(tgt, memory, tgt_mask=lib.causal_mask(4)))


def test_transformer_matches_nn_transformer_stack():
    """The encoder/decoder stacks of lib.Transformer equal nn.Transformer's with copied weights."""
    n_layers = 2
    ours = lib.Transformer(13, 13, d_model=D, n_heads=H, n_layers=n_layers, d_ff=FF).eval()
    theirs = nn.Transformer(D, H, n_layers, n_layers, FF, dropout=0.1, batch_first=True).eval()
    for a, b in zip(ours.encoder_layers, theirs.encoder.layers):
        copy_encoder_layer(a, b)
    for a, b in zip(ours.decoder_layers, theirs.decoder.layers):
        copy_decoder_layer(a, b)
    # nn.Transformer closes each stack with an extra LayerNorm that the paper's post-LN model
    # does not have, so run torch's layers one by one rather than theirs.encoder / theirs.decoder.
    src, tgt = torch.randint(0, 13, (2, 6)), torch.randint(0, 13, (2, 4))
    x = ours.src_pos(ours.src_embed(src))
    y = ours.tgt_pos(ours.tgt_embed(tgt))
    mem_ours = ours.encode(src)
    out_ours = ours.decode(tgt, mem_ours, tgt_mask=lib.causal_mask(4))
    # torch: the same embedded inputs through its stacks, then lib's generator
    mem_theirs = theirs.encoder.layers[1](theirs.encoder.layers[0](x))
    torch.testing.assert_close(mem_ours, mem_theirs, atol=1e-5, rtol=1e-5)
    dec = y
    for layer in theirs.decoder.layers:
        dec = layer(dec, mem_theirs, tgt_mask=~lib.causal_mask(4))
    torch.testing.assert_close(out_ours, ours.generator(dec), atol=1e-5, rtol=1e-5)


def test_shared_embeddings_are_one_matrix():
    model = lib.Transformer(20, 20, d_model=D, n_heads=H, n_layers=1, d_ff=FF, share_embeddings=True)
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight
    untied = lib.Transformer(20, 20, d_model=D, n_heads=H, n_layers=1, d_ff=FF)
    assert untied.count_parameters() - model.count_parameters() == 2 * 20 * D


def base_model_count_from_formulas(vocab=37000, d=512, d_ff=2048, n=6):
    attention = 4 * d * d + 4 * d
    ffn = 2 * d * d_ff + d_ff + d
    layer_norm = 2 * d
    encoder_layer = attention + ffn + 2 * layer_norm
    decoder_layer = 2 * attention + ffn + 3 * layer_norm
    return vocab * d + n * encoder_layer + n * decoder_layer  # one shared embedding matrix


def test_base_model_has_about_65M_parameters():
    model = lib.TransformerConfig(share_embeddings=True).build()
    count = model.count_parameters()
    assert count == base_model_count_from_formulas()
    # the paper (Table 3) reports 65M for the base model: within 5%
    assert abs(count - 65e6) / 65e6 < 0.05


def test_config_defaults_are_the_paper_base_model():
    cfg = lib.TransformerConfig()
    assert (cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff, cfg.dropout) == (512, 8, 6, 2048, 0.1)


def test_decoder_layer_names_the_mask_that_does_not_fit():
    """The attention modules only know "mask": the decoder layer names tgt_mask or memory_mask."""
    layer = lib.DecoderLayer(8, 2, 16).eval()
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    causal = lib.causal_mask(3)
    source_padding = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match="memory_mask"):
        layer(x, memory, tgt_mask=causal, memory_mask=causal)  # (3, 3) against 5 keys
    with pytest.raises(ValueError, match="tgt_mask"):
        layer(x, memory, tgt_mask=source_padding, memory_mask=source_padding)
    with pytest.raises(TypeError, match="memory_mask"):
        layer(x, memory, memory_mask=source_padding.int())
    assert layer(x, memory, tgt_mask=causal, memory_mask=source_padding).shape == x.shape
