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


def test_controls_are_the_widgets_synced_state():
    ex = ScheduleExplorer()
    assert [c.description for c in (ex.d_model, ex.warmup, ex.factor)] == ["d_model", "warmup_steps", "factor"]
    ex.warmup.value = 1000
    state = ex.widget.get_state()
    assert state["warmup_steps"] == 1000 and state["d_model"] == 512 and "schedule-explorer" in state["_esm"]
    ex.widget.factor = 2.0  # as the page sets it
    assert abs(ex.peak_lr - hand_noam(1000, 512, 1000, 2.0)) < 1e-12


def test_bad_total_steps():
    with pytest.raises(ValueError):
        ScheduleExplorer(total_steps=0)


@pytest.mark.parametrize("settings", [{}, {"d_model": 16, "warmup": 100, "factor": 3.9}, {"warmup": 16000}])
def test_the_title_names_the_settings_and_the_peak(settings):
    ex = ScheduleExplorer()
    for name, value in settings.items():
        getattr(ex, name).value = value
    assert ex.title.endswith(f"at step {ex.peak_step}") and "\n" in ex.title


def test_displayed_as_itself_or_as_its_widget(monkeypatch):
    """Every explorer: `explorer` and `display(explorer.widget)` show the same widget."""
    import IPython.display
    import anywidget

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    ex = ScheduleExplorer(total_steps=500)
    assert isinstance(ex.widget, anywidget.AnyWidget)
    ex._ipython_display_()
    assert shown == [ex.widget]
