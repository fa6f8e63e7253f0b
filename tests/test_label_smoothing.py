"""label_smoothed_nll (lib/train/training.py) against nn.CrossEntropyLoss and a hand computation."""

import math

import pytest
import torch
from torch import nn

from lib import label_smoothed_nll


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_matches_cross_entropy_loss(eps):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 7, 11, generator=g)
    target = torch.randint(0, 11, (4, 7), generator=g)
    ours = label_smoothed_nll(logits, target, eps)
    ref = nn.CrossEntropyLoss(label_smoothing=eps)(logits.reshape(-1, 11), target.reshape(-1))
    assert torch.allclose(ours, ref, atol=1e-6)


def test_matches_with_ignore_index():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 9, 6, generator=g)
    target = torch.randint(0, 6, (3, 9), generator=g)
    target[0, 5:] = 0
    target[2, 2:] = 0
    ours = label_smoothed_nll(logits, target, 0.1, ignore_index=0)
    ref = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=0)(logits.reshape(-1, 6), target.reshape(-1))
    assert torch.allclose(ours, ref, atol=1e-6)


def test_hand_value_one_token():
    # p = softmax([0, ln 2, ln 3]) = [1/6, 2/6, 3/6], true class 2, eps 0.3, K 3
    logits = torch.tensor([[0.0, math.log(2), math.log(3)]])
    q = [0.1, 0.1, 0.8]  # 0.3/3 everywhere, plus 0.7 on the true class
    p = [1 / 6, 2 / 6, 3 / 6]
    expected = -sum(qi * math.log(pi) for qi, pi in zip(q, p))
    got = label_smoothed_nll(logits, torch.tensor([2]), 0.3)
    assert abs(float(got) - expected) < 1e-6


def test_minimum_is_at_the_smoothed_distribution():
    # The loss as a function of p is minimised at p = q: 1 - eps + eps/K on the true class.
    K, eps = 5, 0.1
    q = torch.full((K,), eps / K)
    q[3] += 1 - eps
    at_q = label_smoothed_nll(q.log()[None], torch.tensor([3]), eps)
    sharper = torch.full((K,), 0.01)
    sharper[3] = 0.96
    assert float(at_q) < float(label_smoothed_nll(sharper.log()[None], torch.tensor([3]), eps))
    # and its value there is the entropy of q
    entropy = -(q * q.log()).sum()
    assert torch.allclose(at_q, entropy, atol=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="leading dimensions"):
        label_smoothed_nll(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError):
        label_smoothed_nll(torch.randn(2, 5), torch.zeros(2))
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        label_smoothed_nll(torch.randn(2, 5), torch.tensor([1, 7]))
    with pytest.raises(ValueError):
        label_smoothed_nll(torch.randn(2, 5), torch.tensor([1, 2]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="nothing to average"):
        label_smoothed_nll(torch.randn(2, 5), torch.tensor([0, 0]), ignore_index=0)
