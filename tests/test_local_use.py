"""Local use (README "Running the notebooks yourself"): `make lab` and requirements-lab.txt.

No server is started here: `make -n` prints what `make lab` would run.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_requirements_lab_pins_jupyterlab_myst_for_jupyterlab_4():
    lines = [line.strip() for line in (ROOT / "requirements-lab.txt").read_text().splitlines()]
    specs = [line for line in lines if line and not line.startswith("#")]
    assert any(re.fullmatch(r"jupyterlab-myst==\d+\.\d+\.\d+", s) for s in specs), specs
    # jupyterlab-myst 2.7.0 needs @jupyter/ydoc 3 (JupyterLab 4.4, 4.5), not JupyterLab 4.6's ydoc 4
    assert "jupyterlab>=4.4,<4.6" in specs, specs


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_lab_installs_then_serves_book_on_localhost_only():
    # -W: pretend the install stamps are out of date, so the dry run shows the install too
    out = subprocess.run(
        ["make", "-n", "-W", "requirements.lock", "lab"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    # JupyterLab comes with the locked environment (requirements.lock holds requirements-lab.txt)
    assert "tools/lock.py --install" in out
    # JupyterLab's settings written by tools/lab_settings.py: Save Widget State
    # Automatically stays off (on, it marks every chapter with a widget modified on open)
    assert "tools/lab_settings.py" in out and '"saveState": true' not in out
    serve = [line for line in out.splitlines() if "jupyter lab" in line]
    assert len(serve) == 1, out
    assert "--ServerApp.ip=127.0.0.1" in serve[0] and "--ServerApp.root_dir=book" in serve[0]
    assert out.index("tools/lock.py --install") < out.index("jupyter lab")


def test_readme_explains_local_use():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Running the notebooks yourself"):readme.index("## How the tests work")]
    for needle in ["make lab", "jupyterlab-myst", "requirements-lab.txt", "untrusted", "Trust Notebook",
                   "Save Widget State Automatically", "make execute"]:
        assert needle in section, needle
