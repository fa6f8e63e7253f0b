"""Tests for lib/train/decoding.py: greedy decoding and beam search."""

import math

import pytest
import torch
from torch import nn

import lib
from lib import beam_search, exact_match, greedy_decode, sequence_log_prob, translate

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4


class ScriptedModel(nn.Module):
    """A fake encoder-decoder whose next-token probabilities depend only on the prefix.

    After BOS:     A 0.55, B 0.45
    After BOS A:   EOS 0.40, A 0.30, B 0.30
    After BOS B:   EOS 0.95, A 0.025, B 0.025
    Anything else: EOS 1 (almost)

    Greedy takes A (0.55), then EOS: p = 0.55 * 0.40 = 0.22.
    The better output is B EOS: p = 0.45 * 0.95 = 0.4275.
    """

    table = {
        (BOS,): {A: 0.55, B: 0.45},
        (BOS, A): {EOS: 0.40, A: 0.30, B: 0.30},
        (BOS, B): {EOS: 0.95, A: 0.025, B: 0.025},
    }

    def encode(self, src, src_mask=None):
        return torch.zeros(src.shape[0], src.shape[1], 4)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        Bsz, m = tgt.shape
        logits = torch.full((Bsz, m, 5), -30.0)
        for b in range(Bsz):
            for t in range(m):
                probs = self.table.get(tuple(tgt[b, : t + 1].tolist()), {EOS: 1.0})
                for tok, p in probs.items():
                    logits[b, t, tok] = math.log(p)
        return logits


def test_greedy_is_myopic_and_beam_is_not():
    src = torch.tensor([[3, 4], [4, 3]])
    greedy = greedy_decode(ScriptedModel(), src, 5, BOS, EOS, PAD)
    assert greedy.tolist() == [[A, EOS], [A, EOS]]
    beam, scores, finished = beam_search(ScriptedModel(), src, 2, 5, BOS, EOS, PAD, return_scores=True)
    assert beam.tolist() == [[B, EOS], [B, EOS]]
    assert torch.allclose(scores, torch.full((2,), math.log(0.45 * 0.95)), atol=1e-5)
    assert finished.tolist() == [True, True]


def test_beam_of_one_is_greedy_on_the_scripted_model():
    src = torch.tensor([[3, 4]])
    assert beam_search(ScriptedModel(), src, 1, 5, BOS, EOS, PAD).tolist() == [[A, EOS]]


def test_beam_of_one_is_greedy_only_without_a_length_penalty():
    # After BOS: EOS 0.52, A 0.48; after A: EOS 1. By hand, with GNMT's lp:
    # "EOS" scores ln 0.52 / lp(1) = -0.654; "A EOS" ln 0.48 / lp(2) = -0.734 / (7/6)^α,
    # which is -0.629 for α = 1: the one-wide beam sets the greedy EOS aside.
    table = {(BOS,): {EOS: 0.52, A: 0.48}, (BOS, A): {EOS: 1.0}}
    model, src = lib.ScriptedModel(table, vocab_size=5), torch.tensor([[A]])
    assert greedy_decode(model, src, 5, BOS, EOS, PAD).tolist() == [[EOS]]
    assert beam_search(model, src, 1, 5, BOS, EOS, PAD).tolist() == [[EOS]]
    assert beam_search(model, src, 1, 5, BOS, EOS, PAD, length_penalty=1.0).tolist() == [[A, EOS]]


def _random_model(seed=0):
    torch.manual_seed(seed)
    return lib.Transformer(12, 12, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.1, max_len=64)


def _random_src(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 12, (6, 7), generator=g)
    src[1, 5:] = PAD
    src[4, 3:] = PAD
    return src


def test_beam_size_one_equals_greedy_on_a_random_transformer():
    model, src = _random_model(), _random_src()
    g = greedy_decode(model, src, 10, BOS, EOS, PAD)
    b = beam_search(model, src, 1, 10, BOS, EOS, PAD)
    assert torch.equal(g, b)


def test_greedy_matches_a_one_example_reference_loop():
    # Decode each example alone with a plain loop that re-runs the full forward pass.
    model, src = _random_model(1), _random_src(1)
    batch = greedy_decode(model, src, 8, BOS, EOS, PAD)
    for r in range(src.shape[0]):
        s = src[r : r + 1, : int((src[r] != PAD).sum())]
        ys = [BOS]
        for _ in range(8):
            t = torch.tensor([ys])
            logits = model(s, t, tgt_mask=lib.causal_mask(len(ys)))
            ys.append(int(logits[0, -1].argmax()))
            if ys[-1] == EOS:
                break
        row = batch[r].tolist()
        assert row[: len(ys) - 1] == ys[1:]
        assert all(x == PAD for x in row[len(ys) - 1 :])


def test_beam_scores_are_the_log_probs_of_the_outputs():
    model, src = _random_model(2), _random_src(2)
    out, scores, finished = beam_search(model, src, 4, 9, BOS, EOS, PAD, return_scores=True)
    assert torch.allclose(scores, sequence_log_prob(model, src, out, BOS, EOS, PAD), atol=1e-4)
    # every finished row ends with EOS, and no unfinished row has one
    has_eos = (out == EOS).any(dim=1)
    assert torch.equal(has_eos, finished)


def test_length_penalty_can_prefer_the_longer_output():
    # "A EOS" has p = 0.52 * 0.6 = 0.312; "B A A EOS" has p = 0.48 * 0.8**3 = 0.246.
    # Raw log-probabilities pick the short one; with GNMT's lp and α = 2
    # (lp = (7/6)² vs (9/6)²) the long one wins.
    class Longer(ScriptedModel):
        table = {
            (BOS,): {A: 0.52, B: 0.48},
            (BOS, A): {EOS: 0.6, A: 0.4},
            (BOS, B): {A: 0.8, EOS: 0.2},
            (BOS, B, A): {A: 0.8, EOS: 0.2},
            (BOS, B, A, A): {EOS: 0.8, A: 0.2},
        }

    short, long = math.log(0.52 * 0.6), math.log(0.48 * 0.8**3)
    lp = lib.gnmt_length_penalty
    assert short > long and short / lp(2, 2.0) < long / lp(4, 2.0)
    src = torch.tensor([[3]])
    assert beam_search(Longer(), src, 3, 6, BOS, EOS, PAD).tolist() == [[A, EOS]]
    out, score, finished = beam_search(Longer(), src, 3, 6, BOS, EOS, PAD, length_penalty=2.0, return_scores=True)
    assert out.tolist() == [[B, A, A, EOS]] and finished.tolist() == [True]
    assert abs(float(score) - long) < 1e-5  # the raw score is reported


def test_gnmt_length_penalty_is_the_papers_form():
    assert lib.gnmt_length_penalty(1, 0.6) == 1.0
    assert abs(lib.gnmt_length_penalty(7, 0.6) - 2.0**0.6) < 1e-12
    assert lib.gnmt_length_penalty(30, 0.0) == 1.0


def test_eval_mode_and_no_grad():
    model = _random_model(3)
    model.train()
    out = greedy_decode(model, _random_src(3), 4, BOS, EOS, PAD)
    assert not model.training and not out.requires_grad


def test_bad_input():
    model = _random_model()
    with pytest.raises(ValueError, match=r"\(B, n\)"):
        greedy_decode(model, torch.tensor([1, 2, 3]), 5, BOS, EOS)
    with pytest.raises(TypeError):
        greedy_decode(model, torch.rand(2, 3), 5, BOS, EOS)
    with pytest.raises(ValueError):
        greedy_decode(model, _random_src(), 0, BOS, EOS)
    with pytest.raises(ValueError):
        beam_search(model, _random_src(), 0, 5, BOS, EOS)
    with pytest.raises(ValueError):
        beam_search(model, _random_src(), 2, 5, BOS, -1)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, _random_src(), 2, 5, BOS, EOS, length_penalty=-1)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="length_penalty"):
            beam_search(model, _random_src(), 2, 5, BOS, EOS, length_penalty=bad)
    # special ids outside the (12-token) vocabulary, or not ints
    for kw in ({"eos_id": 12}, {"bos_id": 40}, {"pad_id": 12}):
        args = {"bos_id": BOS, "eos_id": EOS, "pad_id": PAD, **kw}
        name = next(iter(kw))
        with pytest.raises(ValueError, match=name):
            beam_search(model, _random_src(), 2, 5, **args)
        with pytest.raises(ValueError, match=name):
            greedy_decode(model, _random_src(), 5, **args)
    with pytest.raises(TypeError, match="pad_id"):
        greedy_decode(model, _random_src(), 5, BOS, EOS, pad_id=torch.tensor([0]))
    with pytest.raises(TypeError, match="pad_id"):
        beam_search(model, _random_src(), 2, 5, BOS, EOS, pad_id=0.0)


def test_special_ids_checked_against_the_logits_of_a_model_without_config():
    with pytest.raises(ValueError, match="eos_id"):
        beam_search(ScriptedModel(), torch.tensor([[3]]), 2, 5, BOS, 7, PAD)
    with pytest.raises(ValueError, match="eos_id"):
        greedy_decode(ScriptedModel(), torch.tensor([[3]]), 5, BOS, 7, PAD)


def test_sequence_log_prob_checks_out():
    model, src = _random_model(), _random_src()
    with pytest.raises(TypeError, match="out"):
        sequence_log_prob(model, src, torch.rand(6, 3), BOS, EOS, PAD)
    with pytest.raises(ValueError, match="out"):
        sequence_log_prob(model, src, torch.ones(6, dtype=torch.long), BOS, EOS, PAD)
    with pytest.raises(ValueError, match="batch size"):
        sequence_log_prob(model, src, torch.ones(5, 3, dtype=torch.long), BOS, EOS, PAD)
    with pytest.raises(ValueError, match="out"):
        sequence_log_prob(model, src, torch.full((6, 3), 12), BOS, EOS, PAD)


# ---------------------------------------------------------------------------
# Beam search keeps its finished hypotheses (review ch6-9 W1).
# ---------------------------------------------------------------------------


class EvictingModel(nn.Module):
    """The review's scripted model (shared/reviews/scripts/beam_evict.py).

    After BOS: A 0.90, EOS 0.06, B 0.04. After BOS A: A 0.5, B 0.5. Afterwards
    A 0.45, B 0.45, EOS 0.10. "EOS" alone (log 0.06 = -2.81) beats every
    continuation: by step 2 both active hypotheses (A A, A B at log 0.45 = -0.80 each)
    outrank it on the raw score, and a beam that keeps finished hypotheses in its
    top-beam_size evicts it; the search then ends with max_len tokens and no EOS.
    """

    dists = {(): {A: 0.90, EOS: 0.06, B: 0.04}, (A,): {A: 0.5, B: 0.5}}

    def encode(self, src, src_mask=None):
        return torch.zeros(src.shape[0], src.shape[1], 4)

    def decode(self, ys, memory, src_mask=None, tgt_mask=None):
        n, t = ys.shape
        logits = torch.zeros(n, t, 5)
        for b in range(n):
            seq = ys[b].tolist()
            for i in range(t):
                prefix = tuple(seq[1 : i + 1])
                if EOS in prefix or PAD in prefix:
                    continue
                p = self.dists.get(prefix, {A: 0.45, B: 0.45, EOS: 0.10})
                row = torch.full((5,), -1e9)
                for k, v in p.items():
                    row[k] = math.log(v)
                logits[b, i] = row
        return logits


def check_beam_keeps_finished(beam_search_fn):
    """The regression test's logic, applied to a given beam search function."""
    src = torch.tensor([[5, 6]])
    for max_len in (3, 5, 10, 30):
        result = beam_search_fn(EvictingModel(), src, 2, max_len, BOS, EOS, PAD, return_scores=True)
        tokens, score = result[0], result[1]
        assert tokens.tolist() == [[EOS]], (max_len, tokens.tolist())
        assert abs(float(score) - math.log(0.06)) < 1e-5


def test_beam_keeps_finished_hypotheses():
    check_beam_keeps_finished(beam_search)
    result = beam_search(EvictingModel(), torch.tensor([[5, 6]]), 2, 30, BOS, EOS, PAD, return_scores=True)
    assert isinstance(result, lib.BeamSearchResult) and result.finished.tolist() == [True]


def test_unfinished_rows_are_flagged():
    class NeverEnds(EvictingModel):
        dists = {(): {A: 0.9, B: 0.1}}

        def decode(self, ys, memory, src_mask=None, tgt_mask=None):
            logits = torch.full((ys.shape[0], ys.shape[1], 5), -1e9)
            logits[..., A] = math.log(0.9)
            logits[..., B] = math.log(0.1)
            return logits

    tokens, score, finished = beam_search(NeverEnds(), torch.tensor([[5]]), 2, 4, BOS, EOS, PAD, return_scores=True)
    assert finished.tolist() == [False]
    assert tokens.tolist() == [[A, A, A, A]]  # max_len tokens, no EOS
    assert abs(float(score) - 4 * math.log(0.9)) < 1e-5


def _brute_force_best(model, src_row, max_len, alpha):
    """Best normalised score over every output Y = y_1 .. y_k EOS with |Y| = k + 1 <= max_len."""
    import itertools

    V = model.config.tgt_vocab_size
    others = [t for t in range(V) if t != EOS]
    outs = [list(p) + [EOS] for k in range(max_len) for p in itertools.product(others, repeat=k)]
    width = max(len(o) for o in outs)
    out = torch.tensor([o + [PAD] * (width - len(o)) for o in outs])
    src = src_row[None].expand(len(outs), -1)
    lp = sequence_log_prob(model, src, out, BOS, EOS, PAD)
    norm = torch.tensor([float(s) / lib.gnmt_length_penalty(len(o), alpha) for s, o in zip(lp, outs)])
    return float(norm.max())


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_a_wide_enough_beam_finds_the_exhaustive_optimum(alpha):
    # |V| = 4 target tokens, max_len 4: 1 + 3 + 9 + 27 = 40 outputs in all, and at most
    # 27 × 4 = 108 candidates per step. A beam of 108 keeps every candidate, so beam
    # search is exhaustive and, if its early stop is sound, returns the best
    # normalised score of all 40 (each scored by teacher forcing).
    torch.manual_seed(5)
    model = lib.Transformer(8, 4, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=16)
    src = torch.tensor([[3, 4, 5, 6], [7, 6, 5, PAD], [4, 4, PAD, PAD]])
    tokens, scores, finished = beam_search(model, src, 108, 4, BOS, EOS, PAD, length_penalty=alpha,
                                           return_scores=True)
    assert bool(finished.all())
    lengths = (tokens == EOS).float().argmax(dim=1) + 1  # |Y|, EOS included
    for b in range(src.shape[0]):
        best = _brute_force_best(model, src[b], 4, alpha)
        got = float(scores[b]) / lib.gnmt_length_penalty(int(lengths[b]), alpha)
        assert abs(got - best) < 1e-4, (b, got, best)


def test_the_early_stop_bound_looks_ahead_to_max_len():
    # After one step "EOS" is finished (log 0.5, lp(1) = 1) and "A" is active (log 0.45).
    # Judged at its current length, "A" cannot beat "EOS" (-0.80 < -0.69), but "A EOS"
    # (p = 0.45, |Y| = 2) wins under α = 2: -0.80 / (7/6)² = -0.59 > -0.69. A search
    # that bounded by the current length would stop after step 1 with "EOS".
    class LateWinner(ScriptedModel):
        table = {(BOS,): {EOS: 0.5, A: 0.45, B: 0.05}, (BOS, A): {EOS: 1.0}}

    src = torch.tensor([[3]])
    assert beam_search(LateWinner(), src, 2, 4, BOS, EOS, PAD).tolist() == [[EOS]]
    assert beam_search(LateWinner(), src, 2, 4, BOS, EOS, PAD, length_penalty=2.0).tolist() == [[A, EOS]]
