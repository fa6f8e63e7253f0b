"""lib/teach/complexity.py against torch's FLOP counter, autograd and hand formulas."""

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import lib
from lib import conv_stack, depends_on, graph_depth, layer_macs


def _flops(f, *args):
    with FlopCounterMode(display=False) as counter:
        f(*args)
    return counter.get_total_flops()


@pytest.mark.parametrize("n,d", [(5, 8), (16, 12), (40, 8)])
def test_macs_match_the_flop_counter(n, d):
    torch.manual_seed(0)
    x = torch.randn(1, n, d)
    mha = lib.MultiHeadAttention(d, 2).eval()
    assert _flops(mha, x, x, x) == 2 * layer_macs("attention", n, d)  # the counter counts a multiply-add as 2
    assert _flops(nn.GRU(d, d, batch_first=True), x) == 2 * layer_macs("gru", n, d)
    conv = nn.Conv1d(d, d, 3, padding=1)
    assert _flops(conv, x.transpose(1, 2)) == 2 * layer_macs("conv", n, d, k=3)


def test_macs_hand_values_and_crossover():
    assert layer_macs("attention", 10, 4, with_projections=False) == 2 * 100 * 4
    assert layer_macs("gru", 10, 4) == 6 * 10 * 16
    assert layer_macs("conv", 10, 4, k=5) == 5 * 10 * 16
    d = 32
    cheaper = [n for n in range(1, 100) if layer_macs("attention", n, d) < layer_macs("gru", n, d)]
    assert cheaper == list(range(1, d))  # 4nd² + 2n²d < 6nd²  <=>  n < d
    with pytest.raises(ValueError, match="kind"):
        layer_macs("lstm", 3, 4)


def test_graph_depth_grows_with_n_only_for_the_recurrence():
    torch.manual_seed(0)
    d = 4
    cell = nn.GRUCell(d, d)
    mha = lib.MultiHeadAttention(d, 2).eval()
    depths_rnn, depths_att = [], []
    for n in (4, 8, 16):
        x = torch.randn(n, 1, d, requires_grad=True)
        h = torch.zeros(1, d)
        for t in range(n):
            h = cell(x[t], h)
        depths_rnn.append(graph_depth(h))
        xa = torch.randn(1, n, d, requires_grad=True)
        depths_att.append(graph_depth(mha(xa, xa, xa)))
    assert depths_att[0] == depths_att[1] == depths_att[2]
    step = depths_rnn[1] - depths_rnn[0]
    assert step > 0 and depths_rnn[2] - depths_rnn[1] == 2 * step  # linear in n
    # a hand-built chain: y = ((x * 2) + 1).exp()  has depth 3 (+1 for the leaf's accumulator)
    x = torch.ones(3, requires_grad=True)
    assert graph_depth(((x * 2) + 1).exp()) == 4
    with pytest.raises(ValueError):
        graph_depth(torch.ones(2))


def test_graph_depth_counts_a_leaf_that_requires_grad_once_and_constants_not_at_all():
    # as graph_depth's docstring says: MulBackward + w's AccumulateGrad = 2
    w = torch.ones(3, requires_grad=True)
    assert graph_depth(w * 2) == 2
    assert graph_depth(w * torch.ones(3)) == 2  # a tensor constant adds no node
    assert graph_depth(torch.tanh(w * 2 + 1)) == 4
    v = torch.ones(3, requires_grad=True)
    assert graph_depth(w * v) == 2  # two leaves side by side, not one after the other


@pytest.mark.parametrize("n", [5, 9, 10, 28])
def test_layers_needed_to_connect_the_ends(n):
    torch.manual_seed(0)
    d = 4
    x = torch.randn(1, n, d)

    def layers_needed(k, dilated):
        for L in range(1, 64):
            stack = conv_stack(d, L, k, dilated).double()
            if depends_on(lambda t: stack(t.transpose(1, 2)).transpose(1, 2), x, n - 1, 0):
                return L

    hand_contiguous = -(-(n - 1) // 2)  # ceil((n-1)/(k-1)) with k = 3
    hand_dilated = next(L for L in range(1, 20) if 3**L >= n)  # smallest L with 3^L >= n
    assert layers_needed(3, False) == hand_contiguous
    assert layers_needed(3, True) == hand_dilated


def test_depends_on_attention_and_causality():
    torch.manual_seed(0)
    mha = lib.MultiHeadAttention(4, 2).eval().double()
    x = torch.randn(1, 6, 4)
    assert depends_on(lambda t: mha(t, t, t), x, 0, 5)
    causal = lib.causal_mask(6)
    assert not depends_on(lambda t: mha(t, t, t, mask=causal), x, 0, 5)
    assert depends_on(lambda t: mha(t, t, t, mask=causal), x, 5, 0)
    with pytest.raises(ValueError):
        conv_stack(4, 2, k=1)


def test_depends_on_a_long_gru_is_not_fooled_by_underflow():
    """Output 299 of a GRU depends on input 0. In float32 the gradient through 299
    steps underflows to exactly 0 (the old depends_on answered False); in float64 it
    does not. The module is passed itself and copied to float64, unchanged."""
    torch.manual_seed(0)
    gru = nn.GRU(64, 64, batch_first=True)
    x = torch.randn(1, 300, 64)
    xx = x.clone().requires_grad_(True)
    (grad32,) = torch.autograd.grad(gru(xx)[0][:, 299].sum(), xx)
    assert grad32[:, 0].abs().sum() == 0  # the float32 false negative this guards against
    assert depends_on(gru, x, 299, 0)
    assert not depends_on(gru, x, 0, 299)  # a left-to-right recurrence
    assert next(gru.parameters()).dtype == torch.float32  # the caller's module is untouched


def test_depends_on_refuses_what_it_cannot_answer():
    mha32 = lib.MultiHeadAttention(4, 2).eval()
    x = torch.randn(1, 6, 4)
    with pytest.raises(TypeError, match="float64"):
        depends_on(lambda t: mha32(t, t, t), x, 0, 5)  # float32 modules inside a function
    with pytest.raises(TypeError, match="float64"):
        depends_on(lambda t: t.float(), x, 0, 0)  # computes in float32
    with pytest.raises(ValueError, match="out_pos"):
        depends_on(lambda t: t, x.double(), 6, 0)
    with pytest.raises(ValueError, match="in_pos"):
        depends_on(lambda t: t, x.double(), 0, 1.5)
    with pytest.raises(ValueError, match="shape"):
        depends_on(lambda t: t, torch.randn(6, 4), 0, 0)


@pytest.mark.parametrize("flag", ["no", 0, 1, None])
def test_layer_macs_refuses_a_flag_that_is_not_a_bool(flag):
    """A truthy string once counted the projections silently: "no" meant yes."""
    with pytest.raises(TypeError, match="with_projections"):
        lib.layer_macs("attention", 8, 4, with_projections=flag)


@pytest.mark.parametrize("flag", ["no", 0, 1, None])
def test_conv_stack_refuses_a_dilated_flag_that_is_not_a_bool(flag):
    with pytest.raises(TypeError, match="dilated"):
        lib.conv_stack(4, 2, 3, dilated=flag)
