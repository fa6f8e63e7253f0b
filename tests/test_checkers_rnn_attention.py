"""The chapter 1 exercise checkers (lib/teach/checkers/rnn_attention.py).

Each checker gets (a) a correct solution written here (must pass), (b) a stub
("not implemented yet"), and (c) for every mistake it names, a wrong
implementation written here independently, which must be recognised by name.
"""

import pytest
import torch

import lib
from lib.teach.checking import NOT_IMPLEMENTED


def stub(*args, **kwargs):
    raise NotImplementedError


def additive_ok(s, h, w_s, w_h, v):
    # one key at a time, column-vector style: e_j = v . tanh(W_s s + W_h h_j)
    n = h.shape[-2]
    return torch.stack(
        [torch.tanh(s @ w_s.T + h[..., j, :] @ w_h.T) @ v for j in range(n)], dim=-1
    )


def additive_hidden(s, h, w_s, w_h):
    return torch.einsum("as,...s->...a", w_s, s).unsqueeze(-2) + torch.einsum("ah,...nh->...na", w_h, h)


ADDITIVE_WRONG = {
    "no tanh": lambda s, h, w_s, w_h, v: torch.einsum("...na,a->...n", additive_hidden(s, h, w_s, w_h), v),
    "tanh after v": lambda s, h, w_s, w_h, v: torch.einsum("...na,a->...n", additive_hidden(s, h, w_s, w_h), v)
    .tanh(),
    "v left out (the hidden units summed)": lambda s, h, w_s, w_h, v: additive_hidden(s, h, w_s, w_h)
    .tanh()
    .sum(-1),
    "softmax applied: weights returned instead of scores": lambda s, h, w_s, w_h, v: torch.softmax(
        additive_ok(s, h, w_s, w_h, v), -1
    ),
    # right without a batch, a broadcasting RuntimeError with one: named, not a raw torch error
    "no positions axis on W_s s": lambda s, h, w_s, w_h, v: torch.einsum(
        "...a,a->...", torch.tanh(torch.einsum("as,...s->...a", w_s, s) + h @ w_h.T), v
    ),
}


def test_a_mistake_that_raises_is_named_only_where_it_raises_the_same_way():
    # raises a different exception type on the batched cases: not the positions-axis mistake
    def raises_value_error(s, h, w_s, w_h, v):
        if s.dim() > 1:
            raise ValueError("my own check")
        return additive_ok(s, h, w_s, w_h, v)

    verdict = lib.check_additive_score(raises_value_error)
    assert not verdict and verdict.mistake is None and "raised ValueError: my own check" in verdict.message


def test_additive_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_additive_score(additive_ok)
    verdict = lib.check_additive_score(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(ADDITIVE_WRONG))
def test_additive_checker_names_each_mistake(mistake):
    verdict = lib.check_additive_score(ADDITIVE_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
    assert "?" in verdict.message


def attend_ok(scores, h):
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.einsum("...n,...nd->...d", weights, h), weights


def attend_wrong_axis(scores, h):
    weights = torch.softmax(scores, dim=0)
    return torch.einsum("...n,...nd->...d", weights, h), weights


def attend_no_softmax(scores, h):
    return torch.einsum("...n,...nd->...d", scores, h), scores


def attend_matmul(scores, h):
    weights = torch.softmax(scores, -1)
    return torch.matmul(weights, h), weights


def attend_swapped(scores, h):
    context, weights = attend_ok(scores, h)
    return weights, context


ATTEND_WRONG = {
    "softmax over the wrong axis": attend_wrong_axis,
    "no softmax: the raw scores used as weights": attend_no_softmax,
    "weights @ h broadcast over the batch": attend_matmul,
    "context and weights returned in the wrong order": attend_swapped,
}


def test_attend_checker_passes_a_solution_and_reports_a_stub():
    assert lib.check_attend(attend_ok)
    verdict = lib.check_attend(stub)
    assert not verdict and NOT_IMPLEMENTED in verdict.message


@pytest.mark.parametrize("mistake", list(ATTEND_WRONG))
def test_attend_checker_names_each_mistake(mistake):
    verdict = lib.check_attend(ATTEND_WRONG[mistake])
    assert not verdict and verdict.mistake == mistake
