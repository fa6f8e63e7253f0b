"""The chapter 2 exercise checkers (lib/teach/checkers/attention.py).

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



# --- softmax -------------------------------------------------------------------------------


def softmax_ok(scores):
    shifted = scores - scores.max(dim=-1, keepdim=True).values
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


SOFTMAX_WRONG = {
    "softmax over the wrong axis": lambda s: (s - s.max(dim=0, keepdim=True).values).exp()
    / (s - s.max(dim=0, keepdim=True).values).exp().sum(dim=0, keepdim=True),
    "overflow: the row maximum is not subtracted": lambda s: s.exp() / s.exp().sum(-1, keepdim=True),
    "no normalisation": lambda s: torch.exp(s),
    "the maximum of the whole tensor subtracted, not each row's": lambda s: (s - s.max()).exp()
    / (s - s.max()).exp().sum(-1, keepdim=True),
}


def test_softmax_checker_names_a_call_to_torch_softmax():
    for fn in (lambda s: torch.softmax(s, dim=-1), lambda s: s.softmax(-1),
               lambda s: torch.nn.functional.softmax(s, dim=-1), lambda s: torch.nn.Softmax(-1)(s),
               lambda s: torch.log_softmax(s, -1).exp()):
        verdict = lib.check_softmax(fn)
        assert not verdict and verdict.mistake == "torch.softmax called", verdict.message
    assert torch.softmax(torch.zeros(2), dim=0).tolist() == [0.5, 0.5]  # restored afterwards


def test_softmax_checker_names_underflow_on_all_negative_rows():
    # exp without the row maximum: right on every case but the all-negative one (0/0 there)
    verdict = lib.check_softmax(SOFTMAX_WRONG["overflow: the row maximum is not subtracted"])
    assert verdict.mistake == "overflow: the row maximum is not subtracted"


def test_softmax_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_softmax(softmax_ok)
    verdict = lib.check_softmax(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(SOFTMAX_WRONG))
def test_softmax_checker_names_each_mistake(mistake):
    verdict = lib.check_softmax(SOFTMAX_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
    assert "?" in verdict.message  # the hint is a question


# --- scaled attention ----------------------------------------------------------------------


def attention_ok(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:  # a query that may see no key: zero weights, as lib gives
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0)
    return weights @ v


def attention_variant(scale, axis=-1, invert=False, after=False, guard=True, fill=float("-inf"),
                      value_width=False):
    def attention(q, k, v, mask=None):
        width = v.shape[-1] if value_width else q.shape[-1]
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale(width)
        if mask is not None and not after:
            scores = torch.where(mask if invert else ~mask, torch.tensor(fill), scores)
        weights = torch.softmax(scores, dim=axis)
        if mask is not None and after:
            weights = weights * mask
        if mask is not None and guard:
            weights = torch.where(torch.isnan(weights), 0.0, weights)
        return torch.matmul(weights, v)

    return attention


ATTENTION_WRONG = {
    "no √d_k scaling": attention_variant(lambda d: 1.0),
    "divided by d_k instead of √d_k": attention_variant(lambda d: 1.0 / d),
    "divided by √d_v instead of √d_k": attention_variant(lambda d: d**-0.5, value_width=True),
    "softmax over the wrong axis": attention_variant(lambda d: d**-0.5, axis=-2),
    "mask ignored": lambda q, k, v, mask=None: torch.softmax(q @ k.mT / k.shape[-1] ** 0.5, -1) @ v,
    "mask convention inverted": attention_variant(lambda d: d**-0.5, invert=True),
    "mask applied after the softmax": attention_variant(lambda d: d**-0.5, after=True),
    "NaN for a query that may see no key": attention_variant(lambda d: d**-0.5, guard=False),
    "masked scores filled with -1e9 instead of -inf": attention_variant(
        lambda d: d**-0.5, guard=False, fill=-1e9),
    "mask multiplied into the scores": lambda q, k, v, mask=None: torch.softmax(
        q @ k.mT / k.shape[-1] ** 0.5 * (1 if mask is None else mask), -1) @ v,
}
# the same slips by a learner who also left the empty row unguarded (NaN there)
UNGUARDED = {
    "no √d_k scaling": attention_variant(lambda d: 1.0, guard=False),
    "divided by √d_v instead of √d_k": attention_variant(lambda d: d**-0.5, value_width=True,
                                                         guard=False),
    "softmax over the wrong axis": attention_variant(lambda d: d**-0.5, axis=-2, guard=False),
    "mask convention inverted": attention_variant(lambda d: d**-0.5, invert=True, guard=False),
}


def test_attention_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_scaled_attention(attention_ok)
    assert lib.check_scaled_attention(attention_variant(lambda d: d**-0.5))
    verdict = lib.check_scaled_attention(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(ATTENTION_WRONG))
def test_attention_checker_names_each_mistake(mistake):
    verdict = lib.check_scaled_attention(ATTENTION_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake


@pytest.mark.parametrize("mistake", list(UNGUARDED))
def test_attention_checker_names_a_slip_with_an_unguarded_empty_row(mistake):
    verdict = lib.check_scaled_attention(UNGUARDED[mistake])
    assert not verdict and verdict.mistake == mistake


def test_attention_checker_reports_nan_as_nan():
    def nan_everywhere(q, k, v, mask=None):
        return attention_ok(q, k, v, mask) * float("nan")

    verdict = lib.check_scaled_attention(nan_everywhere)
    assert not verdict and "NaN in" in verdict.message and "e+38" not in verdict.message


def test_attention_checker_reports_an_unknown_bug_with_its_place():
    verdict = lib.check_scaled_attention(lambda q, k, v, mask=None: attention_ok(q, k, v, mask) + 0.1)
    assert not verdict and verdict.mistake is None and "differs from the reference" in verdict.message


# --- masks ---------------------------------------------------------------------------------


def causal_ok(n):
    i = torch.arange(n)
    return i[None, :] <= i[:, None]


CAUSAL_WRONG = {
    "upper triangle instead of lower": lambda n: torch.arange(n)[None, :] >= torch.arange(n)[:, None],
    "diagonal excluded": lambda n: torch.arange(n)[None, :] < torch.arange(n)[:, None],
    "True marks the blocked keys (nn.MultiheadAttention's convention)": lambda n: torch.arange(n)[None, :]
    > torch.arange(n)[:, None],
    # nanoGPT's idiom: right values, but lib refuses the mask (TypeError)
    "0/1 float mask instead of bool": lambda n: torch.tril(torch.ones(n, n)),
    "0/1 integer mask instead of bool": lambda n: (torch.arange(n)[None, :] <= torch.arange(n)[:, None]).long(),
}


def test_a_float_mask_fails_and_says_which_dtype():
    # no Mistake to match: the generic message names the dtype to return
    verdict = lib.check_causal_mask(lambda n: torch.tril(torch.ones(n, n, dtype=torch.float64)))
    assert not verdict
    verdict = lib.check_causal_mask(lambda n: torch.tril(torch.ones(n, n, dtype=torch.int32)))
    assert not verdict and "int32" in verdict.message and "bool" in verdict.message
    with pytest.raises(TypeError, match="bool"):  # why: lib refuses it
        q = torch.randn(3, 4)
        lib.scaled_dot_product_attention(q, q, q, torch.tril(torch.ones(3, 3)))


def test_causal_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_causal_mask(causal_ok)
    assert NOT_IMPLEMENTED in lib.check_causal_mask(stub).message


@pytest.mark.parametrize("mistake", list(CAUSAL_WRONG))
def test_causal_checker_names_each_mistake(mistake):
    verdict = lib.check_causal_mask(CAUSAL_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake


def padding_ok(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(1).unsqueeze(2)


PADDING_WRONG = {
    "True on the padding instead of the real tokens": lambda t, p: t.eq(p).view(t.shape[0], 1, 1, -1),
    "pad id hard-coded as 0": lambda t, p: (t > 0).view(t.shape[0], 1, 1, -1),
    "shape (B, n): no axes for the heads and the queries": lambda t, p: t.ne(p),
    "shape (B, 1, n, 1): the padding masks queries, not keys": lambda t, p: t.ne(p)
    .unsqueeze(1)
    .unsqueeze(-1),
    "0/1 integer mask instead of bool": lambda t, p: (t != p).long()[:, None, None, :],
    "0/1 float mask instead of bool": lambda t, p: torch.where(t == p, 0.0, 1.0).view(t.shape[0], 1, 1, -1),
}


def test_padding_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_padding_mask(padding_ok)
    assert NOT_IMPLEMENTED in lib.check_padding_mask(stub).message


@pytest.mark.parametrize("mistake", list(PADDING_WRONG))
def test_padding_checker_names_each_mistake(mistake):
    verdict = lib.check_padding_mask(PADDING_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake


# --- exercise 2 on paper: Var(q·k) and the divisor (numbers, not functions) ----------------


def _sampled_variance(sigma2, d_k, rows=400_000):
    """Var(q·k) measured on random entries of variance sigma2: the reference for the closed form."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(rows, d_k, generator=g, dtype=torch.float64) * math.sqrt(sigma2)
    k = torch.randn(rows, d_k, generator=g, dtype=torch.float64) * math.sqrt(sigma2)
    return float((q * k).sum(-1).var())


@pytest.mark.parametrize("sigma2, d_k", [(4, 16), (9, 4)])
def test_score_variance_checker(sigma2, d_k):
    measured = _sampled_variance(sigma2, d_k)
    exact = d_k * sigma2 * sigma2  # each product sigma^4, d_k of them
    assert abs(measured / exact - 1) < 0.02
    check = lambda v: lib.check_score_variance(v, sigma2=sigma2, d_k=d_k)  # noqa: E731
    assert check(exact) and check(float(exact) + 0.3) and check(torch.tensor(exact))
    slips = {
        "σ² not squared (d_k σ²)": d_k * sigma2,
        "one product's variance σ⁴, not the sum over d_k": sigma2 * sigma2,
        "the variances of q_c and k_c added, not multiplied": 2 * d_k * sigma2,
    }
    if sigma2 * math.sqrt(d_k) != sigma2 * sigma2:  # (4, 16): the same number as σ⁴
        slips["the standard deviation σ²√d_k, not the variance"] = sigma2 * math.sqrt(d_k)
    for name, value in slips.items():
        verdict = check(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    wrong = check(exact + 7)
    assert not wrong and wrong.slip is None and "recompute" in wrong.message
    nan = check(float("nan"))
    assert not nan and "NaN" in nan.message


def test_score_divisor_checker():
    exact = 4 * math.sqrt(16)  # the standard deviation sqrt(d_k sigma^4) = sigma^2 sqrt(d_k)
    assert abs(math.sqrt(_sampled_variance(4, 16)) / exact - 1) < 0.01
    assert lib.check_score_divisor(16) and lib.check_score_divisor(16.004)
    for name, value in {"√d_k alone, σ² left out": 4, "σ√d_k: σ² not squared in the variance": 8,
                        "the variance itself, not its square root": 256}.items():
        verdict = lib.check_score_divisor(value)
        assert not verdict and verdict.slip == name, (name, verdict.message)
    assert lib.check_score_divisor(18).slip is None and not lib.check_score_divisor(18)
    assert not lib.check_score_divisor(float("nan"))


@pytest.mark.parametrize("checker, name", [(lib.check_score_variance, "my_variance"),
                                           (lib.check_score_divisor, "my_divisor")])
@pytest.mark.parametrize("bad", ["256", True, [256], torch.tensor([256.0])])  # None: not answered
def test_score_checkers_refuse_what_is_not_a_number(checker, name, bad):
    with pytest.raises(TypeError, match=name):
        checker(bad)
