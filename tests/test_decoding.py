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
    beam, scores = beam_search(ScriptedModel(), src, 2, 5, BOS, EOS, PAD, return_scores=True)
    assert beam.tolist() == [[B, EOS], [B, EOS]]
    assert torch.allclose(scores, torch.full((2,), math.log(0.45 * 0.95)), atol=1e-5)


def test_beam_of_one_is_greedy_on_the_scripted_model():
    src = torch.tensor([[3, 4]])
    assert beam_search(ScriptedModel(), src, 1, 5, BOS, EOS, PAD).tolist() == [[A, EOS]]


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
            logits = model(s, t, None, lib.causal_mask(len(ys)))
            ys.append(int(logits[0, -1].argmax()))
            if ys[-1] == EOS:
                break
        row = batch[r].tolist()
        assert row[: len(ys) - 1] == ys[1:]
        assert all(x == PAD for x in row[len(ys) - 1 :])


def test_beam_scores_are_the_log_probs_of_the_outputs():
    model, src = _random_model(2), _random_src(2)
    out, scores = beam_search(model, src, 4, 9, BOS, EOS, PAD, return_scores=True)
    assert torch.allclose(scores, sequence_log_prob(model, src, out, BOS, EOS, PAD), atol=1e-4)
    # a wider beam never finds a worse output under the raw score (greedy is beam 1)
    g = greedy_decode(model, src, 9, BOS, EOS, PAD)
    g_scores = sequence_log_prob(model, src, g, BOS, EOS, PAD)
    assert bool((scores >= g_scores - 1e-4).all())


def test_length_penalty_can_prefer_the_longer_output():
    # "A EOS" has p = 0.52 * 0.6 = 0.312; "B A A EOS" has p = 0.48 * 0.8**3 = 0.246.
    # Raw log-probabilities pick the short one; divided by the length (2 vs 4) the long one wins.
    class Longer(ScriptedModel):
        table = {
            (BOS,): {A: 0.52, B: 0.48},
            (BOS, A): {EOS: 0.6, A: 0.4},
            (BOS, B): {A: 0.8, EOS: 0.2},
            (BOS, B, A): {A: 0.8, EOS: 0.2},
            (BOS, B, A, A): {EOS: 0.8, A: 0.2},
        }

    short, long = math.log(0.52 * 0.6), math.log(0.48 * 0.8**3)
    assert short > long and short / 2 < long / 4
    src = torch.tensor([[3]])
    assert beam_search(Longer(), src, 3, 6, BOS, EOS, PAD).tolist() == [[A, EOS, PAD, PAD]]
    out, score = beam_search(Longer(), src, 3, 6, BOS, EOS, PAD, length_penalty=1.0, return_scores=True)
    assert out.tolist() == [[B, A, A, EOS]]
    assert abs(float(score) - long) < 1e-5  # the raw score is reported


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
