"""Weight converters between `lib` and Hugging Face's Marian, BERT and GPT-2 models.

Introduced in chapter 7 (the encoder, the decoder and the model families).

Three published models are, layer for layer, the blocks `lib` builds:

    Marian (``MarianMTModel``, the opus-mt translation models)  <->  `lib.Transformer`
    BERT   (``BertModel``, the encoder stack)                     <->  `lib.EncoderOnlyModel`
    GPT-2  (``GPT2LMHeadModel``)                                  <->  `lib.DecoderOnlyModel`

Where a family departs from the 2017 block, `lib`'s models have an option for
it (defaults are the paper's) and the converters only rename and reshape
tensors:

    Marian  post-LN like the paper; FFN activation SiLU ("swish") in opus-mt;
            the sinusoidal table with all sines first, then all cosines
            (``positional="sinusoidal_concat"``); a bias on the logits,
            ``final_logits_bias`` (``output_bias=True``); embeddings × √d_model
            when ``scale_embedding`` (opus-mt: yes).
    BERT    post-LN; GELU; LayerNorm ε = 1e-12; learned positions; token-type
            (segment) embeddings and a LayerNorm on the embedding sum
            (``type_vocab_size``, ``embedding_norm``); no √d_model.
    GPT-2   pre-LN with a final LayerNorm (``norm_first=True``); GELU's tanh
            approximation; learned positions; no √d_model; its ``Conv1D``
            layers store weights as (in, out), the transpose of ``nn.Linear``'s,
            and ``c_attn`` packs W_q, W_k, W_v side by side in one (d, 3d) matrix.

``*_to_lib(source, config=None)`` takes a Hugging Face model, or a state dict
with its config. The config is checked first: a field `lib` cannot represent
(an activation it lacks, a head count that does not divide d_model, encoder and
decoder stacks of different sizes...) raises a ValueError naming the field,
before any weight is copied. Then the state dict's keys are checked: missing
and unexpected keys are named. The returned model is float32 on the CPU, in
the source model's train/eval mode (train mode from a state dict, as any new
module starts).

``lib_to_*(model, ...)`` builds the Hugging Face model from `lib`'s weights;
it needs the ``transformers`` package, imported only then.

Dropout: `lib` has one rate for all its dropout layers; the converters take
Marian's ``dropout``, BERT's ``hidden_dropout_prob`` and GPT-2's ``resid_pdrop``
(eval-mode outputs do not depend on it). BERT's pooler (a layer on the first
token's vector for sentence classification) has no counterpart in `lib` and
is not converted.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from lib.model.families import DecoderOnlyModel, EncoderOnlyModel
from lib.model.layers import LearnedPositionalEmbedding, sinusoidal_positional_encoding
from lib.model.transformer import Transformer

__all__ = ["marian_to_lib", "lib_to_marian", "bert_to_lib", "lib_to_bert", "gpt2_to_lib", "lib_to_gpt2"]

# Hugging Face's activation names -> lib's, and back.
_FROM_HF_ACTIVATION = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "silu": "silu",
    "swish": "silu",
}
_TO_HF_ACTIVATION = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "swish"}


# ---------------------------------------------------------------- the mapping
#
# An entry ties lib keys to Hugging Face keys:
#   (lib_keys, hf_keys, kind)
# hf_keys are alternatives holding the same tensor (tied weights appear under
# several names; a saved checkpoint may keep only one): reading takes the first
# present, writing fills all that exist. ``kind`` says how the tensor changes:
#   "same"      identical
#   "row"       Marian's final_logits_bias (1, V) <-> a Linear bias (V,)
#   "conv1d"    GPT-2's Conv1D weight (in, out) <-> nn.Linear's (out, in): transpose
#   "qkv"       GPT-2's c_attn weight (d, 3d) <-> three (d, d) Linear weights, W_q W_k W_v
#   "qkv_bias"  GPT-2's c_attn bias (3d,) <-> three (d,) biases


def _to_lib(kind: str, t: torch.Tensor, hf_key: str) -> list[torch.Tensor]:
    if kind == "same":
        return [t]
    if kind == "row":
        return [t.reshape(-1)]
    if kind == "conv1d":
        return [t.t()]
    if kind in ("qkv", "qkv_bias"):
        if t.shape[-1] % 3:
            raise ValueError(f"{hf_key} has shape {tuple(t.shape)}: its last size should be 3 d_model (q, k, v)")
        parts = t.split(t.shape[-1] // 3, dim=-1)
        return [p.t() for p in parts] if kind == "qkv" else list(parts)
    raise AssertionError(kind)


def _to_hf(kind: str, ts: list[torch.Tensor]) -> torch.Tensor:
    if kind == "same":
        return ts[0]
    if kind == "row":
        return ts[0][None]
    if kind == "conv1d":
        return ts[0].t()
    if kind == "qkv":
        return torch.cat([w.t() for w in ts], dim=1)
    if kind == "qkv_bias":
        return torch.cat(ts)
    raise AssertionError(kind)


def _linear(lib_prefix: str, hf_prefix: str, kind: str = "same") -> list[tuple]:
    return [((f"{lib_prefix}.weight",), (f"{hf_prefix}.weight",), kind),
            ((f"{lib_prefix}.bias",), (f"{hf_prefix}.bias",), "same")]


def _norm(lib_prefix: str, hf_prefix: str) -> list[tuple]:
    return _linear(lib_prefix, hf_prefix)


def _check_keys(family: str, state_dict: Mapping, entries: list[tuple], ignored: set[str]) -> None:
    """Every entry needs one of its keys; every key must belong to an entry (or be ignorable)."""
    known = {k for _, hf_keys, _ in entries for k in hf_keys}
    missing = [hf_keys[0] for _, hf_keys, _ in entries if not any(k in state_dict for k in hf_keys)]
    unexpected = [k for k in state_dict if k not in known and k not in ignored]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys {missing}")
        if unexpected:
            parts.append(f"unexpected keys {unexpected}")
        raise ValueError(f"the {family} state dict does not fit the lib model: " + "; ".join(parts))


def _hf_to_lib_state(family: str, state_dict: Mapping, entries: list[tuple], lib_model: nn.Module) -> dict:
    """The lib state dict, every tensor's shape checked; nothing is copied yet."""
    lib_shapes = {k: v.shape for k, v in lib_model.state_dict().items()}
    out = {}
    for lib_keys, hf_keys, kind in entries:
        hf_key = next(k for k in hf_keys if k in state_dict)
        t = state_dict[hf_key]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{hf_key} must be a tensor, got {type(t).__name__}")
        for lib_key, value in zip(lib_keys, _to_lib(kind, t.detach(), hf_key)):
            if value.shape != lib_shapes[lib_key]:
                raise ValueError(
                    f"{hf_key} has shape {tuple(t.shape)}, which does not fit lib's {lib_key} "
                    f"of shape {tuple(lib_shapes[lib_key])} (sizes taken from the {family} config)"
                )
            out[lib_key] = value
    missing = set(lib_shapes) - set(out)
    assert not missing, f"converter bug: no source for {sorted(missing)}"
    return out


def _load_into_hf(hf_model: nn.Module, lib_model: nn.Module, entries: list[tuple], ignored: set[str]) -> None:
    lib_state = lib_model.state_dict()
    hf_state = hf_model.state_dict()
    new = {}
    for lib_keys, hf_keys, kind in entries:
        value = _to_hf(kind, [lib_state[k].detach() for k in lib_keys])
        for k in hf_keys:
            if k in hf_state and k not in new:
                new[k] = value
    uncovered = set(hf_state) - set(new) - ignored
    assert not uncovered, f"converter bug: nothing for {sorted(uncovered)}"
    for k in set(hf_state) - set(new):  # ignorable keys (fixed tables, buffers) keep Hugging Face's values
        new[k] = hf_state[k]
    hf_model.load_state_dict(new, strict=True)


def _source(source, config, family: str, classes: tuple[str, ...], model_type: str):
    """(config, state_dict, training) from a Hugging Face model or a state dict + config."""
    if isinstance(source, Mapping):
        if config is None:
            raise ValueError(f"a {family} state dict needs its config: {family.lower()}_to_lib(state_dict, config=...)")
        state_dict, training = source, True
    else:
        name = type(source).__name__
        if name not in classes or not hasattr(source, "config"):
            raise TypeError(f"expected a Hugging Face {' or '.join(classes)} (or a state dict and config), got {name}")
        config = config if config is not None else source.config
        state_dict, training = source.state_dict(), source.training
    found = getattr(config, "model_type", None)
    if found != model_type:
        raise ValueError(f"config.model_type must be {model_type!r} for a {family} model, got {found!r}")
    return config, state_dict, training


def _field(config, name: str):
    if not hasattr(config, name):
        raise ValueError(f"{type(config).__name__} has no field {name!r}")
    return getattr(config, name)


def _activation(config, name: str) -> str:
    value = _field(config, name)
    if value not in _FROM_HF_ACTIVATION:
        raise ValueError(
            f"{type(config).__name__}.{name}={value!r}: lib's feed-forward network has "
            f"{sorted(set(_FROM_HF_ACTIVATION.values()))}, which cover {sorted(_FROM_HF_ACTIVATION)}"
        )
    return _FROM_HF_ACTIVATION[value]


def _divisible(config, d_name: str, h_name: str) -> None:
    d, h = _field(config, d_name), _field(config, h_name)
    if not isinstance(d, int) or not isinstance(h, int) or h <= 0 or d % h:
        raise ValueError(
            f"{type(config).__name__}.{d_name}={d!r} is not divisible by {h_name}={h!r}: "
            "lib splits d_model evenly across the heads"
        )


def _same(config, a: str, b: str, what: str) -> None:
    if _field(config, a) != _field(config, b):
        raise ValueError(
            f"{type(config).__name__}.{b}={_field(config, b)!r} differs from {a}={_field(config, a)!r}: "
            f"lib.Transformer has one {what} for the encoder and the decoder"
        )


def _refuse(config, name: str, allowed, why: str) -> None:
    """Fields some checkpoints carry: only the value lib computes is accepted."""
    if hasattr(config, name) and getattr(config, name) != allowed:
        raise ValueError(f"{type(config).__name__}.{name}={getattr(config, name)!r}: {why}")


def _overrides(kwargs: dict, fixed: dict) -> dict:
    clash = sorted(set(kwargs) & set(fixed))
    if clash:
        raise ValueError(f"{clash} are set from the lib model and cannot be overridden")
    return {**fixed, **kwargs}


def _require(name: str, obj, cls) -> None:
    if not isinstance(obj, cls):
        raise TypeError(f"{name} must be a lib.{cls.__name__}, got {type(obj).__name__}")


def _finish(lib_model: nn.Module, state: dict, training: bool) -> nn.Module:
    lib_model.load_state_dict(state, strict=True)
    return lib_model.train(training)


# --------------------------------------------------------------------- Marian

_MARIAN_POSITIONS = {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}


def _marian_entries(n_layers: int, share_enc_dec: bool, tie_output: bool) -> list[tuple]:
    shared = ("model.shared.weight",) if share_enc_dec else ()
    entries = [
        (("src_embed.embedding.weight",), ("model.encoder.embed_tokens.weight", *shared), "same"),
        (("tgt_embed.embedding.weight",), ("model.decoder.embed_tokens.weight", *shared), "same"),
        (("generator.weight",), ("lm_head.weight",) + (("model.decoder.embed_tokens.weight", *shared)
                                                        if tie_output else ()), "same"),
        (("generator.bias",), ("final_logits_bias",), "row"),
    ]
    for i in range(n_layers):
        h, lb = f"model.encoder.layers.{i}", f"encoder_layers.{i}"
        for hp, lp in (("q_proj", "w_q"), ("k_proj", "w_k"), ("v_proj", "w_v"), ("out_proj", "w_o")):
            entries += _linear(f"{lb}.self_attn.{lp}", f"{h}.self_attn.{hp}")
        entries += _norm(f"{lb}.norm1", f"{h}.self_attn_layer_norm")
        entries += _linear(f"{lb}.feed_forward.linear1", f"{h}.fc1")
        entries += _linear(f"{lb}.feed_forward.linear2", f"{h}.fc2")
        entries += _norm(f"{lb}.norm2", f"{h}.final_layer_norm")
    for i in range(n_layers):
        h, lb = f"model.decoder.layers.{i}", f"decoder_layers.{i}"
        for ha, la in (("self_attn", "self_attn"), ("encoder_attn", "cross_attn")):
            for hp, lp in (("q_proj", "w_q"), ("k_proj", "w_k"), ("v_proj", "w_v"), ("out_proj", "w_o")):
                entries += _linear(f"{lb}.{la}.{lp}", f"{h}.{ha}.{hp}")
        entries += _norm(f"{lb}.norm1", f"{h}.self_attn_layer_norm")
        entries += _norm(f"{lb}.norm2", f"{h}.encoder_attn_layer_norm")
        entries += _linear(f"{lb}.feed_forward.linear1", f"{h}.fc1")
        entries += _linear(f"{lb}.feed_forward.linear2", f"{h}.fc2")
        entries += _norm(f"{lb}.norm3", f"{h}.final_layer_norm")
    return entries


def _marian_lib_kwargs(config) -> dict:
    """The `lib.Transformer` arguments for a Marian config (ValueError naming a field lib cannot hold)."""
    activation = _activation(config, "activation_function")
    _divisible(config, "d_model", "encoder_attention_heads")
    _same(config, "encoder_layers", "decoder_layers", "number of layers")
    _same(config, "encoder_attention_heads", "decoder_attention_heads", "number of heads")
    _same(config, "encoder_ffn_dim", "decoder_ffn_dim", "feed-forward width d_ff")
    if _field(config, "d_model") % 2:
        raise ValueError(
            f"MarianConfig.d_model={config.d_model} is odd: lib's sinusoidal table pairs sines with cosines"
        )
    _refuse(config, "normalize_before", False, "lib's Marian is post-LN, as Marian is")
    _refuse(config, "normalize_embedding", False, "lib has no LayerNorm on Marian's embeddings")
    _refuse(config, "add_final_layer_norm", False, "lib's post-LN Transformer has no final LayerNorm")
    _refuse(config, "static_position_embeddings", True, "lib holds Marian's fixed sinusoidal positions only")
    share_enc_dec = bool(_field(config, "share_encoder_decoder_embeddings"))
    tie_output = bool(_field(config, "tie_word_embeddings"))
    src_vocab = _field(config, "vocab_size")
    tgt_vocab = src_vocab if share_enc_dec else (_field(config, "decoder_vocab_size") or src_vocab)
    return dict(
        src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, d_model=config.d_model,
        n_heads=config.encoder_attention_heads, n_layers=config.encoder_layers, d_ff=config.encoder_ffn_dim,
        dropout=float(_field(config, "dropout")), norm_first=False, share_embeddings=share_enc_dec and tie_output,
        max_len=_field(config, "max_position_embeddings"), positional="sinusoidal_concat",
        activation=activation, layer_norm_eps=1e-5, scale_embedding=bool(_field(config, "scale_embedding")),
        output_bias=True,
    )


def marian_to_lib(source, config=None) -> Transformer:
    """A `lib.Transformer` computing what a Hugging Face ``MarianMTModel`` computes.

    ``source`` is a ``MarianMTModel`` (e.g. ``MarianMTModel.from_pretrained(
    "Helsinki-NLP/opus-mt-en-de")``) or its state dict, with ``config`` (a
    ``MarianConfig``) then required. The lib model has Marian's options:
    ``positional="sinusoidal_concat"``, ``output_bias=True`` (Marian's
    ``final_logits_bias``), its activation and embedding scale, and ties the
    source, target and output matrices when Marian ties all three. Marian's
    source and target share one pad id, which is also the decoder's start token:
    decode with ``bos_id=config.decoder_start_token_id``,
    ``eos_id=config.eos_token_id``, ``pad_id=config.pad_token_id``.
    """
    config, state_dict, training = _source(source, config, "Marian", ("MarianMTModel",), "marian")
    kwargs = _marian_lib_kwargs(config)
    share_enc_dec = bool(config.share_encoder_decoder_embeddings)
    entries = _marian_entries(kwargs["n_layers"], share_enc_dec, bool(config.tie_word_embeddings))
    _check_keys("Marian", state_dict, entries, _MARIAN_POSITIONS)
    lib_model = Transformer(**kwargs)
    for key in sorted(_MARIAN_POSITIONS & set(state_dict)):  # fixed tables: must be the ones lib computes
        table = state_dict[key]
        expected = sinusoidal_positional_encoding(kwargs["max_len"], kwargs["d_model"], layout="concat")
        if table.shape != expected.shape or not torch.allclose(table.float().cpu(), expected, atol=1e-6):
            raise ValueError(f"{key} is not the sines-then-cosines table of Marian that lib computes")
    return _finish(lib_model, _hf_to_lib_state("Marian", state_dict, entries, lib_model), training)


def lib_to_marian(model: Transformer, *, pad_id: int, eos_id: int, decoder_start_id: int | None = None,
                  **config_kwargs):
    """A Hugging Face ``MarianMTModel`` with the weights of a `lib.Transformer`.

    The lib model must be one Marian can hold: post-LN (``norm_first=False``)
    and ``positional="sinusoidal_concat"`` (Marian's table). Without
    ``output_bias`` the ``final_logits_bias`` is zero. ``pad_id``, ``eos_id``
    and ``decoder_start_id`` (default: ``pad_id``, Marian's convention) are the
    ids `lib`'s decoding functions take as ``pad_id``, ``eos_id`` and ``bos_id``;
    other ``MarianConfig`` fields can be passed as keywords.
    """
    from transformers import MarianConfig, MarianMTModel

    _require("model", model, Transformer)
    c = model.config
    if c.norm_first:
        raise ValueError("model.config.norm_first=True: Marian is post-LN (norm_first=False)")
    if c.positional != "sinusoidal_concat":
        raise ValueError(
            f"model.config.positional={c.positional!r}: Marian adds the sinusoidal table with all sines first, "
            "then all cosines; build the lib model with positional='sinusoidal_concat'"
        )
    if c.layer_norm_eps != 1e-5:
        raise ValueError(f"model.config.layer_norm_eps={c.layer_norm_eps}: Marian's LayerNorms use 1e-5")
    share = c.share_embeddings
    hf_config = MarianConfig(**_overrides(config_kwargs, dict(
        vocab_size=c.src_vocab_size, decoder_vocab_size=c.tgt_vocab_size, d_model=c.d_model,
        encoder_layers=c.n_layers, decoder_layers=c.n_layers, encoder_attention_heads=c.n_heads,
        decoder_attention_heads=c.n_heads, encoder_ffn_dim=c.d_ff, decoder_ffn_dim=c.d_ff,
        activation_function=_TO_HF_ACTIVATION[c.activation], dropout=c.dropout, attention_dropout=c.dropout,
        activation_dropout=c.dropout, max_position_embeddings=c.max_len, scale_embedding=c.scale_embedding,
        share_encoder_decoder_embeddings=share, tie_word_embeddings=share,
        pad_token_id=pad_id, eos_token_id=eos_id, forced_eos_token_id=eos_id,
        decoder_start_token_id=pad_id if decoder_start_id is None else decoder_start_id,
    )))
    hf_model = MarianMTModel(hf_config)
    entries = _marian_entries(c.n_layers, share, share)
    if not c.output_bias:
        entries = [e for e in entries if e[0] != ("generator.bias",)]
    with torch.no_grad():
        ignored = _MARIAN_POSITIONS | (set() if c.output_bias else {"final_logits_bias"})
        _load_into_hf(hf_model, model, entries, ignored)
        if not c.output_bias:
            hf_model.final_logits_bias.zero_()
    return hf_model.train(model.training)


# ----------------------------------------------------------------------- BERT

_BERT_IGNORED_PREFIXES = ("pooler.",)
_BERT_BUFFERS = {"embeddings.position_ids", "embeddings.token_type_ids"}


def _bert_entries(n_layers: int) -> list[tuple]:
    entries = [
        (("embed.embedding.weight",), ("embeddings.word_embeddings.weight",), "same"),
        (("head.weight",), ("embeddings.word_embeddings.weight",), "same"),  # lib's head is tied to it
        (("pos.embedding.weight",), ("embeddings.position_embeddings.weight",), "same"),
        (("token_type_embed.weight",), ("embeddings.token_type_embeddings.weight",), "same"),
        *_norm("embed_norm", "embeddings.LayerNorm"),
    ]
    for i in range(n_layers):
        h, lb = f"encoder.layer.{i}", f"layers.{i}"
        for hp, lp in (("query", "w_q"), ("key", "w_k"), ("value", "w_v")):
            entries += _linear(f"{lb}.self_attn.{lp}", f"{h}.attention.self.{hp}")
        entries += _linear(f"{lb}.self_attn.w_o", f"{h}.attention.output.dense")
        entries += _norm(f"{lb}.norm1", f"{h}.attention.output.LayerNorm")
        entries += _linear(f"{lb}.feed_forward.linear1", f"{h}.intermediate.dense")
        entries += _linear(f"{lb}.feed_forward.linear2", f"{h}.output.dense")
        entries += _norm(f"{lb}.norm2", f"{h}.output.LayerNorm")
    return entries


def bert_to_lib(source, config=None) -> EncoderOnlyModel:
    """A `lib.EncoderOnlyModel` computing BERT's encoder (``BertModel``'s ``last_hidden_state``).

    ``source`` is a ``BertModel`` or its state dict with ``config`` (a ``BertConfig``).
    The lib model has BERT's options: GELU, its LayerNorm ε, no √d_model, token-type
    embeddings and the embedding LayerNorm. Its hidden states are the input of its
    (tied) vocabulary head; BERT's pooler is not converted, nor is the prediction head
    of ``BertForMaskedLM`` (dense, GELU, LayerNorm, bias before the tied matrix), so
    the lib model's logits are not BERT's masked-token predictions.
    """
    config, state_dict, training = _source(source, config, "BERT", ("BertModel",), "bert")
    activation = _activation(config, "hidden_act")
    _divisible(config, "hidden_size", "num_attention_heads")
    _refuse(config, "is_decoder", False, "lib's encoder-only model is bidirectional")
    _refuse(config, "add_cross_attention", False, "lib's encoder-only model has no cross-attention")
    _refuse(config, "position_embedding_type", "absolute", "lib adds learned absolute positions only")
    lib_model = EncoderOnlyModel(
        _field(config, "vocab_size"), d_model=config.hidden_size, n_heads=config.num_attention_heads,
        n_layers=_field(config, "num_hidden_layers"), d_ff=_field(config, "intermediate_size"),
        dropout=float(_field(config, "hidden_dropout_prob")), norm_first=False,
        max_len=_field(config, "max_position_embeddings"), positional="learned", activation=activation,
        layer_norm_eps=float(_field(config, "layer_norm_eps")), scale_embedding=False,
        type_vocab_size=_field(config, "type_vocab_size"), embedding_norm=True,
    )
    entries = _bert_entries(config.num_hidden_layers)
    ignored = _BERT_BUFFERS | {k for k in state_dict if k.startswith(_BERT_IGNORED_PREFIXES)}
    _check_keys("BERT", state_dict, entries, ignored)
    return _finish(lib_model, _hf_to_lib_state("BERT", state_dict, entries, lib_model), training)


def _family_sizes(model: nn.Module) -> dict:
    """What a lib encoder-only or decoder-only model was built with, read off its modules."""
    layer = model.layers[0]
    return dict(
        n_layers=len(model.layers), n_heads=layer.self_attn.n_heads, d_ff=layer.feed_forward.d_ff,
        activation=layer.feed_forward.activation, eps=layer.norm1.eps, norm_first=layer.norm_first,
        dropout=layer.dropout1.p, learned=isinstance(model.pos, LearnedPositionalEmbedding),
        max_len=model.pos.max_len, scale=model.embed.scale,
    )


def lib_to_bert(model: EncoderOnlyModel, **config_kwargs):
    """A Hugging Face ``BertModel`` (no pooler) with the weights of a `lib.EncoderOnlyModel`.

    The lib model must have BERT's structure: post-LN, learned positions,
    ``scale_embedding=False``, ``type_vocab_size`` >= 1 and ``embedding_norm=True``.
    Other ``BertConfig`` fields (e.g. ``pad_token_id``) can be passed as keywords.
    """
    from transformers import BertConfig, BertModel

    _require("model", model, EncoderOnlyModel)
    s = _family_sizes(model)
    for ok, field, why in (
        (not s["norm_first"], "norm_first", "BERT is post-LN (norm_first=False)"),
        (s["learned"], "positional", "BERT learns its positions (positional='learned')"),
        (not s["scale"], "scale_embedding",
         "BERT does not multiply embeddings by √d_model (scale_embedding=False)"),
        (hasattr(model, "token_type_embed"), "type_vocab_size",
         "BERT has token-type embeddings (type_vocab_size >= 1)"),
        (hasattr(model, "embed_norm"), "embedding_norm",
         "BERT normalises the embedding sum (embedding_norm=True)"),
    ):
        if not ok:
            raise ValueError(f"the lib model's {field} does not fit BERT: {why}")
    hf_config = BertConfig(**_overrides(config_kwargs, dict(
        vocab_size=model.vocab_size, hidden_size=model.d_model, num_hidden_layers=s["n_layers"],
        num_attention_heads=s["n_heads"], intermediate_size=s["d_ff"],
        hidden_act=_TO_HF_ACTIVATION[s["activation"]], hidden_dropout_prob=s["dropout"],
        attention_probs_dropout_prob=s["dropout"], max_position_embeddings=s["max_len"],
        type_vocab_size=model.token_type_embed.num_embeddings, layer_norm_eps=s["eps"],
    )))
    hf_model = BertModel(hf_config, add_pooling_layer=False)
    with torch.no_grad():
        _load_into_hf(hf_model, model, _bert_entries(s["n_layers"]), _BERT_BUFFERS)
    return hf_model.train(model.training)


# ---------------------------------------------------------------------- GPT-2

def _gpt2_entries(n_layers: int) -> list[tuple]:
    entries = [
        (("embed.embedding.weight",), ("transformer.wte.weight",), "same"),
        (("head.weight",), ("lm_head.weight", "transformer.wte.weight"), "same"),  # tied in both
        (("pos.embedding.weight",), ("transformer.wpe.weight",), "same"),
        *_norm("final_norm", "transformer.ln_f"),
    ]
    for i in range(n_layers):
        h, lb = f"transformer.h.{i}", f"layers.{i}"
        qkv = tuple(f"{lb}.self_attn.{p}" for p in ("w_q", "w_k", "w_v"))
        entries += [
            (tuple(f"{k}.weight" for k in qkv), (f"{h}.attn.c_attn.weight",), "qkv"),
            (tuple(f"{k}.bias" for k in qkv), (f"{h}.attn.c_attn.bias",), "qkv_bias"),
        ]
        entries += _linear(f"{lb}.self_attn.w_o", f"{h}.attn.c_proj", "conv1d")
        entries += _norm(f"{lb}.norm1", f"{h}.ln_1")
        entries += _linear(f"{lb}.feed_forward.linear1", f"{h}.mlp.c_fc", "conv1d")
        entries += _linear(f"{lb}.feed_forward.linear2", f"{h}.mlp.c_proj", "conv1d")
        entries += _norm(f"{lb}.norm2", f"{h}.ln_2")
    return entries


def _gpt2_buffers(state_dict: Mapping) -> set[str]:
    """Older GPT-2 checkpoints store the causal mask as buffers ``attn.bias``, ``attn.masked_bias``."""
    return {k for k in state_dict if k.endswith((".attn.bias", ".attn.masked_bias"))}


def gpt2_to_lib(source, config=None) -> DecoderOnlyModel:
    """A `lib.DecoderOnlyModel` computing what a Hugging Face ``GPT2LMHeadModel`` computes.

    ``source`` is a ``GPT2LMHeadModel`` or its state dict with ``config`` (a ``GPT2Config``).
    The lib model is pre-LN with a final LayerNorm (``norm_first=True``), GELU's tanh
    form, no √d_model, learned positions, and the output head tied to the embedding.
    """
    config, state_dict, training = _source(source, config, "GPT-2", ("GPT2LMHeadModel",), "gpt2")
    activation = _activation(config, "activation_function")
    _divisible(config, "n_embd", "n_head")
    _refuse(config, "add_cross_attention", False, "lib's decoder-only model has no cross-attention")
    _refuse(config, "scale_attn_weights", True, "lib always divides the scores by √d_k")
    _refuse(config, "scale_attn_by_inverse_layer_idx", False, "lib scales every layer's scores alike")
    _refuse(config, "tie_word_embeddings", True, "lib's decoder-only head is tied to the token embedding")
    d_model = config.n_embd
    lib_model = DecoderOnlyModel(
        _field(config, "vocab_size"), d_model=d_model, n_heads=config.n_head, n_layers=_field(config, "n_layer"),
        d_ff=_field(config, "n_inner") or 4 * d_model, dropout=float(_field(config, "resid_pdrop")),
        norm_first=True, max_len=_field(config, "n_positions"), positional="learned", activation=activation,
        layer_norm_eps=float(_field(config, "layer_norm_epsilon")), scale_embedding=False,
    )
    entries = _gpt2_entries(config.n_layer)
    _check_keys("GPT-2", state_dict, entries, _gpt2_buffers(state_dict))
    return _finish(lib_model, _hf_to_lib_state("GPT-2", state_dict, entries, lib_model), training)


def lib_to_gpt2(model: DecoderOnlyModel, **config_kwargs):
    """A Hugging Face ``GPT2LMHeadModel`` with the weights of a `lib.DecoderOnlyModel`.

    The lib model must have GPT-2's structure: pre-LN (``norm_first=True``), learned
    positions, ``scale_embedding=False``. Other ``GPT2Config`` fields (e.g.
    ``bos_token_id``, ``eos_token_id``) can be passed as keywords.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    _require("model", model, DecoderOnlyModel)
    s = _family_sizes(model)
    for ok, field, why in (
        (s["norm_first"], "norm_first", "GPT-2 is pre-LN with a final LayerNorm (norm_first=True)"),
        (s["learned"], "positional", "GPT-2 learns its positions (positional='learned')"),
        (not s["scale"], "scale_embedding", "GPT-2 does not multiply embeddings by √d_model (scale_embedding=False)"),
    ):
        if not ok:
            raise ValueError(f"the lib model's {field} does not fit GPT-2: {why}")
    hf_config = GPT2Config(**_overrides(config_kwargs, dict(
        vocab_size=model.vocab_size, n_embd=model.d_model, n_layer=s["n_layers"], n_head=s["n_heads"],
        n_inner=s["d_ff"], n_positions=s["max_len"], activation_function=_TO_HF_ACTIVATION[s["activation"]],
        layer_norm_epsilon=s["eps"], resid_pdrop=s["dropout"], embd_pdrop=s["dropout"], attn_pdrop=s["dropout"],
        tie_word_embeddings=True,
    )))
    hf_model = GPT2LMHeadModel(hf_config)
    with torch.no_grad():
        _load_into_hf(hf_model, model, _gpt2_entries(s["n_layers"]), _gpt2_buffers(hf_model.state_dict()))
    return hf_model.train(model.training)
