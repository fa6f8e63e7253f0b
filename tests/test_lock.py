"""requirements.lock: written from the current requirement files, and every pin
inside what requirements.txt allows (issue 22: an install that resolves the same later)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lock  # noqa: E402


def pins(text: str) -> dict[str, list[tuple[Version, str]]]:
    """name -> [(version, marker text)] from a lock's requirement lines."""
    found: dict[str, list] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^ ;\\]+)\s*(?:;\s*(.*?))?\s*\\?$", line)
        if m:
            found.setdefault(m.group(1).lower().replace("_", "-"), []).append((Version(m.group(2)), m.group(3) or ""))
    return found


def requirements(name: str) -> list[Requirement]:
    out = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-e")):
            out.append(Requirement(line))
    return out


LOCKED = pins((ROOT / "requirements.lock").read_text())
PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def applies(marker: str, python: str) -> bool:
    env = {"python_version": python, "python_full_version": python + ".0", "sys_platform": "linux",
           "platform_machine": "x86_64", "platform_system": "Linux", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    return not marker or Marker(marker).evaluate(env)


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("req", requirements("requirements.txt") + requirements("requirements-lab.txt"), ids=str)
def test_every_requirement_is_locked_within_its_range(req, python):
    if req.marker and not req.marker.evaluate({"python_version": python, "python_full_version": python + ".0"}):
        return
    name = req.name.lower().replace("_", "-")
    chosen = [v for v, marker in LOCKED.get(name, []) if applies(marker, python)]
    assert len(chosen) == 1, f"{name}: {len(chosen)} pins apply on Python {python} on Linux"
    assert req.specifier.contains(chosen[0], prereleases=True), (
        f"{name}=={chosen[0]} is outside requirements' {req.specifier}: run `make lock`"
    )


def test_every_locked_package_has_hashes():
    entries = lock.split_entries((ROOT / "requirements.lock").read_text())
    assert len(entries) > 100
    for entry in entries:
        assert "--hash=sha256:" in entry, entry.split("\n", 1)[0]


def test_torch_lock_accepts_the_cpu_build_and_needs_no_cuda_library():
    text = (ROOT / "requirements.lock").read_text()
    assert not re.search(r"^(nvidia-|triton==|cuda-)", text, re.M)
    cuda = (ROOT / "requirements-cuda.lock").read_text()
    assert re.search(r"^nvidia-", cuda, re.M)
    torch_entry = next(e for e in lock.split_entries(text) if lock.entry_name(e) == "torch")
    assert torch_entry.startswith("torch==2.13.0")


def test_the_locks_were_written_from_the_current_requirement_files():
    assert lock.check() == [], "run `make lock` after changing requirements*.txt"


def test_the_check_fails_when_a_requirement_file_changes(tmp_path, monkeypatch):
    for name in lock.INPUTS:
        (tmp_path / name).write_text((ROOT / name).read_text())
    for p in (lock.LOCK, lock.CUDA_LOCK):
        (tmp_path / p.name).write_text(p.read_text())
    monkeypatch.setattr(lock, "ROOT", tmp_path)
    monkeypatch.setattr(lock, "LOCK", tmp_path / lock.LOCK.name)
    monkeypatch.setattr(lock, "CUDA_LOCK", tmp_path / lock.CUDA_LOCK.name)
    assert lock.check() == []
    with open(tmp_path / "requirements.txt", "a") as f:
        f.write("rich>=13\n")
    assert len(lock.check()) == 2


def test_make_install_checks_hashes():
    makefile = (ROOT / "Makefile").read_text()
    assert "tools/lock.py --install" in makefile
    assert subprocess.run(["make", "-n", "lock"], cwd=ROOT, capture_output=True).returncode == 0
