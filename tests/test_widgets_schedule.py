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
