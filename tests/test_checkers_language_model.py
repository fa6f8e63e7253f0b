"""The chapter 11 exercise checkers (lib/teach/checkers/language_model.py).

Each checker gets (a) a correct solution written here (must pass), (b) a stub
("not implemented yet"), and (c) for every mistake it names, a wrong
implementation written here independently, which must be recognised by name.
"""

import math

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args, **kwargs):
    raise NotImplementedError


# --- sampling_probs ----------------------------------------------------------------------------


def probs_ok(logits, temperature, top_k):
    z = logits / temperature
    if top_k is not None:
        threshold = torch.sort(z, dim=-1, descending=True).values[:, top_k - 1 : top_k]
        z = torch.where(z >= threshold, z, torch.full_like(z, -math.inf))
    p = torch.exp(z - z.max(dim=-1, keepdim=True).values)
    return p / p.sum(dim=-1, keepdim=True)


def _top_mask(z, k, strict=False):
    if k is None:
        return torch.ones_like(z, dtype=torch.bool)
    threshold = torch.sort(z, dim=-1, descending=True).values[:, k - 1 : k]
    return z > threshold if strict else z >= threshold


def probs_times_t(logits, t, k):
    return probs_ok(logits * t, 1.0, k)


def probs_divided_after(logits, t, k):
    z = torch.where(_top_mask(logits, k), logits, torch.tensor(-math.inf, dtype=logits.dtype))
    return torch.softmax(z, dim=-1) / t


def probs_zero_fill(logits, t, k):
    z = logits / t
    return torch.softmax(torch.where(_top_mask(z, k), z, torch.zeros_like(z)), dim=-1)


def probs_not_renormalised(logits, t, k):
    z = logits / t
    return torch.softmax(z, dim=-1) * _top_mask(z, k)


def probs_smallest(logits, t, k):
    z = logits / t
    if k is None:
        return torch.softmax(z, dim=-1)
    threshold = torch.sort(z, dim=-1).values[:, k - 1 : k]
    return torch.softmax(z.masked_fill(z > threshold, -math.inf), dim=-1)


def probs_strict(logits, t, k):
    z = logits / t
    return torch.softmax(z.masked_fill(~_top_mask(z, k, strict=True), -math.inf), dim=-1)


def probs_temperature_ignored(logits, t, k):
    return probs_ok(logits, 1.0, k)


def probs_temperature_after_softmax(logits, t, k):
    p = probs_ok(logits, 1.0, k) / t
    return p / p.sum(dim=-1, keepdim=True)


def probs_one_too_many(logits, t, k):
    z = logits / t
    if k is not None and k < z.shape[-1]:
        threshold = torch.sort(z, dim=-1, descending=True).values[:, k : k + 1]
        z = torch.where(z >= threshold, z, torch.full_like(z, -math.inf))
    return torch.softmax(z, dim=-1)


def probs_scatter_exactly_k(logits, t, k):
    z = logits / t
    if k is None:
        return torch.softmax(z, dim=-1)
    keep = torch.zeros_like(z).scatter(-1, torch.topk(z, k, dim=-1).indices, 1.0)
    return torch.softmax(torch.where(keep > 0, z, torch.full_like(z, -math.inf)), dim=-1)


def probs_nan(logits, t, k):
    return torch.full_like(logits, math.nan)


PROBS_WRONG = {
    "temperature ignored (or applied after the softmax, then renormalised)": probs_temperature_ignored,
    "one token too many kept (k + 1)": probs_one_too_many,
    "exactly k tokens kept when the k-th logit is tied": probs_scatter_exactly_k,
    "multiplied by the temperature": probs_times_t,
    "probabilities divided by the temperature": probs_divided_after,
    "tokens outside the top k set to 0 instead of -inf": probs_zero_fill,
    "top-k filter without renormalising": probs_not_renormalised,
    "kept the k smallest logits": probs_smallest,
    "one token too few kept (k - 1)": probs_strict,
}


def test_sampling_checker_passes_solutions_and_reports_a_stub():
    assert lib.check_sampling_probs(probs_ok)
    verdict = lib.check_sampling_probs(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(PROBS_WRONG))
def test_sampling_checker_names_each_mistake(mistake):
    verdict = lib.check_sampling_probs(PROBS_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake, verdict.message
    assert "?" in verdict.message


def test_sampling_checker_names_temperature_after_the_softmax_as_ignored():
    verdict = lib.check_sampling_probs(probs_temperature_after_softmax)
    assert not verdict and verdict.mistake.startswith("temperature ignored")


def test_sampling_checker_never_accepts_nan_or_the_wrong_dtype_kind():
    assert not lib.check_sampling_probs(probs_nan)
    verdict = lib.check_sampling_probs(lambda x, t, k: probs_ok(x, t, k).half())
    assert not verdict


def test_sampling_checker_accepts_equivalent_forms():
    def probs_power(logits, t, k):  # p^(1/T), renormalised, top-k on probabilities
        p = torch.softmax(logits, dim=-1) ** (1 / t)
        if k is not None:
            kth = torch.sort(p, dim=-1, descending=True).values[:, k - 1 : k]
            p = p * (p >= kth)
        return p / p.sum(dim=-1, keepdim=True)

    assert lib.check_sampling_probs(probs_power)


def test_sampling_checker_reports_an_unknown_bug_without_a_name():
    verdict = lib.check_sampling_probs(lambda x, t, k: probs_ok(x, t + 0.1, k))
    assert not verdict and verdict.mistake is None


# --- causal_lm_loss ----------------------------------------------------------------------------


def loss_ok(logits, tokens):
    log_p = torch.log_softmax(logits, dim=-1)[:, :-1]  # predictions for positions 1..L-1
    target = tokens[:, 1:]
    return -log_p.gather(-1, target.unsqueeze(-1)).mean()


def loss_no_shift(logits, tokens):
    return -torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).mean()


def loss_wrong_way(logits, tokens):
    log_p = torch.log_softmax(logits, -1)[:, 1:]
    return -log_p.gather(-1, tokens[:, :-1].unsqueeze(-1)).mean()


def loss_sum(logits, tokens):
    return -torch.log_softmax(logits, -1)[:, :-1].gather(-1, tokens[:, 1:].unsqueeze(-1)).sum()


def loss_bits(logits, tokens):
    p = torch.softmax(logits, -1)[:, :-1].gather(-1, tokens[:, 1:].unsqueeze(-1))
    return -torch.log2(p).mean()


def loss_wrong_axis(logits, tokens):
    log_p = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    return -log_p[:, :-1].gather(-1, tokens[:, 1:].unsqueeze(-1)).mean()


def loss_plus(logits, tokens):
    return torch.log_softmax(logits, -1)[:, :-1].gather(-1, tokens[:, 1:].unsqueeze(-1)).mean()


def loss_over_all_positions(logits, tokens):
    picked = torch.log_softmax(logits, -1)[:, :-1].gather(-1, tokens[:, 1:].unsqueeze(-1))
    return -picked.sum() / tokens.numel()


def loss_per_sequence(logits, tokens):
    picked = torch.log_softmax(logits, -1)[:, :-1].gather(-1, tokens[:, 1:].unsqueeze(-1))
    return -picked.sum(dim=(1, 2)).mean()


def loss_smoothed(logits, tokens):
    return torch.nn.CrossEntropyLoss(label_smoothing=0.1)(
        logits[:, :-1].transpose(1, 2), tokens[:, 1:])


def loss_ignore_zero(logits, tokens):
    return torch.nn.CrossEntropyLoss(ignore_index=0)(logits[:, :-1].transpose(1, 2), tokens[:, 1:])


def loss_item(logits, tokens):
    return float(loss_ok(logits, tokens))


def loss_float32(logits, tokens):
    return loss_ok(logits.to(torch.float32), tokens)


LOSS_WRONG = {
    "the minus sign is missing": loss_plus,
    "divided by B × L instead of B × (L - 1)": loss_over_all_positions,
    "summed over each sequence, averaged over the batch": loss_per_sequence,
    "label smoothing": loss_smoothed,
    "token 0 ignored as padding": loss_ignore_zero,
    "returned a Python number (.item())": loss_item,
    "computed in float32 on float64 input": loss_float32,
    "no shift: each position scored on its own token": loss_no_shift,
    "shifted the wrong way": loss_wrong_way,
    "summed instead of averaged": loss_sum,
    "bits instead of nats": loss_bits,
    "softmax over the positions instead of the vocabulary": loss_wrong_axis,
}


def test_lm_loss_checker_passes_solutions_and_reports_a_stub():
    assert lib.check_causal_lm_loss(loss_ok)
    assert lib.check_causal_lm_loss(lambda logits, tokens: lib.causal_lm_loss(logits, tokens))
    verdict = lib.check_causal_lm_loss(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(LOSS_WRONG))
def test_lm_loss_checker_names_each_mistake(mistake):
    verdict = lib.check_causal_lm_loss(LOSS_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake, verdict.message
    assert "?" in verdict.message


def test_lm_loss_checker_never_accepts_nan():
    verdict = lib.check_causal_lm_loss(lambda x, y: loss_ok(x, y) * math.nan)
    assert not verdict and "NaN" in verdict.message


def test_lm_loss_checker_reports_an_unknown_bug_without_a_name():
    verdict = lib.check_causal_lm_loss(lambda x, y: loss_ok(x, y) * 1.01)
    assert not verdict and verdict.mistake is None


# --- sample_loop -------------------------------------------------------------------------------
# Written here with torch.sort thresholds and torch.where, apart from the checker's variants.


def _filtered(z, top_k, fill=-math.inf, strict=False):
    if top_k is None:
        return z
    threshold = torch.sort(z, dim=-1, descending=True).values[:, top_k - 1 : top_k]
    keep = z > threshold if strict else z >= threshold
    return torch.where(keep, z, torch.full_like(z, fill))


def make_loop(temperature_first=True, strict=False, fill=-math.inf, draw="probs", feed=True,
              crop="last", with_prompt=True):
    def loop(model, prompt, n_new, temperature, top_k, generator):
        L = model.pos.max_len
        out = prompt.clone()
        for _ in range(n_new):
            seen = out if feed else prompt
            n = seen.shape[1]
            context = {"last": seen[:, max(0, n - L):], "first": seen[:, : min(n, L)], "none": seen}[crop]
            logits = model(context)[:, -1, :]
            z = logits / temperature if temperature_first else logits
            z = _filtered(z, top_k, fill, strict)
            probs = torch.exp(z - z.max(dim=-1, keepdim=True).values)
            probs = probs / probs.sum(dim=-1, keepdim=True)
            if not temperature_first:
                probs = probs / temperature
            if draw == "probs":
                new = torch.multinomial(probs, num_samples=1, generator=generator)
            elif draw == "logits":
                new = torch.multinomial(z, num_samples=1, generator=generator)
            elif draw == "argmax":
                new = probs.argmax(dim=-1, keepdim=True)
            else:
                new = torch.multinomial(probs, num_samples=1)
            out = torch.cat((out, new), dim=1)
        return out if with_prompt else out[:, prompt.shape[1]:]

    return loop


LOOP_WRONG = {
    "temperature applied after the softmax (or not at all)": make_loop(temperature_first=False),
    "top-k keeps k - 1 tokens": make_loop(strict=True),
    "tokens outside the top k set to 0 instead of -inf": make_loop(fill=0.0),
    "sampled from the logits, not the probabilities": make_loop(draw="logits"),
    "the most probable token taken (greedy), not sampled": make_loop(draw="argmax"),
    "the generator not used": make_loop(draw="global"),
    "the sampled token is not fed back": make_loop(feed=False),
    "the context is not cropped to max_len": make_loop(crop="none"),
    "cropped to the first max_len tokens": make_loop(crop="first"),
    "only the new tokens returned": make_loop(with_prompt=False),
}


def test_sample_loop_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_sample_loop(make_loop())
    verdict = lib.check_sample_loop(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(LOOP_WRONG))
def test_sample_loop_checker_names_each_mistake(mistake):
    verdict = lib.check_sample_loop(LOOP_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake, verdict.message


def test_sample_loop_checker_matches_lib_generate_where_no_crop_is_needed():
    # the checker's reference is lib's sampler in a loop: on a run that fits in max_len it
    # must give lib.generate's tokens for the same generator (so a right loop is lib's)
    torch.manual_seed(0)
    model = lib.DecoderOnlyModel(11, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0,
                                 max_len=8).eval()
    prompt = torch.randint(0, 11, (5, 3))
    want = lib.generate(model, prompt, 5, temperature=0.7, top_k=4,
                        generator=torch.Generator().manual_seed(3), use_cache=False)
    with torch.no_grad():
        got = make_loop()(model, prompt, 5, 0.7, 4, torch.Generator().manual_seed(3))
    assert torch.equal(got, want)


def test_sample_loop_checker_refuses_lib_sampler_and_wrong_dtypes():
    def with_lib(model, prompt, n_new, temperature, top_k, generator):
        out = prompt
        for _ in range(n_new):
            logits = model(out[:, -model.pos.max_len:])[:, -1]
            out = torch.cat([out, lib.sample_next(logits, temperature, top_k, generator)[:, None]], 1)
        return out

    verdict = lib.check_sample_loop(with_lib)
    assert not verdict and "write the temperature, the top-k filter" in verdict.message
    assert lib.sample_next is not None and callable(lib.generate)  # restored afterwards
    assert lib.sample_next.__name__ == "sample_next"
    as_int32 = lambda *a: make_loop()(*a).int()  # noqa: E731
    verdict = lib.check_sample_loop(as_int32)
    assert not verdict and "int64" in verdict.message


def test_sample_loop_checker_reports_an_unknown_bug_without_a_name():
    def top_k_plus_one(model, prompt, n_new, temperature, top_k, generator):
        bigger = None if top_k is None else min(top_k + 1, model.vocab_size)
        return make_loop()(model, prompt, n_new, temperature, bigger, generator)

    verdict = lib.check_sample_loop(top_k_plus_one)
    assert not verdict and verdict.mistake is None


# --- exercise 1 by hand: the perplexity at 1.5 bits per character -----------------------------


def test_perplexity_checker():
    # perplexity = 1 / (geometric mean probability); 1.5 bits per character is a mean
    # probability of 2^-1.5 per character: check on a uniform model over 2^1.5 choices
    bits = 1.5
    p = 0.5 ** bits
    perplexity = 1 / p
    assert abs(-math.log2(p) - bits) < 1e-12
    assert abs(perplexity - math.sqrt(8)) < 1e-12  # 2^1.5 = sqrt(2^3)
    assert lib.check_perplexity(perplexity) and lib.check_perplexity(2.83)
    assert lib.check_perplexity(torch.tensor(perplexity, dtype=torch.float64))
    slips = {
        "e^bits: nats for bits": 4.48,
        "bits squared": 2.25,
        "2 x bits": 3.0,
        "1 / 2^bits: a probability, not a perplexity": 0.354,
        "e^(bits x ln 2) taken as e^(bits / ln 2)": math.exp(bits * 1.4426950408889634),
    }
    for name, value in slips.items():
        verdict = lib.check_perplexity(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert not lib.check_perplexity(2.5) and lib.check_perplexity(2.5).slip is None
    assert not lib.check_perplexity(float("nan"))
    assert lib.check_perplexity(2 ** 2, bits=2)
    for bad in ("2.83", True, [2.83], torch.tensor([2.83])):  # None: not answered
        with pytest.raises(TypeError, match="my_perplexity"):
            lib.check_perplexity(bad)
