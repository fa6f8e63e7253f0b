"""Looking at attention heads one at a time: a heatmap helper and a small widget.

Introduced in chapter 4 (multi-head attention); chapter 3 borrows `draw_weights`.

`head_weights` is the pure function behind the widget: the weights one head of
a seeded `lib.MultiHeadAttention` puts on a sequence. `HeadsExplorer` is an
``anywidget``: it stores the sequence and the seeded layer's query and key
projections, and its JavaScript (lib/widgets/static/heads.js) computes the
chosen head's weights and draws them as a table-heatmap in the page, in Jupyter
and on the static web book alike. Its state can be driven from Python
(``.n_heads_slider.value = 4``); the same weights, computed with `lib`, are
always in ``.current_weights``. Displayed with ``explorer`` or ``display(explorer)``
(or ``explorer.widget``).
"""

from __future__ import annotations

import pathlib

import anywidget
import torch
import traitlets

from lib._checks import require_float, require_positive_int, shape
from lib.model.attention import MultiHeadAttention
from lib.widgets._display import Control, DisplaysWidget

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


_JS_PATH = pathlib.Path(__file__).parent / "static" / "heads.js"


def _projections(d_model: int, n_heads: int, seed: int) -> dict:
    """The query and key projections of ``lib.MultiHeadAttention(d_model, n_heads)`` seeded
    as `head_weights` seeds it: what the page needs to recompute the weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mha = MultiHeadAttention(d_model, n_heads).eval()
    return {name: getattr(mha, f"w_{role}").__getattr__(part).detach().double().tolist()
            for role in "qk" for part, name in (("weight", f"w{role}"), ("bias", f"b{role}"))}


class _HeadsWidget(anywidget.AnyWidget):
    """The synced state of `HeadsExplorer` (its JavaScript computes from it)."""

    _esm = _JS_PATH.read_text(encoding="utf-8")
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    x = traitlets.List().tag(sync=True)  # (n, d_model)
    projections = traitlets.Dict().tag(sync=True)  # str(n_heads) -> {wq, bq, wk, bk}
    choices = traitlets.List(traitlets.Int()).tag(sync=True)
    n_heads = traitlets.Int(2).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)


class HeadsExplorer(DisplaysWidget):
    """Two controls, number of heads and head, over one sequence; a heatmap of that head's weights.

    ``x`` (n, d_model) is the sequence, ``tokens`` its n labels. The choices of
    ``n_heads`` are the divisors of d_model. The page computes the weights itself
    (softmax(q kᵀ / √d_k) of the chosen head, from the stored projections); here
    everything comes from `head_weights` (same ``seed``), so a test can set the
    controls and compare ``current_weights`` with a layer it builds itself;
    ``title`` is the heatmap's title and ``alt`` one sentence saying what it shows.
    """

    def __init__(self, x: torch.Tensor, tokens: list[str], seed: int = 0, n_heads: int = 2):
        self.x = _as_sequence(x)
        _require_seed(seed)
        if len(tokens) != self.x.shape[1]:
            raise ValueError(f"got {len(tokens)} tokens for a sequence of length {self.x.shape[1]}")
        d_model = self.x.shape[-1]
        choices = [h for h in range(1, d_model + 1) if d_model % h == 0]
        if n_heads not in choices:
            raise ValueError(f"n_heads must divide d_model={d_model}: one of {choices}, got {n_heads}")
        self.tokens, self.seed = [str(t) for t in tokens], seed
        self.widget = _HeadsWidget(
            tokens=self.tokens, x=self.x[0].double().tolist(), choices=choices, n_heads=n_heads, head=0,
            projections={str(h): _projections(d_model, h, seed) for h in choices},
        )
        self.n_heads_slider = Control(self.widget, "n_heads", "n_heads", options=choices)
        self.head_slider = Control(self.widget, "head", "head", min=0, max=n_heads - 1)
        self.widget.observe(self._on_change, names=["n_heads", "head"])
        self._refresh()

    def _on_change(self, _change) -> None:
        self._refresh()

    def _refresh(self) -> None:
        n_heads = self.widget.n_heads
        if n_heads not in self.n_heads_slider.options:
            raise ValueError(f"n_heads must be one of {self.n_heads_slider.options}, got {n_heads}")
        self.head_slider.max = n_heads - 1
        if self.widget.head > n_heads - 1 or self.widget.head < 0:  # pull the head into range
            self.widget.head = min(max(self.widget.head, 0), n_heads - 1)  # observed: refreshes again
            return
        self.current_n_heads, self.current_head = n_heads, self.widget.head
        self.current_weights = head_weights(self.x, self.current_n_heads, self.current_head, self.seed)
        self._describe()

    def _describe(self) -> None:
        d_k = self.x.shape[-1] // self.current_n_heads
        self.title = f"head {self.current_head} of {self.current_n_heads} (d_k = {d_k})"
        w = self.current_weights
        flat = int(torch.argmax(w))
        i, j = divmod(flat, w.shape[1])
        self.alt = (
            f"Heatmap of the attention weights of head {self.current_head} of {self.current_n_heads} "
            f"(d_k = {d_k}): rows are the queries and columns the keys ({' '.join(self.tokens)}), each cell "
            f"printed with its weight, darker for larger; the largest, {w[i, j].item():.2f}, is query "
            f"{i} ({self.tokens[i]}) on key {j} ({self.tokens[j]})."
        )
