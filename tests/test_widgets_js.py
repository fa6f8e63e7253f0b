"""The widgets' JavaScript math against fixed numbers from lib: runs tests/js/widgets.test.mjs
with node (`node --test`); the fixtures (tests/js/fixtures.json) are written by
tests/js/make_fixtures.py with torch. Also checks that the fixtures are lib's current numbers."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "js"


def test_javascript_unit_tests_pass_under_node():
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (the book's build needs it too: npm ci)")
    result = subprocess.run([node, "--no-warnings", "--test", str(HERE / "widgets.test.mjs")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout and "# pass " in result.stdout, result.stdout[-2000:]


def test_fixtures_are_libs_current_numbers():
    """The fixture's runs are recomputed with lib now: a change in lib that the fixture
    does not follow would leave the JavaScript tested against stale numbers."""
    import sys

    sys.path.insert(0, str(HERE))
    try:
        import make_fixtures
    finally:
        sys.path.remove(str(HERE))
    stored = json.loads((HERE / "fixtures.json").read_text())
    fresh = make_fixtures.date_fixture(0, False)
    assert fresh["weights"] == stored["dates"][0]["weights"]
    for a, b in zip(fresh["runs"], stored["dates"][0]["runs"]):
        assert a["output"] == b["output"]
        assert [s["token"] for s in a["steps"]] == [s["token"] for s in b["steps"]]
        assert max(abs(x - y) for s, t in zip(a["steps"], b["steps"]) for x, y in zip(s["logits"], t["logits"])) < 1e-5
