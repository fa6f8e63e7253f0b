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
        scores = scores.masked_fill(mask.logical_not(), -1e9)  # -1e9 or -inf: the same here
    return torch.softmax(scores, dim=-1) @ v


def attention_variant(scale, axis=-1, invert=False, after=False):
    def attention(q, k, v, mask=None):
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale(q.shape[-1])
        if mask is not None and not after:
            scores = torch.where(mask if invert else ~mask, torch.tensor(float("-inf")), scores)
        weights = torch.softmax(scores, dim=axis)
        if mask is not None and after:
            weights = weights * mask
        return torch.matmul(weights, v)

    return attention


ATTENTION_WRONG = {
    "no √d_k scaling": attention_variant(lambda d: 1.0),
    "divided by d_k instead of √d_k": attention_variant(lambda d: 1.0 / d),
    "softmax over the wrong axis": attention_variant(lambda d: d**-0.5, axis=-2),
    "mask ignored": lambda q, k, v, mask=None: torch.softmax(q @ k.mT / k.shape[-1] ** 0.5, -1) @ v,
    "mask convention inverted": attention_variant(lambda d: d**-0.5, invert=True),
    "mask applied after the softmax": attention_variant(lambda d: d**-0.5, after=True),
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
}


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
}


def test_padding_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_padding_mask(padding_ok)
    assert NOT_IMPLEMENTED in lib.check_padding_mask(stub).message


@pytest.mark.parametrize("mistake", list(PADDING_WRONG))
def test_padding_checker_names_each_mistake(mistake):
    verdict = lib.check_padding_mask(PADDING_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
