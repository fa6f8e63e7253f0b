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


@pytest.mark.parametrize("n", [5, 9, 10, 28])
def test_layers_needed_to_connect_the_ends(n):
    torch.manual_seed(0)
    d = 4
    x = torch.randn(1, n, d)

    def layers_needed(k, dilated):
        for L in range(1, 64):
            stack = conv_stack(d, L, k, dilated)
            if depends_on(lambda t: stack(t.transpose(1, 2)).transpose(1, 2), x, n - 1, 0):
                return L

    hand_contiguous = -(-(n - 1) // 2)  # ceil((n-1)/(k-1)) with k = 3
    hand_dilated = next(L for L in range(1, 20) if 3**L >= n)  # smallest L with 3^L >= n
    assert layers_needed(3, False) == hand_contiguous
    assert layers_needed(3, True) == hand_dilated


def test_depends_on_attention_and_causality():
    torch.manual_seed(0)
    mha = lib.MultiHeadAttention(4, 2).eval()
    x = torch.randn(1, 6, 4)
    assert depends_on(lambda t: mha(t, t, t), x, 0, 5)
    causal = lib.causal_mask(6)
    assert not depends_on(lambda t: mha(t, t, t, causal), x, 0, 5)
    assert depends_on(lambda t: mha(t, t, t, causal), x, 5, 0)
    with pytest.raises(ValueError):
        conv_stack(4, 2, k=1)
