"""Chapter 6's PositionExplorer: drive the controls from Python, check the numbers it shows.

Expected values are computed here from math.sin / math.cos, not from lib.
"""

import math
import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from lib import PositionExplorer  # noqa: E402


def pe(pos: int, dim: int, d_model: int) -> float:
    """The paper's formula, written out: sin for even dimensions, cos for odd ones."""
    angle = pos / 10000 ** ((dim - dim % 2) / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


def expected(a: int, b: int, lo: int, hi: int, d_model: int):
    va = [pe(a, d, d_model) for d in range(lo, hi + 1)]
    vb = [pe(b, d, d_model) for d in range(lo, hi + 1)]
    dot = sum(x * y for x, y in zip(va, vb))
    cos = dot / math.sqrt(sum(x * x for x in va) * sum(y * y for y in vb))
    return va, vb, dot, cos


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_initial_values_match_formula():
    ex = PositionExplorer(d_model=64, max_pos=50, pos_a=5, pos_b=12, dims=(0, 5))
    va, vb, dot, cos = expected(5, 12, 0, 5, 64)
    assert ex.values_a == pytest.approx(va, abs=1e-6)
    assert ex.values_b == pytest.approx(vb, abs=1e-6)
    assert ex.dot == pytest.approx(dot, abs=1e-6)
    assert ex.similarity == pytest.approx(cos, abs=1e-6)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("a, b, dims", [(3, 10, (0, 7)), (0, 49, (10, 31)), (17, 17, (1, 1)), (40, 2, (60, 63))])
def test_setting_controls_updates_numbers(a, b, dims):
    ex = PositionExplorer(d_model=64, max_pos=50, draw=False)
    before = ex.similarity
    ex.pos_a.value = a
    ex.pos_b.value = b
    ex.dims.value = dims
    va, vb, dot, cos = expected(a, b, dims[0], dims[1], 64)
    assert ex.values_a == pytest.approx(va, abs=1e-6)
    assert ex.values_b == pytest.approx(vb, abs=1e-6)
    assert ex.dot == pytest.approx(dot, abs=1e-6)
    assert ex.cosine == pytest.approx(cos, abs=1e-6)
    assert ex.similarity == ex.cosine
    # the text the reader sees carries the same numbers, to 4 decimals
    shown = [float(x) for x in re.findall(r"<b>(-?\d+\.\d{4})</b>", ex.readout.value)]
    assert shown == pytest.approx([dot, cos], abs=6e-5)
    assert f"PE[{a}, {dims[0]}:{dims[1] + 1}]" in ex.readout.value
    if (a, b, dims) != (5, 12, (0, 5)):
        assert ex.similarity != before or a == b


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_same_position_has_cosine_one_and_the_page_state_follows():
    ex = PositionExplorer(d_model=16, max_pos=30, draw=True)
    ex.pos_b.value = ex.pos_a.value
    state = ex.widget.get_state()
    assert state["pos_b"] == state["pos_a"] == 5 and state["dims"] == [0, 5] and "positions-explorer" in state["_esm"]
    assert ex.cosine == pytest.approx(1.0, abs=1e-12)
    assert ex.dot == pytest.approx(sum(pe(5, d, 16) ** 2 for d in range(0, 6)), abs=1e-6)
    assert ex.dot == pytest.approx(3.0, abs=1e-6)  # three sin²+cos² pairs


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="pos_a=60 is outside"):
        PositionExplorer(max_pos=50, pos_a=60)
    with pytest.raises(ValueError, match="d_model must be even"):
        PositionExplorer(d_model=63)
    with pytest.raises(ValueError, match="dims=.*d_model=16"):
        PositionExplorer(d_model=16, dims=(3, 16))
    with pytest.raises(TypeError, match="d_model must be an int"):
        PositionExplorer(d_model=64.0)


@pytest.mark.parametrize("dims, drawn, note", [
    ((0, 63), (0, 7), "showing dims 0-7 of 0-63"),
    ((10, 20), (10, 17), "showing dims 10-17 of 10-20"),
    ((56, 63), (56, 63), ""),
    ((3, 3), (3, 3), ""),
])
def test_says_when_only_some_dimensions_have_curves(dims, drawn, note):
    """jupyterlab.md §3: the left panel drew 8 curves for dims 0-63 and said nothing."""
    ex = PositionExplorer(d_model=64, max_pos=50, dims=dims)
    assert ex.curve_dims == drawn and ex.curves_note == note
    if note:
        assert note in ex.readout.value and note in ex.title
        assert f"all {dims[1] - dims[0] + 1} dimensions" in ex.readout.value
    else:
        assert "showing" not in ex.readout.value and ex.title == f"curves: dims {dims[0]}-{dims[1]}"


def test_similarity_is_an_alias_of_cosine():
    ex = PositionExplorer(d_model=16, max_pos=30, draw=False)
    ex.pos_b.value = 20
    assert ex.similarity == ex.cosine
    assert "similarity" not in vars(ex)  # one number, not two copies that could drift apart


def test_displayed_as_its_widget(monkeypatch):
    import IPython.display

    ex = PositionExplorer(d_model=16, max_pos=30)
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    ex._ipython_display_()
    assert shown == [ex.widget]


def test_a_bad_dims_value_set_from_python_is_refused():
    ex = PositionExplorer(d_model=16, max_pos=30)
    with pytest.raises(ValueError, match="dims="):
        ex.dims.value = (5, 3)


def test_bad_positions_and_dims_name_the_argument():
    """Before: pos_a=5.5 and pos_a=True were accepted, dims=(0,) gave 'not enough values to
    unpack'."""
    with pytest.raises(TypeError, match="pos_a must be an int"):
        PositionExplorer(d_model=16, pos_a=5.5, draw=False)
    with pytest.raises(TypeError, match="pos_b must be an int"):
        PositionExplorer(d_model=16, pos_b=True, draw=False)
    with pytest.raises(ValueError, match="dims must be a pair"):
        PositionExplorer(d_model=16, dims=(0,), draw=False)
    with pytest.raises(TypeError, match="dims must hold two ints"):
        PositionExplorer(d_model=16, dims=(0.0, 3), draw=False)


def test_zero_vector_cosine_is_called_undefined_not_nan():
    """Dimension 0 (a sine) is 0 at position 0: the cosine of a zero vector has no value."""
    ex = PositionExplorer(d_model=16, pos_a=0, pos_b=3, dims=(0, 0), draw=False)
    assert math.isnan(ex.cosine)
    assert "undefined" in ex.readout.value and "nan" not in ex.readout.value
