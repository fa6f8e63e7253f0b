"""Looking at attention heads one at a time: a heatmap helper and a small widget.

Introduced in chapter 4 (multi-head attention); chapter 3 borrows `draw_weights`.

`head_weights` is the pure function behind the widget: the weights one head of
a seeded `lib.MultiHeadAttention` puts on a sequence. `HeadsExplorer` wraps it
in two sliders (number of heads, head to show) and redraws a heatmap; its
state can be driven from Python (``.n_heads_slider.value = 4``), and the
weights on screen are always in ``.current_weights``. Like the other widgets,
it draws a PNG into an ``ipywidgets.Image`` (see lib/widgets/_display.py) and is
displayed with ``explorer`` or ``display(explorer)`` (or ``explorer.widget``).
"""

from __future__ import annotations

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from lib._checks import require_float, require_positive_int, shape
from lib.model.attention import MultiHeadAttention
from lib.widgets._display import DisplaysWidget, image_widget, show_png

__all__ = ["head_weights", "draw_weights", "HeadsExplorer"]


def _as_sequence(x: torch.Tensor) -> torch.Tensor:
    """x (n, d_model) or (1, n, d_model) -> (1, n, d_model)."""
    require_float("x", x)
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if x.dim() != 3 or x.shape[0] != 1:
        raise ValueError(f"x must be one sequence, shape (n, d_model) or (1, n, d_model), got {shape(x)}")
    if x.dtype != torch.float32:  # the layer's parameters are float32
        raise TypeError(f"x must be float32 (the layer's dtype), got {str(x.dtype).replace('torch.', '')}")
    return x


def _require_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r} ({type(seed).__name__})")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return seed


def head_weights(x: torch.Tensor, n_heads: int, head: int, seed: int = 0) -> torch.Tensor:
    """Self-attention weights (n, n) of head ``head`` over the sequence ``x``.

    The layer is ``lib.MultiHeadAttention(d_model, n_heads)`` with its
    parameters drawn right after ``torch.manual_seed(seed)``; the global random
    state is left as it was. Row i is how query i spreads its attention.
    """
    x = _as_sequence(x)
    require_positive_int("n_heads", n_heads)
    _require_seed(seed)
    if isinstance(head, bool) or not isinstance(head, int):
        raise TypeError(f"head must be an int, got {type(head).__name__}")
    if not 0 <= head < n_heads:
        raise ValueError(f"head must be in [0, {n_heads}) for n_heads={n_heads}, got {head}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mha = MultiHeadAttention(x.shape[-1], n_heads).eval()  # raises if n_heads does not divide d_model
    with torch.no_grad():
        mha(x, x, x)
    return mha.attention_weights[0, head]  # (n, n)


def draw_weights(ax, weights: torch.Tensor, rows=None, cols=None, title: str | None = None, annotate: bool = True):
    """Heatmap of a (m, n) weight matrix on ``ax``: rows are queries, columns keys, colour scale 0..1."""
    w = torch.as_tensor(weights).detach().to(torch.float64)
    if w.dim() != 2:
        raise ValueError(f"weights must be a matrix (m, n), got shape {shape(w)}")
    image = ax.imshow(w.numpy(), vmin=0.0, vmax=1.0, cmap="Blues")
    ax.set_xticks(range(w.shape[1]), cols if cols is not None else range(w.shape[1]), rotation=45 if cols else 0)
    ax.set_yticks(range(w.shape[0]), rows if rows is not None else range(w.shape[0]))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                value = w[i, j].item()
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if value > 0.6 else "black")
    return image


class HeadsExplorer(DisplaysWidget):
    """Two sliders, number of heads and head, over one sequence; a heatmap of that head's weights.

    ``x`` (n, d_model) is the sequence, ``tokens`` its n labels. The choices of
    ``n_heads`` are the divisors of d_model. Everything shown comes from
    `head_weights` (same ``seed``), so a test can set the sliders and compare
    ``current_weights`` with a layer it builds itself; ``title`` is the heatmap's title
    and ``alt`` one sentence saying what it shows (the image's alternative text).
    """

    figsize = (4.8, 4.2)  # inches; shown at 480 × 420 CSS px

    def __init__(self, x: torch.Tensor, tokens: list[str], seed: int = 0, n_heads: int = 2):
        self.x = _as_sequence(x)
        _require_seed(seed)
        if len(tokens) != self.x.shape[1]:
            raise ValueError(f"got {len(tokens)} tokens for a sequence of length {self.x.shape[1]}")
        d_model = self.x.shape[-1]
        choices = [h for h in range(1, d_model + 1) if d_model % h == 0]
        if n_heads not in choices:
            raise ValueError(f"n_heads must divide d_model={d_model}: one of {choices}, got {n_heads}")
        self.tokens, self.seed = list(tokens), seed
        self.n_heads_slider = widgets.SelectionSlider(
            options=choices, value=n_heads, description="n_heads", continuous_update=False
        )
        self.head_slider = widgets.IntSlider(
            value=0, min=0, max=n_heads - 1, description="head", continuous_update=False
        )
        self.image = image_widget(self.figsize)
        self.widget = widgets.VBox([widgets.HBox([self.n_heads_slider, self.head_slider]), self.image])
        self._updating = False
        self.n_heads_slider.observe(self._on_change, names="value")
        self.head_slider.observe(self._on_change, names="value")
        self._refresh()

    def _on_change(self, _change) -> None:
        if not self._updating:
            self._refresh()

    def _refresh(self) -> None:
        self._updating = True
        try:
            n_heads = self.n_heads_slider.value
            self.head_slider.max = n_heads - 1  # also pulls a too-large head value down
            self.current_n_heads, self.current_head = n_heads, self.head_slider.value
        finally:
            self._updating = False
        self.current_weights = head_weights(self.x, self.current_n_heads, self.current_head, self.seed)
        self._draw()

    def _draw(self) -> None:
        d_k = self.x.shape[-1] // self.current_n_heads
        self.title = f"head {self.current_head} of {self.current_n_heads} (d_k = {d_k})"
        fig = Figure(figsize=self.figsize)
        ax = fig.subplots()
        draw_weights(ax, self.current_weights, self.tokens, self.tokens, title=self.title)
        fig.tight_layout()
        self.figure = fig
        w = self.current_weights
        flat = int(torch.argmax(w))
        i, j = divmod(flat, w.shape[1])
        self.alt = (
            f"Heatmap of the attention weights of head {self.current_head} of {self.current_n_heads} "
            f"(d_k = {d_k}): rows are the queries and columns the keys ({' '.join(self.tokens)}), each cell "
            f"printed with its weight, darker for larger; the largest, {w[i, j].item():.2f}, is query "
            f"{i} ({self.tokens[i]}) on key {j} ({self.tokens[j]})."
        )
        show_png(self.image, fig, self.alt)
