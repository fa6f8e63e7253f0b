"""Alternative text (issue 15): lib.describe_figure for the chapters' figures, and the
widgets' images, which say in one sentence what they show after every redraw."""

import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import lib  # noqa: E402
from lib.teach import figures  # noqa: E402


def test_describe_figure_stores_the_text():
    fig = Figure()
    assert lib.figure_alt(fig) is None
    assert lib.describe_figure(fig, "  Loss against step:\n it falls.  ") is None  # no second display
    assert lib.figure_alt(fig) == "Loss against step: it falls."
    lib.describe_figure(fig, "Accuracy against step: it rises.")
    assert lib.figure_alt(fig) == "Accuracy against step: it rises."


@pytest.mark.parametrize("bad, error", [("", ValueError), ("a plot", ValueError), (None, TypeError), (3, TypeError)])
def test_describe_figure_refuses_empty_or_non_text(bad, error):
    with pytest.raises(error):
        lib.describe_figure(Figure(), bad)


def test_describe_figure_needs_a_figure():
    with pytest.raises(TypeError, match="Figure"):
        lib.describe_figure("fig", "Loss against step: it falls.")


class FakeFormatter:
    """The part of IPython's PNG formatter that describe_figure uses."""

    def __init__(self, printer):
        self.printers = {Figure: printer}

    def lookup_by_type(self, kind):
        return self.printers[kind]

    def for_type(self, kind, printer):
        self.printers[kind] = printer


def test_the_png_output_carries_the_alt_text(monkeypatch):
    formatter = FakeFormatter(lambda fig: "BASE64PNG")

    class Shell:
        class display_formatter:  # noqa: N801
            formatters = {"image/png": formatter}

    monkeypatch.setattr("IPython.get_ipython", lambda: Shell)
    described, plain = Figure(), Figure()
    lib.describe_figure(described, "Loss against step: it falls.")
    printer = formatter.lookup_by_type(Figure)
    assert printer(described) == ("BASE64PNG", {"alt": "Loss against step: it falls."})
    assert printer(plain) == "BASE64PNG"  # undescribed figures are shown as before
    lib.describe_figure(plain, "Accuracy against step: it rises.")
    assert formatter.lookup_by_type(Figure) is printer  # wrapped once
    # a retina printer returns (data, {width, height}): both kept
    formatter.printers[Figure] = lambda fig: ("B64", {"width": 320})
    figures._install_png_formatter()
    assert formatter.lookup_by_type(Figure)(plain) == ("B64", {"width": 320, "alt": "Accuracy against step: it rises."})


def assert_image_described(explorer, *fragments):
    """The page computes its own description (tests/browser/test_site.py compares it);
    Python keeps the same sentence in ``.alt``."""
    for fragment in fragments:
        assert fragment in explorer.alt, (fragment, explorer.alt)


def test_schedule_image_says_what_it_shows_after_each_redraw():
    ex = lib.ScheduleExplorer(total_steps=2000, warmup_steps=400)
    assert_image_described(ex, "Learning rate (y axis) against training step (x axis, 1 to 2000)",
                           f"peak {ex.peak_lr:.2e} at step 400", "square root")
    ex.warmup.value = 2000
    assert_image_described(ex, "warmup_steps=2000", "rises linearly over all 2000 steps")


def test_positions_image_says_what_it_shows():
    ex = lib.PositionExplorer(d_model=16, max_pos=30, dims=(0, 3), pos_a=2, pos_b=9)
    assert_image_described(ex, "position 0 to 29", "dimensions 0 to 3", "positions 2 and 9",
                           f"cosine similarity is {ex.cosine:.3f}")
    ex.dims.value = (5, 5)
    assert_image_described(ex, "dimension 5,", "dimension 5, whose")


def test_heads_image_names_the_largest_weight():
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    ex = lib.HeadsExplorer(x, list("abcde"), n_heads=2)
    w = ex.current_weights
    i, j = divmod(int(torch.argmax(w)), w.shape[1])
    assert_image_described(ex, "head 0 of 2 (d_k = 4)", f"{w[i, j].item():.2f}", f"query {i} (", f"key {j} (")
    ex.n_heads_slider.value = 4
    ex.head_slider.value = 3
    assert_image_described(ex, "head 3 of 4 (d_k = 2)")
    assert math.isfinite(float(ex.alt.split("the largest, ")[1].split(",")[0]))
