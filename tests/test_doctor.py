"""`python -m lib.doctor` / `make doctor`: one OK/WARN/FAIL line per piece, a fix under each FAIL.

The probes (interpreter version, imports, the Jupyter kernels, programs on the PATH) are
replaced one at a time, so every FAIL message and both exit codes are checked on any machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from lib import doctor

ROOT = Path(__file__).resolve().parents[1]


def _fake_torch(version="2.13.0", cuda=False, mps=False):
    return SimpleNamespace(
        __version__=version,
        cuda=SimpleNamespace(is_available=lambda: cuda),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps)),
    )


@pytest.fixture
def machine(monkeypatch):
    """A machine where everything is present; each test breaks one piece."""
    state = SimpleNamespace(
        python=(3, 12, 1),
        modules={
            "torch": _fake_torch(),
            "lib": SimpleNamespace(__file__="/course/lib/__init__.py"),
            "ipywidgets": SimpleNamespace(__version__="8.1.9"),
            "anywidget": SimpleNamespace(__version__="0.11.0"),
        },
        kernels={"python3": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]},
        programs={p: f"/usr/bin/{p}" for p in ("node", "npm", "chromium", "chromedriver")},
        versions={"anywidget": "0.11.0", "jupyterlab": "4.5.11", "jupyterlab-myst": "2.7.0"},
    )

    def fake_import(name):
        module = state.modules.get(name)
        return module if module is not None else ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(doctor, "_python_version", lambda: state.python)
    monkeypatch.setattr(doctor, "_import", fake_import)
    monkeypatch.setattr(doctor, "_version", lambda dist: state.versions.get(dist))
    monkeypatch.setattr(doctor, "_kernel_specs", lambda: state.kernels)
    monkeypatch.setattr(doctor, "_which", lambda program: state.programs.get(program))
    monkeypatch.setattr(doctor, "_program_version", lambda path: "1.0.0")
    return state


def _run(capsys):
    code = doctor.main()
    return code, capsys.readouterr().out


def _line(out, name):
    """The status line of one piece and the fix line under it (if any)."""
    lines = out.splitlines()
    i = next(i for i, line in enumerate(lines) if re.match(rf"(OK|WARN|FAIL)\s+{re.escape(name)}:", line))
    fix = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].strip().startswith("fix:") else ""
    return lines[i], fix


def test_everything_present_exits_0(machine, capsys):
    code, out = _run(capsys)
    assert code == 0, out
    names = ["Python", "torch", "lib", "widgets", "Jupyter kernel", "JupyterLab", "jupyterlab-myst", "Node.js",
             "Chromium"]
    for name in names:
        status, fix = _line(out, name)
        assert status.startswith("OK"), status
        assert fix == ""
    assert "Everything the chapters need is here." in out
    assert "FAIL" not in out


@pytest.mark.parametrize("version", [(3, 9, 18), (3, 8, 0)])
def test_python_older_than_tested_fails(machine, capsys, version):
    machine.python = version
    code, out = _run(capsys)
    status, fix = _line(out, "Python")
    assert code == 1
    assert status.startswith("FAIL") and f"{version[0]}.{version[1]}" in status and "3.10 to 3.13" in status
    assert "install Python 3.13" in fix and "make distclean && make install PYTHON=python3.13" in fix
    assert "1 required piece(s) failed: Python." in out


def test_python_newer_than_tested_warns_only(machine, capsys):
    machine.python = (3, 14, 0)
    code, out = _run(capsys)
    status, fix = _line(out, "Python")
    assert code == 0
    assert status.startswith("WARN") and "newer than the versions tested" in status
    assert fix.startswith("fix: if something fails")


@pytest.mark.parametrize("version", [(3, 10, 13), (3, 11, 7), (3, 12, 1), (3, 13, 0)])
def test_every_tested_python_is_ok(machine, capsys, version):
    machine.python = version
    code, out = _run(capsys)
    assert code == 0 and _line(out, "Python")[0].startswith("OK")


def test_missing_torch_fails_with_the_pinned_install(machine, capsys):
    del machine.modules["torch"]
    code, out = _run(capsys)
    status, fix = _line(out, "torch")
    assert code == 1
    assert status.startswith("FAIL") and "not importable" in status and "No module named 'torch'" in status
    assert fix.startswith(f"fix: pip install torch=={doctor.TESTED_TORCH}")


def test_other_torch_version_warns(machine, capsys):
    machine.modules["torch"] = _fake_torch("2.9.1")
    code, out = _run(capsys)
    status, fix = _line(out, "torch")
    assert code == 0
    assert status.startswith("WARN") and "2.9.1" in status and doctor.TESTED_TORCH in status
    assert fix == f"fix: pip install torch=={doctor.TESTED_TORCH}"


def test_torch_names_its_devices(machine, capsys):
    machine.modules["torch"] = _fake_torch("2.13.0+cpu", cuda=True, mps=True)
    _, out = _run(capsys)
    assert "torch 2.13.0+cpu (devices: cpu, cuda, mps)" in _line(out, "torch")[0]


def test_missing_lib_fails_with_the_editable_install(machine, capsys):
    del machine.modules["lib"]
    code, out = _run(capsys)
    status, fix = _line(out, "lib")
    assert code == 1 and status.startswith("FAIL")
    assert "pip install -e ." in fix and "first cell" in fix


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m.modules.pop("ipywidgets"), "ipywidgets is missing"),
        (lambda m: m.modules.__setitem__("ipywidgets", SimpleNamespace(__version__="7.8.1")), "older than 8"),
        (lambda m: m.modules.pop("anywidget"), "anywidget is missing"),
    ],
)
def test_widget_packages(machine, capsys, change, message):
    change(machine)
    code, out = _run(capsys)
    status, fix = _line(out, "widgets")
    assert code == 1 and status.startswith("FAIL") and message in status
    assert 'pip install "ipywidgets>=8.1,<9" "anywidget>=0.9,<0.12"' in fix and "restart the kernel" in fix


def test_no_python3_kernel_fails(machine, capsys):
    machine.kernels = {"ir": ["R"]}
    code, out = _run(capsys)
    status, fix = _line(out, "Jupyter kernel")
    assert code == 1 and status.startswith("FAIL")
    assert "no Jupyter kernel named python3 (found: ir)" in status
    assert "python -m ipykernel install --user --name python3" in fix


def test_kernel_whose_python_is_gone_fails(machine, capsys, tmp_path):
    machine.kernels = {"python3": [str(tmp_path / "deleted-venv" / "bin" / "python"), "-m", "ipykernel_launcher"]}
    code, out = _run(capsys)
    status, fix = _line(out, "Jupyter kernel")
    assert code == 1 and status.startswith("FAIL") and "does not exist" in status
    assert "ipykernel install" in fix


def test_kernel_of_another_python_warns(machine, capsys, tmp_path):
    other = tmp_path / "python"
    other.write_text("")
    machine.kernels = {"python3": [str(other), "-m", "ipykernel_launcher"]}
    code, out = _run(capsys)
    status, fix = _line(out, "Jupyter kernel")
    assert code == 0 and status.startswith("WARN") and "not this Python" in status
    assert "ipykernel install" in fix


def test_ipykernels_own_spec_is_this_python(machine, capsys):
    machine.kernels = {"python3": ["python", "-m", "ipykernel_launcher"]}
    code, out = _run(capsys)
    assert code == 0 and _line(out, "Jupyter kernel")[0].startswith("OK")


def test_without_jupyter_client_the_kernel_check_fails(machine, capsys, monkeypatch):
    monkeypatch.setattr(doctor, "_kernel_specs", lambda: ModuleNotFoundError("No module named 'jupyter_client'"))
    code, out = _run(capsys)
    status, fix = _line(out, "Jupyter kernel")
    assert code == 1 and status.startswith("FAIL") and "jupyter_client" in status
    assert "pip install ipykernel" in fix


@pytest.mark.parametrize(
    "missing, name, fix_part",
    [
        (["node"], "Node.js", "apt-get install nodejs npm"),
        (["npm"], "Node.js", "apt-get install nodejs npm"),
        (["chromium"], "Chromium", "apt-get install chromium chromium-driver"),
        (["chromedriver"], "Chromium", "apt-get install chromium chromium-driver"),
    ],
)
def test_site_build_tools_are_optional(machine, capsys, missing, name, fix_part):
    for program in missing:
        del machine.programs[program]
    code, out = _run(capsys)
    status, fix = _line(out, name)
    assert code == 0, "an optional piece never fails the check"
    assert status.startswith("FAIL") and "optional" in status and f"{missing[0]} not found" in status
    assert fix_part in fix
    assert "Everything the chapters need is here." in out


@pytest.mark.parametrize(
    "versions, name, status_part",
    [
        ({"jupyterlab": None}, "JupyterLab", "JupyterLab is not installed (the course uses 4.4 or 4.5)"),
        ({"jupyterlab": "4.6.6"}, "JupyterLab", "JupyterLab 4.6.6 is installed, but jupyterlab-myst 2.7.0 works"),
        ({"jupyterlab": "4.3.0"}, "JupyterLab", "JupyterLab 4.3.0 is installed"),
        ({"jupyterlab-myst": None}, "jupyterlab-myst", "markup as raw text, exercise solutions included"),
    ],
)
def test_what_make_lab_needs_is_reported_with_the_fix(machine, capsys, versions, name, status_part):
    machine.versions.update(versions)
    code, out = _run(capsys)
    status, fix = _line(out, name)
    assert code == 0, "JupyterLab is optional: the chapters also run in VS Code or Colab"
    assert status.startswith("FAIL") and "optional" in status and "make lab" in status
    assert status_part in status
    assert fix.startswith("fix: make lab-install") and "pip install -r requirements-lab.txt" in fix
    assert "Everything the chapters need is here." in out


@pytest.mark.parametrize("version", ["4.4.0", "4.4.10", "4.5.11"])
def test_jupyterlab_versions_that_work_with_jupyterlab_myst(machine, capsys, version):
    machine.versions["jupyterlab"] = version
    _, out = _run(capsys)
    assert _line(out, "JupyterLab")[0] == f"OK    JupyterLab: JupyterLab {version} (make lab)"


def test_other_jupyterlab_myst_warns(machine, capsys):
    machine.versions["jupyterlab-myst"] = "2.4.2"
    code, out = _run(capsys)
    status, fix = _line(out, "jupyterlab-myst")
    assert code == 0 and status.startswith("WARN") and "2.4.2" in status and "2.7.0" in status
    assert fix.startswith("fix: make lab-install")


def test_lab_pins_match_requirements_lab():
    specs = [line.strip() for line in (ROOT / "requirements-lab.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    (low, high) = doctor.LAB_RANGE
    assert f"jupyterlab>={low[0]}.{low[1]},<{high[0]}.{high[1]}" in specs, specs
    assert f"jupyterlab-myst=={doctor.MYST_VERSION}" in specs, specs


def test_make_lab_install_exists_for_the_fix():
    out = subprocess.run(["make", "-n", "lab-install"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_chromium_under_another_name_is_found(machine, capsys):
    del machine.programs["chromium"]
    machine.programs["chromium-browser"] = "/usr/bin/chromium-browser"
    _, out = _run(capsys)
    assert _line(out, "Chromium")[0] == "OK    Chromium: chromium-browser 1.0.0, chromedriver 1.0.0"


def test_several_failures_are_all_listed(machine, capsys):
    machine.python = (3, 9, 0)
    del machine.modules["torch"], machine.modules["anywidget"]
    code, out = _run(capsys)
    assert code == 1
    assert "3 required piece(s) failed: Python, torch, widgets." in out
    assert out.count("fix:") == 3


def test_the_real_probes_run_here(capsys):
    """No monkeypatching: this machine runs the tests, so the required pieces are present."""
    results = doctor.run_checks()
    assert [r.name for r in results] == [
        "Python", "torch", "lib", "widgets", "Jupyter kernel", "JupyterLab", "jupyterlab-myst", "Node.js", "Chromium"
    ]
    assert all(r.status in ("OK", "WARN", "FAIL") for r in results)
    for r in results[:4]:
        assert r.status != "FAIL", r


def test_tested_versions_match_the_pin_and_the_matrix():
    pin = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert pin and pin.group(1) == doctor.TESTED_TORCH
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import test_matrix
    finally:
        sys.path.remove(str(ROOT / "tools"))
    low, high = doctor.TESTED_PYTHON
    assert test_matrix.VERSIONS[0] == f"{low[0]}.{low[1]}" and test_matrix.VERSIONS[-1] == f"{high[0]}.{high[1]}"


def test_runs_as_a_script_without_torch(tmp_path):
    """`python lib/doctor.py` (what `make doctor` runs) reports a missing torch instead of crashing."""
    (tmp_path / "torch.py").write_text("raise ImportError('torch is not installed (test)')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "lib" / "doctor.py")], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(r"^FAIL  torch: PyTorch is not importable \(ImportError: torch is not installed", proc.stdout, re.M)
    assert "fix: pip install torch==" in proc.stdout


def test_make_doctor_runs_the_script():
    makefile = (ROOT / "Makefile").read_text()
    rule = makefile.split("\ndoctor:", 1)[1].split("\n\n", 1)[0]
    assert "lib/doctor.py" in rule
