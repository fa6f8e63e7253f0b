"""Chapter 3's exercise checkers: a right solution passes, a stub is "not implemented yet",
and every named mistake, written out independently here, is recognised by name."""

import math

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


# attention_by_steps -------------------------------------------------------------------


def steps_right(q, k, v):
    scores = q @ k.T
    weights = torch.softmax(scores / math.sqrt(k.shape[1]), dim=1)
    return scores, weights, weights @ v


def steps_unscaled(q, k, v):
    scores = q @ k.T
    weights = scores.exp() / scores.exp().sum(dim=1, keepdim=True)
    return scores, weights, weights @ v


def steps_by_d_k(q, k, v):
    scores = q @ k.T
    weights = torch.softmax(scores / k.shape[1], dim=-1)
    return scores, weights, weights @ v


def steps_wrong_axis(q, k, v):
    scores = q @ k.T
    scaled = scores / k.shape[1] ** 0.5
    weights = scaled.exp() / scaled.exp().sum(dim=0, keepdim=True)
    return scores, weights, weights @ v


def steps_scaled_scores(q, k, v):
    scores = q @ k.T / math.sqrt(k.shape[1])
    weights = torch.softmax(scores, dim=-1)
    return scores, weights, weights @ v


def steps_by_d_v(q, k, v):
    weights = torch.softmax(q @ k.T / v.shape[1] ** 0.5, dim=-1)
    return q @ k.T, weights, weights @ v


def steps_exp_unshifted(q, k, v):
    # exp / sum without the row maximum: 0/0 on the all-negative case
    e = torch.exp(q @ k.T / math.sqrt(k.shape[1]))
    weights = e / e.sum(dim=1, keepdim=True)
    return q @ k.T, weights, weights @ v


def steps_stub(q, k, v):
    raise NotImplementedError


def test_attention_by_steps_right_passes():
    verdict = lib.check_attention_by_steps(steps_right)
    assert verdict and verdict.mistake is None, verdict.message


def test_attention_by_steps_stub():
    verdict = lib.check_attention_by_steps(steps_stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (steps_unscaled, "no scaling by √d_k"),
        (steps_by_d_k, "divided by d_k instead of √d_k"),
        (steps_wrong_axis, "softmax over the wrong axis"),
        (steps_scaled_scores, "the scaled scores returned as `scores`"),
        (steps_by_d_v, "divided by √d_v instead of √d_k"),
        (steps_exp_unshifted, "exp without the row maximum subtracted (0/0 on large negative scores)"),
    ],
)
def test_attention_by_steps_mistakes_named(fn, mistake):
    verdict = lib.check_attention_by_steps(fn)
    assert not verdict and verdict.mistake == mistake, verdict.message


# two_head_attention -------------------------------------------------------------------


def attend(q, k, v, scale):
    w = torch.softmax(q @ k.T / scale, dim=-1)
    return w @ v


def two_heads_right(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    heads = [attend(x_q @ a, x_k @ b, x_v @ c, math.sqrt(a.shape[1]))
             for a, b, c in zip(w_q, w_k, w_v)]
    return torch.cat(heads, dim=1) @ w_o


def two_heads_no_w_o(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    heads = [attend(x_q @ a, x_k @ b, x_v @ c, math.sqrt(a.shape[1]))
             for a, b, c in zip(w_q, w_k, w_v)]
    return torch.cat(heads, dim=1)


def two_heads_sqrt_d_model(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    d_model = x_q.shape[1]
    head_1 = attend(x_q @ w_q[0], x_k @ w_k[0], x_v @ w_v[0], d_model**0.5)
    head_2 = attend(x_q @ w_q[1], x_k @ w_k[1], x_v @ w_v[1], d_model**0.5)
    return torch.cat([head_1, head_2], dim=1) @ w_o


def two_heads_swapped(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    d_k = w_q[0].shape[1]
    head_1 = attend(x_q @ w_q[0], x_k @ w_k[0], x_v @ w_v[0], math.sqrt(d_k))
    head_2 = attend(x_q @ w_q[1], x_k @ w_k[1], x_v @ w_v[1], math.sqrt(d_k))
    return torch.cat([head_2, head_1], dim=1) @ w_o


def two_heads_unscaled(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    head_1 = attend(x_q @ w_q[0], x_k @ w_k[0], x_v @ w_v[0], 1.0)
    head_2 = attend(x_q @ w_q[1], x_k @ w_k[1], x_v @ w_v[1], 1.0)
    return torch.cat([head_1, head_2], dim=1) @ w_o


def two_heads_by_d_k(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    d_k = w_k[0].shape[1]
    heads = [attend(x_q @ w_q[i], x_k @ w_k[i], x_v @ w_v[i], d_k) for i in range(2)]
    return torch.cat(heads, dim=1) @ w_o


def two_heads_stub(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
    raise NotImplementedError


def test_two_head_attention_right_passes():
    verdict = lib.check_two_head_attention(two_heads_right)
    assert verdict and verdict.mistake is None, verdict.message


def test_two_head_attention_stub():
    verdict = lib.check_two_head_attention(two_heads_stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize(
    "fn, mistake",
    [
        (two_heads_no_w_o, "W^O left out"),
        (two_heads_sqrt_d_model, "scaled by √d_model instead of √d_k"),
        (two_heads_swapped, "heads concatenated in the wrong order"),
        (two_heads_unscaled, "no scaling"),
        (two_heads_by_d_k, "divided by d_k instead of √d_k"),
    ],
)
def test_two_head_attention_mistakes_named(fn, mistake):
    verdict = lib.check_two_head_attention(fn)
    assert not verdict and verdict.mistake == mistake, verdict.message


def test_two_head_attention_against_lib_module():
    """The checker's reference equals lib.MultiHeadAttention on the chapter's example."""
    case = lib.teach.checkers.worked_examples._two_head_cases()[0]
    x_q, x_k, x_v, w_q, w_k, w_v, w_o = case.args
    mha = lib.MultiHeadAttention(4, 2, bias=False).double().eval()
    with torch.no_grad():
        mha.w_q.weight.copy_(torch.cat(w_q, dim=1).T)
        mha.w_k.weight.copy_(torch.cat(w_k, dim=1).T)
        mha.w_v.weight.copy_(torch.cat(w_v, dim=1).T)
        mha.w_o.weight.copy_(w_o.T)
        out = mha(x_q[None], x_k[None], x_v[None])[0]
    torch.testing.assert_close(out, two_heads_right(*case.args))


# --- check_answer with the chapter's own slips (chapters 1, 5, 7, 10, 13 use it) ---------------


def test_check_answer_names_a_chapter_slip_and_nothing_else():
    exact = torch.tensor([[6.0, 1.0]])
    slips = {"b_2 left out": ([[5.0, 2.0]], "Did you add b_2?"),
             "b_1 left out": ([[5.0, 0.0]], "Did you add b_1?")}
    verdict = lib.check_answer([5, 2], exact, slips=slips)
    assert not verdict and verdict.slip == "b_2 left out" and "Did you add b_2?" in verdict.message
    assert lib.check_answer([5, 0.004], exact, slips=slips).slip == "b_1 left out"
    unknown = lib.check_answer([4, 4], exact, slips=slips)
    assert not unknown and unknown.slip is None
    assert lib.check_answer([6.004, 1], exact, slips=slips)  # right within atol
    assert not lib.check_answer([float("nan"), 1], exact, slips=slips)


def test_check_answer_refuses_malformed_slips_before_checking():
    with pytest.raises(TypeError, match="slips must be a dict"):
        lib.check_answer(1, 1, slips=[(1, "hint")])
    with pytest.raises(TypeError, match=r"slips\['x'\] must be a \(value, hint\) pair"):
        lib.check_answer(1, 1, slips={"x": 1})
    with pytest.raises(ValueError, match=r"slips\['x'\] has shape"):
        lib.check_answer([1, 2], [1, 2], slips={"x": ([1, 2, 3], "hint")})
