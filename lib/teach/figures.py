"""Alternative text for the chapters' figures (issue 15: every figure says what it shows).

``describe_figure(fig, alt)`` gives a matplotlib figure one sentence that says what
it shows: the axes and the point (e.g. "Learning rate against training step: a linear
rise to a peak at step 4000, then a 1/√step decay."). Call it in the cell that makes
the figure, before the figure is shown:

    fig, ax = plt.subplots()
    _ = ax.plot(steps, rates)
    lib.describe_figure(fig, "Learning rate against step: ...")

(It returns None, so that as the last line of a cell it does not show the figure twice.)

When the figure is displayed (the inline backend at the end of the cell, ``plt.show()``
or ``display(fig)``), its PNG output carries the text in its metadata,
``{"image/png": {"alt": ...}}``, so it is stored in the notebook; the book's build
(_ext/accessibility.py) makes it the ``alt`` attribute of the figure on the site.
The widgets' images (lib/widgets) carry theirs in the Image widget's ``tooltip``.
"""

from __future__ import annotations

import weakref

from matplotlib.figure import Figure

__all__ = ["describe_figure", "figure_alt"]

_ALTS: "weakref.WeakKeyDictionary[Figure, str]" = weakref.WeakKeyDictionary()


def check_alt(alt: object) -> str:
    """The alt text, stripped; a ValueError unless it is a non-empty sentence on one line."""
    if not isinstance(alt, str):
        raise TypeError(f"alt must be a str, got {type(alt).__name__}")
    text = " ".join(alt.split())
    if len(text) < 10:
        raise ValueError(f"alt must say what the figure shows (the axes and the point), got {alt!r}")
    return text


def describe_figure(fig: Figure, alt: str) -> None:
    """Attach ``alt`` (one sentence: the axes and the point) to ``fig``.

    Displaying the figure in IPython/Jupyter then stores the text in the PNG
    output's metadata (see the module docstring). Calling it again replaces the text.
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"describe_figure needs a matplotlib Figure, got {type(fig).__name__}")
    _ALTS[fig] = check_alt(alt)
    _install_png_formatter()


def figure_alt(fig: Figure) -> str | None:
    """The text given to ``fig`` by `describe_figure`, or None."""
    return _ALTS.get(fig)


def _install_png_formatter() -> None:
    """Wrap IPython's PNG printer for figures (matplotlib-inline's) so that a described
    figure's PNG comes with ``{"alt": ...}`` metadata. Idempotent; no-op outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of the course
        return
    shell = get_ipython()
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["image/png"]
    try:
        printer = formatter.lookup_by_type(Figure)
    except KeyError:
        return  # no PNG printer for figures (not the inline backend): nothing is shown as PNG
    if getattr(printer, "_adds_alt", False):
        return

    def png_with_alt(fig, _printer=printer):
        result = _printer(fig)
        alt = _ALTS.get(fig)
        if alt is None or result is None:
            return result
        data, metadata = result if isinstance(result, tuple) else (result, None)
        return data, {**(metadata or {}), "alt": alt}

    png_with_alt._adds_alt = True  # type: ignore[attr-defined]
    formatter.for_type(Figure, png_with_alt)
