"""lib.sampler_probs / lib.sample (chapter 17) proven exact.

1. On fixed logits, every token's probability equals the formula's, written out here
   token by token in plain Python (sorted lists, no torch cut), independent of lib.
2. A frequency test: N = 20,000 seeded draws, Pearson's chi-square against the
   formula's probabilities, rejected below a p-value of ALPHA = 1e-3 (so a right
   sampler raises a false alarm with probability 1e-3 per seed; the draws are seeded,
   so the outcome is fixed).
3. Both checks fail on wrong samplers written out below (renormalises before cutting,
   keeps the token that crosses p out, applies temperature after top-p, min-p as an
   absolute threshold, top-k that breaks ties): each is asserted to be rejected.
"""

from __future__ import annotations

import math

import pytest
import torch

import lib
from lib.train.sampling import chi_square_test

ALPHA = 1e-3
N_DRAWS = 20_000


def formula(logits: list[float], temperature=1.0, top_k=None, top_p=None, min_p=None):
    """The samplers' definition, one token at a time, in float64 Python."""
    V = len(logits)
    if temperature == 0:
        best = max(range(V), key=lambda i: (logits[i], -i))
        return [1.0 if i == best else 0.0 for i in range(V)]
    m = max(z / temperature for z in logits)
    e = [math.exp(z / temperature - m) for z in logits]
    pi = [x / sum(e) for x in e]
    kept = set(range(V))
    if top_k is not None and top_k < V:
        kth = sorted(pi, reverse=True)[top_k - 1]
        kept &= {i for i in range(V) if pi[i] >= kth}
    if top_p is not None and top_p < 1:
        order = sorted(range(V), key=lambda i: -pi[i])
        mass, last = 0.0, None
        for i in order:
            if mass < top_p:
                last = pi[i]
            mass += pi[i]
        kept &= {i for i in range(V) if pi[i] >= last}
    if min_p is not None:
        kept &= {i for i in range(V) if pi[i] >= min_p * max(pi)}
    total = sum(pi[i] for i in kept)
    return [pi[i] / total if i in kept else 0.0 for i in range(V)]


# Wrong samplers, each a distribution function (logits (V,) list -> probs list)
def renormalise_before_cut(logits, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """top-k, renormalise, then top-p's mass on the renormalised distribution."""
    probs = formula(logits, temperature, top_k=top_k)
    V = len(probs)
    order = sorted(range(V), key=lambda i: -probs[i])
    mass, kept = 0.0, set()
    for i in order:
        if mass < top_p:
            kept.add(i)
        mass += probs[i]
    total = sum(probs[i] for i in kept)
    return [probs[i] / total if i in kept else 0.0 for i in range(V)]


def crossing_token_dropped(logits, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """keeps a token only if the mass up to and including it is <= p."""
    pi = formula(logits, temperature)
    V = len(pi)
    order = sorted(range(V), key=lambda i: -pi[i])
    mass, kept = 0.0, {order[0]}
    for i in order:
        mass += pi[i]
        if mass <= top_p:
            kept.add(i)
    total = sum(pi[i] for i in kept)
    return [pi[i] / total if i in kept else 0.0 for i in range(V)]


def temperature_after_top_p(logits, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """the cut on softmax(z), temperature applied to the kept tokens afterwards."""
    kept = [p > 0 for p in formula(logits, 1.0, top_p=top_p)]
    tempered = formula(logits, temperature)
    total = sum(t for t, k in zip(tempered, kept) if k)
    return [t / total if k else 0.0 for t, k in zip(tempered, kept)]


def min_p_absolute(logits, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """min-p as pi >= min_p, not pi >= min_p * max(pi)."""
    pi = formula(logits, temperature)
    kept = [p >= min_p for p in pi]
    total = sum(p for p, k in zip(pi, kept) if k)
    return [p / total if k else 0.0 for p, k in zip(pi, kept)]


def top_k_breaks_ties(logits, temperature=1.0, top_k=None, top_p=None, min_p=None):
    """exactly k tokens, ties at the cut broken by index (torch.topk's indices)."""
    pi = formula(logits, temperature)
    order = sorted(range(len(pi)), key=lambda i: (-pi[i], i))[:top_k]
    total = sum(pi[i] for i in order)
    return [pi[i] / total if i in order else 0.0 for i in range(len(pi))]


LOGITS = [2.0, 1.5, 1.0, 0.5, 0.0, -1.0, -2.0, -4.0]
TIES = [1.0, 1.0, 0.5, 0.5, 0.5, 0.0, -1.0, -3.0]
SETTINGS = [  # (logits, settings)
    (LOGITS, dict(temperature=1.0)),
    (LOGITS, dict(temperature=0.7)),
    (LOGITS, dict(temperature=1.6, top_k=3)),
    (LOGITS, dict(top_p=0.6)),
    (LOGITS, dict(temperature=0.5, top_p=0.9)),
    (LOGITS, dict(temperature=2.0, top_p=0.8)),
    (LOGITS, dict(min_p=0.1)),
    (LOGITS, dict(temperature=1.3, top_k=3, top_p=0.7)),
    (LOGITS, dict(top_k=4, top_p=0.8, min_p=0.2)),
    (TIES, dict(top_k=3)),  # a tie at the k-th: all three 0.5s kept
    (TIES, dict(top_p=0.5)),  # the crossing token is tied with two others
    (TIES, dict(top_p=1.0)),
    (LOGITS, dict(top_k=50)),  # k larger than the vocabulary: all kept
]

WRONG = [  # (wrong sampler, logits, settings on which it differs)
    (renormalise_before_cut, LOGITS, dict(top_k=2, top_p=0.5)),
    (crossing_token_dropped, LOGITS, dict(top_p=0.6)),
    (temperature_after_top_p, LOGITS, dict(temperature=2.0, top_p=0.6)),
    (min_p_absolute, LOGITS, dict(min_p=0.1)),
    (top_k_breaks_ties, TIES, dict(top_k=3)),
]


def probabilities_agree(probs, logits, settings) -> bool:
    want = formula(logits, **settings)
    return all(abs(a - b) <= 1e-12 for a, b in zip(probs, want))


def frequencies_agree(draws: torch.Tensor, logits, settings) -> bool:
    """Chi-square goodness of fit of the draws against the formula, at ALPHA."""
    counts = torch.bincount(draws, minlength=len(logits))
    _, p_value, _ = chi_square_test(counts, torch.tensor(formula(logits, **settings)))
    return p_value >= ALPHA


def draws_of(probs: list[float], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.multinomial(torch.tensor(probs, dtype=torch.float64).expand(N_DRAWS, -1),
                             1, generator=g).squeeze(-1)


@pytest.mark.parametrize("logits, settings", SETTINGS)
def test_probabilities_equal_the_formula(logits, settings):
    q = lib.sampler_probs(torch.tensor([logits]), **settings)
    assert q.dtype == torch.float64 and q.shape == (1, len(logits))
    assert probabilities_agree(q[0].tolist(), logits, settings)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("logits, settings", SETTINGS)
def test_draws_agree_with_the_formula(logits, settings, seed):
    g = torch.Generator().manual_seed(seed)
    draws = lib.sample(torch.tensor([logits]).expand(N_DRAWS, -1), generator=g, **settings)
    assert draws.dtype == torch.int64 and draws.shape == (N_DRAWS,)
    assert frequencies_agree(draws, logits, settings)


@pytest.mark.parametrize("wrong, logits, settings", WRONG,
                         ids=[w[0].__name__ for w in WRONG])
def test_both_checks_reject_wrong_samplers(wrong, logits, settings):
    probs = wrong(logits, **settings)
    assert abs(sum(probs) - 1) < 1e-12  # a distribution, just not the right one
    assert not probabilities_agree(probs, logits, settings)
    for seed in (0, 1):
        assert not frequencies_agree(draws_of(probs, seed), logits, settings)


def test_the_frequency_test_has_the_stated_false_alarm_rate():
    """Over 2,000 seeds of a right sampler (200 draws each), about ALPHA of tests reject:
    the rejections are at most 10 (expected 2; P(more than 10) < 1e-5)."""
    probs = formula(LOGITS, temperature=1.5)
    g = torch.Generator().manual_seed(0)
    draws = torch.multinomial(torch.tensor(probs).expand(2000 * 200, -1), 1, generator=g)
    draws = draws.view(2000, 200)
    rejected = 0
    for row in draws:
        counts = torch.bincount(row, minlength=len(probs))
        rejected += chi_square_test(counts, torch.tensor(probs))[1] < ALPHA
    assert rejected <= 10


def test_temperature_zero_is_greedy():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 100, generator=g)
    logits[3, 7] = logits[3, 9] = logits[3].max() + 1  # a tie: the first index wins
    ids = lib.sample(logits, temperature=0)
    assert torch.equal(ids, logits.argmax(-1)) and int(ids[3]) == 7
    assert torch.equal(lib.sampler_probs(logits, temperature=0, top_p=0.1).argmax(-1), ids)


def test_temperature_zero_generation_equals_greedy_generate():
    torch.manual_seed(0)
    for model in (lib.DecoderOnlyModel(vocab_size=11, d_model=16, n_heads=2, n_layers=1,
                                       d_ff=32, max_len=40),
                  lib.ModernConfig(vocab_size=11, d_model=16, n_heads=4, n_kv_heads=2,
                                   n_layers=2, d_ff=32, max_len=40).build()):
        prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
        want = lib.generate(model, prompt, 12, greedy=True)
        assert torch.equal(lib.generate_sampled(model, prompt, 12, temperature=0), want)


def test_generation_is_seeded_and_uses_the_sampler():
    torch.manual_seed(0)
    model = lib.ModernConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                             max_len=40).build()
    prompt = torch.tensor([1, 2])
    a = lib.generate_sampled(model, prompt, 20, top_k=1, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, lib.generate(model, prompt, 20, greedy=True))  # top-1: greedy
    b = lib.generate_sampled(model, prompt, 20, temperature=3.0,
                             generator=torch.Generator().manual_seed(3))
    c = lib.generate_sampled(model, prompt, 20, temperature=3.0,
                             generator=torch.Generator().manual_seed(3))
    assert torch.equal(b, c) and not torch.equal(a, b)


@pytest.mark.parametrize("bad, match", [
    (float("nan"), "NaN"), (float("inf"), r"\+inf"),
])
def test_nan_and_inf_logits_refused(bad, match):
    logits = torch.zeros(2, 5)
    logits[1, 2] = bad
    with pytest.raises(ValueError, match=match):
        lib.sampler_probs(logits)
    with pytest.raises(ValueError, match=match):
        lib.sample(logits, temperature=0)


def test_minus_inf_is_a_token_that_cannot_be_drawn():
    logits = torch.tensor([[0.0, float("-inf"), 1.0]])
    assert lib.sampler_probs(logits)[0, 1] == 0
    with pytest.raises(ValueError, match="-inf everywhere"):
        lib.sampler_probs(torch.full((1, 3), float("-inf")))


@pytest.mark.parametrize("kw, match", [
    (dict(temperature=-0.1), "temperature"), (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=0), "top_k"), (dict(top_k=2.5), "top_k"), (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"), (dict(min_p=-0.1), "min_p"), (dict(min_p="0.1"), "min_p"),
])
def test_bad_settings_are_named(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        lib.sampler_probs(torch.zeros(1, 4), **kw)


@pytest.mark.parametrize("logits", [torch.zeros(4), torch.zeros(1, 0), torch.zeros(1, 3, 4),
                                    torch.zeros(1, 4, dtype=torch.long)])
def test_bad_logits_are_named(logits):
    with pytest.raises((ValueError, TypeError), match="logits"):
        lib.sampler_probs(logits)
