"""Plots the chapters share: annotated heatmaps of scores and weights (chapter 1 on)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["plot_heatmap"]


def plot_heatmap(
    ax,
    matrix,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str | None = None,
    *,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = True,
    fmt: str = "{:.2f}",
):
    """Draw a matrix as an annotated heatmap on `ax`; returns the image (chapter 1 on).

    matrix: a 2-D tensor, array or list of lists; NaN or None entries (masked
    scores) are drawn blank and annotated "–". Rows are labelled
    ``row_labels`` (e.g. queries) on the y axis, columns ``col_labels`` (e.g.
    keys) on the x axis. With ``annotate`` each cell shows its value in ``fmt``.
    Use ``fig.colorbar(image, ax=ax)`` for a colour bar.
    """
    values = torch.as_tensor(
        [[math.nan if x is None else float(x) for x in row] for row in (matrix.tolist() if hasattr(matrix, "tolist") else matrix)],
        dtype=torch.float64,
    )
    if values.dim() != 2:
        raise ValueError(f"plot_heatmap needs a 2-D matrix, got shape {tuple(values.shape)}")
    rows, cols = values.shape
    for name, labels, size in (("row_labels", row_labels, rows), ("col_labels", col_labels, cols)):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} has {len(labels)} labels for {size} {name.split('_')[0]}s of a {rows}x{cols} matrix")
    array = values.numpy()
    image = ax.imshow(array, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(cols), labels=col_labels if col_labels is not None else range(cols))
    ax.set_yticks(range(rows), labels=row_labels if row_labels is not None else range(rows))
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(rows):
            for j in range(cols):
                x = array[i, j]
                text = "–" if math.isnan(x) else fmt.format(x)
                r, g, b, _ = image.cmap(image.norm(x)) if not math.isnan(x) else (1.0, 1.0, 1.0, 1.0)
                colour = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=9)
    return image
