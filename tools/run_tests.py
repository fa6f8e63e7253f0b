"""`make test`: every check of the course, run two at a time on a 2-core machine.

    python tools/run_tests.py --jobs 2 --avx2 "book/02_… book/08_…" book/*.ipynb

The checks, each a separate process:
- the library tests (`pytest tests`);
- strict nbval on every notebook (as `make test-notebooks`);
- strict nbval again on the chapters that train, with ATEN_CPU_CAPABILITY=avx2
  (as `make test-avx2`: the kernels of a CPU without AVX-512);
- the book build with warnings as errors and the browser test (`make test-site`);
- with `--fresh`, those chapters run as in Colab or Binder instead of in the clone
  (`tools/fresh_env.py`: `lib` installed from a wheel by the chapter's first cell, the
  data fetched by it, strict nbval from a folder with no `data/`); that check replaces
  their native nbval run, so it costs only the wheel, the environment and the fetch.

The browser test mostly waits for pages (90 s of CPU in 5.3 min), so it starts at once
and runs beside the two. Two checks side by side take about half the time of one after the other when each
uses one core, so every check that runs beside another gets OMP_NUM_THREADS=1 (most
chapters pin PyTorch to one thread anyway; the SmolLM2 chapters did not, and with two
threads each beside another check they took 3.5 and 2.1 min instead of 1.2 and 0.6).
A chapter that sets two threads itself (the translation chapter) keeps them and runs
beside another check with OMP_WAIT_POLICY=PASSIVE: its threads sleep while they wait
for each other instead of spinning. Spinning, beside another check, its training took
over fifteen minutes instead of two; run alone it left a core idle in its serial parts
(3.1 min of both cores, twice). Passive, beside chapter 14 on a loaded machine, it used
5.6 CPU minutes against 7.3 spinning. The wait policy changes no result (the work is
split between the same two threads). The longest expected check
starts first (times from site/run_times.json, else the notebook's stored cell
times); two checks of the same notebook never run at once. Each check prints a
line when it starts and one when it ends, with its time and the CPU time it used
(its processes and theirs, from wait4); a failing check does not
stop the others, its output is printed when it ends, and the exit status is 1 if
any failed. The last lines list the time of the whole run and what failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_notebooks import ROOT, chapter_seconds, minutes, nbval_argv  # noqa: E402

# Expected minutes of the checks that are not notebooks, on an idle 2-core machine.
LIB_SECONDS = 300
SITE_SECONDS = 330
# Beside another check, a check gets one thread (set here, so each chapter's own
# torch.set_num_threads still wins).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# A chapter that sets two threads itself: its threads sleep, not spin, while they wait.
PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}


@dataclass
class Check:
    name: str
    argv: list[str]
    expected: float
    env: dict = field(default_factory=dict)
    notebook: str | None = None  # two checks of one notebook never run together
    alone: bool = False  # runs with nothing beside it (`make test-cpus`: four threads)
    light: bool = False  # mostly waits (the browser test): runs beside the `jobs` checks


# The settings of `make test-cpus` (issue 22): each notebook under the kernels of a CPU
# without AVX-512 and with one and four OpenMP threads (`make test` is the native run).
SETTINGS = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "omp1": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    "omp4": {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"},
}


def pins_one_thread(path: Path) -> bool:
    return "torch.set_num_threads(1)" in path.read_text()


def uses_both_cores(path: Path) -> bool:
    """A chapter that sets PyTorch to 2 threads: beside another check its threads wait
    on each other, so they must wait passively (spinning, the translation chapter's
    training took over 15 min instead of 2)."""
    return "torch.set_num_threads(2)" in path.read_text()


def threads_env(path: Path) -> dict:
    """Beside another check: one thread, or two that wait passively for a chapter that
    sets two itself (its own torch.set_num_threads wins over OMP_NUM_THREADS)."""
    return dict(PASSIVE) if uses_both_cores(path) else dict(ONE_THREAD)


def native_capability() -> str:
    """The kernels PyTorch picks on this CPU when nothing forces them ("AVX512", "AVX2", ...)."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    out = subprocess.run([sys.executable, "-c", "import torch; "
                          "print(torch.backends.cpu.get_cpu_capability())"],
                         capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip()


def plan(notebooks: list[Path], avx2: list[Path], lib: bool, site: bool,
         fresh: list[Path] = (), native: str | None = None) -> list[Check]:
    """The checks of `make test`. On a CPU whose own kernels are already AVX2 (`native`,
    asked of PyTorch when not given) the AVX2 runs would repeat the native ones kernel for
    kernel, so they are left out (one line says so) and the native run stands for both."""
    checks = []
    if avx2 and (native if native is not None else native_capability()) == "AVX2":
        print(f"AVX2 runs of {len(avx2)} chapters left out: this CPU's own kernels are "
              "AVX2, so the native runs are those runs", flush=True)
        avx2 = []
    fresh = [p for p in fresh if p in notebooks]
    if fresh:
        checks.append(Check(f"fresh environment: {' '.join(p.stem for p in fresh)}",
                            [sys.executable, str(ROOT / "tools" / "fresh_env.py"),
                             *map(str, fresh)],
                            sum(chapter_seconds(p) for p in fresh) + 60, dict(ONE_THREAD)))
        notebooks = [p for p in notebooks if p not in fresh]
    if lib:
        checks.append(Check("library tests", [sys.executable, "-m", "pytest", "tests", "-q",
                                              "-p", "no:cacheprovider"], LIB_SECONDS,
                            dict(ONE_THREAD)))
    if site:
        checks.append(Check("book build and browser test", ["make", "--no-print-directory",
                                                            "test-site"], SITE_SECONDS,
                            dict(ONE_THREAD), light=True))
    for path in notebooks:
        checks.append(Check(f"{path}", nbval_argv(path), chapter_seconds(path),
                            threads_env(path), notebook=path.name))
    for path in avx2:
        checks.append(Check(f"{path} (AVX2)", nbval_argv(path), chapter_seconds(path),
                            {**threads_env(path), "ATEN_CPU_CAPABILITY": "avx2"},
                            notebook=path.name))
    return sorted(checks, key=lambda c: -c.expected)


def plan_settings(notebooks: list[Path], settings: list[str]) -> list[Check]:
    """Every notebook under each setting. A notebook under four threads that does not
    pin PyTorch to one thread runs alone (four threads beside another check, on two
    cores, mostly wait); the others as in `plan`."""
    checks = []
    for name in settings:
        if name not in SETTINGS:
            raise ValueError(f"settings: {name!r} is not one of {', '.join(SETTINGS)}")
        for path in notebooks:
            alone = name == "omp4" and not pins_one_thread(path) and not uses_both_cores(path)
            env = dict(SETTINGS[name]) if alone else {**threads_env(path), **SETTINGS[name]}
            checks.append(Check(f"{path} ({name})", nbval_argv(path), chapter_seconds(path),
                                env, notebook=path.name, alone=alone))
    return sorted(checks, key=lambda c: -c.expected)


def run_one(argv: list[str], env: dict) -> tuple[int, str, str, float]:
    """Run argv; return its exit code, stdout, stderr and the CPU seconds (user +
    system) of the process and of every descendant it waited for."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **env})
    streams: dict[str, str] = {}

    def drain(name, stream):
        streams[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s))
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode, streams["out"], streams["err"], usage.ru_utime + usage.ru_stime


def run(checks: list[Check], jobs: int) -> list[Check]:
    lock = threading.Lock()
    pending = [c for c in checks if not c.light]
    light = [c for c in checks if c.light]  # each starts at once in a place of its own
    running: set[str] = set()
    busy = [0]  # checks running now
    exclusive = [False]  # a check that must run alone is running
    failed: list[Check] = []
    done = [0]
    total = len(checks)

    def take() -> Check | None:
        with lock:
            if exclusive[0]:
                return None
            for check in pending:
                if check.alone and busy[0]:
                    continue  # waits until nothing else runs
                if check.notebook is None or check.notebook not in running:
                    pending.remove(check)
                    if check.notebook:
                        running.add(check.notebook)
                    busy[0] += 1
                    exclusive[0] = check.alone
                    return check
            return None

    def execute(check: Check) -> None:
        with lock:  # two starts at once printed on one line
            print(f"start: {check.name} (last run: {minutes(check.expected)})", flush=True)
        t0 = time.monotonic()
        code, out, err, cpu = run_one(check.argv, check.env)
        took = time.monotonic() - t0
        lines = [l for l in out.strip().splitlines() if l.strip()]
        status = "passed" if code == 0 else "FAILED"
        with lock:
            done[0] += 1
            if not check.light:
                if check.notebook:
                    running.discard(check.notebook)
                busy[0] -= 1
                if check.alone:
                    exclusive[0] = False
            print(f"[{done[0]}/{total}] {check.name} {status} in {minutes(took)} "
                  f"(CPU {minutes(cpu)}): "
                  f"{(lines[-1:] or ['(no output)'])[0].strip('= ')}", flush=True)
            if code != 0:
                failed.append(check)
                print(out[-20000:], flush=True)
                print(err[-5000:], file=sys.stderr, flush=True)

    def worker() -> None:
        while True:
            with lock:
                if not pending:
                    return
            check = take()
            if check is None:  # only checks of a notebook that is running: wait for it
                time.sleep(1)
                continue
            execute(check)

    threads = [threading.Thread(target=execute, args=(c,)) for c in light]
    threads += [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--avx2", default="", help="notebooks to run again with AVX2 kernels")
    parser.add_argument("--fresh", default="",
                        help="notebooks to run as in Colab (tools/fresh_env.py) instead of natively")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-lib", action="store_true", help="skip the library tests")
    parser.add_argument("--no-site", action="store_true", help="skip the book and browser test")
    parser.add_argument("--settings", default="",
                        help="instead of make test's checks: each notebook under these "
                             f"settings ({' '.join(SETTINGS)}), as `make test-cpus`")
    parser.add_argument("--estimate", action="store_true", help="print the plan and its length, run nothing")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error("--jobs: at least 1")
    if args.settings:
        try:
            checks = plan_settings(args.notebooks, args.settings.split())
        except ValueError as e:
            parser.error(str(e))
    else:
        checks = plan(args.notebooks, [Path(p) for p in args.avx2.split()],
                      lib=not args.no_lib, site=not args.no_site,
                      fresh=[Path(p) for p in args.fresh.split()])
    serial = sum(c.expected for c in checks)
    print(f"{'make test-cpus' if args.settings else 'make test'}: {len(checks)} checks, {args.jobs} at a time; one after another they "
          f"took {minutes(serial)} on 2 CPU cores, so expect about "
          f"{minutes(serial / args.jobs * 1.15)}", flush=True)
    if args.estimate:
        return 0
    started = time.monotonic()
    failed = run(checks, args.jobs)
    print(f"{'make test-cpus' if args.settings else 'make test'} took {minutes(time.monotonic() - started)}: "
          f"{len(checks) - len(failed)} checks passed, {len(failed)} failed", flush=True)
    for check in failed:
        print(f"  failed: {check.name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
