"""The Q/K/V explorer of chapter 2 (attention math): `AttentionExplorer`.

The annotated heatmap the chapters draw scores, attention weights and masks
with, `plot_heatmap`, is not here: it lives in `lib.teach.plots` and is first
used in chapter 1.

`AttentionExplorer` is an ``anywidget`` widget: in Jupyter, every change of
an input is recomputed in Python with `lib.scaled_dot_product_attention`; in
the static HTML book (no kernel) its JavaScript, lib/widgets/static/attention_explorer.js,
recomputes the same formula in the browser.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Sequence

import anywidget
import torch
import traitlets

from lib.model.attention import causal_mask, scaled_dot_product_attention

__all__ = ["AttentionExplorer", "ExplorerValueError", "explorer_values"]

_JS_PATH = pathlib.Path(__file__).parent / "static" / "attention_explorer.js"

# Ties: the explorer reports the lowest key index among the keys whose weight is
# within this distance of the row's largest weight (the browser does the same),
# so that Python and JavaScript agree even when rounding differs in the last bit.
ARGMAX_TOLERANCE = 1e-9


class ExplorerValueError(traitlets.TraitError, ValueError):
    """Bad input to `AttentionExplorer`: a ValueError (and a TraitError, so that
    traitlets rolls back every value assigned inside ``hold_trait_notifications``)."""


def _shape(matrix: list[list[float]]) -> str:
    return f"({len(matrix)}, {len(matrix[0]) if matrix else 0})"


def _as_matrix(name: str, value: object) -> list[list[float]]:
    """Check that `value` is a non-empty rectangular matrix of finite numbers; return it as lists of floats."""
    if hasattr(value, "tolist"):  # torch.Tensor, numpy.ndarray
        value = value.tolist()
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) == 0:
        raise ExplorerValueError(f"{name} must be a non-empty list of rows, got {value!r}")
    rows = []
    for i, row in enumerate(value):
        if not isinstance(row, Sequence) or isinstance(row, str) or len(row) == 0:
            raise ExplorerValueError(f"{name} row {i} must be a non-empty list of numbers, got {row!r}")
        if len(row) != len(value[0]):
            lengths = [len(r) if isinstance(r, Sequence) else None for r in value]
            raise ExplorerValueError(f"{name} is not rectangular: its rows have lengths {lengths}")
        clean = []
        for j, x in enumerate(row):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise ExplorerValueError(f"{name}[{i}][{j}] must be a finite number, got {x!r}")
            clean.append(float(x))
        rows.append(clean)
    return rows


class _Matrix(traitlets.TraitType):
    """Trait: a non-empty rectangular list of lists of finite floats (a 2-D tensor or array is converted)."""

    info_text = "a non-empty rectangular matrix (list of lists) of finite numbers"

    def validate(self, obj, value):
        return _as_matrix(self.name.upper(), value)

    def make_dynamic_default(self):
        return [list(row) for row in self.default_value]  # a fresh copy for every widget


def _check_shapes(q: list, k: list, v: list) -> None:
    if len(q[0]) != len(k[0]):
        raise ExplorerValueError(
            f"Q and K must have the same width d_k: Q is {_shape(q)}, K is {_shape(k)} "
            "(to change both, use set_matrices(q=..., k=...))"
        )
    if len(k) != len(v):
        raise ExplorerValueError(
            f"K and V must have the same number of rows n: K is {_shape(k)}, V is {_shape(v)} "
            "(to change both, use set_matrices(k=..., v=...))"
        )


def _check_temperature(t: object) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        raise ExplorerValueError(f"temperature must be a finite number > 0, got {t!r}")
    return float(t)


def explorer_values(
    q: list[list[float]],
    k: list[list[float]],
    v: list[list[float]],
    scale: bool = True,
    causal: bool = False,
    temperature: float = 1.0,
) -> dict[str, list]:
    """What `AttentionExplorer` shows, computed with `lib` (chapter 2).

    scores = Q Kᵀ / (√d_k if scale else 1) / temperature, with the entries a
    causal mask hides (key j > query i) set to None; weights = softmax of each
    row over the visible keys; output = weights · V; argmax[i] = the key query
    i weighs most (lowest index among ties). All in float64.
    """
    q, k, v = _as_matrix("Q", q), _as_matrix("K", k), _as_matrix("V", v)
    _check_shapes(q, k, v)
    temperature = _check_temperature(temperature)
    qt, kt, vt = (torch.tensor(x, dtype=torch.float64) for x in (q, k, v))
    m, d_k = qt.shape
    n = kt.shape[0]
    divisor = (math.sqrt(d_k) if scale else 1.0) * temperature
    # lib always divides by √d_k; pre-scale the queries so that its logits are q·k / divisor.
    q_in = qt * (math.sqrt(d_k) / divisor)
    mask = causal_mask(max(m, n))[:m, :n] if causal else None  # query i sees keys 0..i
    output, weights = scaled_dot_product_attention(q_in, kt, vt, mask)  # (m, d_v), (m, n)
    scores = (qt @ kt.T / divisor).tolist()  # (m, n), the formula written out
    if mask is not None:
        scores = [[s if keep else None for s, keep in zip(row, mrow)] for row, mrow in zip(scores, mask.tolist())]
    argmax = []
    for row in weights.tolist():
        top = max(row)
        argmax.append(next(j for j, w in enumerate(row) if w >= top - ARGMAX_TOLERANCE) if top > 0 else -1)
    return {"scores": scores, "weights": weights.tolist(), "output": output.tolist(), "argmax": argmax}


class AttentionExplorer(anywidget.AnyWidget):
    """The Q/K/V explorer of chapter 2: edit Q, K, V, the scaling, a causal mask
    and a temperature; see the scores, the weights and the output at once.

    Inputs (synced with the browser): ``q`` (m, d_k), ``k`` (n, d_k), ``v`` (n, d_v)
    as lists of lists of floats; ``scale`` (divide by √d_k); ``causal`` (query i
    sees keys 0..i only); ``temperature`` (> 0, divides the logits).
    Outputs, recomputed with `lib` (see `explorer_values`) whenever an input
    changes: ``scores`` (masked entries None), ``weights``, ``output``, ``argmax``.

    Bad input raises `ExplorerValueError` (a ValueError) and leaves the widget
    unchanged. A bad edit that comes from the browser (the reader's typing)
    cannot raise in a cell, so it is rejected the same way, the browser is sent
    the values the widget kept, and the message is shown in the widget itself
    (the synced trait ``error``, "" when all is well). To change the shapes of
    several matrices at once, use `set_matrices`: the browser then receives
    every new matrix in one message. Starts from the course's first example.
    """

    _esm = _JS_PATH.read_text(encoding="utf-8")

    q = _Matrix(default_value=[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]).tag(sync=True)
    k = _Matrix(default_value=[[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]).tag(sync=True)
    v = _Matrix(default_value=[[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]]).tag(sync=True)
    scale = traitlets.Bool(True).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    temperature = traitlets.Float(1.0).tag(sync=True)

    scores = traitlets.List(traitlets.List(traitlets.Float(allow_none=True))).tag(sync=True)
    weights = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
    output = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
    argmax = traitlets.List(traitlets.Int()).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)  # why the kernel refused the browser's last edit

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._recompute()

    @traitlets.validate("q", "k", "v")
    def _validate_matrix(self, proposal):
        value = proposal["value"]
        current = {"q": self.q, "k": self.k, "v": self.v}
        current[proposal["trait"].name] = value
        _check_shapes(current["q"], current["k"], current["v"])
        return value

    @traitlets.validate("temperature")
    def _validate_temperature(self, proposal):
        return _check_temperature(proposal["value"])

    @traitlets.observe("q", "k", "v", "scale", "causal", "temperature")
    def _inputs_changed(self, change):
        self._recompute()

    def _recompute(self) -> None:
        values = explorer_values(self.q, self.k, self.v, self.scale, self.causal, self.temperature)
        with self.hold_sync():
            for name, value in values.items():
                setattr(self, name, value)
            self.error = ""

    def set_state(self, sync_data):
        """Apply an edit from the browser. An edit that fails validation changes
        nothing (traitlets rolls the values back); instead of only logging the
        error where no reader looks, show it in the widget and send the browser
        back the values the widget kept."""
        try:
            super().set_state(sync_data)
        except traitlets.TraitError as err:  # ExplorerValueError, or a value of the wrong type
            inputs = [name for name in sync_data if name in ("q", "k", "v", "scale", "causal", "temperature")]
            self.error = f"Not applied: {err}"
            self.send_state(inputs)

    def set_matrices(self, q=None, k=None, v=None) -> None:
        """Assign several of Q, K, V at once (e.g. to change n in both K and V);
        the shapes are checked together, and nothing changes if they disagree.
        The browser receives the new matrices and the recomputed outputs in one
        message, so it never sees a K of one length with a V of another."""
        with self.hold_sync(), self.hold_trait_notifications():
            for name, value in (("q", q), ("k", k), ("v", v)):
                if value is not None:
                    setattr(self, name, value)

    @property
    def widget(self) -> "AttentionExplorer":
        """The ipywidgets object to display: the explorer itself (every widget of the
        course has ``.widget``, see lib/widgets/_display.py)."""
        return self

    def summary(self) -> list[str]:
        """One line per query, as the widget shows them: "query i attends most
        to key j", followed by " (tied with key j2, ...)" when other keys get the
        same weight (within ARGMAX_TOLERANCE), and "query i sees no key" when a
        mask hides every key."""
        lines = []
        for i, (j, row) in enumerate(zip(self.argmax, self.weights)):
            if j < 0:
                lines.append(f"query {i} sees no key")
                continue
            top = max(row)
            ties = [jj for jj, w in enumerate(row) if jj != j and top > 0 and w >= top - ARGMAX_TOLERANCE]
            tied = f" (tied with key {', '.join(map(str, ties))})" if ties else ""
            lines.append(f"query {i} attends most to key {j}{tied}")
        return lines
