"""Tests of lib/model/rnn_attention.py (chapter 1): the Bahdanau and Luong scores and steps.

References: torch.nn.Linear / nn.Bilinear modules holding the same weights,
scores written out one key at a time, and the R² of a linear map that is known.
"""

import pytest
import torch
from torch import nn

from lib import (
    additive_score,
    attend,
    bahdanau_step,
    linear_readout_r2,
    luong_step,
    multiplicative_score,
    run_encoder,
)

B, N, D_S, D_H, D_A = 2, 5, 3, 4, 6


@pytest.fixture
def tensors():
    g = torch.Generator().manual_seed(1)
    return {
        "s": torch.randn(B, D_S, generator=g),
        "h": torch.randn(B, N, D_H, generator=g),
        "w_s": torch.randn(D_A, D_S, generator=g),
        "w_h": torch.randn(D_A, D_H, generator=g),
        "v": torch.randn(D_A, generator=g),
        "b": torch.randn(D_A, generator=g),
    }


def test_additive_score_is_an_mlp_on_each_pair(tensors):
    t = tensors
    lin_s, lin_h, lin_v = nn.Linear(D_S, D_A), nn.Linear(D_H, D_A, bias=False), nn.Linear(D_A, 1, bias=False)
    with torch.no_grad():
        lin_s.weight.copy_(t["w_s"])
        lin_s.bias.copy_(t["b"])
        lin_h.weight.copy_(t["w_h"])
        lin_v.weight.copy_(t["v"][None])
    expected = torch.stack(
        [lin_v(torch.tanh(lin_s(t["s"]) + lin_h(t["h"][:, j])))[:, 0] for j in range(N)], dim=1
    )  # (B, N), one key at a time
    got = additive_score(t["s"], t["h"], t["w_s"], t["w_h"], t["v"], t["b"])
    assert got.shape == (B, N)
    assert torch.allclose(got, expected, atol=1e-6)


def test_multiplicative_score_general_is_a_bilinear_form(tensors):
    t = tensors
    w = torch.randn(D_S, D_H)
    bilinear = nn.Bilinear(D_S, D_H, 1, bias=False)
    with torch.no_grad():
        bilinear.weight.copy_(w[None])
    expected = torch.stack([bilinear(t["s"], t["h"][:, j])[:, 0] for j in range(N)], dim=1)
    assert torch.allclose(multiplicative_score(t["s"], t["h"], w), expected, atol=1e-6)


def test_multiplicative_score_dot():
    s, h = torch.tensor([1.0, 2.0]), torch.tensor([[3.0, 4.0], [-1.0, 0.5], [0.0, 0.0]])
    assert multiplicative_score(s, h).tolist() == [11.0, 0.0, 0.0]


def test_attend_weights_and_context():
    scores = torch.tensor([0.0, 0.0, torch.log(torch.tensor(2.0))])
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    context, weights = attend(scores, h)
    assert torch.allclose(weights, torch.tensor([0.25, 0.25, 0.5]))
    assert torch.allclose(context, torch.tensor([0.75, 0.75]))


def test_run_encoder_matches_nn_rnn():
    cell = nn.RNNCell(3, 5)
    rnn = nn.RNN(3, 5, batch_first=True)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(rnn, name + "_l0").copy_(getattr(cell, name))
    x = torch.randn(2, 7, 3)
    assert torch.allclose(run_encoder(cell, x), rnn(x)[0], atol=1e-6)


def test_bahdanau_attends_before_the_step_luong_after(tensors):
    h = tensors["h"]  # (B, N, D_H)
    s_prev = torch.randn(B, D_H)
    dot = multiplicative_score
    b_cell, l_cell = nn.GRUCell(2 + D_H, D_H), nn.GRUCell(2, D_H)
    w_c = torch.randn(3, 2 * D_H)
    y1, y2 = torch.randn(B, 2), torch.randn(B, 2)
    _, _, wb1 = bahdanau_step(b_cell, y1, s_prev, h, dot)
    _, _, wb2 = bahdanau_step(b_cell, y2, s_prev, h, dot)
    assert torch.equal(wb1, wb2)  # scored with s_{i-1}: the new input y plays no part
    assert torch.allclose(wb1, torch.softmax(torch.einsum("bnd,bd->bn", h, s_prev), -1))
    s1, h_tilde, wl1 = luong_step(l_cell, y1, s_prev, h, dot, w_c)
    _, _, wl2 = luong_step(l_cell, y2, s_prev, h, dot, w_c)
    assert not torch.allclose(wl1, wl2)  # scored with s_t, which has read y
    assert torch.allclose(wl1, torch.softmax(torch.einsum("bnd,bd->bn", h, l_cell(y1, s_prev)), -1))
    assert h_tilde.shape == (B, 3)


def test_linear_readout_r2_of_a_known_map():
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(600, 3, generator=g)
    exact = feats @ torch.tensor([[1.0], [2.0], [0.0]]) + 0.5
    noise = torch.randn(600, 1, generator=g)
    targets = torch.cat([exact, noise], dim=1)  # column 0 is linear in the features, column 1 is not
    r2 = linear_readout_r2(feats[:400], targets[:400], feats[400:], targets[400:])
    assert r2[0] == pytest.approx(1.0, abs=1e-9)
    assert abs(float(r2[1])) < 0.05


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda t: additive_score(t["s"], t["h"], t["w_h"], t["w_h"], t["v"]), r"w_s must be \(d_a=6, d_s=3\)"),
        (lambda t: multiplicative_score(t["s"], t["h"]), r"d_s == d_h.*\(2, 3\).*\(2, 5, 4\)"),
        (lambda t: multiplicative_score(t["s"], t["h"], torch.randn(4, 4)), r"w must be \(d_s=3, d_h=4\)"),
        (lambda t: attend(torch.randn(2, 4), t["h"]), "disagree on n"),
        (lambda t: run_encoder(nn.RNNCell(3, 4), torch.randn(2, 5, 2)), r"d_x=3"),
        (lambda t: linear_readout_r2(torch.randn(5, 2), torch.randn(4, 1), torch.randn(3, 2), torch.randn(3, 1)), "same number of rows"),
    ],
)
def test_bad_input(tensors, call, match):
    with pytest.raises(ValueError, match=match):
        call(tensors)


def test_integer_tensors_are_refused(tensors):
    with pytest.raises(TypeError, match="floating-point"):
        multiplicative_score(torch.tensor([1, 2]), torch.tensor([[1, 2]]))


def _step_inputs():
    g = torch.Generator().manual_seed(5)
    return torch.randn(2, 2, generator=g), torch.randn(2, 4, generator=g), torch.randn(2, 5, 4, generator=g)


@pytest.mark.parametrize(
    "call, error, match",
    [
        # a cell of the wrong input width: torch would say "input has inconsistent input_size"
        (lambda y, s, h: bahdanau_step(nn.GRUCell(2, 4), y, s, h, multiplicative_score),
         ValueError, r"bahdanau_step: the cell reads inputs of width 2, but d_y \+ d_h = 2 \+ 4 is 6"),
        (lambda y, s, h: luong_step(nn.GRUCell(6, 4), y, s, h, multiplicative_score, torch.randn(3, 8)),
         ValueError, r"luong_step: the cell reads inputs of width 6, but d_y is 2"),
        # a w_c of the wrong width: torch would say "mat1 and mat2 shapes cannot be multiplied"
        (lambda y, s, h: luong_step(nn.GRUCell(2, 4), y, s, h, multiplicative_score, torch.randn(3, 7)),
         ValueError, r"w_c must be \(d_out, d_h \+ d_s\) = \(d_out, 4 \+ 4\), got \(3, 7\)"),
        (lambda y, s, h: bahdanau_step(nn.GRUCell(6, 5), y, torch.randn(2, 5), h, multiplicative_score),
         ValueError, r"s_prev must be|d_s"),
        (lambda y, s, h: bahdanau_step(nn.GRUCell(6, 4), y, s[:1], h, multiplicative_score),
         ValueError, r"share the batch size"),
        (lambda y, s, h: luong_step(nn.GRUCell(2, 4), y, s, h[0], multiplicative_score, torch.randn(3, 8)),
         ValueError, r"h \(B, n, d_h\)"),
        (lambda y, s, h: bahdanau_step(nn.Linear(6, 4), y, s, h, multiplicative_score),
         TypeError, r"cell must be"),
        (lambda y, s, h: bahdanau_step(nn.GRUCell(6, 4), y, s, h, "dot"),
         TypeError, r"score must be a function"),
        (lambda y, s, h: luong_step(nn.GRUCell(2, 4), y.long(), s, h, multiplicative_score, torch.randn(3, 8)),
         TypeError, r"y_prev must be a floating-point tensor"),
    ],
)
def test_step_functions_refuse_bad_input(call, error, match):
    y, s, h = _step_inputs()
    with pytest.raises(error, match=match):
        call(y, s, h)


def test_step_functions_accept_good_input():
    y, s, h = _step_inputs()
    assert bahdanau_step(nn.GRUCell(6, 4), y, s, h, multiplicative_score)[0].shape == (2, 4)
    assert luong_step(nn.GRUCell(2, 4), y, s, h, multiplicative_score, torch.randn(3, 8))[1].shape == (2, 3)


def test_linear_readout_r2_refuses_too_few_training_rows():
    # 10 rows for 32 features: least squares fits them exactly and the held-out R² means nothing
    with pytest.raises(ValueError, match=r"32 features and a bias from 10 training rows"):
        linear_readout_r2(torch.randn(10, 32), torch.randn(10, 2), torch.randn(50, 32), torch.randn(50, 2))


def test_linear_readout_r2_of_a_constant_target_is_nan():
    feats = torch.randn(100, 3, generator=torch.Generator().manual_seed(1))
    targets = torch.cat([feats[:, :1], torch.ones(100, 1)], dim=1)  # column 1 has no variance
    r2 = linear_readout_r2(feats[:60], targets[:60], feats[60:], targets[60:])
    assert r2[0] == pytest.approx(1.0, abs=1e-9) and torch.isnan(r2[1])
