"""Numbers that come from a run: quoted in the prose, checked against a band.

A training run's figures depend on floating-point rounding, so they change a
little with the CPU's kernels (AVX-512 or AVX2) and the thread count. The
chapters therefore never compare them verbatim. Two helpers, used from the
language-model chapter's first training run on:

- `glue(name, value)` stores a value for the prose. The markdown quotes it as
  ``{eval}`name` ``: in JupyterLab (jupyterlab-myst) the role evaluates the
  kernel's variable of that name, so the reader sees their own run; in the
  built book the course's Sphinx extension (`_ext/run_values.py`) renders the
  glued value stored with the notebook. The variable and the glued name are
  therefore the same, and the value is an int, a rounded float or a bool.
- `check_band(name, value, low, high)` asserts that a measured value lies in
  the band every tested machine produced, and records it for the table of
  expected results (`tools/expected_results.py`, the page "Expected results").

Cells that call either carry the tag ``nbval-ignore-output`` (a test checks
it): what they display is the run's own, and the band is the check.
"""

from __future__ import annotations

import json
import math
import numbers

RESULT_MIME = "application/vnd.transformer-course.result+json"

__all__ = ["RESULT_MIME", "check_band", "glue"]


def _display(bundle: dict, metadata: dict | None = None) -> None:
    try:
        from IPython.display import display
    except ImportError:  # plain Python: nothing to store
        return
    display(bundle, raw=True, metadata=metadata or {})


def glue(name: str, value) -> None:
    """Store `value` under `name` for the prose's ``{eval}`name` `` role.

    `value` must be what the prose shows as it is: an int, a bool, or a float
    already rounded (``round(x, 3)``), because JupyterLab shows the variable's
    own ``repr``. The call displays nothing visible.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be a Python identifier (the variable's name), got {name!r}")
    if isinstance(value, bool) or isinstance(value, numbers.Integral):
        text = repr(int(value)) if not isinstance(value, bool) else repr(value)
    elif isinstance(value, numbers.Real):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"value of {name!r} must be finite, got {value!r}")
        if round(value, 6) != value:
            raise ValueError(
                f"value of {name!r} must be rounded to the digits the prose shows "
                f"(for example round(x, 3)), got {value!r}"
            )
        text = repr(value)
    else:
        raise TypeError(
            f"value of {name!r} must be an int, a bool or a rounded float, "
            f"got {type(value).__name__}"
        )
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:  # Colab or a bare kernel: the same bundle by hand
        _display(
            {"application/papermill.record/text/plain": text},
            {"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}},
        )
    else:
        _myst_glue(name, int(value) if text.lstrip("-").isdigit() else value, display=False)


def check_band(name: str, value, low: float, high: float, *, unit: str = "") -> None:
    """Assert that `value` lies in ``[low, high]``, and record it.

    The band is the range that every tested setting produced (native CPU
    dispatch, ``ATEN_CPU_CAPABILITY=avx2``, 1, 2 and 4 threads), with margin;
    a value outside it fails the cell with a message that names the metric.
    The record (metric, value, band) feeds the expected-results table.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    for arg, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise TypeError(f"{arg} must be a finite number, got {v!r}")
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low!r} > high={high!r}")
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"value must be a number, got {type(value).__name__}")
    if not isinstance(value, numbers.Real):
        try:
            value = float(value)  # a 0-d tensor or numpy scalar
        except (TypeError, ValueError):
            raise TypeError(f"value must be a number, got {type(value).__name__}") from None
    value = float(value)
    if math.isnan(value):
        raise AssertionError(f"{name}: the run gave NaN (expected {low} to {high})")
    if not low <= value <= high:
        raise AssertionError(
            f"{name}: the run gave {value:.6g}, outside the expected band {low} to {high}{unit}. "
            "Every tested machine lands inside it: see the page 'Expected results'."
        )
    _display({RESULT_MIME: json.dumps({"name": name, "value": value, "low": low, "high": high, "unit": unit})})
