"""An interactive explorer of the sinusoidal positional encoding.

Introduced in chapter 6 (positional encoding).

``PositionExplorer`` holds three ipywidgets controls, a figure (``.image``, a
PNG redrawn on every change) and the numbers it shows, so a notebook (or a test) can drive it from Python:

    ex = PositionExplorer(d_model=64)
    ex.pos_a.value, ex.pos_b.value = 3, 10    # two positions
    ex.dims.value = (0, 7)                    # dimensions 0..7 (inclusive)
    ex.cosine                                 # cosine of PE[3, 0:8] and PE[10, 0:8]

Every change of a control recomputes ``.values_a``, ``.values_b``, ``.dot``,
``.cosine`` and the text in ``.readout``, then redraws (``.alt`` says in one
sentence what the figure shows: its alternative text). The left panel draws
at most ``max_curves`` sinusoids; ``.curve_dims`` says which, and the readout and
the panel's title say so when that is fewer than the selected dimensions.
Display it with ``ex`` or ``display(ex)`` (``display(ex.widget)`` also works).
"""

from __future__ import annotations

import math

import ipywidgets as widgets
from matplotlib.figure import Figure
import torch

from lib._checks import require_positive_int
from lib.model.layers import sinusoidal_positional_encoding
from lib.widgets._display import DisplaysWidget, image_widget, show_png

__all__ = ["PositionExplorer"]


class PositionExplorer(DisplaysWidget):
    """Sliders for two positions and a range of dimensions of the sinusoidal encoding.

    Left panel: the selected dimensions of PE as functions of the position,
    with the two chosen positions marked. Right panel: the two encodings'
    values on those dimensions, side by side. The readout (``.readout.value``)
    gives their dot product and cosine similarity.
    """

    max_curves = 8  # more sinusoids than this in one panel is unreadable
    figsize = (8.8, 3.0)  # inches; shown at 880 × 300 CSS px

    def __init__(self, d_model: int = 64, max_pos: int = 100, pos_a: int = 5, pos_b: int = 12,
                 dims: tuple[int, int] = (0, 5), draw: bool = True):
        require_positive_int("d_model", d_model)
        require_positive_int("max_pos", max_pos)
        if d_model % 2:
            raise ValueError(f"d_model must be even, got {d_model}")
        for name, p in (("pos_a", pos_a), ("pos_b", pos_b)):
            if isinstance(p, bool) or not isinstance(p, int):
                raise TypeError(f"{name} must be an int (a position), got {p!r} ({type(p).__name__})")
            if not 0 <= p < max_pos:
                raise ValueError(f"{name}={p} is outside [0, max_pos={max_pos})")
        if not isinstance(dims, (tuple, list)) or len(dims) != 2:
            raise ValueError(f"dims must be a pair (first, last) of dimensions, got {dims!r}")
        if any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
            raise TypeError(f"dims must hold two ints (first, last), got {dims!r}")
        lo, hi = dims
        if not 0 <= lo <= hi < d_model:
            raise ValueError(f"dims={dims} must satisfy 0 <= first <= last < d_model={d_model}")
        self.d_model, self.max_pos, self.draw = d_model, max_pos, draw
        self.pe = sinusoidal_positional_encoding(max_pos, d_model).double()  # (max_pos, d_model)
        # Sliders act when released: every change redraws a figure.
        common = {"continuous_update": False}
        self.pos_a = widgets.IntSlider(value=pos_a, min=0, max=max_pos - 1, description="position a", **common)
        self.pos_b = widgets.IntSlider(value=pos_b, min=0, max=max_pos - 1, description="position b", **common)
        self.dims = widgets.IntRangeSlider(value=(lo, hi), min=0, max=d_model - 1, description="dimensions", **common)
        self.readout = widgets.HTML()
        self.image = image_widget(self.figsize)
        for control in (self.pos_a, self.pos_b, self.dims):
            control.observe(self._on_change, names="value")
        self.widget = widgets.VBox([widgets.HBox([self.pos_a, self.pos_b, self.dims]), self.readout, self.image])
        self.update()

    def _on_change(self, change) -> None:
        self.update()

    def update(self) -> None:
        """Recompute the displayed numbers from the controls, then redraw."""
        a, b = self.pos_a.value, self.pos_b.value
        lo, hi = self.dims.value
        va, vb = self.pe[a, lo : hi + 1], self.pe[b, lo : hi + 1]
        self.values_a = [float(v) for v in va]
        self.values_b = [float(v) for v in vb]
        self.dot = float(va @ vb)
        norms = float(va.norm() * vb.norm())
        self.cosine = self.dot / norms if norms > 0 else float("nan")
        self.curve_dims = (lo, min(hi, lo + self.max_curves - 1))
        # "" when every selected dimension has its curve in the left panel
        self.curves_note = (
            f"showing dims {lo}-{self.curve_dims[1]} of {lo}-{hi}" if self.curve_dims[1] < hi else ""
        )
        note = (
            f"<br><i>curves: {self.curves_note} (at most {self.max_curves} curves); "
            f"the bars and both numbers use all {hi - lo + 1} dimensions</i>"
        )
        cosine_text = (
            f"{self.cosine:.4f}" if norms > 0 else "undefined (a zero vector has no direction)"
        )
        self.readout.value = (
            f"PE[{a}, {lo}:{hi + 1}] · PE[{b}, {lo}:{hi + 1}] = <b>{self.dot:.4f}</b>, "
            f"cosine similarity = <b>{cosine_text}</b>" + (note if self.curves_note else "")
        )
        if self.draw:
            self._redraw(a, b, lo, hi)

    # Deprecated alias of `cosine` (chapter 6's cells read it); new code should use `cosine`.
    @property
    def similarity(self) -> float:
        return self.cosine

    def _redraw(self, a: int, b: int, lo: int, hi: int) -> None:
        # The figure is rendered to PNG bytes and shown in an `ipywidgets.Image`
        # (see lib/widgets/_display.py).
        fig = Figure(figsize=self.figsize)
        left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
        positions = torch.arange(self.max_pos)
        for d in range(self.curve_dims[0], self.curve_dims[1] + 1):
            kind = "sin" if d % 2 == 0 else "cos"
            wavelength = 2 * math.pi * 10000 ** ((d - d % 2) / self.d_model)
            left.plot(positions, self.pe[:, d], label=f"dim {d} ({kind}, wavelength {wavelength:.1f})")
        for p, style in ((a, "-"), (b, "--")):
            left.axvline(p, color="k", linestyle=style, linewidth=1)
        left.set_title(f"curves: {self.curves_note or f'dims {lo}-{hi}'}", fontsize=10)
        left.set_xlabel("position")
        left.set_ylabel("PE value")
        left.legend(fontsize=7, loc="upper right")
        idx = torch.arange(lo, hi + 1)
        right.bar(idx - 0.2, self.values_a, width=0.4, label=f"pos {a}")
        right.bar(idx + 0.2, self.values_b, width=0.4, label=f"pos {b}")
        right.set_xlabel("dimension")
        cosine_text = f"{self.cosine:.3f}" if self.cosine == self.cosine else "undefined"
        right.set_title(f"cosine = {cosine_text}", fontsize=10)
        right.legend(fontsize=7)
        fig.tight_layout()
        self.figure = fig
        c_lo, c_hi = self.curve_dims
        self.alt = (
            f"Left: the sinusoidal encoding's value (y axis) against position 0 to {self.max_pos - 1} (x axis) "
            f"for dimension{'s' if c_hi > c_lo else ''} {c_lo}{f' to {c_hi}' if c_hi > c_lo else ''}, "
            f"each a sine or cosine wave, slower for higher dimensions, with positions {a} and {b} marked "
            f"by vertical lines; right: bars of the two positions' values on dimension{'s' if hi > lo else ''} "
            f"{lo}{f' to {hi}' if hi > lo else ''}, whose cosine similarity is {cosine_text}."
        )
        show_png(self.image, fig, self.alt)
