"""An interactive plot of the paper's learning-rate schedule.

Introduced in chapter 8 (training).

Three controls (d_model, warmup_steps, factor) and the curve of `noam_lr` over
the first ``total_steps`` steps. The widget is an ``anywidget``: its JavaScript,
lib/widgets/static/schedule.js, computes the curve and draws it (SVG) in the page
itself, in Jupyter and on the static web book alike. The same numbers are
recomputed here with `lib` on every change (``steps``, ``curve``, ``peak_step``,
``peak_lr``), so a notebook cell or a test can move a control and check them
without a browser: ``explorer.warmup.value = 200``.
"""

from __future__ import annotations

import pathlib

import anywidget
import traitlets

from lib._checks import require_positive_int
from lib.train.training import noam_lr
from lib.widgets._display import Control, DisplaysWidget

__all__ = ["ScheduleExplorer"]

_JS_PATH = pathlib.Path(__file__).parent / "static" / "schedule.js"


class _ScheduleWidget(anywidget.AnyWidget):
    """The synced state of `ScheduleExplorer` (its JavaScript computes from it)."""

    _esm = _JS_PATH.read_text(encoding="utf-8")
    d_model = traitlets.Int(512).tag(sync=True)
    warmup_steps = traitlets.Int(4000).tag(sync=True)
    factor = traitlets.Float(1.0).tag(sync=True)
    total_steps = traitlets.Int(20000).tag(sync=True)
    limits = traitlets.Dict().tag(sync=True)  # each control's min, max and step


class ScheduleExplorer(DisplaysWidget):
    """Controls for ``noam_lr(step, d_model, warmup_steps, factor)`` and the curve they draw.

    After every change (from Python or from the page):
        steps      list of the steps drawn, 1 .. total_steps
        curve      list of the learning rates at those steps
        peak_step  the step where the curve is highest (= warmup_steps if it lies within total_steps)
        peak_lr    the rate there
        title      the plot's title (two lines: the settings, then the peak)
        alt        one sentence saying what the plot shows (the page's description of its SVG)
    Controls: ``d_model``, ``warmup``, ``factor`` (``.value`` reads and sets them).
    Display it with ``explorer`` or ``display(explorer)`` (``display(explorer.widget)`` also works).
    """

    def __init__(self, d_model: int = 512, warmup_steps: int = 4000, factor: float = 1.0, total_steps: int = 20000):
        self.total_steps = require_positive_int("total_steps", total_steps)
        limits = {
            "d_model": {"min": 16, "max": 1024, "step": 16},
            "warmup_steps": {"min": 100, "max": min(16000, total_steps), "step": 100},
            "factor": {"min": 0.1, "max": 4.0, "step": 0.1},
        }
        # a value outside a control's range is pulled to its nearest end (as a slider does)
        clamp = lambda name, v: min(max(v, limits[name]["min"]), limits[name]["max"])  # noqa: E731
        d_model, warmup_steps, factor = clamp("d_model", d_model), clamp("warmup_steps", warmup_steps), clamp("factor", factor)
        self.widget = _ScheduleWidget(d_model=d_model, warmup_steps=warmup_steps, factor=float(factor),
                                      total_steps=total_steps, limits=limits)
        self.d_model = Control(self.widget, "d_model", "d_model", **limits["d_model"])
        self.warmup = Control(self.widget, "warmup_steps", "warmup_steps", **limits["warmup_steps"])
        self.factor = Control(self.widget, "factor", "factor", **limits["factor"])
        self.redraws = 0
        self.widget.observe(self._on_change, names=["d_model", "warmup_steps", "factor"])
        self.update()

    def _on_change(self, change) -> None:
        self.update()

    def update(self) -> None:
        """Recompute the curve from the controls' values (the page draws it itself)."""
        d, w, f = self.d_model.value, self.warmup.value, self.factor.value
        self.steps = list(range(1, self.total_steps + 1))
        self.curve = [noam_lr(s, d, w, f) for s in self.steps]
        best = max(range(len(self.curve)), key=self.curve.__getitem__)
        self.peak_step, self.peak_lr = self.steps[best], self.curve[best]
        self.redraws += 1
        self.title = f"d_model={d}, warmup_steps={w}, factor={f:.1f}\npeak {self.peak_lr:.2e} at step {self.peak_step}"
        settings = f"d_model={d}, warmup_steps={w}, factor={f:.1f}"
        if w < self.total_steps:
            shape = (f"it rises linearly to its peak {self.peak_lr:.2e} at step {self.peak_step}, "
                     "then decays in proportion to one over the square root of the step")
        else:  # the warm-up fills the whole plot
            shape = f"it rises linearly over all {self.total_steps} steps drawn, to {self.peak_lr:.2e} at the last"
        self.alt = f"Learning rate (y axis) against training step (x axis, 1 to {self.total_steps}) for {settings}: {shape}."
