"""What the four widgets share: how they are displayed and how they draw.

Display protocol (the same for every widget of the course): an explorer is
shown by leaving it as the last expression of a cell (``explorer``) or with
``display(explorer)``; ``explorer.widget`` is the ipywidgets object itself, so
``display(explorer.widget)`` works too, and so does putting it into a layout
(``ipywidgets.HBox([a.widget, b.widget])``).

Drawing: a matplotlib figure is rendered to PNG bytes and shown in an
``ipywidgets.Image``. Redrawing only changes the image's value, so it works
without a live kernel (the static book keeps the last image), sends no display
messages that would land in the output of the cell that moved a slider, and has
no captured output to replay or clear. The PNG is rendered at twice the size
it is shown at (a device pixel ratio of 2), and the image's layout width is set
to that size, so the picture is neither stretched nor blurred.
"""

from __future__ import annotations

import io

import ipywidgets as widgets
from matplotlib.figure import Figure

PIXEL_RATIO = 2  # PNG pixels per CSS pixel: sharp on high-density screens, fine on others
CSS_DPI = 100  # CSS pixels per figure inch: a (6, 3) inch figure is shown at 600 × 300 px


def image_widget(figsize: tuple[float, float]) -> widgets.Image:
    """An empty Image widget shown at the CSS size of a figure of ``figsize`` inches
    (narrower if the page is narrower, keeping its proportions)."""
    width = round(figsize[0] * CSS_DPI)
    return widgets.Image(format="png", layout=widgets.Layout(width=f"{width}px", max_width="100%", height="auto"))


def render_png(fig: Figure) -> bytes:
    """The figure as PNG bytes at PIXEL_RATIO × its displayed size (see `image_widget`)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=CSS_DPI * PIXEL_RATIO)
    return buffer.getvalue()


class DisplaysWidget:
    """Mixin: ``display(explorer)`` shows ``explorer.widget`` (set by the subclass)."""

    widget: widgets.Widget

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
