"""An interactive explorer of the sinusoidal positional encoding.

Introduced in chapter 6 (positional encoding).

``PositionExplorer`` is an ``anywidget``: its JavaScript (lib/widgets/static/positions.js)
computes the encoding and draws the curves and bars (SVG) in the page, in Jupyter and on
the static web book alike. The same numbers are recomputed here with `lib` on every
change, so a notebook (or a test) can drive it from Python:

    ex = PositionExplorer(d_model=64)
    ex.pos_a.value, ex.pos_b.value = 3, 10    # two positions
    ex.dims.value = (0, 7)                    # dimensions 0..7 (inclusive)
    ex.cosine                                 # cosine of PE[3, 0:8] and PE[10, 0:8]

Every change of a control recomputes ``.values_a``, ``.values_b``, ``.dot``,
``.cosine`` and the text in ``.readout`` (``.alt`` says in one sentence what the
figure shows: its alternative text). The left panel draws
at most ``max_curves`` sinusoids; ``.curve_dims`` says which, and the readout and
the panel's title say so when that is fewer than the selected dimensions.
Display it with ``ex`` or ``display(ex)`` (``display(ex.widget)`` also works).
"""

from __future__ import annotations

import pathlib

import anywidget
import traitlets

from lib._checks import require_positive_int
from lib.model.layers import sinusoidal_positional_encoding
from lib.widgets._display import Control, DisplaysWidget

__all__ = ["PositionExplorer"]


_JS_PATH = pathlib.Path(__file__).parent / "static" / "positions.js"


class _PositionWidget(anywidget.AnyWidget):
    """The synced state of `PositionExplorer` (its JavaScript computes from it)."""

    _esm = _JS_PATH.read_text(encoding="utf-8")
    d_model = traitlets.Int(64).tag(sync=True)
    max_pos = traitlets.Int(100).tag(sync=True)
    max_curves = traitlets.Int(8).tag(sync=True)
    pos_a = traitlets.Int(5).tag(sync=True)
    pos_b = traitlets.Int(12).tag(sync=True)
    dims = traitlets.List(traitlets.Int(), default_value=[0, 5]).tag(sync=True)

    @traitlets.validate("dims")
    def _valid_dims(self, proposal):
        value = list(proposal["value"])
        PositionExplorer._check_dims(value, self.d_model)
        return value

    @traitlets.validate("pos_a", "pos_b")
    def _valid_position(self, proposal):
        p, name = proposal["value"], proposal["trait"].name
        if not 0 <= p < self.max_pos:
            raise ValueError(f"{name}={p} is outside [0, max_pos={self.max_pos})")
        return p


class _Text:
    """The readout's text (HTML), as the page shows it."""

    value = ""


class PositionExplorer(DisplaysWidget):
    """Controls for two positions and a range of dimensions of the sinusoidal encoding.

    Left panel: the selected dimensions of PE as functions of the position,
    with the two chosen positions marked. Right panel: the two encodings'
    values on those dimensions, side by side. The readout (``.readout.value``)
    gives their dot product and cosine similarity. ``draw`` is kept for old
    callers: the page always draws (in JavaScript), Python only computes.
    """

    max_curves = 8  # more sinusoids than this in one panel is unreadable

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
        lo, hi = self._check_dims(dims, d_model)
        self.d_model, self.max_pos, self.draw = d_model, max_pos, draw
        self.pe = sinusoidal_positional_encoding(max_pos, d_model).double()  # (max_pos, d_model)
        self.widget = _PositionWidget(d_model=d_model, max_pos=max_pos, max_curves=self.max_curves,
                                      pos_a=pos_a, pos_b=pos_b, dims=[lo, hi])
        self.pos_a = Control(self.widget, "pos_a", "position a", min=0, max=max_pos - 1)
        self.pos_b = Control(self.widget, "pos_b", "position b", min=0, max=max_pos - 1)
        self.dims = Control(self.widget, "dims", "dimensions", min=0, max=d_model - 1)
        self.readout = _Text()
        self.widget.observe(self._on_change, names=["pos_a", "pos_b", "dims"])
        self.update()

    @staticmethod
    def _check_dims(dims, d_model: int) -> tuple[int, int]:
        if not isinstance(dims, (tuple, list)) or len(dims) != 2:
            raise ValueError(f"dims must be a pair (first, last) of dimensions, got {dims!r}")
        if any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
            raise TypeError(f"dims must hold two ints (first, last), got {dims!r}")
        lo, hi = dims
        if not 0 <= lo <= hi < d_model:
            raise ValueError(f"dims={tuple(dims)} must satisfy 0 <= first <= last < d_model={d_model}")
        return lo, hi

    def _on_change(self, change) -> None:
        self.update()

    def update(self) -> None:
        """Recompute the displayed numbers from the controls (the page draws them itself)."""
        a, b = self.pos_a.value, self.pos_b.value
        lo, hi = self._check_dims(self.dims.value, self.d_model)
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
        self.title = f"curves: {self.curves_note or f'dims {lo}-{hi}'}"
        c_lo, c_hi = self.curve_dims
        short_cosine = f"{self.cosine:.3f}" if norms > 0 else "undefined"
        self.alt = (
            f"Left: the sinusoidal encoding's value (y axis) against position 0 to {self.max_pos - 1} (x axis) "
            f"for dimension{'s' if c_hi > c_lo else ''} {c_lo}{f' to {c_hi}' if c_hi > c_lo else ''}, "
            f"each a sine or cosine wave, slower for higher dimensions, with positions {a} and {b} marked "
            f"by vertical lines; right: bars of the two positions' values on dimension{'s' if hi > lo else ''} "
            f"{lo}{f' to {hi}' if hi > lo else ''}, whose cosine similarity is {short_cosine}."
        )

    # Deprecated alias of `cosine` (chapter 6's cells read it); new code should use `cosine`.
    @property
    def similarity(self) -> float:
        return self.cosine
