"""lib/widgets/schedule.py: moving a slider recomputes the plotted schedule."""

import pytest

from lib import ScheduleExplorer


def hand_noam(step, d_model, warmup, factor=1.0):
    # the paper's formula, written out again here
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def test_initial_state_is_the_papers_example():
    ex = ScheduleExplorer()
    assert ex.peak_step == 4000
    assert abs(ex.peak_lr - 512 ** -0.5 * 4000 ** -0.5) < 1e-12
    assert abs(ex.peak_lr - 6.99e-4) < 5e-7
    assert len(ex.curve) == 20000 and ex.steps[0] == 1


def test_sliders_redraw_the_curve():
    ex = ScheduleExplorer()
    before = ex.redraws
    ex.d_model.value = 256
    ex.warmup.value = 1000
    ex.factor.value = 2.0
    assert ex.redraws == before + 3
    assert ex.peak_step == 1000
    assert abs(ex.peak_lr - hand_noam(1000, 256, 1000, 2.0)) < 1e-12
    for s in (1, 500, 1000, 7000, 20000):
        assert abs(ex.curve[s - 1] - hand_noam(s, 256, 1000, 2.0)) < 1e-12


def test_widget_holds_the_three_sliders():
    ex = ScheduleExplorer()
    descriptions = [c.description for c in ex.widget.children[:3]]
    assert descriptions == ["d_model", "warmup_steps", "factor"]


def test_bad_total_steps():
    with pytest.raises(ValueError):
        ScheduleExplorer(total_steps=0)


def test_the_plot_is_a_png_that_changes_with_the_sliders():
    ex = ScheduleExplorer(total_steps=2000)
    before = ex.image.value
    assert before[:8] == b"\x89PNG\r\n\x1a\n"
    ex.d_model.value = 128
    assert ex.image.value != before and ex.image.value[:4] == b"\x89PNG"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.mark.parametrize("settings", [{}, {"d_model": 16, "warmup": 100, "factor": 3.9}, {"warmup": 16000}])
def test_the_title_fits_inside_the_picture(settings):
    """jupyterlab.md §4: the one-line title was cut at "...at step 40" (for 4000)."""
    ex = ScheduleExplorer()
    for name, value in settings.items():
        getattr(ex, name).value = value
    assert ex.title.endswith(f"at step {ex.peak_step}") and "\n" in ex.title
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = ex.figure
    renderer = FigureCanvasAgg(fig).get_renderer()
    title = fig.axes[0].title
    assert title.get_text() == ex.title
    box, frame = title.get_window_extent(renderer), fig.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, (box, frame)


def test_the_picture_is_drawn_at_twice_the_size_it_is_shown():
    ex = ScheduleExplorer(total_steps=500)
    shown = int(ex.image.layout.width.removesuffix("px"))
    width, height = png_size(ex.image.value)
    assert width == 2 * shown  # crisp on a screen with device pixel ratio 2, never stretched
    assert height == round(width * ex.figsize[1] / ex.figsize[0])
    assert ex.image.layout.max_width == "100%" and ex.image.layout.height == "auto"


def test_sliders_act_on_release():
    ex = ScheduleExplorer(total_steps=500)
    assert [s.continuous_update for s in (ex.d_model, ex.warmup, ex.factor)] == [False] * 3


def test_displayed_as_itself_or_as_its_widget(monkeypatch):
    """Every explorer: `explorer` and `display(explorer.widget)` show the same widget."""
    import IPython.display
    import ipywidgets

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    ex = ScheduleExplorer(total_steps=500)
    assert isinstance(ex.widget, ipywidgets.VBox)
    ex._ipython_display_()
    assert shown == [ex.widget]
