"""What the widgets share: how they are displayed, and how Python drives them.

Display protocol (the same for every widget of the course): an explorer is
shown by leaving it as the last expression of a cell (``explorer``) or with
``display(explorer)``; ``explorer.widget`` is the ipywidgets object itself, so
``display(explorer.widget)`` works too, and so does putting it into a layout
(``ipywidgets.HBox([a.widget, b.widget])``).

Every widget of the course is an ``anywidget`` whose JavaScript (lib/widgets/static/)
computes and draws in the page, in JupyterLab, VS Code, Colab and on the static web
book (issue 25). `Control` lets a notebook cell read and set one of its synced values
(``explorer.warmup.value = 200``), as the explorers' ipywidgets sliders used to.

The PNG helpers below (`image_widget`, `show_png`, `render_png`) draw a matplotlib
figure into an ``ipywidgets.Image`` at twice the size it is shown at; no widget of the
course uses them any more, they are kept for a widget that must show a figure drawn by
a kernel (its caption must then say it is a stored picture: tests/browser/test_site.py
fails on a stored ImageModel). Alternative text: `show_png` puts one sentence in the
Image widget's ``tooltip``; _ext/accessibility/static/course-a11y.js copies it into ``alt``.
"""

from __future__ import annotations

import io

import ipywidgets as widgets
import traitlets
from matplotlib.figure import Figure

PIXEL_RATIO = 2  # PNG pixels per CSS pixel: sharp on high-density screens, fine on others
CSS_DPI = 100  # CSS pixels per figure inch: a (6, 3) inch figure is shown at 600 × 300 px


class DescribedImage(widgets.Image):
    """An ``ipywidgets.Image`` whose ``tooltip`` (its title: the accessible name) works.

    The widget front end (@jupyter-widgets/base 2.0 ``DOMWidgetView.updateTooltip``) sets
    the title only when ``model.get("description").length === 0``; an Image has no
    ``description``, so a tooltip makes the view throw and the image is never drawn.
    This class syncs an empty ``description`` so that the check passes; the model and
    view are still the standard ImageModel/ImageView.
    """

    description = traitlets.Unicode("").tag(sync=True)


def image_widget(figsize: tuple[float, float]) -> DescribedImage:
    """An empty Image widget shown at the CSS size of a figure of ``figsize`` inches
    (narrower if the page is narrower, keeping its proportions)."""
    width = round(figsize[0] * CSS_DPI)
    return DescribedImage(format="png", layout=widgets.Layout(width=f"{width}px", max_width="100%", height="auto"))


def show_png(image: widgets.Image, fig: Figure, alt: str) -> None:
    """Show ``fig`` in ``image`` (see `render_png`), described by ``alt`` (one sentence)."""
    from lib.teach.figures import check_alt

    alt = check_alt(alt)
    with image.hold_sync():
        image.value = render_png(fig)
        image.tooltip = alt


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


class Control:
    """One control of a live widget, seen from Python: ``control.value`` reads and sets
    the widget's synced trait ``name`` (the browser redraws, the explorer recomputes its
    numbers). Keeps the attributes the explorers' ipywidgets sliders had (``description``,
    ``min``, ``max``, ``step``, ``options``), so chapters' cells such as
    ``explorer.warmup.value = 200`` keep working."""

    continuous_update = False  # the page recomputes on every change; Python follows the synced value

    def __init__(self, widget, name: str, description: str, **limits):
        self._widget, self._name, self.description = widget, name, description
        for key, value in limits.items():
            setattr(self, key, value)

    @property
    def value(self):
        value = getattr(self._widget, self._name)
        return tuple(value) if isinstance(value, list) else value

    @value.setter
    def value(self, new) -> None:
        setattr(self._widget, self._name, list(new) if isinstance(new, tuple) else new)

    def __repr__(self) -> str:
        return f"Control({self.description!r}, value={self.value!r})"
