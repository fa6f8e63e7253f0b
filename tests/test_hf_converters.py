"""lib against whole models it did not write: Hugging Face's Marian, BERT and GPT-2.

Tiny models are built from configs with random weights (no download), converted
with `lib.marian_to_lib` / `lib.bert_to_lib` / `lib.gpt2_to_lib` and back, and
compared in eval mode: encoder outputs, decoder outputs and logits to 1e-5 on
batches with padding and the causal mask, greedy generation token for token,
and lib -> Hugging Face -> lib as the identity on the weights.
"""

from __future__ import annotations

import pytest
import torch

import lib

transformers = pytest.importorskip("transformers")
from transformers import (  # noqa: E402
    BertConfig,
    BertModel,
    GenerationConfig,
    GPT2Config,
    GPT2LMHeadModel,
    MarianConfig,
    MarianMTModel,
)

TOL = 1e-5
PAD, EOS = 1, 0  # Marian's source and target pad id (also the decoder's start token) and EOS


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def randomise(model: torch.nn.Module, seed: int, scale: float = 0.3) -> torch.nn.Module:
    """Weights far from Hugging Face's small initialisation, so every input changes the output."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # each tied matrix once
            if not p.requires_grad:
                continue  # Marian's fixed sinusoidal tables
            noise = torch.randn(p.shape, generator=g)
            if p.dim() == 1 and name.endswith("weight"):  # LayerNorm gains
                p.copy_(1 + 0.1 * noise)
            else:
                p.copy_((0.1 if p.dim() == 1 else scale) * noise)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.copy_(0.5 * torch.randn(model.final_logits_bias.shape, generator=g))
    return model.eval()


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# --------------------------------------------------------------------- Marian

def marian_config(**kw) -> MarianConfig:
    base = dict(
        vocab_size=23, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=40,
        activation_function="swish", scale_embedding=True, pad_token_id=PAD, eos_token_id=EOS,
        decoder_start_token_id=PAD, forced_eos_token_id=None,
    )
    return MarianConfig(**{**base, **kw})


def tiny_marian(seed: int = 0, **kw) -> MarianMTModel:
    torch.manual_seed(seed)
    return randomise(MarianMTModel(marian_config(**kw)), seed)


def marian_batch(src_vocab: int, tgt_vocab: int, seed: int = 0):
    """Sources (3, 7) and decoder inputs (3, 6), both right-padded, ids from 2 on."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(2, src_vocab, (3, 7), generator=g)
    src[0, 4:] = PAD
    src[2, 6:] = PAD
    tgt = torch.randint(2, tgt_vocab, (3, 6), generator=g)
    tgt[:, 0] = PAD  # the decoder's start token
    tgt[1, 3:] = PAD
    tgt_keep = torch.ones_like(tgt, dtype=torch.bool)
    tgt_keep[1, 3:] = False
    return src, tgt, tgt_keep


def compare_marian(hf: MarianMTModel, ours: lib.Transformer, seed: int = 0) -> dict[str, float]:
    src, tgt, tgt_keep = marian_batch(ours.config.src_vocab_size, ours.config.tgt_vocab_size, seed)
    src_mask = lib.padding_mask(src, PAD)  # (B, 1, 1, n)
    tgt_mask = lib.causal_mask(tgt.shape[1])[None, None] & tgt_keep[:, None, None, :]  # (B, 1, m, m)
    seen = {}
    hook = ours.generator.register_forward_hook(lambda m, inp, out: seen.__setitem__("decoder", inp[0]))
    with torch.no_grad():
        out = hf(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt,
                 decoder_attention_mask=tgt_keep.long(), output_hidden_states=True)
        memory = ours.encode(src, src_mask=src_mask)
        logits = ours.decode(tgt, memory, src_mask=src_mask, tgt_mask=tgt_mask)
    hook.remove()
    return {
        "encoder": max_diff(memory, out.encoder_last_hidden_state),
        "decoder": max_diff(seen["decoder"], out.decoder_hidden_states[-1]),
        "logits": max_diff(logits, out.logits),
    }


@pytest.mark.parametrize("kw", [
    {},
    {"activation_function": "gelu", "scale_embedding": False},
    {"activation_function": "relu", "share_encoder_decoder_embeddings": False, "tie_word_embeddings": False,
     "decoder_vocab_size": 19},
    {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 19},  # decoder tied to the output only
])
def test_marian_outputs_agree(kw):
    hf = tiny_marian(**kw)
    ours = lib.marian_to_lib(hf)
    assert not ours.training
    diffs = compare_marian(hf, ours)
    assert max(diffs.values()) <= TOL, diffs
    tied = kw.get("share_encoder_decoder_embeddings", True) and kw.get("tie_word_embeddings", True)
    assert ours.config.share_embeddings == tied


def test_marian_options_in_lib():
    ours = lib.marian_to_lib(tiny_marian())
    c = ours.config
    assert (c.positional, c.activation, c.output_bias, c.scale_embedding, c.layer_norm_eps) == (
        "sinusoidal_concat", "silu", True, True, 1e-5)
    assert ours.generator.weight is ours.src_embed.weight  # Marian ties all three
    # Marian's table is the paper's, its sines first and cosines second
    pe = lib.sinusoidal_positional_encoding(40, 16)
    marian_pe = lib.sinusoidal_positional_encoding(40, 16, layout="concat")
    assert torch.equal(marian_pe, torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1))


def test_marian_greedy_generation_is_identical():
    hf = tiny_marian(seed=3)
    with torch.no_grad():
        hf.final_logits_bias[0, EOS] += 2.5  # so that some rows end early
    ours = lib.marian_to_lib(hf)
    src, _, _ = marian_batch(23, 23, seed=3)
    config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=12, decoder_start_token_id=PAD,
                              eos_token_id=EOS, pad_token_id=PAD)
    with torch.no_grad():
        theirs = hf.generate(src, attention_mask=(src != PAD).long(), generation_config=config)
    mine = lib.greedy_decode(ours, src, 12, bos_id=PAD, eos_id=EOS, pad_id=PAD)
    assert theirs[:, 0].eq(PAD).all()  # Hugging Face returns the start token too
    assert torch.equal(theirs[:, 1:], mine)
    ended = (mine == EOS).any(dim=1)
    assert ended.any() and not ended.all(), mine  # both stopping rules are exercised


def test_marian_from_state_dict_and_config():
    hf = tiny_marian()
    a = lib.marian_to_lib(hf)
    b = lib.marian_to_lib(hf.state_dict(), config=hf.config)
    assert same_weights(a, b)
    # a saved checkpoint keeps one copy of tied matrices and no position tables
    sd = {k: v for k, v in hf.state_dict().items()
          if k not in {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                       "model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}}
    assert same_weights(a, lib.marian_to_lib(sd, config=hf.config))


@pytest.mark.parametrize("share", [True, False])
def test_marian_round_trip_is_the_identity(share):
    torch.manual_seed(1)
    ours = lib.Transformer(23, 23 if share else 19, d_model=16, n_heads=4, n_layers=2, d_ff=24, dropout=0.1,
                           positional="sinusoidal_concat", activation="silu", output_bias=True,
                           share_embeddings=share, max_len=40).eval()
    with torch.no_grad():
        ours.generator.bias.normal_()
    hf = lib.lib_to_marian(ours, pad_id=PAD, eos_id=EOS)
    assert not hf.training
    back = lib.marian_to_lib(hf)
    assert same_weights(ours, back)
    assert back.config == ours.config
    diffs = compare_marian(hf, ours, seed=1)  # and lib's own initialisation computes the same
    assert max(diffs.values()) <= TOL, diffs


def test_marian_without_output_bias_gets_zero_logits_bias():
    torch.manual_seed(2)
    ours = lib.Transformer(23, 23, d_model=16, n_heads=4, n_layers=1, d_ff=24, positional="sinusoidal_concat",
                           max_len=40, share_embeddings=True).eval()
    hf = lib.lib_to_marian(ours, pad_id=PAD, eos_id=EOS)
    assert not hf.final_logits_bias.any()
    assert max(compare_marian(hf, ours).values()) <= TOL


# ----------------------------------------------------------------------- BERT

def bert_config(**kw) -> BertConfig:
    base = dict(vocab_size=29, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
                max_position_embeddings=40, type_vocab_size=2, pad_token_id=0)
    return BertConfig(**{**base, **kw})


def tiny_bert(seed: int = 0, **kw) -> BertModel:
    torch.manual_seed(seed)
    return randomise(BertModel(bert_config(**kw)), seed)


def compare_bert(hf: BertModel, ours: lib.EncoderOnlyModel, seed: int = 0) -> float:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, ours.vocab_size, (3, 8), generator=g)
    tokens[0, 5:] = 0
    tokens[1, 7:] = 0
    types = torch.zeros_like(tokens)
    types[:, 3:] = 1  # a second segment
    seen = {}
    hook = ours.head.register_forward_hook(lambda m, inp, out: seen.__setitem__("hidden", inp[0]))
    with torch.no_grad():
        theirs = hf(input_ids=tokens, attention_mask=(tokens != 0).long(), token_type_ids=types).last_hidden_state
        ours(tokens, pad_id=0, token_type_ids=types)
    hook.remove()
    return max_diff(seen["hidden"], theirs)


@pytest.mark.parametrize("kw", [{}, {"hidden_act": "gelu_new", "layer_norm_eps": 1e-6}])
def test_bert_encoder_outputs_agree(kw):
    hf = tiny_bert(**kw)
    ours = lib.bert_to_lib(hf)
    assert compare_bert(hf, ours) <= TOL
    eps = kw.get("layer_norm_eps", 1e-12)
    assert ours.layers[0].norm1.eps == ours.embed_norm.eps == eps


def test_bert_round_trip_is_the_identity():
    torch.manual_seed(4)
    ours = lib.EncoderOnlyModel(29, d_model=16, n_heads=4, n_layers=2, d_ff=24, max_len=40, activation="gelu",
                                layer_norm_eps=1e-12, scale_embedding=False, type_vocab_size=2,
                                embedding_norm=True).eval()
    hf = lib.lib_to_bert(ours)
    assert same_weights(ours, lib.bert_to_lib(hf))
    assert compare_bert(hf, ours, seed=4) <= TOL


def test_bert_pooler_is_left_out():
    hf = tiny_bert()
    assert any(k.startswith("pooler.") for k in hf.state_dict())
    ours = lib.bert_to_lib(hf)
    assert not any("pooler" in k for k in ours.state_dict())


# ---------------------------------------------------------------------- GPT-2

def gpt2_config(**kw) -> GPT2Config:
    base = dict(vocab_size=31, n_embd=16, n_layer=2, n_head=4, n_positions=40, bos_token_id=None,
                eos_token_id=None)
    return GPT2Config(**{**base, **kw})


def tiny_gpt2(seed: int = 0, **kw) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    return randomise(GPT2LMHeadModel(gpt2_config(**kw)), seed)


def compare_gpt2(hf: GPT2LMHeadModel, ours: lib.DecoderOnlyModel, seed: int = 0) -> dict[str, float]:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, ours.vocab_size, (3, 9), generator=g)
    tokens[0, 6:] = 0  # right padding, id 0
    tokens[2, 8:] = 0
    seen = {}
    hook = ours.head.register_forward_hook(lambda m, inp, out: seen.__setitem__("hidden", inp[0]))
    with torch.no_grad():
        out = hf(input_ids=tokens, attention_mask=(tokens != 0).long(), output_hidden_states=True)
        logits = ours(tokens, pad_id=0)
    hook.remove()
    return {"hidden": max_diff(seen["hidden"], out.hidden_states[-1]), "logits": max_diff(logits, out.logits)}


@pytest.mark.parametrize("kw", [{}, {"activation_function": "gelu", "n_inner": 20, "layer_norm_epsilon": 1e-6}])
def test_gpt2_outputs_agree(kw):
    hf = tiny_gpt2(**kw)
    ours = lib.gpt2_to_lib(hf)
    diffs = compare_gpt2(hf, ours)
    assert max(diffs.values()) <= TOL, diffs
    assert ours.head.weight is ours.embed.weight  # tied, as GPT-2's


def lib_greedy(model: lib.DecoderOnlyModel, prompt: torch.Tensor, steps: int, eos_id: int, pad_id: int):
    """The plainest greedy loop: rerun the whole prefix, take the argmax, pad rows that ended."""
    ids = prompt
    done = torch.zeros(len(prompt), dtype=torch.bool)
    with torch.no_grad():
        for _ in range(steps):
            nxt = model(ids)[:, -1].argmax(dim=-1).masked_fill(done, pad_id)
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            done |= nxt == eos_id
            if done.all():
                break
    return ids


def test_gpt2_greedy_generation_is_identical():
    hf = tiny_gpt2(seed=5)
    ours = lib.gpt2_to_lib(hf)
    prompt = torch.randint(1, 31, (4, 5), generator=torch.Generator().manual_seed(5))
    eos = 7
    config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=12, eos_token_id=eos, pad_token_id=0)
    with torch.no_grad():
        theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)
    mine = lib_greedy(ours, prompt, 12, eos_id=eos, pad_id=0)
    assert torch.equal(theirs, mine)
    ended = (mine[:, 5:] == eos).any(dim=1)
    assert ended.any() and not ended.all(), mine


def test_gpt2_round_trip_is_the_identity():
    torch.manual_seed(6)
    ours = lib.DecoderOnlyModel(31, d_model=16, n_heads=4, n_layers=2, d_ff=24, norm_first=True, max_len=40,
                                activation="gelu_tanh", scale_embedding=False).eval()
    hf = lib.lib_to_gpt2(ours, bos_token_id=None, eos_token_id=None)
    assert hf.transformer.h[0].attn.c_attn.weight.shape == (16, 48)  # Conv1D: (in, out), q k v side by side
    assert same_weights(ours, lib.gpt2_to_lib(hf))
    assert max(compare_gpt2(hf, ours, seed=6).values()) <= TOL


# ------------------------------------------------------------------ bad input

@pytest.fixture
def no_copy(monkeypatch):
    """Fail if any state dict is loaded: the converters must refuse before copying a weight."""
    def refuse(self, *a, **k):
        raise AssertionError("a weight was copied before the config was refused")
    monkeypatch.setattr(torch.nn.Module, "load_state_dict", refuse)


@pytest.mark.parametrize("field, value, extra", [
    ("activation_function", "gelu_fast", {}),
    ("encoder_attention_heads", 3, {"decoder_attention_heads": 3}),
    ("decoder_layers", 3, {}),
    ("decoder_attention_heads", 2, {}),
    ("decoder_ffn_dim", 32, {}),
])
def test_marian_config_lib_cannot_hold(no_copy, field, value, extra):
    state_dict = MarianMTModel(marian_config()).state_dict()
    config = marian_config(**{field: value, **extra})
    with pytest.raises(ValueError, match=field):
        lib.marian_to_lib(state_dict, config=config)


def test_marian_d_model_not_divisible_names_d_model(no_copy):
    config = marian_config()
    config.d_model = 18  # 18 / 4 heads
    with pytest.raises(ValueError, match="d_model=18 is not divisible by encoder_attention_heads"):
        lib.marian_to_lib(MarianMTModel(marian_config()).state_dict(), config=config)


@pytest.mark.parametrize("field, value", [
    ("hidden_act", "quick_gelu"),
    ("is_decoder", True),
    ("add_cross_attention", True),
    ("num_attention_heads", 5),
])
def test_bert_config_lib_cannot_hold(no_copy, field, value):
    state_dict = BertModel(bert_config()).state_dict()
    with pytest.raises(ValueError, match=field):
        lib.bert_to_lib(state_dict, config=bert_config(**{field: value}))


@pytest.mark.parametrize("field, value", [
    ("activation_function", "gelu_fast"),
    ("scale_attn_by_inverse_layer_idx", True),
    ("scale_attn_weights", False),
    ("tie_word_embeddings", False),
    ("add_cross_attention", True),
    ("n_head", 3),
])
def test_gpt2_config_lib_cannot_hold(no_copy, field, value):
    state_dict = GPT2LMHeadModel(gpt2_config()).state_dict()
    with pytest.raises(ValueError, match=field):
        lib.gpt2_to_lib(state_dict, config=gpt2_config(**{field: value}))


def test_wrong_family_or_object(no_copy):
    with pytest.raises(ValueError, match="model_type"):
        lib.marian_to_lib(BertModel(bert_config()).state_dict(), config=bert_config())
    with pytest.raises(ValueError, match="config"):
        lib.gpt2_to_lib(GPT2LMHeadModel(gpt2_config()).state_dict())
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        lib.gpt2_to_lib(BertModel(bert_config()))


def test_missing_and_unexpected_keys_are_named():
    hf = tiny_gpt2()
    sd = dict(hf.state_dict())
    del sd["transformer.h.1.mlp.c_fc.bias"]
    sd["transformer.h.0.attn.rotary.weight"] = torch.zeros(3)
    with pytest.raises(ValueError, match=r"missing keys \['transformer.h.1.mlp.c_fc.bias'\]; "
                                         r"unexpected keys \['transformer.h.0.attn.rotary.weight'\]"):
        lib.gpt2_to_lib(sd, config=hf.config)
    bert = tiny_bert()
    sd = {k: v for k, v in bert.state_dict().items() if k != "embeddings.token_type_embeddings.weight"}
    with pytest.raises(ValueError, match="missing keys.*token_type_embeddings"):
        lib.bert_to_lib(sd, config=bert.config)
    marian = tiny_marian()
    sd = {**marian.state_dict(), "model.decoder.layers.2.fc1.weight": torch.zeros(24, 16)}
    with pytest.raises(ValueError, match=r"unexpected keys \['model.decoder.layers.2.fc1.weight'\]"):
        lib.marian_to_lib(sd, config=marian.config)


def test_a_tensor_of_the_wrong_shape_is_named():
    hf = tiny_gpt2()
    sd = dict(hf.state_dict())
    sd["transformer.h.0.mlp.c_fc.weight"] = sd["transformer.h.0.mlp.c_fc.weight"].t()  # Linear's layout, not Conv1D's
    with pytest.raises(ValueError, match=r"transformer.h.0.mlp.c_fc.weight has shape \(64, 16\)"):
        lib.gpt2_to_lib(sd, config=hf.config)
    marian = tiny_marian()
    sd = dict(marian.state_dict())
    sd["model.encoder.embed_positions.weight"] = torch.zeros(40, 16)  # not Marian's sinusoids
    with pytest.raises(ValueError, match="embed_positions"):
        lib.marian_to_lib(sd, config=marian.config)


def test_lib_models_the_families_cannot_hold():
    paper = lib.Transformer(23, 23, d_model=16, n_heads=4, n_layers=1, d_ff=24, max_len=40)
    with pytest.raises(ValueError, match="positional='sinusoidal_concat'"):
        lib.lib_to_marian(paper, pad_id=PAD, eos_id=EOS)
    pre_ln = lib.Transformer(23, 23, d_model=16, n_heads=4, n_layers=1, d_ff=24, max_len=40, norm_first=True,
                             positional="sinusoidal_concat")
    with pytest.raises(ValueError, match="norm_first"):
        lib.lib_to_marian(pre_ln, pad_id=PAD, eos_id=EOS)
    with pytest.raises(ValueError, match="scale_embedding"):
        lib.lib_to_bert(lib.EncoderOnlyModel(29, d_model=16, n_heads=4, max_len=40))
    with pytest.raises(ValueError, match="type_vocab_size"):
        lib.lib_to_bert(lib.EncoderOnlyModel(29, d_model=16, n_heads=4, max_len=40, scale_embedding=False))
    with pytest.raises(ValueError, match="norm_first"):
        lib.lib_to_gpt2(lib.DecoderOnlyModel(31, d_model=16, n_heads=4, max_len=40))
    gpt = lib.DecoderOnlyModel(31, d_model=16, n_heads=4, max_len=40, norm_first=True, scale_embedding=False)
    with pytest.raises(ValueError, match="n_layer"):
        lib.lib_to_gpt2(gpt, n_layer=5)
    with pytest.raises(TypeError, match="lib.Transformer"):
        lib.lib_to_marian(gpt, pad_id=PAD, eos_id=EOS)


# ------------------------------------------------------- the options lib gained

def test_new_options_default_to_the_paper():
    ffn = lib.PositionwiseFeedForward(8, 16)
    assert ffn.activation == "relu"
    x = torch.randn(2, 3, 8)
    assert torch.equal(ffn(x), ffn.linear2(torch.relu(ffn.linear1(x))))
    c = lib.TransformerConfig()
    assert (c.activation, c.layer_norm_eps, c.scale_embedding, c.output_bias) == ("relu", 1e-5, True, False)
    model = lib.EncoderOnlyModel(29, d_model=16, n_heads=4)
    assert not hasattr(model, "token_type_embed") and not hasattr(model, "embed_norm")


@pytest.mark.parametrize("name, fn", [
    ("gelu", torch.nn.functional.gelu),
    ("gelu_tanh", lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    ("silu", torch.nn.functional.silu),
])
def test_ffn_activations(name, fn):
    ffn = lib.PositionwiseFeedForward(8, 16, activation=name)
    x = torch.randn(2, 3, 8)
    assert torch.equal(ffn(x), ffn.linear2(fn(ffn.linear1(x))))


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="activation"):
        lib.PositionwiseFeedForward(8, 16, activation="tanh")
    with pytest.raises(ValueError, match="activation"):
        lib.Transformer(11, 11, d_model=16, n_heads=4, n_layers=1, d_ff=8, activation="swish")
    with pytest.raises(ValueError, match="layer_norm_eps"):
        lib.EncoderLayer(16, 4, 8, layer_norm_eps=0.0)
    with pytest.raises(ValueError, match="layout"):
        lib.sinusoidal_positional_encoding(4, 8, layout="halves")
    with pytest.raises(ValueError, match="positional"):
        lib.DecoderOnlyModel(31, d_model=16, n_heads=4, positional="rotary")
    model = lib.EncoderOnlyModel(29, d_model=16, n_heads=4)
    with pytest.raises(ValueError, match="type_vocab_size=0"):
        model(torch.ones(1, 3, dtype=torch.long), token_type_ids=torch.zeros(1, 3, dtype=torch.long))
    bert = lib.EncoderOnlyModel(29, d_model=16, n_heads=4, type_vocab_size=2)
    with pytest.raises(ValueError, match="token_type_ids"):
        bert(torch.ones(1, 3, dtype=torch.long), token_type_ids=torch.full((1, 3), 2))


def test_unscaled_embedding_and_output_bias():
    emb = lib.TokenEmbedding(10, 16, scale=False)
    ids = torch.arange(10)[None]
    assert torch.equal(emb(ids), emb.weight[None])
    biased = lib.Transformer(11, 13, d_model=16, n_heads=4, n_layers=1, d_ff=8, output_bias=True)
    plain = lib.Transformer(11, 13, d_model=16, n_heads=4, n_layers=1, d_ff=8)
    assert biased.count_parameters() == plain.count_parameters() + 13
    assert not biased.generator.bias.any()  # starts at zero, as Marian's final_logits_bias
