"""An interactive plot of the paper's learning-rate schedule.

Introduced in chapter 8 (training).

Three sliders (d_model, warmup_steps, factor) redraw `noam_lr` over the first
``total_steps`` steps. The numbers behind the drawing live in plain Python
attributes (``steps``, ``curve``, ``peak_step``, ``peak_lr``), so a notebook
cell or a test can move a slider and check what was drawn without a browser.
"""

from __future__ import annotations

import ipywidgets as widgets
from matplotlib.figure import Figure

from lib._checks import require_positive_int
from lib.train.training import noam_lr
from lib.widgets._display import DisplaysWidget, image_widget, show_png

__all__ = ["ScheduleExplorer"]


class ScheduleExplorer(DisplaysWidget):
    """Sliders for ``noam_lr(step, d_model, warmup_steps, factor)`` and the curve they draw.

    After every slider change:
        steps      list of the steps drawn, 1 .. total_steps
        curve      list of the learning rates at those steps
        peak_step  the step where the curve is highest (= warmup_steps if it lies within total_steps)
        peak_lr    the rate there
        title      the plot's title (two lines: the settings, then the peak)
        alt        one sentence saying what the plot shows (the image's alternative text)
    Display it with ``explorer`` or ``display(explorer)`` (``display(explorer.widget)`` also works).
    The sliders act when released (``continuous_update=False``): each redraw
    computes ``total_steps`` rates and renders a PNG.
    """

    figsize = (6.4, 3.2)  # inches; shown at 640 × 320 CSS px

    def __init__(self, d_model: int = 512, warmup_steps: int = 4000, factor: float = 1.0, total_steps: int = 20000):
        self.total_steps = require_positive_int("total_steps", total_steps)
        common = {"style": {"description_width": "110px"}, "continuous_update": False}
        self.d_model = widgets.IntSlider(value=d_model, min=16, max=1024, step=16, description="d_model", **common)
        self.warmup = widgets.IntSlider(
            value=warmup_steps, min=100, max=min(16000, total_steps), step=100, description="warmup_steps", **common
        )
        self.factor = widgets.FloatSlider(value=factor, min=0.1, max=4.0, step=0.1, description="factor", **common)
        # The plot is a PNG inside an Image widget (see lib/widgets/_display.py).
        self.image = image_widget(self.figsize)
        self.widget = widgets.VBox([self.d_model, self.warmup, self.factor, self.image])
        self.steps: list[int] = []
        self.curve: list[float] = []
        self.peak_step = 0
        self.peak_lr = 0.0
        self.title = ""
        self.alt = ""
        self.redraws = 0
        self.figure: Figure | None = None  # the last figure drawn
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
        # Two short lines, so the title fits the figure whatever the numbers.
        self.title = f"d_model={d}, warmup_steps={w}, factor={f:.1f}\npeak {self.peak_lr:.2e} at step {self.peak_step}"
        fig = Figure(figsize=self.figsize)
        ax = fig.subplots()
        ax.plot(self.steps, self.curve)
        ax.axvline(self.peak_step, color="grey", linestyle=":")
        ax.set(xlabel="step", ylabel="learning rate")
        ax.set_title(self.title, fontsize=10)
        fig.tight_layout()
        self.figure = fig
        settings = f"d_model={d}, warmup_steps={w}, factor={f:.1f}"
        if w < self.total_steps:
            shape = (f"it rises linearly to its peak {self.peak_lr:.2e} at step {self.peak_step}, "
                     "then decays in proportion to one over the square root of the step")
        else:  # the warm-up fills the whole plot
            shape = f"it rises linearly over all {self.total_steps} steps drawn, to {self.peak_lr:.2e} at the last"
        self.alt = f"Learning rate (y axis) against training step (x axis, 1 to {self.total_steps}) for {settings}: {shape}."
        show_png(self.image, fig, self.alt)
