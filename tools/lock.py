"""The course's lock files: every package of the environment, pinned, with hashes.

    python tools/lock.py           # `make lock`: re-resolve requirements*.txt, write the locks
    python tools/lock.py --check   # exit 1 if the locks no longer match requirements*.txt
    python tools/lock.py --install .venv/bin/python   # `make install`

`make install` installs `requirements.lock` with `pip --require-hashes --no-deps`,
so a later install gets the same versions and the same files, byte for byte, or
fails. The lock is universal: one resolution, by `uv pip compile --universal`,
for Python 3.10 to 3.13 on every platform (markers choose per machine).

torch is the one package with two builds of the same version. The registry's
Linux wheel of torch 2.13.0 is the CUDA build, which needs about 2 GB of nvidia-*
and triton wheels; the machines the course is checked on install the CPU build
(`2.13.0+cpu`, about 0.2 GB) from a local wheel folder (`CPU_WHEELS`). So:
- `requirements.lock` holds everything but those CUDA libraries; its torch line
  accepts the registry's wheels and the CPU wheels found in `CPU_WHEELS` when the
  lock was written (their hashes are added);
- `requirements-cuda.lock` holds the CUDA libraries, installed (hash-checked too)
  only when the torch that pip chose is the CUDA build.

The first line of each lock records the SHA-256 of the requirement files it was
resolved from; `--check` (and tests/test_lock.py) compares them, and checks that
every pinned version satisfies requirements.txt.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ("requirements.txt", "requirements-lab.txt")
LOCK = ROOT / "requirements.lock"
CUDA_LOCK = ROOT / "requirements-cuda.lock"
CPU_WHEELS = Path(os.environ.get("CPU_WHEELS", "/opt/wheels"))
PYTHON_FLOOR = "3.10"
# Packages that only torch's CUDA build needs.
CUDA_ONLY = re.compile(r"^(nvidia-[a-z0-9-]+|cuda-[a-z0-9-]+|triton)$")
HEADER = "# inputs-sha256: {digest}"


def inputs_digest() -> str:
    h = hashlib.sha256()
    for name in INPUTS:
        h.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    return h.hexdigest()


def split_entries(text: str) -> list[str]:
    """The lock's entries: each a requirement line with its --hash and # via lines."""
    entries, current = [], []
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            if current:
                entries.append("\n".join(current))
            current = [line]
        elif current:
            current.append(line)
    if current:
        entries.append("\n".join(current))
    return entries


def entry_name(entry: str) -> str:
    return re.split(r"[=<>!~ ;\[]", entry.split("\n", 1)[0], maxsplit=1)[0].lower()


def cpu_wheel_hashes(version: str) -> list[str]:
    found = sorted(CPU_WHEELS.glob(f"torch-{version}+cpu-*.whl")) if CPU_WHEELS.is_dir() else []
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in found]


def compile_locks() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # The course's own package is installed editable, outside the lock.
        reqs = Path(tmp, "requirements.txt")
        reqs.write_text(
            "".join(l for l in (ROOT / "requirements.txt").read_text().splitlines(True)
                    if not l.startswith("-e "))
        )
        out = Path(tmp, "lock.txt")
        cmd = [
            "uv", "pip", "compile", str(reqs), str(ROOT / "requirements-lab.txt"),
            "--universal", "--python-version", PYTHON_FLOOR, "--generate-hashes",
            "--no-header", "--no-annotate", "--index-url", "https://pypi.org/simple",
            "-o", str(out),
        ]
        subprocess.run(cmd, check=True)
        entries = split_entries(out.read_text())
    main, cuda = [], []
    for entry in entries:
        (cuda if CUDA_ONLY.match(entry_name(entry)) else main).append(entry)
    for i, entry in enumerate(main):
        if entry_name(entry) == "torch":
            version = re.search(r"==([^ ;\\]+)", entry).group(1)
            extra = cpu_wheel_hashes(version)
            if not extra:
                print(f"note: no torch-{version}+cpu wheel in {CPU_WHEELS}; "
                      "the lock accepts the registry's torch only", file=sys.stderr)
            lines = entry.split("\n")
            main[i] = "\n".join([lines[0]] + [f"    --hash=sha256:{h} \\" for h in extra] + lines[1:])
    head = HEADER.format(digest=inputs_digest())
    LOCK.write_text(
        head + "\n# Written by `make lock` (tools/lock.py); installed by `make install`.\n"
        + "\n".join(main) + "\n"
    )
    CUDA_LOCK.write_text(
        head + "\n# torch's CUDA libraries: installed only with the registry's CUDA build.\n"
        + "\n".join(cuda) + "\n"
    )
    print(f"wrote {LOCK.name} ({len(main)} packages) and {CUDA_LOCK.name} ({len(cuda)})")


def check() -> list[str]:
    problems = []
    digest = inputs_digest()
    for lock in (LOCK, CUDA_LOCK):
        first = lock.read_text().split("\n", 1)[0] if lock.exists() else ""
        if first != HEADER.format(digest=digest):
            problems.append(f"{lock.name} was not written from the current {' and '.join(INPUTS)}: run `make lock`")
    return problems


def locked_hashes(name: str, lock: Path = LOCK) -> set[str]:
    for entry in split_entries(lock.read_text()):
        if entry_name(entry) == name:
            return set(re.findall(r"--hash=sha256:([0-9a-f]{64})", entry))
    raise KeyError(f"{name} is not in {lock.name}")


def install(python: str) -> int:
    """Install the locked environment into the interpreter `python` (a venv's)."""
    pip = [python, "-m", "pip", "install", "--progress-bar", "on", "--require-hashes", "--no-deps"]
    tag = subprocess.run(
        [python, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    version = re.search(r"^torch==([^ ;\\]+)", LOCK.read_text(), re.M).group(1)
    wheels = sorted(CPU_WHEELS.glob(f"torch-{version}+cpu-{tag}-*.whl")) if CPU_WHEELS.is_dir() else []
    allowed = locked_hashes("torch")
    for wheel in wheels:
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest not in allowed:
            print(f"{wheel.name}: its SHA-256 is not in {LOCK.name}; not using it", file=sys.stderr)
            continue
        # pip would prefer the registry's (CUDA) wheel, whose links carry hashes:
        # the CPU build goes in first, by path, with its hash checked.
        print(f"torch: the CPU build {wheel.name} (hash in {LOCK.name})", flush=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(f"{wheel} --hash=sha256:{digest}\n")
        subprocess.run(pip + ["-r", f.name], check=True)
        break
    print(f"installing {LOCK.name} (every file hash-checked)", flush=True)
    subprocess.run(pip + ["-r", str(LOCK)], check=True)
    shown = subprocess.run([python, "-m", "pip", "show", "torch"], capture_output=True, text=True).stdout
    if "+cpu" not in shown:
        print(f"torch is the registry's CUDA build: installing {CUDA_LOCK.name}", flush=True)
        subprocess.run(pip + ["-r", str(CUDA_LOCK)], check=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the locks are current")
    parser.add_argument("--install", metavar="PYTHON", help="install the locks into this interpreter")
    args = parser.parse_args()
    if args.install:
        return install(args.install)
    if not args.check:
        compile_locks()
    problems = check()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
