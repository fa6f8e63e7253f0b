"""lib.teach.diagram: the architecture figure drawn from the model (chapter 7).

The tests read the drawn artists back: the boxes' labels, the ⊕ circles
(gid "residual-add") and the skip paths (gid "residual-skip")."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import lib  # noqa: E402
from lib.teach.diagram import record_forward  # noqa: E402

V = 30
SUBLAYERS = ("self_attn", "cross_attn", "feed_forward")


def draw(norm_first, n_layers=1):
    model = lib.Transformer(V, V, d_model=16, n_heads=2, n_layers=n_layers, d_ff=32, norm_first=norm_first)
    fig, ax = plt.subplots(figsize=(10, 9))
    lib.draw_architecture(model, ax=ax)
    boxes = []  # (x, y, name, label) of every module box
    for t in ax.texts:
        label = t.get_text()
        if "params" in label and "×" not in label:
            x, y = t.get_position()
            boxes.append((x, y, label.split(":")[0], label))
    adds = [p.center for p in ax.patches if p.get_gid() == "residual-add"]
    skips = [(line.get_xdata(), line.get_ydata()) for line in ax.lines if line.get_gid() == "residual-skip"]
    plt.close(fig)
    return boxes, adds, skips


def neighbour(boxes, x, y, above):
    """The name of the box in column x nearest above (or below) height y."""
    column = [(by, name) for bx, by, name, _ in boxes if abs(bx - x) < 1e-9]
    side = [(by, name) for by, name in column if (by > y if above else by < y)]
    if not side:
        return None
    return (min if above else max)(side)[1]


@pytest.mark.parametrize("norm_first", [False, True])
def test_one_residual_sum_per_sub_layer(norm_first):
    boxes, adds, skips = draw(norm_first)
    n_sublayers = sum(name in SUBLAYERS for *_, name, _ in boxes)
    assert n_sublayers == 5  # encoder: attention, FFN; decoder: self, cross, FFN
    assert len(adds) == len(skips) == n_sublayers


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_sum_follows_its_sub_layer_and_the_norm_sits_where_the_order_says(norm_first):
    boxes, adds, skips = draw(norm_first)
    for ax_x, ax_y in adds:
        below = neighbour(boxes, ax_x, ax_y, above=False)
        above = neighbour(boxes, ax_x, ax_y, above=True)
        assert below in SUBLAYERS  # ⊕ right after the sub-layer
        if norm_first:  # pre-LN: norm -> sub-layer -> ⊕
            sub_y = max(by for bx, by, name, _ in boxes if abs(bx - ax_x) < 1e-9 and by < ax_y)
            assert neighbour(boxes, ax_x, sub_y, above=False).startswith("norm")
        else:
            assert above.startswith("norm")  # post-LN: the LayerNorm takes the sum


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_skip_branches_before_the_norm_in_pre_ln_and_before_the_sub_layer_in_post_ln(norm_first):
    boxes, adds, skips = draw(norm_first)
    ends = {(round(x, 6), round(y, 6)) for x, y in adds}
    for xs, ys in skips:
        column_x, start_y, end_y = xs[0], ys[0], ys[-1]
        assert end_y > start_y
        assert any(abs(end_y - y) < 1e-9 and abs(column_x - x) < 1e-9 for x, y in ends)  # into a ⊕
        first = neighbour(boxes, column_x, start_y, above=True)
        if norm_first:
            assert first.startswith("norm")  # around norm + sub-layer
        else:
            assert first in SUBLAYERS  # around the sub-layer only
        # exactly one sub-layer is bypassed
        inside = [name for bx, by, name, _ in boxes if abs(bx - column_x) < 1e-9 and start_y < by < end_y]
        assert sum(name in SUBLAYERS for name in inside) == 1
        assert sum(name.startswith("norm") for name in inside) == (1 if norm_first else 0)


def test_only_the_decoder_self_attention_is_marked_causal():
    boxes, _, _ = draw(False)
    causal = [(x, name) for x, _, name, label in boxes if "masked (causal)" in label]
    decoder_x = max(x for x, *_ in boxes)
    assert causal == [(decoder_x, "self_attn")]


def test_record_forward_sees_masks_memory_and_weights():
    torch.manual_seed(0)
    model = lib.Transformer(V, V, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).eval()
    src, tgt = torch.tensor([[1, 2, 3, 0]]), torch.tensor([[1, 2, 3]])
    seen = record_forward(model, src, tgt, src_mask=lib.padding_mask(src, 0), tgt_mask=lib.causal_mask(3))
    cross = seen["decoder_layers.0.cross_attn"]
    assert torch.equal(cross["args"][1], seen["encoder_layers.1"]["output"])
    assert cross["weights"].shape == (1, 2, 3, 4) and (cross["weights"][..., 3] == 0).all()
    assert seen["generator"]["weights"] is None
    only = record_forward(model, src, tgt, names={"generator"})
    assert set(only) == {"generator"}
    assert not any(m._forward_hooks for m in model.modules())  # hooks removed


def test_record_forward_refuses_a_non_module():
    with pytest.raises(TypeError, match="model"):
        record_forward(lambda x: x, torch.zeros(1))
