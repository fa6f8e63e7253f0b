"""lib runs where the model is: the meta device (shapes without values), CUDA when present,
and the device-following helpers (make_batch, Batch.to, fit, the decoders)."""


import pytest
import torch
from torch import nn

import lib
from lib import DATE_VOCAB

META = torch.device("meta")
SIZES = dict(d_model=8, n_heads=2, d_ff=16, dropout=0.1)


def _on_meta(build):
    with torch.device("meta"):
        return build()


@pytest.mark.parametrize("training", [False, True])
def test_every_module_runs_on_meta_tensors(training):
    """A forward pass of each module on the meta device: shape checks only, no value read."""
    B, m, n, d = 2, 3, 5, SIZES["d_model"]
    x, memory = torch.randn(B, m, d, device=META), torch.randn(B, n, d, device=META)
    causal = lib.causal_mask(m, device=META)
    src = torch.zeros(B, n, dtype=torch.long, device=META)
    tgt = torch.zeros(B, m, dtype=torch.long, device=META)
    cases = [
        (lambda: lib.MultiHeadAttention(d, 2, dropout=0.1), lambda mod: mod(x, memory, memory), (B, m, d)),
        (lambda: lib.PositionwiseFeedForward(d, 16, dropout=0.1), lambda mod: mod(x), (B, m, d)),
        (lambda: lib.SinusoidalPositionalEncoding(d, max_len=16), lambda mod: mod(x), (B, m, d)),
        (lambda: lib.LearnedPositionalEmbedding(d, max_len=16), lambda mod: mod(x), (B, m, d)),
        (lambda: lib.TokenEmbedding(11, d), lambda mod: mod(tgt), (B, m, d)),
        (lambda: lib.EncoderLayer(d, 2, 16), lambda mod: mod(memory), (B, n, d)),
        (lambda: lib.DecoderLayer(d, 2, 16), lambda mod: mod(x, memory, tgt_mask=causal), (B, m, d)),
        (lambda: lib.Transformer(11, 13, n_layers=1, max_len=16, **SIZES),
         lambda mod: mod(src, tgt, src_mask=lib.padding_mask(src, 0), tgt_mask=causal), (B, m, 13)),
        (lambda: lib.EncoderOnlyModel(11, n_layers=1, max_len=16, **SIZES), lambda mod: mod(src, pad_id=0),
         (B, n, 11)),
        (lambda: lib.DecoderOnlyModel(11, n_layers=1, max_len=16, **SIZES), lambda mod: mod(src, pad_id=0),
         (B, n, 11)),
    ]
    for build, run, expected in cases:
        module = _on_meta(build).train(training)
        out = run(module)
        assert out.device == META and tuple(out.shape) == expected, type(module).__name__
    out, weights = lib.scaled_dot_product_attention(x, memory, memory, torch.ones(m, n, dtype=torch.bool, device=META))
    assert out.shape == (B, m, d) and weights.shape == (B, m, n) and out.device == META
    logits = torch.randn(B, m, 13, device=META)
    assert lib.label_smoothed_nll(logits, tgt, 0.1, ignore_index=0).device == META


def test_make_batch_and_batch_to():
    pairs = [("2019-03-07", "March 7, 2019"), ("2001-12-25", "December 25, 2001")]
    batch = lib.make_batch(pairs, DATE_VOCAB)
    assert batch.device == torch.device("cpu") and batch.pad_id == DATE_VOCAB.pad_id
    assert batch.to("cpu") is batch
    on_meta = lib.make_batch(pairs, DATE_VOCAB, device="meta")
    for name in ("src", "tgt_in", "tgt_out", "src_mask", "tgt_mask"):
        assert getattr(on_meta, name).device == META
        assert getattr(on_meta, name).shape == getattr(batch, name).shape
    assert on_meta.pad_id == batch.pad_id


def test_n_tokens_uses_the_vocabularys_pad_id():
    # A vocabulary whose PAD is not 0: the old n_tokens counted `tgt_out != 0`.
    class ShiftedVocab(lib.CharVocab):
        def __init__(self, characters):
            super().__init__(characters)
            self.itos = [self.itos[1], self.itos[2], self.itos[0], *self.itos[3:]]  # BOS, EOS, PAD, ...
            self.stoi = {s: i for i, s in enumerate(self.itos)}
            self.bos_id, self.eos_id, self.pad_id = 0, 1, 2

    vocab = ShiftedVocab("ab")
    batch = lib.make_batch([("a", "ab"), ("b", "abba")], vocab)
    assert batch.pad_id == 2
    assert batch.n_tokens == (2 + 1) + (4 + 1)  # target characters + EOS, PAD excluded
    assert int((batch.tgt_out == vocab.pad_id).sum()) == 2


def test_init_picks_embeddings_by_module_type():
    # A sub-module whose *name* contains "embed" but which is a Linear gets Xavier,
    # not the embeddings' N(0, 1/d_model); embedding tables get N(0, 1/d_model).
    class WithExtras(lib.Transformer):
        def __init__(self):
            nn.Module.__init__(self)  # build the parts ourselves, then reuse lib's initialisation
            self.embedder_proj = nn.Linear(64, 64)
            self.table = nn.Embedding(5000, 64)

    torch.manual_seed(0)
    model = WithExtras()
    from lib.model.transformer import _init_parameters

    _init_parameters(model, 64)
    xavier_bound = (6 / (64 + 64)) ** 0.5
    assert float(model.embedder_proj.weight.detach().abs().max()) <= xavier_bound
    assert abs(float(model.table.weight.detach().std()) - 64**-0.5) < 0.005
    # lib.Transformer's learned positions are nn.Embedding tables: N(0, 1/d_model), documented
    torch.manual_seed(0)
    t = lib.Transformer(11, 11, d_model=64, n_heads=2, n_layers=1, d_ff=16, positional="learned", max_len=2000)
    assert abs(float(t.src_pos.embedding.weight.detach().std()) - 64**-0.5) < 0.005


def test_transformer_config_is_built_by_keyword():
    model = lib.Transformer(11, 13, d_model=8, n_heads=2, n_layers=3, d_ff=16, dropout=0.2, norm_first=True,
                            max_len=40, positional="learned")
    c = model.config
    assert (c.src_vocab_size, c.tgt_vocab_size, c.d_model, c.n_heads, c.n_layers, c.d_ff) == (11, 13, 8, 2, 3, 16)
    assert (c.dropout, c.norm_first, c.share_embeddings, c.max_len, c.positional) == (0.2, True, False, 40, "learned")
    rebuilt = c.build()
    assert rebuilt.config == c


def test_masks_are_keyword_only():
    model = lib.Transformer(11, 11, n_layers=1, max_len=16, **SIZES)
    src, tgt = torch.ones(1, 4, dtype=torch.long), torch.ones(1, 3, dtype=torch.long)
    mask = lib.padding_mask(src, 0)
    with pytest.raises(TypeError):
        model(src, tgt, mask, lib.causal_mask(3))
    with pytest.raises(TypeError):
        model.decode(tgt, model.encode(src), mask, lib.causal_mask(3))
    with pytest.raises(TypeError):
        model.encode(src, mask)
    with pytest.raises(TypeError):
        lib.DecoderLayer(8, 2, 16)(torch.randn(1, 3, 8), torch.randn(1, 4, 8), lib.causal_mask(3), mask)


def test_label_smoothed_nll_keyword_is_label_smoothing():
    logits, target = torch.randn(3, 5), torch.tensor([1, 2, 3])
    torch.testing.assert_close(
        lib.label_smoothed_nll(logits, target, label_smoothing=0.2), lib.label_smoothed_nll(logits, target, 0.2)
    )


def test_value_checks_are_not_repeated_inside_the_model(monkeypatch):
    # Token ids are read (a device->host sync) once per public call, not once per layer or twice per forward.
    import lib._checks as checks
    import lib.model.families as families
    import lib.model.layers as layers
    import lib.model.transformer as transformer

    calls = []
    original = checks.require_token_ids

    def counting(name, ids, vocab_size):
        calls.append(name)
        return original(name, ids, vocab_size)

    for module in (transformer, layers, families):
        monkeypatch.setattr(module, "require_token_ids", counting)
    model = lib.Transformer(11, 11, n_layers=2, max_len=16, **SIZES)
    src, tgt = torch.ones(2, 4, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)
    model(src, tgt)
    assert calls == ["src", "tgt"]
    calls.clear()
    lib.DecoderOnlyModel(11, n_layers=2, max_len=16, **SIZES)(src)
    assert calls == ["tokens"]


def _tiny_date_model(device):
    torch.manual_seed(0)
    V = len(DATE_VOCAB)
    return lib.Transformer(V, V, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=32).to(device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_public_functions_run_on_cuda():
    device = torch.device("cuda")
    model = _tiny_date_model(device)
    pairs = [("2019-03-07", "March 7, 2019"), ("2001-12-25", "December 25, 2001")]
    optimizer, scheduler = lib.noam_optimizer(model, 16, 10)
    result = lib.fit(model, lambda step: lib.make_batch(pairs, DATE_VOCAB), 2, optimizer, scheduler)
    assert result.steps == 2
    assert len(lib.translate(model, [s for s, _ in pairs], DATE_VOCAB, max_len=5)) == 2
    assert len(lib.translate(model, [s for s, _ in pairs], DATE_VOCAB, max_len=5, beam_size=2)) == 2
    assert 0.0 <= lib.exact_match(model, pairs, DATE_VOCAB, max_len=5) <= 1.0
    src = lib.make_batch(pairs, DATE_VOCAB).src  # on the CPU: the decoders move it
    assert lib.greedy_decode(model, src, 5, 1, 2).device.type == "cuda"
    result = lib.beam_search(model, src, 2, 5, 1, 2, return_scores=True)
    assert result.tokens.device.type == "cuda" and result.finished.device.type == "cuda"
    x = torch.randn(2, 3, 16, device=device, dtype=torch.float16)
    out, _ = lib.scaled_dot_product_attention(x, x, x)
    assert out.device.type == "cuda" and bool(torch.isfinite(out).all())


def test_fit_and_decoders_follow_the_model_not_the_batch():
    # On a CPU-only machine the model's device is the CPU; a batch built elsewhere is moved to it.
    model = _tiny_date_model("cpu")
    pairs = [("2019-03-07", "March 7, 2019")]
    moved = []

    class Recording(lib.Batch):
        def to(self, device):
            moved.append(torch.device(device))
            return super().to(device)

    def next_batch(step):
        b = lib.make_batch(pairs, DATE_VOCAB)
        return Recording(b.src, b.tgt_in, b.tgt_out, b.src_mask, b.tgt_mask, pad_id=b.pad_id)

    optimizer, scheduler = lib.noam_optimizer(model, 16, 10)
    lib.fit(model, next_batch, 2, optimizer, scheduler)
    assert moved == [torch.device("cpu")] * 2
    out = lib.translate(model, ["2019-03-07"], DATE_VOCAB, max_len=4)
    assert isinstance(out[0], str)
