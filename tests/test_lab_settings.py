"""The JupyterLab settings `make lab` installs (tools/lab_settings.py, issue 27 item 8):
"Save Widget State Automatically" stays off, so that opening a chapter that stores a
widget does not mark it modified. No browser needed; tests/browser/test_lab.py
(`make test-lab`) opens every chapter in JupyterLab and checks the effect itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab_settings  # noqa: E402

PLUGIN = "@jupyter-widgets/jupyterlab-manager:plugin"
# What `make lab` wrote before issue 27: the setting that marks chapters modified on open.
OLD_OVERRIDES = {PLUGIN: {"saveState": True}}


def _write(settings_dir: Path, data) -> Path:
    settings_dir.mkdir(parents=True, exist_ok=True)
    path = settings_dir / "overrides.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_an_older_install_is_corrected_and_other_settings_kept(tmp_path):
    path = _write(tmp_path, {**OLD_OVERRIDES, "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}})
    assert lab_settings.problems(tmp_path) == [f"{PLUGIN} saveState: true, the course needs false"]
    assert lab_settings.apply(tmp_path) is True
    data = json.loads(path.read_text())
    assert data[PLUGIN] == {"saveState": False}
    assert data["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert lab_settings.problems(tmp_path) == []


def test_writing_is_idempotent_and_creates_the_folder(tmp_path):
    settings_dir = tmp_path / "share" / "jupyter" / "lab" / "settings"
    assert lab_settings.problems(settings_dir) == [f"{PLUGIN} saveState: <not set>, the course needs false"]
    assert lab_settings.apply(settings_dir) is True
    first = (settings_dir / "overrides.json").read_bytes()
    assert lab_settings.apply(settings_dir) is False
    assert (settings_dir / "overrides.json").read_bytes() == first
    assert json.loads(first) == {PLUGIN: {"saveState": False}}


def test_other_widget_manager_settings_are_kept(tmp_path):
    path = _write(tmp_path, {PLUGIN: {"saveState": True, "future": 1}})
    lab_settings.apply(tmp_path)
    assert json.loads(path.read_text()) == {PLUGIN: {"saveState": False, "future": 1}}


@pytest.mark.parametrize("text, says", [("{not json", "not valid JSON"), ('{"a": 1}', "must map plugin ids")])
def test_a_broken_file_is_named_not_overwritten(tmp_path, text, says):
    path = _write(tmp_path, text)
    with pytest.raises(SystemExit, match=re.escape(str(path)) + ".*" + says):
        lab_settings.apply(tmp_path)
    assert path.read_text() == text


def test_the_script_checks_and_writes(tmp_path):
    _write(tmp_path, OLD_OVERRIDES)
    run = [sys.executable, str(ROOT / "tools" / "lab_settings.py"), "--settings-dir", str(tmp_path)]
    check = subprocess.run([*run, "--check"], capture_output=True, text=True)
    assert check.returncode == 1 and "saveState: true" in check.stdout
    assert subprocess.run(run, capture_output=True, text=True).returncode == 0
    assert subprocess.run([*run, "--check"], capture_output=True, text=True).returncode == 0


def _recipe(target: str) -> tuple[str, str]:
    """(prerequisites, recipe lines) of a Makefile rule."""
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(rf"^{re.escape(target)}:(.*)\n((?:\t.*\n)+)", makefile, re.M)
    assert found, f"no rule for {target} in the Makefile"
    return found.group(1), found.group(2)


def test_make_lab_installs_these_settings_and_never_turns_saving_on():
    makefile = (ROOT / "Makefile").read_text()
    assert not re.search(r'"saveState"\s*:\s*true', makefile), "the Makefile turns Save Widget State on again"
    prerequisites, recipe = _recipe("$(LAB_STAMP)")
    assert "tools/lab_settings.py" in recipe, recipe
    # an install made by the older Makefile (stamp already there) is redone once
    assert "tools/lab_settings.py" in prerequisites, prerequisites
    assert "$(LAB_STAMP)" in _recipe("lab")[0] and "$(LAB_STAMP)" in _recipe("test-lab")[0]
    assert "COURSE_LAB_TEST=1" in _recipe("test-lab")[1]
    assert re.search(r"^LAB_OVERRIDES := \$\(VENV\)/share/jupyter/lab/settings/overrides\.json$", makefile, re.M)
    assert lab_settings.DEFAULT_DIR == ROOT / ".venv" / "share" / "jupyter" / "lab" / "settings"


def test_jupyterlab_default_is_off_too():
    """Without the course's file the installed widget manager's own default applies: off."""
    schemas = list((Path(sys.prefix) / "share" / "jupyter" / "labextensions").glob(
        "@jupyter-widgets/jupyterlab-manager/schemas/@jupyter-widgets/jupyterlab-manager/plugin.json"))
    if not schemas:
        pytest.skip("JupyterLab's widget manager is not installed in this environment")
    schema = json.loads(schemas[0].read_text())
    assert schema["properties"]["saveState"]["default"] is False


def test_this_installs_settings_if_jupyterlab_was_set_up():
    """The .venv of this checkout: once `make lab-install` has run, its settings are the course's."""
    if not (ROOT / ".venv" / ".lab-installed").exists():
        pytest.skip("`make lab-install` has not run here")
    assert lab_settings.problems(lab_settings.DEFAULT_DIR) == []
