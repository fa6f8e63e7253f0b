"""lib.glue and lib.check_band (run values for the prose, bands for results),
and the Sphinx role that renders a glued value in the built book."""

import importlib.util
import json
from pathlib import Path

import pytest

import lib

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("run_values", ROOT / "_ext" / "run_values.py")
run_values = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_values)


def test_check_band_passes_inside_and_fails_outside_naming_the_metric():
    lib.check_band("accuracy", 0.95, 0.9, 1.0)
    lib.check_band("edge", 0.9, 0.9, 1.0)
    with pytest.raises(AssertionError, match="accuracy: the run gave 0.85"):
        lib.check_band("accuracy", 0.85, 0.9, 1.0)
    with pytest.raises(AssertionError, match="NaN"):
        lib.check_band("loss", float("nan"), 0.0, 5.0)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("", 1.0, 0, 2), ValueError),
        (("x", 1.0, 2, 0), ValueError),
        (("x", 1.0, float("nan"), 2), TypeError),
        (("x", "1.0", 0, 2), TypeError),
        (("x", 1.0, None, 2), TypeError),
    ],
)
def test_check_band_refuses_bad_arguments(args, error):
    with pytest.raises(error):
        lib.check_band(*args)


def test_glue_refuses_what_jupyterlab_would_show_differently():
    with pytest.raises(ValueError, match="identifier"):
        lib.glue("not a name", 1)
    with pytest.raises(ValueError, match="rounded"):
        lib.glue("acc", 0.1 + 0.2 + 1e-9)
    with pytest.raises(ValueError, match="finite"):
        lib.glue("acc", float("inf"))
    with pytest.raises(TypeError, match="int, a bool or a rounded float"):
        lib.glue("acc", "0.995")
    lib.glue("acc", round(0.99512, 3))
    lib.glue("count", 840)


def test_glued_bundle_in_a_kernel(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append((a, k)))
    lib.check_band("bleu", 3.2, 2.0, 5.0, unit=" BLEU")
    (bundle,), kwargs = shown[0]
    record = json.loads(bundle[lib.RESULT_MIME])
    assert record == {"name": "bleu", "value": 3.2, "low": 2.0, "high": 5.0, "unit": " BLEU"}


@pytest.mark.parametrize(
    ("data", "text"),
    [({"text/plain": "840"}, "840"), ({"text/plain": "'0.995'"}, "0.995"), ({"text/plain": "True"}, "True")],
)
def test_role_shows_the_plain_text_without_quotes(data, text):
    assert run_values.plain_text(data) == text


def test_role_refuses_a_value_without_text():
    with pytest.raises(run_values.RetrievalError):
        run_values.plain_text({"image/png": "..."})
