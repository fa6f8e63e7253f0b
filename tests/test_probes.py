"""Tests for lib/teach/probes.py: the scripted model, the beam trace, the
cross-attention maps and the masking ablation."""

import math

import pytest
import torch

import lib
from lib import DATE_VOCAB, ScriptedModel, beam_search, beam_trace, date_fields

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4

FOOLED = {  # greedy takes A (0.55) then EOS: 0.22; beam finds B EOS: 0.4275
    (BOS,): {A: 0.55, B: 0.45},
    (BOS, A): {EOS: 0.40, A: 0.30, B: 0.30},
    (BOS, B): {EOS: 0.95, A: 0.025, B: 0.025},
}
LONGER = {  # "A EOS" 0.312 beats "B A A EOS" 0.246 on raw scores only
    (BOS,): {A: 0.52, B: 0.48},
    (BOS, A): {EOS: 0.6, A: 0.4},
    (BOS, B): {A: 0.8, EOS: 0.2},
    (BOS, B, A): {A: 0.8, EOS: 0.2},
    (BOS, B, A, A): {EOS: 0.8, A: 0.2},
}
SRC = torch.tensor([[3, 4]])


def test_scripted_model_gives_the_table_probabilities():
    model = ScriptedModel(FOOLED, vocab_size=5)
    logits = model.decode(torch.tensor([[BOS, A]]), model.encode(SRC))
    p = logits.softmax(-1)
    assert abs(float(p[0, 0, A]) - 0.55) < 1e-6 and abs(float(p[0, 1, EOS]) - 0.40) < 1e-6
    assert abs(float(model(SRC, torch.tensor([[BOS, B, A]])).softmax(-1)[0, 2, EOS]) - 1) < 1e-6


def test_beam_trace_finds_what_greedy_misses():
    model = ScriptedModel(FOOLED, vocab_size=5)
    best, score, steps = beam_trace(model, SRC, 2, 5, BOS, EOS)
    assert best == (B, EOS) and abs(score - math.log(0.45 * 0.95)) < 1e-5
    assert [t for t, _ in steps[0].active] == [(A,), (B,)]
    assert steps[0].finished == []
    assert [t for t, _ in steps[1].finished] == [(B, EOS), (A, EOS)]
    assert len(steps) == 2  # nothing active can beat B EOS any more
    greedy = lib.greedy_decode(model, SRC, 5, BOS, EOS, PAD)
    assert greedy.tolist() == [[A, EOS]]
    assert beam_trace(model, SRC, 1, 5, BOS, EOS)[0] == (A, EOS)  # one beam is greedy


def test_beam_trace_agrees_with_lib_beam_search():
    for table in (FOOLED, LONGER):
        model = ScriptedModel(table, vocab_size=5)
        for beam_size in (1, 2, 3):
            best, _, _ = beam_trace(model, SRC, beam_size, 6, BOS, EOS)
            out = beam_search(model, SRC, beam_size, 6, BOS, EOS, PAD)
            assert tuple(t for t in out[0].tolist() if t != PAD) == best


def test_beam_trace_length_penalty_gnmt():
    model = ScriptedModel(LONGER, vocab_size=5)
    short, long = math.log(0.52 * 0.6), math.log(0.48 * 0.8**3)
    lp = lambda n, a: ((5 + n) / 6) ** a
    assert beam_trace(model, SRC, 3, 6, BOS, EOS)[0] == (A, EOS)
    assert short / lp(2, 0.6) > long / lp(4, 0.6)  # the paper's α = 0.6 keeps the short one
    assert beam_trace(model, SRC, 3, 6, BOS, EOS, length_penalty=0.6)[0] == (A, EOS)
    assert short / lp(2, 1.0) < long / lp(4, 1.0)
    best, score, _ = beam_trace(model, SRC, 3, 6, BOS, EOS, length_penalty=1.0)
    assert best == (B, A, A, EOS) and abs(score - long) < 1e-5  # raw score reported


def test_beam_trace_keeps_a_finished_hypothesis():
    # The review's eviction case: EOS at once (0.06) is the best output; the
    # continuations are uncertain and end rarely. A finished hypothesis must stay.
    table = {(BOS,): {A: 0.90, EOS: 0.06, B: 0.04}, (BOS, A): {A: 0.5, B: 0.5}}
    model = ScriptedModel(table, vocab_size=5, default={A: 0.45, B: 0.45, EOS: 0.10})
    for max_len in (3, 5, 10, 30):
        best, score, steps = beam_trace(model, SRC, 2, max_len, BOS, EOS)
        assert best == (EOS,) and abs(score - math.log(0.06)) < 1e-5
        assert (EOS,) in [t for t, _ in steps[-1].finished]
    assert len(steps) < 30  # stopped once nothing active could beat it


def test_beam_trace_refuses_a_batch():
    with pytest.raises(ValueError):
        beam_trace(ScriptedModel(FOOLED, 5), torch.tensor([[3], [4]]), 2, 5, BOS, EOS)


def test_date_fields():
    assert date_fields("2019-3-07") == {
        "year": [0, 1, 2, 3], "dashes": [4, 6], "month": [5], "day": [7, 8]}
    assert date_fields("1987-11-23")["month"] == [5, 6]
    with pytest.raises(ValueError):
        date_fields("20190307")


def _small_model():
    torch.manual_seed(0)
    return lib.TransformerConfig(
        src_vocab_size=len(DATE_VOCAB), tgt_vocab_size=len(DATE_VOCAB), d_model=16,
        n_heads=2, n_layers=2, d_ff=32, dropout=0.1, max_len=32).build()


def test_cross_attention_maps_are_per_head_distributions():
    model = _small_model()
    w = lib.cross_attention_maps(model, "2019-3-7", "March 7, 2019", DATE_VOCAB)
    assert w.shape == (2, len("March 7, 2019") + 1, len("2019-3-7"))
    assert torch.allclose(w.sum(-1), torch.ones(2, 14), atol=1e-6)
    assert not model.training
    # the same weights the layer computes itself, where it records them
    recorded = getattr(model.decoder_layers[-1].cross_attn, "attention_weights", None)
    if recorded is not None:
        assert torch.allclose(recorded[0], w, atol=1e-6)
    # first layer differs from the last
    w0 = lib.cross_attention_maps(model, "2019-3-7", "March 7, 2019", DATE_VOCAB, layer=0)
    assert not torch.allclose(w0, w)


def test_cross_attention_maps_follow_the_ablation_mask_semantics():
    # Hiding every source position but one from a row forces all its weight there.
    model = _small_model()
    pairs = [("2019-3-7", "March 7, 2019"), ("1987-11-23", "November 23, 1987")]
    full = lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows=lambda s, t: range(len(t) + 1))
    batch = lib.make_batch(pairs, DATE_VOCAB)
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask, tgt_mask=batch.tgt_mask)
    real = batch.tgt_out != PAD
    expected = float((logits.argmax(-1) == batch.tgt_out)[real].float().mean())
    assert abs(full - expected) < 1e-9  # nothing hidden: plain teacher-forced accuracy


def test_ablation_hiding_changes_only_the_chosen_rows():
    model = _small_model()
    pairs = [("2019-03-07", "March 7, 2019")]
    rows = lambda s, t: [0]
    hidden = lambda s: [j for j in range(len(s)) if j != 5]
    a = lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows=rows)
    b = lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows=rows, hide=hidden)
    assert a in (0.0, 1.0) and b in (0.0, 1.0)
    with pytest.raises(ValueError):
        lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows=lambda s, t: [])


def test_row_probe_gives_the_rows_probabilities_and_attention():
    model = _small_model()
    pairs = [("2019-3-7", "March 7, 2019"), ("1987-11-23", "November 23, 1987")]
    last = lambda s, t: len(t) - 1  # the row that writes the last year digit
    probs, weights = lib.row_probe(model, pairs, DATE_VOCAB, last)
    assert probs.shape == (2, len(DATE_VOCAB)) and weights.shape == (2, 10)
    for i, (source, target) in enumerate(pairs):
        # one pair alone, through the model's own forward pass
        batch = lib.make_batch([(source, target)], DATE_VOCAB)
        with torch.no_grad():
            logits = model(batch.src, batch.tgt_in, src_mask=batch.src_mask,
                           tgt_mask=batch.tgt_mask)
        assert torch.allclose(probs[i], logits[0, len(target) - 1].softmax(-1), atol=1e-6)
        # the weights the last layer records itself in eval mode, averaged over heads
        recorded = model.decoder_layers[-1].cross_attn.attention_weights  # (1, h, m, n)
        n = len(source)
        assert torch.allclose(weights[i, :n], recorded[0, :, len(target) - 1].mean(0), atol=1e-6)
        assert float(weights[i, n:].abs().sum()) == 0.0  # PAD columns
    with pytest.raises(ValueError, match="pairs"):
        lib.row_probe(model, [], DATE_VOCAB, last)
    with pytest.raises(ValueError, match="row"):
        lib.row_probe(model, pairs, DATE_VOCAB, lambda s, t: len(t) + 1)


def test_ablation_all_rows_hides_from_every_row_and_refuses_no_pairs():
    model = _small_model()
    pairs = [("2019-03-07", "March 7, 2019"), ("1987-11-23", "November 23, 1987")]
    everything = lambda s: list(range(len(s)))
    rows = lambda s, t: [len(t) - 1]
    # with every position hidden from every row the decoder never reads the source, so
    # the accuracy equals that of a model whose memory is cut off entirely
    blind = lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows, everything,
                                         all_rows=True)
    batch = lib.make_batch(pairs, DATE_VOCAB)
    model.eval()
    with torch.no_grad():
        memory = model.encode(batch.src, src_mask=batch.src_mask)
        none = torch.zeros_like(batch.src_mask)
        logits = model.decode(batch.tgt_in, memory, src_mask=none, tgt_mask=batch.tgt_mask)
    idx = torch.arange(2), torch.tensor([len(t) - 1 for _, t in pairs])
    expected = float((logits.argmax(-1)[idx] == batch.tgt_out[idx]).float().mean())
    assert blind == expected
    with pytest.raises(ValueError, match="pairs"):
        lib.cross_attention_ablation(model, [], DATE_VOCAB, rows)
    with pytest.raises(TypeError, match="all_rows"):
        lib.cross_attention_ablation(model, pairs, DATE_VOCAB, rows, all_rows=1)


def test_warmup_runs_in_processes_equal_the_runs_in_turn():
    dates = lib.make_date_split(n_held_out=1500, seed=0).train
    here = lib.warmup_runs(dates, [0], steps=2, workers=1)
    pooled = lib.warmup_runs(dates, [0], steps=2, workers=2)
    assert list(here) == ["post-LN, no warm-up", "post-LN, warm-up",
                          "pre-LN, no warm-up", "pre-LN, warm-up"]
    assert here == pooled
    # warm-up only changes the rate, so the first step's loss is the same with or without
    assert here["post-LN, warm-up"][0][0] == here["post-LN, no warm-up"][0][0]
    assert here["post-LN, warm-up"][0][1] != here["post-LN, no warm-up"][0][1]
    with pytest.raises(ValueError, match="seeds"):
        lib.warmup_runs(dates, [])
    with pytest.raises(ValueError, match="workers"):
        lib.warmup_runs(dates, [0], workers=0)


def test_row_probe_takes_numpy_ints_and_refuses_bools_and_negative_rows():
    """Review 2026-11-28 (5-8) P8: a np.int64 row was refused; a negative one must not wrap."""
    import numpy as np

    model = _small_model()
    pairs = [("2019-3-7", "March 7, 2019")]
    want, _ = lib.row_probe(model, pairs, DATE_VOCAB, lambda s, t: len(t) - 1)
    got, _ = lib.row_probe(model, pairs, DATE_VOCAB, lambda s, t: np.int64(len(t) - 1))
    assert torch.equal(got, want)
    with pytest.raises(ValueError, match="row"):
        lib.row_probe(model, pairs, DATE_VOCAB, lambda s, t: -1)
    with pytest.raises(TypeError, match="int row"):
        lib.row_probe(model, pairs, DATE_VOCAB, lambda s, t: True)
    with pytest.raises(TypeError, match="int row"):
        lib.row_probe(model, pairs, DATE_VOCAB, lambda s, t: 3.0)
