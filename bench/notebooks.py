"""Benchmark: how long each chapter takes to execute, and optionally the whole `make test`.

Each notebook runs in a fresh kernel through nbclient, as `make execute` does,
but nothing is written back. The environment is the Makefile's (fixed hash
seed, 2 OpenMP threads, inline matplotlib backend).

    .venv/bin/python bench/notebooks.py                      # every book/*.ipynb
    .venv/bin/python bench/notebooks.py book/08_training.ipynb
    .venv/bin/python bench/notebooks.py --make-test          # also time `make test` (long)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}


def execute(path: Path, timeout: int) -> tuple[float, str]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    try:
        client.execute()
        status = "ok"
    except Exception as error:  # report and go on with the next notebook
        status = f"FAILED: {type(error).__name__}"
    return time.perf_counter() - start, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: book/*.ipynb")
    parser.add_argument("--make-test", action="store_true", help="also time the whole `make test`")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args()
    os.environ.update(ENV)
    notebooks = args.notebooks or sorted((ROOT / "book").glob("*.ipynb"))

    rows = []
    for path in notebooks:
        seconds, status = execute(path.resolve(), args.timeout)
        rows.append((path.name, seconds, status))
        print(f"{path.name:40s}{seconds:9.1f} s  {status}", flush=True)
    total = sum(s for _, s, _ in rows)
    print(f"\n{'notebook':40s}{'seconds':>9s}  status")
    for name, seconds, status in rows:
        print(f"{name:40s}{seconds:9.1f}  {status}")
    print(f"{'total':40s}{total:9.1f}")

    if args.make_test:
        start = time.perf_counter()
        done = subprocess.run(["make", "test"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"{'make test':40s}{time.perf_counter() - start:9.1f}  exit code {done.returncode}")
        sys.exit(done.returncode)


if __name__ == "__main__":
    main()
