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
