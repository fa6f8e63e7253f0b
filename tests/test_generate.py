"""Sampling and generation (lib/train/generate.py): temperature, top-k, bad input."""

import math

import pytest
import torch

import lib


def model(max_len=32, vocab=20):
    torch.manual_seed(0)
    return lib.DecoderOnlyModel(vocab, d_model=16, n_heads=2, n_layers=1, d_ff=32, norm_first=True,
                                max_len=max_len).eval()


def test_top_k_one_is_greedy_and_top_k_keeps_only_the_k_best():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 10, generator=g)
    assert torch.equal(lib.sample_next(logits, top_k=1, generator=g), logits.argmax(-1))
    allowed = logits.topk(3, dim=-1).indices
    for _ in range(20):
        ids = lib.sample_next(logits, temperature=2.0, top_k=3, generator=g)
        assert (allowed == ids[:, None]).any(dim=1).all()


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_sample_frequencies_follow_the_tempered_softmax(temperature):
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).expand(20000, 4)
    ids = lib.sample_next(logits, temperature=temperature, generator=torch.Generator().manual_seed(1))
    freq = torch.bincount(ids, minlength=4).double() / ids.numel()
    want = (logits[0].double() / temperature).softmax(-1)
    # 20000 draws: the standard error of each frequency is below 0.0036; allow 5 of them.
    assert (freq - want).abs().max() < 0.018


def test_top_k_renormalises_over_the_kept_tokens():
    logits = torch.tensor([[1.0, 0.5, 0.0, -3.0]]).expand(20000, 4)
    ids = lib.sample_next(logits, top_k=2, generator=torch.Generator().manual_seed(2))
    freq = torch.bincount(ids, minlength=4).double() / ids.numel()
    want = torch.tensor([1.0, 0.5]).double().softmax(-1)
    assert freq[2:].sum() == 0 and (freq[:2] - want).abs().max() < 0.018


def test_a_seeded_generator_reproduces_the_draw():
    logits = torch.randn(4, 30)
    a = lib.sample_next(logits, 0.7, 5, torch.Generator().manual_seed(3))
    b = lib.sample_next(logits, 0.7, 5, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.dtype == torch.int64 and a.shape == (4,)


@pytest.mark.parametrize("temperature", [0, 0.0, -1.0, float("nan"), float("inf")])
def test_temperature_must_be_positive_and_finite(temperature):
    with pytest.raises(ValueError, match="temperature"):
        lib.sample_next(torch.randn(2, 5), temperature=temperature)
    with pytest.raises(ValueError, match="temperature"):
        lib.generate(model(), torch.tensor([1, 2]), 3, temperature=temperature)


@pytest.mark.parametrize("temperature", [True, "1", None])
def test_temperature_must_be_a_number(temperature):
    with pytest.raises(TypeError, match="temperature"):
        lib.sample_next(torch.randn(2, 5), temperature=temperature)


@pytest.mark.parametrize("top_k", [0, -2, 6])
def test_top_k_must_lie_in_one_to_the_vocabulary(top_k):
    with pytest.raises(ValueError, match="top_k"):
        lib.sample_next(torch.randn(2, 5), top_k=top_k)


def test_top_k_beyond_the_model_vocabulary_is_refused_by_generate():
    with pytest.raises(ValueError, match="top_k"):
        lib.generate(model(vocab=20), torch.tensor([1, 2]), 3, top_k=21)
    with pytest.raises(TypeError, match="top_k"):
        lib.generate(model(), torch.tensor([1, 2]), 3, top_k=2.0)


def test_sample_next_refuses_bad_logits():
    with pytest.raises(TypeError, match="logits"):
        lib.sample_next(torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="logits"):
        lib.sample_next(torch.randn(2, 3, 4))


def test_generate_shapes_and_prompt_kept():
    m = model()
    out = lib.generate(m, torch.tensor([3, 1, 4]), 5, generator=torch.Generator().manual_seed(0))
    assert out.shape == (8,) and out[:3].tolist() == [3, 1, 4]
    out = lib.generate(m, torch.tensor([[3, 1], [4, 1]]), 4, greedy=True)
    assert out.shape == (2, 6)
    assert torch.equal(lib.generate(m, torch.tensor([[5]]), 0), torch.tensor([[5]]))
    # greedy ignores temperature and top_k (even values that sampling would refuse)
    assert torch.equal(lib.generate(m, torch.tensor([5]), 6, greedy=True, temperature=0.01),
                       lib.generate(m, torch.tensor([5]), 6, greedy=True))
    assert lib.context_length(m) == 32


def test_generate_bad_input_names_the_argument():
    m = model(max_len=8)
    with pytest.raises(ValueError, match="prompt"):
        lib.generate(m, torch.zeros(9, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        lib.generate(m, torch.zeros(4, dtype=torch.long), 5)
    with pytest.raises(ValueError, match="prompt"):
        lib.generate(m, torch.zeros(1, 0, dtype=torch.long), 1)
    with pytest.raises(TypeError, match="prompt"):
        lib.generate(m, torch.zeros(3), 1)
    with pytest.raises(TypeError, match="prompt"):
        lib.generate(m, [1, 2], 1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        lib.generate(m, torch.zeros(3, dtype=torch.long), -1)
    with pytest.raises(TypeError, match="greedy"):
        lib.generate(m, torch.zeros(3, dtype=torch.long), 1, greedy=1)
    with pytest.raises(TypeError, match="model"):
        lib.generate(torch.nn.Linear(2, 2), torch.zeros(3, dtype=torch.long), 1)
    with pytest.raises(ValueError, match="tokens"):
        lib.generate(m, torch.tensor([25]), 1)  # id outside the vocabulary


def test_low_temperature_approaches_greedy():
    m = model()
    prompt = torch.tensor([[2, 3]])
    greedy = lib.generate(m, prompt, 10, greedy=True)
    cold = lib.generate(m, prompt, 10, temperature=1e-3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(greedy, cold)
    assert math.isfinite(float(m(prompt).detach().sum()))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_sample_next_refuses_nan_and_inf_logits_naming_them(bad):
    logits = torch.randn(3, 5)
    logits[1, 2] = bad
    with pytest.raises(ValueError, match="logits"):
        lib.sample_next(logits)
    with pytest.raises(ValueError, match="logits"):
        lib.sample_next(logits, top_k=2)


def test_sample_next_refuses_a_row_of_only_minus_inf_but_allows_some():
    logits = torch.randn(2, 4)
    logits[0, :2] = float("-inf")  # masked tokens are fine
    assert not set(lib.sample_next(logits, generator=torch.Generator().manual_seed(0)).tolist()[:1]) & {0, 1}
    logits[1] = float("-inf")
    with pytest.raises(ValueError, match="logits"):
        lib.sample_next(logits)


def test_generate_refuses_nan_logits_from_a_diverged_model_greedy_or_sampled():
    m = model()
    with torch.no_grad():
        m.head.weight.fill_(float("nan"))
    for kw in (dict(greedy=True), dict(temperature=1.0)):
        with pytest.raises(ValueError, match="NaN"):
            lib.generate(m, torch.tensor([1, 2]), 3, **kw)


def test_top_k_keeps_every_logit_tied_with_the_kth():
    # logits [2, 1, 1, 0], k = 2: the two tied at 1 both stay, so three tokens can be drawn
    logits = torch.tensor([[2.0, 1.0, 1.0, 0.0]]).expand(6000, 4)
    ids = lib.sample_next(logits, top_k=2, generator=torch.Generator().manual_seed(4))
    freq = torch.bincount(ids, minlength=4).double() / ids.numel()
    want = torch.tensor([math.e, 1.0, 1.0]) / (math.e + 2)  # e^2 : e : e, divided by e
    assert freq[3] == 0 and (freq[:3] - want).abs().max() < 0.03


class _BigramTable(torch.nn.Module):
    """A stand-in language model: the next token's log-probabilities depend on the last one.

    From 0: p(1) = 0.6, p(2) = 0.4. From 1: uniform over 0, 1, 2. From 2: p(0) = 0.9,
    p(1) = p(2) = 0.05. Two steps from 0: greedy takes 1 then (a tie, the first) 0:
    0.6 * 1/3 = 0.2; the most probable pair is 2 then 0: 0.4 * 0.9 = 0.36.
    """

    def __init__(self):
        super().__init__()
        table = torch.tensor([[1e-9, 0.6, 0.4], [1 / 3, 1 / 3, 1 / 3], [0.9, 0.05, 0.05]])
        self.table = torch.nn.Parameter(table.log(), requires_grad=False)
        self.pos = type("Pos", (), {"max_len": 8})()
        self.layers = [None]
        self.vocab_size = 3

    def forward(self, tokens):
        return self.table[tokens]  # (B, L, 3)


def test_beam_search_finds_the_more_probable_sequence_greedy_misses():
    m = _BigramTable()
    prompt = torch.tensor([0])
    greedy = lib.generate(m, prompt, 2, greedy=True, use_cache=False)
    assert greedy.tolist() == [0, 1, 0]
    assert lib.continuation_log_prob(m, prompt, greedy[1:]) == pytest.approx(math.log(0.6 / 3))
    tokens, log_p = lib.lm_beam_search(m, prompt, 2, width=2)
    assert tokens.tolist() == [0, 2, 0] and log_p == pytest.approx(math.log(0.36))
    tokens, log_p = lib.lm_beam_search(m, prompt, 2, width=1)  # width 1 is greedy
    assert tokens.tolist() == [0, 1, 0] and log_p == pytest.approx(math.log(0.2))
    assert lib.continuation_log_prob(m, prompt, torch.tensor([], dtype=torch.long)) == 0.0


def test_beam_search_and_log_prob_bad_input():
    m = _BigramTable()
    with pytest.raises(ValueError, match="max_new_tokens"):
        lib.lm_beam_search(m, torch.tensor([0, 1]), 7, 2)
    with pytest.raises(ValueError, match="width"):
        lib.lm_beam_search(m, torch.tensor([0]), 2, 0)
    with pytest.raises(TypeError, match="prompt"):
        lib.lm_beam_search(m, torch.tensor([0.0]), 2, 2)
    with pytest.raises(ValueError, match="prompt"):
        lib.continuation_log_prob(m, torch.tensor([[0]]), torch.tensor([1]))
    with pytest.raises(ValueError, match="prompt"):
        lib.continuation_log_prob(m, torch.tensor([], dtype=torch.long), torch.tensor([1]))
    with pytest.raises(ValueError, match="continuation"):
        lib.continuation_log_prob(m, torch.tensor([0]), torch.zeros(8, dtype=torch.long))
