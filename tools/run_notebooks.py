"""Run strict nbval on the chapters one at a time, saying what runs and for how long.

    python tools/run_notebooks.py book/*.ipynb         # `make test-notebooks`
    python tools/run_notebooks.py --banded book/*.ipynb  # only chapters with lib.check_band

Before it starts it prints the whole run's expected duration (from the times
stored with each notebook when `make execute` last ran it); then, for each
notebook, a line when it starts and one when it ends, with its time. A failing
notebook does not stop the others; the exit status is 1 if any failed, and the
last line is the count of notebooks passed and failed.

`--banded` keeps only the notebooks whose results depend on floating-point
rounding (those that call `lib.check_band`): `make test-avx2` runs them with
`ATEN_CPU_CAPABILITY=avx2`, the kernels of a CPU without AVX-512.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
# Each chapter's time under `make test-notebooks` (nbval, 2 threads) on an otherwise idle
# machine, written by `--record`: what the intro's table and the Expected results page show.
RUN_TIMES = ROOT / "site" / "run_times.json"


def stored_seconds(path: Path) -> float:
    """Seconds the notebook's code cells took when it was last executed (cell metadata)."""
    total = 0.0
    for cell in json.loads(path.read_text())["cells"]:
        times = cell.get("metadata", {}).get("execution", {})
        start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
        if start and end:
            parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
            total += max(0.0, (parse(end) - parse(start)).total_seconds())
    return total


def chapter_seconds(path: Path) -> float:
    """The chapter's recorded nbval time (RUN_TIMES), else its stored cell timings."""
    if RUN_TIMES.exists():
        recorded = json.loads(RUN_TIMES.read_text())
        if path.name in recorded:
            return float(recorded[path.name])
    return stored_seconds(path)


def is_banded(path: Path) -> bool:
    cells = json.loads(path.read_text())["cells"]
    return any(c["cell_type"] == "code" and "check_band(" in "".join(c["source"]) for c in cells)


def nbval_argv(path: Path) -> list[str]:
    """Strict nbval on one notebook: the command both this runner and run_tests.py use."""
    return [sys.executable, "-m", "pytest", "-q", "--nbval", "--nbval-current-env",
            "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout=900",
            "-p", "no:cacheprovider", str(path)]


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--banded", action="store_true", help="only notebooks that call lib.check_band")
    parser.add_argument("--record", action="store_true",
                        help=f"write each passing notebook's time into {RUN_TIMES.relative_to(ROOT)} (on an idle machine)")
    args = parser.parse_args()
    notebooks = [p for p in args.notebooks if not args.banded or is_banded(p)]
    if not notebooks:
        print("no notebook to run")
        return 1
    expected = {p: chapter_seconds(p) for p in notebooks}
    settings = ", ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "ATEN_CPU_CAPABILITY") if k in os.environ)
    print(f"nbval: {len(notebooks)} notebooks ({settings or 'default settings'}); "
          f"expected about {minutes(sum(expected.values()) * 1.05)} on 2 CPU cores", flush=True)
    failed = []
    started = time.monotonic()
    for i, path in enumerate(notebooks, 1):
        print(f"[{i}/{len(notebooks)}] {path} ... (last run: {minutes(expected[path])})", flush=True)
        t0 = time.monotonic()
        result = subprocess.run(nbval_argv(path), capture_output=True, text=True)
        took = time.monotonic() - t0
        tail = [l for l in result.stdout.strip().splitlines() if l.strip()][-1:] or ["(no output)"]
        status = "passed" if result.returncode == 0 else "FAILED"
        print(f"[{i}/{len(notebooks)}] {path} {status} in {minutes(took)}: {tail[0].strip('= ')}", flush=True)
        if result.returncode == 0 and args.record:
            recorded = json.loads(RUN_TIMES.read_text()) if RUN_TIMES.exists() else {}
            recorded[path.name] = round(took)
            RUN_TIMES.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")
        if result.returncode != 0:
            failed.append(path)
            print(result.stdout[-20000:], flush=True)
            print(result.stderr[-5000:], file=sys.stderr, flush=True)
    print(f"all notebooks took {minutes(time.monotonic() - started)}")
    print(f"notebooks: {len(notebooks) - len(failed)} passed, {len(failed)} failed", flush=True)
    for path in failed:
        print(f"  failed: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
