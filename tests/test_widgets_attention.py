"""Tests of lib/widgets/attention_explorer.py: the Q/K/V explorer shows what attention computes.

The reference is torch.nn.functional.scaled_dot_product_attention (with its
own `scale` argument and a boolean mask), or a hand value, never `lib`, so
that each test compares the widget with an independent computation. The
browser half (lib/widgets/static/attention_explorer.js) is tested by the book's
headless-browser test; here only its DOM contract is guarded.
"""

import math
import pathlib

import pytest
import torch
import torch.nn.functional as F

from lib import AttentionExplorer, ExplorerValueError, explorer_values, plot_heatmap

JS = pathlib.Path(__file__).resolve().parents[1] / "lib" / "widgets" / "static" / "attention_explorer.js"


def reference(q, k, v, scale=True, causal=False, temperature=1.0):
    """weights and output from torch's fused attention, with its own scale and mask arguments."""
    q, k, v = (torch.tensor(x, dtype=torch.float64) for x in (q, k, v))
    m, n, d_k = q.shape[0], k.shape[0], q.shape[1]
    factor = (1 / math.sqrt(d_k) if scale else 1.0) / temperature
    mask = torch.ones(m, n, dtype=torch.bool).tril() if causal else None
    out = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask, scale=factor)[0]
    logits = (q @ k.T * factor).masked_fill(~mask, float("-inf")) if causal else q @ k.T * factor
    return logits.softmax(-1), out


def assert_matches(widget, **reference_kw):
    weights, out = reference(widget.q, widget.k, widget.v, **reference_kw)
    assert torch.allclose(torch.tensor(widget.weights, dtype=torch.float64), weights, atol=1e-12)
    assert torch.allclose(torch.tensor(widget.output, dtype=torch.float64), out, atol=1e-12)
    assert widget.argmax == weights.argmax(-1).tolist()


def test_starts_from_the_course_example_with_hand_values():
    w = AttentionExplorer()
    assert w.q == [[1, 0], [0, 1], [1, 1]] and w.k == [[1, 1], [0, 1], [1, 0]] and w.v == [[0, 2], [1, 1], [2, 0]]
    a, b = math.exp(1 / math.sqrt(2)), math.exp(math.sqrt(2))
    hand_row_2 = [b / (b + 2 * a), a / (b + 2 * a), a / (b + 2 * a)]  # scores √2, 1/√2, 1/√2
    assert w.weights[2] == pytest.approx(hand_row_2, abs=1e-12)
    assert w.output[0] == pytest.approx([1.0, 1.0], abs=1e-12)  # symmetric weights on [0,2] and [2,0]
    assert w.scores[2] == pytest.approx([math.sqrt(2), 1 / math.sqrt(2), 1 / math.sqrt(2)], abs=1e-12)
    # query 0 ties keys 0 and 2, query 1 ties keys 0 and 1: the lowest index wins
    assert w.argmax == [0, 0, 0]
    assert w.summary() == [
        "query 0 attends most to key 0 (tied with key 2)",
        "query 1 attends most to key 0 (tied with key 1)",
        "query 2 attends most to key 0",
    ]


def test_summary_reports_ties_and_fully_masked_rows_like_the_browser():
    # three equal keys: every key ties; a causal mask over more keys than queries
    w = AttentionExplorer(q=[[1.0, 0.0]], k=[[1.0, 5.0]] * 3, v=[[1.0], [2.0], [3.0]])
    assert w.summary() == ["query 0 attends most to key 0 (tied with key 1, 2)"]
    w.set_matrices(q=[[0.0, 1.0]], k=[[0.0, 1.0], [0.0, 3.0], [0.0, 2.0]])
    assert w.summary() == ["query 0 attends most to key 1"]
    # the JS writes the same words (the DOM contract below guards them)
    source = JS.read_text(encoding="utf-8")
    assert "(tied with key ${ties.join(\", \")})" in source and "sees no key" in source


def test_editing_an_entry_recomputes():
    w = AttentionExplorer()
    w.q = [[1.0, 3.0], [0.0, 1.0], [1.0, 1.0]]
    assert_matches(w)
    assert w.argmax[0] == 0  # q0 = [1, 3]: scores 4, 3, 1 over √2
    w.k = [[1.0, 1.0], [0.0, 5.0], [1.0, 0.0]]
    assert_matches(w)
    assert w.argmax[0] == 1  # now k1 = [0, 5] gives q0 the score 15
    w.v = [[0.5, -1.0], [2.0, 0.0], [1.0, 3.0]]
    assert_matches(w)


def test_toggle_scale_causal_and_temperature():
    w = AttentionExplorer(q=[[0.3, -1.2], [2.0, 0.7], [-0.4, 1.5]])
    w.scale = False
    assert_matches(w, scale=False)
    w.causal = True
    assert_matches(w, scale=False, causal=True)
    assert w.scores[0][1] is None and w.scores[0][2] is None and w.scores[1][2] is None
    assert w.weights[0] == [1.0, 0.0, 0.0]
    w.temperature = 0.25
    assert_matches(w, scale=False, causal=True, temperature=0.25)
    w.scale, w.causal, w.temperature = True, False, 3.0
    assert_matches(w, temperature=3.0)


def test_high_temperature_flattens_low_sharpens():
    w = AttentionExplorer(q=[[2.0, 0.0]], k=[[1.0, 0.0], [0.0, 1.0]], v=[[1.0], [0.0]])
    w.temperature = 1e6
    assert w.weights[0] == pytest.approx([0.5, 0.5], abs=1e-6)
    w.temperature = 1e-3
    assert w.weights[0] == pytest.approx([1.0, 0.0], abs=1e-12)


def test_causal_with_more_queries_than_keys():
    q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]]
    k = [[1.0, 1.0], [0.0, 1.0]]
    v = [[1.0, 0.0], [0.0, 1.0]]
    w = AttentionExplorer(q=q, k=k, v=v, causal=True)
    assert_matches(w, causal=True)
    assert w.scores[3][1] is not None  # query 3 sees both keys


def test_set_matrices_changes_shapes_together():
    w = AttentionExplorer()
    w.set_matrices(k=[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 2.0]], v=[[1.0], [2.0], [3.0], [4.0]])
    assert len(w.weights[0]) == 4 and len(w.output[0]) == 1
    assert_matches(w)


def lib_reference(widget):
    """The widget's formula at its defaults (scale on, no mask, T = 1) is lib's attention."""
    import lib

    q, k, v = (torch.tensor(x, dtype=torch.float64) for x in (widget.q, widget.k, widget.v))
    output, weights = lib.scaled_dot_product_attention(q, k, v)
    return weights, output


def record_messages(widget, monkeypatch):
    """Every comm message the widget would send to the browser, as a list of state dicts."""
    sent = []

    def fake_send(msg, buffers=None):
        sent.append(msg)

    monkeypatch.setattr(widget, "_send", fake_send)
    return sent


GROW = dict(k=[[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [-1.0, 0.0]], v=[[0.0, 2.0], [1.0, 1.0], [2.0, 0.0], [3.0, 3.0]])
SHRINK = dict(k=[[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]], v=[[5.0, 5.0], [1.0, 1.0], [2.0, 0.0]])
WIDEN = dict(q=[[1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [1.0, 1.0, -1.0]], k=[[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 3.0]])


@pytest.mark.parametrize("steps", [[GROW], [GROW, SHRINK], [WIDEN], [GROW, SHRINK, WIDEN]],
                         ids=["grow", "grow-shrink", "change-d_k", "grow-shrink-widen"])
def test_set_matrices_sends_one_message_with_consistent_shapes(steps, monkeypatch):
    """The browser must never receive a K of one length with a V of another (jupyterlab.md §1):
    every set_matrices call is ONE update message carrying the new inputs and outputs."""
    w = AttentionExplorer()
    sent = record_messages(w, monkeypatch)
    for step in steps:
        before = len(sent)
        w.set_matrices(**step)
        new = sent[before:]
        assert len(new) == 1 and new[0]["method"] == "update", new
        state = new[0]["state"]
        assert set(step) <= set(state) and {"weights", "output", "scores"} <= set(state)
        for name, value in step.items():
            assert state[name] == value
        q, k, v = (state.get(name, getattr(w, name)) for name in ("q", "k", "v"))
        assert len(q[0]) == len(k[0]) and len(k) == len(v)
        weights, output = lib_reference(w)
        assert torch.allclose(torch.tensor(state["weights"], dtype=torch.float64), weights, atol=1e-12)
        assert torch.allclose(torch.tensor(state["output"], dtype=torch.float64), output, atol=1e-12)
        assert_matches(w)
    # the shrink of jupyterlab.md §1: the kernel's output, which the page showed wrongly
    if steps[-1] is SHRINK and len(steps) == 2:
        assert w.output[0] == pytest.approx([3.006, 2.203], abs=1e-3)


def test_refused_set_matrices_sends_nothing(monkeypatch):
    w = AttentionExplorer()
    sent = record_messages(w, monkeypatch)
    with pytest.raises(ExplorerValueError):
        w.set_matrices(k=GROW["k"])  # K grows, V does not
    assert sent == [] and len(w.k) == 3


def browser_edit(widget, **state):
    """What ipywidgets does with an 'update' message from the page."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state}}, "buffers": []})


def test_a_bad_edit_from_the_browser_is_shown_in_the_widget_and_undone(monkeypatch):
    w = AttentionExplorer()
    sent = record_messages(w, monkeypatch)
    before = (w.q, w.k, w.v, w.weights)
    browser_edit(w, v=[[0.0, 2.0], [1.0, 1.0], [2.0, 0.0], [3.0, 3.0]])  # a stale 4-row V
    assert (w.q, w.k, w.v, w.weights) == before  # nothing applied
    assert w.error.startswith("Not applied: K and V must have the same number of rows n")
    assert "V is (4, 2)" in w.error
    updates = [m["state"] for m in sent if m["method"] == "update"]
    assert {"error": w.error} in updates  # the page is told why ...
    assert any(u.get("v") == before[2] for u in updates)  # ... and gets back the V the kernel kept
    # a good edit applies, recomputes, and clears the error
    browser_edit(w, q=[[2.0, 2.0], [0.0, 1.0], [1.0, 1.0]])
    assert w.error == "" and w.q[0] == [2.0, 2.0]
    assert_matches(w)
    updates = [m["state"] for m in sent if m["method"] == "update"]
    assert updates[-1].get("error") == "" or any(u.get("error") == "" for u in updates[-2:])


def test_a_good_edit_from_the_browser_with_k_and_v_together():
    w = AttentionExplorer()
    browser_edit(w, **GROW)
    assert w.error == "" and len(w.v) == 4
    assert_matches(w)


def test_bad_temperature_from_the_browser_is_shown():
    w = AttentionExplorer()
    browser_edit(w, temperature=-1.0)
    assert w.temperature == 1.0 and "temperature must be a finite number > 0" in w.error
    browser_edit(w, causal="yes")  # not a bool: traitlets refuses it, the widget says so
    assert w.causal is False and w.error.startswith("Not applied:") and "causal" in w.error


def test_tensors_are_accepted():
    w = AttentionExplorer(q=torch.tensor([[1.0, 2.0]]), k=torch.eye(2), v=torch.tensor([[2.0, 3.0], [4.0, 1.0]]))
    assert w.q == [[1.0, 2.0]]
    assert_matches(w)


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"q": [[1.0, 2.0], [3.0]]}, ["Q", "rectangular", "[2, 1]"]),
        ({"q": [[1.0, 2.0, 3.0]]}, ["Q is (1, 3)", "K is (3, 2)"]),
        ({"k": [[1.0, 2.0]] * 4}, ["K is (4, 2)", "V is (3, 2)"]),
        ({"v": [[1.0, 2.0]] * 2}, ["K is (3, 2)", "V is (2, 2)"]),
        ({"temperature": 0.0}, ["temperature", "> 0", "0.0"]),
        ({"temperature": -2.0}, ["temperature", "-2.0"]),
        ({"q": [[math.nan, 1.0]] * 3}, ["Q[0][0]", "nan"]),
        ({"v": []}, ["V", "non-empty"]),
        ({"k": [["a", 1.0]] * 3}, ["K[0][0]", "'a'"]),
    ],
)
def test_bad_input_raises_value_error_and_changes_nothing(changes, words):
    w = AttentionExplorer()
    before = (w.q, w.k, w.v, w.temperature, w.weights)
    with pytest.raises(ValueError) as info:
        for name, value in changes.items():
            setattr(w, name, value)
    for word in words:
        assert word in str(info.value)
    assert (w.q, w.k, w.v, w.temperature, w.weights) == before


def test_bad_input_in_constructor_and_set_matrices():
    with pytest.raises(ValueError, match="temperature"):
        AttentionExplorer(temperature=-1.0)
    w = AttentionExplorer()
    with pytest.raises(ExplorerValueError, match=r"K is \(5, 2\), V is \(4, 1\)"):
        w.set_matrices(k=[[1.0, 0.0]] * 5, v=[[1.0]] * 4)
    assert len(w.k) == 3 and len(w.v) == 3  # rolled back
    with pytest.raises(ValueError, match="d_k"):
        explorer_values([[1.0]], [[1.0, 2.0]], [[1.0]])


def test_widgets_do_not_share_their_matrices():
    a, b = AttentionExplorer(), AttentionExplorer()
    a.q = [[5.0, 5.0], [0.0, 1.0], [1.0, 1.0]]
    assert b.q[0] == [1.0, 0.0]


def test_esm_is_the_js_file_and_it_keeps_the_dom_contract():
    source = JS.read_text(encoding="utf-8")
    assert AttentionExplorer()._esm == source
    for needle in [
        "qkv-explorer",
        '"data-matrix"',
        '"data-row"',
        '"data-col"',
        '"data-control": control',
        '"data-control": "temperature"',
        'checkbox("scale"',
        'checkbox("causal"',
        '"data-output"',
        '"data-value"',
        'heatmapTable("scores"',
        'heatmapTable("weights"',
        'heatmapTable("output"',
        'addEventListener("input"',
        'addEventListener("change"',
        "model.save_changes()",
        "toFixed(3)",
        "attends most to key",
        "export default",
        # every dimension in the shape key; inconsistent shapes refused; errors in the widget
        "state.q.length, width(state.q), state.k.length, width(state.k), state.v.length, width(state.v)",
        "modelProblem = shapeProblem(fresh)",
        '"qkv-error"',
        'model.get("error")',
        '"data-shape"',
    ]:
        assert needle in source, needle
    for forbidden in ["http://", "https://", "import "]:  # no network, no libraries
        assert forbidden not in source, forbidden


def test_plot_heatmap_draws_the_matrix_and_blanks_masked_entries():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    image = plot_heatmap(ax, [[0.25, None], [1.0, 0.5]], ["q0", "q1"], ["k0", "k1"], "weights")
    data = image.get_array().filled(math.nan)  # matplotlib masks the NaN entries
    assert data[0, 0] == 0.25 and data[1, 0] == 1.0 and math.isnan(data[0, 1])
    assert [t.get_text() for t in ax.texts] == ["0.25", "–", "1.00", "0.50"]
    assert ax.get_title() == "weights" and [t.get_text() for t in ax.get_xticklabels()] == ["k0", "k1"]
    with pytest.raises(ValueError, match="3 labels for 2 rows"):
        plot_heatmap(ax, [[1.0], [2.0]], ["a", "b", "c"])
    plt.close(fig)


def test_displayed_as_itself_or_as_its_widget():
    """Like the other explorers, `.widget` is what to display; here it is the explorer itself."""
    w = AttentionExplorer()
    assert w.widget is w
    bundle = w._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == w.model_id
