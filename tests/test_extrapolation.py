"""Chapter 6's extrapolation experiment (lib/teach/extrapolation.py) and the bad inputs of
chapters 5-6's modules: each expected value is written out by hand here."""

import math

import pytest
import torch

import lib
from lib.teach.extrapolation import PatternRun, repeating, train_pattern_model


def test_repeating_repeats_its_pattern():
    g = torch.Generator().manual_seed(3)
    seq = repeating(4, 23, period=5, generator=g)
    assert seq.shape == (4, 23) and seq.dtype == torch.int64
    assert torch.equal(seq[:, 5:], seq[:, :-5])  # every token equals the one 5 back
    assert int(seq.min()) >= 1 and int(seq.max()) <= 19  # id 0 never drawn


@pytest.mark.parametrize("kwargs, match", [
    ({"batch_size": 0, "length": 5}, "batch_size must be a positive int"),
    ({"batch_size": 2, "length": 5.0}, "length must be a positive int"),
    ({"batch_size": 2, "length": 5, "period": True}, "period must be a positive int"),
    ({"batch_size": 2, "length": 5, "vocab": 1}, "vocab must be at least 2"),
])
def test_repeating_refuses_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        repeating(**kwargs)


def test_repeating_refuses_a_seed_as_generator():
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        repeating(2, 5, generator=0)


@pytest.mark.parametrize("kwargs, match", [
    ({"positional": "rope"}, "positional must be 'sinusoidal' or 'learned'"),
    ({"seed": -1}, "seed must be a non-negative int"),
    ({"seed": 1.0}, "seed must be a non-negative int"),
    ({"steps": 0}, "steps must be a positive int"),
    ({"train_len": 4}, "need period < train_len"),
    ({"test_len": 200}, "need period < train_len <= test_len <= 128"),
])
def test_train_pattern_model_refuses_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_pattern_model(**kwargs)


def _run(pred, test, train_len=6, period=2):
    correct = (pred == test[:, 1:]).double().mean(0)
    L = test.shape[1] - 1
    attention = torch.zeros(test.shape[0], 2, L, L)
    attention[:, 0, :, 0] = 1.0  # head 0: everything on position 0
    attention[:, 1] = torch.eye(L)  # head 1: each query on itself
    return PatternRun("sinusoidal", 0, train_len, period, 0.0, None, test, pred, correct, attention)


def test_pattern_run_reads_by_hand():
    # period 2, pattern (3, 4); test length 9: targets at positions 1..8.
    test = torch.tensor([[3, 4, 3, 4, 3, 4, 3, 4, 3], [5, 6, 5, 6, 5, 6, 5, 6, 5]])
    # predictions for positions 1..8; train_len 6, so positions 6, 7, 8 are "beyond".
    pred = torch.tensor([[4, 3, 4, 3, 4, 3, 3, 3], [6, 5, 6, 5, 6, 5, 5, 9]])
    run = _run(pred, test)
    # beyond: targets (3, 4, 3) and (5, 6, 5); predictions (3, 3, 3) and (5, 5, 9)
    assert run.first_token_share() == pytest.approx(5 / 6)  # 3,3,3 and 5,5 equal the first
    assert run.in_pattern_share() == pytest.approx(5 / 6)  # only the 9 is not in the pattern
    assert run.accuracy(1, 6) == pytest.approx(1.0)
    assert run.accuracy(6) == pytest.approx((2 / 2 + 0 / 2 + 1 / 2) / 3)
    at_even, at_odd = run.accuracy_where_first_is_right()  # positions 6, 8 vs 7
    assert (at_even, at_odd) == (pytest.approx(0.75), pytest.approx(0.0))
    assert torch.equal(run.attention_row(3), torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]]))
    assert run.attention_on_first() == pytest.approx(1.0)  # head 0
    with pytest.raises(ValueError, match="query must be an int"):
        run.attention_row(8)


def test_short_training_runs_and_learned_rows_past_training_get_no_gradient():
    threads = torch.get_num_threads()
    run = train_pattern_model("learned", 0, steps=1, train_len=8, test_len=12, test_batch=4)
    assert torch.get_num_threads() == threads  # trained on one thread, then restored
    assert run.pred.shape == (4, 11) and run.correct.shape == (11,)
    assert run.last_attention.shape == (4, 2, 11, 11)
    run.model.train()
    seq = repeating(2, 8)
    run.model(seq[:, :-1]).sum().backward()
    grad = run.model.pos.embedding.weight.grad.norm(dim=-1)
    assert (grad[:7] > 0).all() and (grad[7:] == 0).all()


def test_feed_forward_refuses_a_0d_tensor():
    """Before: IndexError 'tuple index out of range' from x.shape[-1]."""
    ffn = lib.PositionwiseFeedForward(4, 8)
    with pytest.raises(ValueError, match="x must have a feature axis"):
        ffn(torch.tensor(1.0))


def test_sinusoidal_module_refuses_an_unknown_layout():
    with pytest.raises(ValueError, match="layout must be 'interleaved' or 'concat'"):
        lib.SinusoidalPositionalEncoding(8, max_len=4, layout="halves")


def test_dominant_period_finds_a_planted_rhythm_and_refuses_bad_input():
    t = torch.arange(48, dtype=torch.float64)
    for period in (2 * math.pi, 5.0, 9.5):
        values = 0.5 + 0.4 * torch.cos(2 * math.pi * t / period + 1.0)
        assert abs(lib.dominant_period(values) - period) < 0.05
    with pytest.raises(ValueError, match="values"):
        lib.dominant_period(torch.zeros(2))
    with pytest.raises(ValueError, match="shortest"):
        lib.dominant_period(torch.zeros(10), shortest=5.0, longest=4.0)


def test_lookup_reads_the_top_key_of_the_most_focused_head():
    run = lib.train_pattern_model("sinusoidal", 0, steps=2, test_len=20, test_batch=4)
    att = torch.zeros_like(run.last_attention)  # (B, h, 19, 19)
    for q in range(att.shape[2]):
        att[:, 0, q, 0] = 0.4  # head 0: vague, always key 0
        att[:, 1, q, (q + 1) % 5] = 0.9  # head 1: sure, the first period's right key
    run.last_attention = att
    assert run.top_keys(5, 8).tolist() == [1, 2, 3]
    assert run.lookup(5, 15) == (1.0, 1.0)
    queries, w0 = run.weight_on_first_by_query()
    assert queries[0] == run.train_len - 1 and torch.all(w0 >= 0.4)
    with pytest.raises(ValueError):
        run.top_keys(8, 5)


def test_repeating_refuses_a_period_longer_than_the_sequence():
    """Review 2026-11-28 (5-8) P8: period > length returned a sequence that never repeats."""
    with pytest.raises(ValueError, match="period must be at most length"):
        repeating(2, 4, period=5)
    seq = repeating(2, 5, period=5)  # one whole copy: allowed
    assert seq.shape == (2, 5)
