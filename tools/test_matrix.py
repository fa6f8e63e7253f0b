"""Run the library tests (`tests/`) on several Python versions with the pinned torch.

    python tools/test_matrix.py                 # 3.10 3.11 3.12 3.13 (`make test-matrix`)
    python tools/test_matrix.py 3.12 3.13       # only these
    python tools/test_matrix.py --rebuild 3.12  # throw the cached venv away first

For each version it makes (once) a virtual environment `.matrix/py<version>/` from that
interpreter, installs torch at the version `requirements.txt` pins and everything else
`requirements.txt` lists, runs `python -m pytest tests` there (the notebooks and the
browser test are not part of it), and prints one table: Python, torch, passed, failed,
skipped, seconds to install, megabytes downloaded, seconds to test.

The interpreter for "3.12" is pyenv's newest 3.12.x if pyenv has one, else `python3.12`
on the PATH (as on CI after actions/setup-python).

What installing torch costs. torch's Linux x86_64 wheels on the package registry are the
CUDA builds: about 0.5 GB for torch itself plus about 2 GB of nvidia-* and triton wheels
that it requires, even on a machine without a GPU. The nvidia-* wheels are the same for
every Python version (`py3-none`), so the matrix downloads them once into `.matrix/wheels/`
and installs every venv from there without asking the registry again; only torch and triton
are per version. A CPU-only build is much smaller: set TORCH_INDEX_URL to an index that has
one (as the GitHub workflow does) and pip prefers its `+cpu` wheel. Installing the CUDA
wheel without its dependencies (`--no-deps`) does not work: `import torch` then fails
with "libcudnn.so.9: cannot open shared object file".

A venv is reused while `requirements.txt`, `pyproject.toml` and the torch pin are unchanged
(a stamp file holds their hash); otherwise it is rebuilt. `.matrix/` is git-ignored.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("3.10", "3.11", "3.12", "3.13")
MATRIX = Path(os.environ.get("MATRIX_DIR", ROOT / ".matrix"))
# The same environment as `make test` (the Makefile exports these).
TEST_ENV = {
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}
_TORCH_LINE = re.compile(r"^torch\s*($|[=<>!~;\[ ])")


def torch_requirement(requirements: str) -> str:
    """The torch line of requirements.txt (e.g. 'torch==2.13.0')."""
    for line in requirements.splitlines():
        line = line.split("#", 1)[0].strip()
        if _TORCH_LINE.match(line):
            return line
    raise SystemExit("requirements.txt has no torch line")


def other_requirements(requirements: str) -> str:
    """requirements.txt without torch and without the editable course library.

    torch is installed on its own first (from the wheel cache); listing it again would
    make pip resolve its CUDA dependencies anew. The library is installed with --no-deps.
    """
    keep = []
    for line in requirements.splitlines():
        spec = line.split("#", 1)[0].strip()
        if _TORCH_LINE.match(spec) or spec in ("-e .", "--editable ."):
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"


def parse_summary(output: str) -> dict[str, int]:
    """Counts from pytest's closing line ('3 failed, 120 passed, 2 skipped in 9.1s')."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    lines = [line for line in output.splitlines() if re.search(r"\b(passed|failed|error|errors|no tests ran)\b", line)]
    if not lines:
        return counts
    for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", lines[-1]):
        key = "errors" if word.startswith("error") else word
        if key in counts:
            counts[key] += int(number)
    return counts


def find_python(version: str) -> str | None:
    """pyenv's newest <version>.x, else python<version> on the PATH."""
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = glob.glob(os.path.join(pyenv_root, "versions", f"{version}.*", "bin", "python"))
    found = [p for p in found if re.fullmatch(rf"{re.escape(version)}\.\d+", Path(p).parents[1].name)]
    if found:
        return max(found, key=lambda p: [int(x) for x in Path(p).parents[1].name.split(".")])
    return shutil.which(f"python{version}")


def _run(cmd, log, **kwargs):
    log.write("$ " + " ".join(map(str, cmd)) + "\n")
    log.flush()
    return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, **kwargs)


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*") if f.is_file())


def _du_mb(path: Path) -> float:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total / 1e6


def install(version: str, python: str, rebuild: bool) -> dict:
    """Create or reuse .matrix/py<version>; return what it cost."""
    requirements = (ROOT / "requirements.txt").read_text()
    torch_spec = os.environ.get("TORCH_SPEC") or torch_requirement(requirements)
    index = os.environ.get("TORCH_INDEX_URL", "")
    key = hashlib.sha256(
        "\0".join([requirements, (ROOT / "pyproject.toml").read_text(), torch_spec, index, python]).encode()
    ).hexdigest()
    venv = MATRIX / f"py{version}"
    stamp = venv / ".installed"
    info = {"venv": venv, "download_mb": 0.0, "install_s": 0.0, "reused": False, "ok": True}
    if not rebuild and stamp.exists() and stamp.read_text().strip() == key:
        info["reused"] = True
        return info
    shutil.rmtree(venv, ignore_errors=True)
    wheels = MATRIX / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    before = _dir_bytes(wheels)
    with open(MATRIX / f"install-py{version}.log", "w") as log:
        steps = [[python, "-m", "venv", venv]]
        pip = [venv / "bin" / "python", "-m", "pip"]
        extra = ["--extra-index-url", index] if index else []
        steps += [
            # torch and all it requires, into the shared wheel cache (a no-op when cached)
            pip + ["download", "--quiet", "--only-binary=:all:", "--dest", wheels, *extra, torch_spec],
            # then installed from the cache alone
            pip + ["install", "--quiet", "--no-index", "--find-links", wheels, torch_spec],
        ]
        rest = venv / "requirements-without-torch.txt"
        steps += [
            pip + ["install", "--quiet", "-r", rest],
            # the course library, editable: also checks pyproject's requires-python
            pip + ["install", "--quiet", "--no-deps", "-e", ROOT],
        ]
        for i, cmd in enumerate(steps):
            if i == 1:
                rest.write_text(other_requirements(requirements))
            if _run(cmd, log, cwd=ROOT).returncode != 0:
                info["ok"] = False
                break
    info["install_s"] = time.monotonic() - start
    info["download_mb"] = (_dir_bytes(wheels) - before) / 1e6
    if info["ok"]:
        info["venv_mb"] = _du_mb(venv)
        stamp.write_text(key + "\n")
    return info


def run_tests(version: str, venv: Path, pytest_args: list[str]) -> dict:
    python = venv / "bin" / "python"
    env = {**os.environ, **TEST_ENV}
    env.pop("COURSE_SITE_TEST", None)  # the browser test needs the built site: not here
    probe = subprocess.run(
        [python, "-c", "import sys, torch; print(sys.version.split()[0], torch.__version__)"],
        capture_output=True, text=True, env=env,
    )
    py_version, torch_version = (probe.stdout.split() + ["?", "?"])[:2]
    start = time.monotonic()
    log_path = MATRIX / f"pytest-py{version}.log"
    with open(log_path, "w") as log:
        proc = _run([python, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", *pytest_args], log, cwd=ROOT, env=env)
    seconds = time.monotonic() - start
    counts = parse_summary(log_path.read_text())
    return {"python": py_version, "torch": torch_version, "test_s": seconds, "rc": proc.returncode, "log": log_path, **counts}


def table(rows: list[dict]) -> str:
    head = ["Python", "torch", "passed", "failed", "skipped", "errors", "install s", "download MB", "venv MB", "test s", "result"]
    body = []
    for r in rows:
        body.append([
            r.get("python", r["version"]), r.get("torch", "-"), str(r.get("passed", "-")), str(r.get("failed", "-")),
            str(r.get("skipped", "-")), str(r.get("errors", "-")),
            "cached" if r.get("reused") else f"{r.get('install_s', 0):.0f}",
            "cached" if r.get("reused") else f"{r.get('download_mb', 0):.0f}",
            f"{r['venv_mb']:.0f}" if "venv_mb" in r else "-",
            f"{r['test_s']:.0f}" if "test_s" in r else "-", r["result"],
        ])
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(head)]
    fmt = lambda row: "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"  # noqa: E731
    return "\n".join([fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(fmt, body)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=list(VERSIONS), help="Python versions (default: %(default)s)")
    parser.add_argument("--rebuild", action="store_true", help="recreate the venvs even if cached")
    parser.add_argument("--pytest-args", default="", help="extra pytest arguments, one string")
    args = parser.parse_args(argv)
    rows = []
    for version in args.versions:
        row = {"version": version}
        python = find_python(version)
        if python is None:
            row["result"] = "no interpreter"
            rows.append(row)
            print(f"[{version}] no interpreter (pyenv or python{version} on the PATH)", flush=True)
            continue
        print(f"[{version}] {python}: installing into {MATRIX / ('py' + version)} ...", flush=True)
        info = install(version, python, args.rebuild)
        row.update(info)
        if not info["ok"]:
            row["result"] = f"install failed: {MATRIX / f'install-py{version}.log'}"
            rows.append(row)
            print(f"[{version}] {row['result']}", flush=True)
            continue
        print(f"[{version}] testing ...", flush=True)
        row.update(run_tests(version, info["venv"], args.pytest_args.split()))
        row["result"] = "ok" if row["rc"] == 0 else f"FAILED (see {row['log']})"
        rows.append(row)
        print(f"[{version}] {row['passed']} passed, {row['failed']} failed in {row['test_s']:.0f} s", flush=True)
    print()
    print(table(rows))
    (MATRIX / "results.md").write_text(table(rows) + "\n") if MATRIX.exists() else None
    return 0 if rows and all(r["result"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
