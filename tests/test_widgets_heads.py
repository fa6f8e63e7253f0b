"""Tests of lib/widgets/heads.py: the widget shows the weights of the head it says.

The reference is torch.nn.MultiheadAttention loaded with the parameters of a
lib.MultiHeadAttention built under the same seed, so the check does not go
through `head_weights`.
"""

import pytest
import torch
from torch import nn

import lib
from conftest import copy_mha
from lib import HeadsExplorer, draw_weights, head_weights

D_MODEL, SEED = 8, 3
TOKENS = ["the", "cat", "sat", "on", "the", "mat"]


@pytest.fixture
def x():
    g = torch.Generator().manual_seed(11)
    return 2.0 * torch.randn(len(TOKENS), D_MODEL, generator=g)


def reference_weights(x, n_heads, head, seed=SEED):
    """Per-head weights from nn.MultiheadAttention holding a seeded lib layer's parameters."""
    torch.manual_seed(seed)
    ours = lib.MultiHeadAttention(D_MODEL, n_heads)
    ref = nn.MultiheadAttention(D_MODEL, n_heads, batch_first=True)
    copy_mha(ours, ref)
    with torch.no_grad():
        xb = x.unsqueeze(0)
        _, w = ref(xb, xb, xb, need_weights=True, average_attn_weights=False)
    return w[0, head]


@pytest.mark.parametrize("n_heads,head", [(1, 0), (2, 1), (4, 2), (8, 7)])
def test_sliders_drive_the_displayed_weights(x, n_heads, head):
    explorer = HeadsExplorer(x, TOKENS, seed=SEED, n_heads=2)
    explorer.n_heads_slider.value = n_heads
    explorer.head_slider.value = head
    assert explorer.current_n_heads == n_heads and explorer.current_head == head
    assert explorer.current_weights.shape == (len(TOKENS), len(TOKENS))
    torch.testing.assert_close(explorer.current_weights, reference_weights(x, n_heads, head))


def test_fewer_heads_pulls_the_head_down(x):
    explorer = HeadsExplorer(x, TOKENS, seed=SEED, n_heads=8)
    explorer.head_slider.value = 6
    explorer.n_heads_slider.value = 2
    assert explorer.head_slider.max == 1
    assert explorer.current_head == explorer.head_slider.value == 1
    torch.testing.assert_close(explorer.current_weights, reference_weights(x, 2, 1))


def test_different_heads_differ(x):
    explorer = HeadsExplorer(x, TOKENS, seed=SEED, n_heads=4)
    first = explorer.current_weights.clone()
    explorer.head_slider.value = 1
    assert not torch.allclose(first, explorer.current_weights)


def test_head_weights_rows_sum_to_one_and_leave_rng_alone(x):
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    w = head_weights(x, 4, 3, seed=SEED)
    torch.testing.assert_close(w.sum(-1), torch.ones(len(TOKENS)))
    torch.testing.assert_close(torch.rand(1), expected_next)


def test_bad_inputs_raise(x):
    with pytest.raises(ValueError, match="not divisible"):
        head_weights(x, 3, 0)
    with pytest.raises(ValueError, match="head must be in"):
        head_weights(x, 2, 2)
    with pytest.raises(ValueError, match="one sequence"):
        head_weights(torch.zeros(2, 6, D_MODEL), 2, 0)
    with pytest.raises(ValueError, match="n_heads must divide"):
        HeadsExplorer(x, TOKENS, n_heads=3)
    with pytest.raises(ValueError, match="tokens"):
        HeadsExplorer(x, TOKENS[:-1])


def test_draw_weights_refuses_a_vector():
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    with pytest.raises(ValueError, match="matrix"):
        draw_weights(ax, torch.ones(3))


def test_the_page_gets_the_sequence_and_each_layers_projections(x):
    """The page recomputes the weights from the synced state: x and, for every choice of
    n_heads, the seeded layer's W_q, b_q, W_k, b_k. Its formula, written out here with torch
    from that state, must give the reference weights of nn.MultiheadAttention."""
    explorer = HeadsExplorer(x, TOKENS, seed=SEED, n_heads=2)
    state = explorer.widget.get_state()
    assert "heads-explorer" in state["_esm"] and state["choices"] == [1, 2, 4, 8]
    xs = torch.tensor(state["x"], dtype=torch.float64)
    for n_heads in (1, 2, 4, 8):
        p = {k: torch.tensor(v, dtype=torch.float64) for k, v in state["projections"][str(n_heads)].items()}
        q, k = xs @ p["wq"].T + p["bq"], xs @ p["wk"].T + p["bk"]
        d_k = D_MODEL // n_heads
        for head in range(n_heads):
            sl = slice(head * d_k, (head + 1) * d_k)
            w = (q[:, sl] @ k[:, sl].T / d_k**0.5).softmax(-1)
            torch.testing.assert_close(w, reference_weights(x, n_heads, head).double(), atol=1e-6, rtol=0)


def test_controls_are_the_widgets_synced_state(x):
    explorer = HeadsExplorer(x, TOKENS, seed=SEED, n_heads=2)
    explorer.n_heads_slider.value = 4
    explorer.head_slider.value = 3
    assert (explorer.widget.n_heads, explorer.widget.head) == (4, 3)
    assert explorer.title == "head 3 of 4 (d_k = 2)"
    explorer.widget.head = 1  # as the page sets it
    assert explorer.current_head == 1
    torch.testing.assert_close(explorer.current_weights, reference_weights(x, 4, 1))


def test_displayed_as_itself_or_as_its_widget(x, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    explorer = HeadsExplorer(x, TOKENS, seed=SEED)
    explorer._ipython_display_()
    assert shown == [explorer.widget]


def test_bad_seed_names_the_argument(x):
    """Before: seed=1.5 was silently truncated to 1 and seed='a' gave torch's message."""
    with pytest.raises(TypeError, match="seed must be an int"):
        head_weights(x, 2, 0, seed=1.5)
    with pytest.raises(TypeError, match="seed must be an int"):
        head_weights(x, 2, 0, seed="a")
    with pytest.raises(ValueError, match="seed must be non-negative"):
        HeadsExplorer(x, TOKENS, seed=-1)


def test_float64_sequence_names_x(x):
    """Before: the error named `query`, an argument the caller never passed."""
    with pytest.raises(TypeError, match="x must be float32"):
        head_weights(x.double(), 2, 0)
