"""An interactive plot of the paper's learning-rate schedule.

Introduced in chapter 8 (training).

Three sliders (d_model, warmup_steps, factor) redraw `noam_lr` over the first
``total_steps`` steps. The numbers behind the drawing live in plain Python
attributes (``steps``, ``curve``, ``peak_step``, ``peak_lr``), so a notebook
cell or a test can move a slider and check what was drawn without a browser.
"""

from __future__ import annotations

import io

import ipywidgets as widgets
from matplotlib.figure import Figure

from lib._checks import require_positive_int
from lib.train.training import noam_lr

__all__ = ["ScheduleExplorer"]


class ScheduleExplorer:
    """Sliders for ``noam_lr(step, d_model, warmup_steps, factor)`` and the curve they draw.

    After every slider change:
        steps      list of the steps drawn, 1 .. total_steps
        curve      list of the learning rates at those steps
        peak_step  the step where the curve is highest (= warmup_steps if it lies within total_steps)
        peak_lr    the rate there
    Display it with ``display(explorer.widget)``.
    """

    def __init__(self, d_model: int = 512, warmup_steps: int = 4000, factor: float = 1.0, total_steps: int = 20000):
        self.total_steps = require_positive_int("total_steps", total_steps)
        style = {"description_width": "110px"}
        self.d_model = widgets.IntSlider(value=d_model, min=16, max=1024, step=16, description="d_model", style=style)
        self.warmup = widgets.IntSlider(
            value=warmup_steps, min=100, max=min(16000, total_steps), step=100, description="warmup_steps", style=style
        )
        self.factor = widgets.FloatSlider(value=factor, min=0.1, max=4.0, step=0.1, description="factor", style=style)
        # The plot is a PNG inside an Image widget: redrawing only changes the widget's
        # state, so it also works without a live kernel (the static book) and sends no
        # display messages that would land in the output of the cell that moved a slider.
        self.image = widgets.Image(format="png")
        self.widget = widgets.VBox([self.d_model, self.warmup, self.factor, self.image])
        self.steps: list[int] = []
        self.curve: list[float] = []
        self.peak_step = 0
        self.peak_lr = 0.0
        self.redraws = 0
        for slider in (self.d_model, self.warmup, self.factor):
            slider.observe(self._on_change, names="value")
        self.update()

    def _on_change(self, change) -> None:
        self.update()

    def update(self) -> None:
        """Recompute the curve from the sliders' values and redraw it."""
        d, w, f = self.d_model.value, self.warmup.value, self.factor.value
        self.steps = list(range(1, self.total_steps + 1))
        self.curve = [noam_lr(s, d, w, f) for s in self.steps]
        best = max(range(len(self.curve)), key=self.curve.__getitem__)
        self.peak_step, self.peak_lr = self.steps[best], self.curve[best]
        self.redraws += 1
        fig = Figure(figsize=(6, 3))
        ax = fig.subplots()
        ax.plot(self.steps, self.curve)
        ax.axvline(self.peak_step, color="grey", linestyle=":")
        ax.set(xlabel="step", ylabel="learning rate",
               title=f"d_model={d}, warmup={w}, factor={f:.1f}: peak {self.peak_lr:.2e} at step {self.peak_step}")
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80)
        self.image.value = buffer.getvalue()
