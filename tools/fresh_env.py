"""Run chapters as Colab or Binder would: `lib` installed from a wheel by the chapter's
own first cell, the data fetched by that cell, no clone and no `data/` in sight.

    python tools/fresh_env.py book/11_language_model.ipynb book/15_pretrained_model.ipynb
    make test-fresh                      # the same, the chapters `make test` runs this way

What it does, each step printed as it starts:
1. builds a wheel of the repository (`pip wheel --no-deps`) from a copy of its files
   (those git tracks or would add), so nothing is written into the checkout;
2. creates a new virtual environment. It reuses the installed dependencies (torch,
   Jupyter, nbval...) through a folder of links to the course's `.venv`, leaving out
   the course itself (its editable install and its metadata), so neither the checkout
   nor its `data/` can be imported or found;
3. runs each chapter's first cell, as it stands in the chapter, in IPython in that
   environment, with `REPOSITORY`'s source replaced by the wheel's path (the one line
   `tools/install_cell.py` writes for that: `SOURCE = f"git+{REPOSITORY}"`); the cell
   installs the wheel with `%pip` and fetches the data sets the chapter reads with
   `python -m lib.course_data` into the user's cache (a temporary HOME). pip is
   pointed at the course's cached downloads (`PIP_NO_INDEX`, `PIP_FIND_LINKS`):
   the same files and SHA-256 checks as from PyPI, with no network;
4. checks that `lib` now imports from that environment's site-packages, and that the
   data is in the cache;
5. runs strict nbval on each chapter (the same command as `make test-notebooks`)
   from a temporary folder holding only the notebook.

The exit status is 1 if a step fails; the last line counts the chapters passed and
failed. Nothing is left behind (the temporary folder is removed; `--keep` keeps it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from install_cell import DISTRIBUTION, SOURCE_LINE, install_cell_index  # noqa: E402
from run_notebooks import ROOT, SANITIZE  # noqa: E402

# What of the course's own install the new environment must not see.
HIDDEN_PREFIXES = ("__editable__", "transformer_course_lib", "lib")


class StepError(RuntimeError):
    """A step failed; the message names it."""


def say(message: str) -> None:
    print(f"fresh environment: {message}", flush=True)


def run(argv: list, step: str, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise StepError(f"step '{step}' failed ({result.returncode}):\n"
                        f"{result.stdout[-8000:]}\n{result.stderr[-4000:]}")
    return result


def tracked_copy(dest: Path) -> Path:
    """The repository's files as they are in the work tree (tracked, and new ones git does
    not ignore), copied to `dest`."""
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    files = subprocess.run(listing, cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def build_wheel(work: Path) -> Path:
    src = tracked_copy(work / "source")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", work / "dist", src], "build wheel")
    wheels = sorted((work / "dist").glob("*.whl"))
    if len(wheels) != 1:
        raise StepError(f"step 'build wheel' left {len(wheels)} wheels in {work / 'dist'}")
    shutil.rmtree(src)
    return wheels[0]


def site_packages(python: Path) -> Path:
    out = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
              "find site-packages")
    return Path(out.stdout.strip())


def is_hidden(name: str) -> bool:
    """True for the course's own entries in a site-packages folder (its editable install,
    its metadata, a `lib` package or `.pth` files, which would not be read from a linked
    folder anyway)."""
    stem = name.split("-")[0].split(".")[0]
    return name.endswith(".pth") or any(stem == p or name.startswith(p + "-") or
                                        name.startswith("__editable__")
                                        for p in HIDDEN_PREFIXES)


def new_environment(work: Path) -> Path:
    """A virtual environment that sees the course's dependencies but not the course."""
    # Without a pip of its own: its bundled setuptools would shadow the newer one the
    # dependencies need (torch asks for setuptools >= 77); pip comes with the links.
    run([sys.executable, "-m", "venv", "--without-pip", work / "venv"], "create venv")
    python = work / "venv" / "bin" / "python"
    deps = work / "deps"
    deps.mkdir()
    source = Path(site_packages(Path(sys.executable)))
    for entry in sorted(source.iterdir()):
        if not is_hidden(entry.name):
            (deps / entry.name).symlink_to(entry)
    (site_packages(python) / "course_dependencies.pth").write_text(f"{deps}\n")
    return python


def first_cell(notebook: Path, wheel: Path) -> str:
    """The chapter's install cell with the repository replaced by the wheel."""
    nb = json.loads(notebook.read_text())
    i = install_cell_index(nb)
    if i is None:
        raise StepError(f"step 'first cell': {notebook.name} has no install cell first")
    source = "".join(nb["cells"][i]["source"])
    if SOURCE_LINE not in source:
        raise StepError(f"step 'first cell': {notebook.name}'s install cell has no line "
                        f"{SOURCE_LINE!r} (run `python tools/install_cell.py`)")
    return source.replace(SOURCE_LINE, f'SOURCE = "{wheel.as_uri()}"')


def environment(work: Path) -> dict:
    """The process environment of a fresh machine: a new HOME (so the user's cache is
    empty), none of the course's path variables, pip pointed at the cached downloads."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COURSE_", "JUPYTER_", "PYTHON", "VIRTUAL_ENV", "PIP_"))
           and k not in ("XDG_CACHE_HOME", "XDG_DATA_HOME")}
    home = work / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), PYTHONHASHSEED="0", PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(ROOT / "data" / "downloads"),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1",
               JUPYTER_PLATFORM_DIRS="1")
    env["PATH"] = f"{work / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def install_by_first_cell(python: Path, notebook: Path, wheel: Path, work: Path,
                          env: dict) -> Path:
    """Run the chapter's first cell in IPython (its `%pip` and `!` lines are IPython's),
    then check where `lib` and the data are. Returns the data folder."""
    folder = work / f"install-{notebook.stem}"
    folder.mkdir()
    cell = folder / "first_cell.ipy"
    cell.write_text(first_cell(notebook, wheel) + "\n")
    out = run([python, "-m", "IPython", "--no-banner", "--quick", "--colors=NoColor", cell],
              "run the first cell", cwd=folder, env=env)
    for line in (out.stdout + out.stderr).strip().splitlines():
        print(f"    {line}", flush=True)
    probe = run([python, "-c", "import lib, lib.course_data as d; "
                 "print(lib.__file__); print(d.data_root()); print(d.clone_root())"],
                "import lib", cwd=folder, env=env).stdout.split("\n")
    where, data, clone = probe[0], Path(probe[1]), probe[2]
    if str(work / "venv") not in where or clone != "None" or not data.is_dir():
        raise StepError(f"step 'import lib': lib imports from {where} (clone: {clone}), "
                        f"data in {data} ({data.is_dir()}): the first cell did not install "
                        "the wheel into the new environment, or fetched nothing")
    if ROOT in data.parents:
        raise StepError(f"step 'import lib': data folder {data} is inside the checkout")
    return data


def run_chapter(python: Path, notebook: Path, work: Path, env: dict) -> subprocess.CompletedProcess:
    folder = work / f"run-{notebook.stem}"
    folder.mkdir()
    copy = folder / notebook.name
    shutil.copy2(notebook, copy)
    argv = [python, "-m", "pytest", "-q", "--nbval", "--nbval-current-env",
            "--nbval-sanitize-with", SANITIZE, "--nbval-cell-timeout=900",
            "-p", "no:cacheprovider", copy]
    return subprocess.run([str(a) for a in argv], cwd=folder, env=env,
                          capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="course-fresh-"))
    passed, failed = [], []
    try:
        say(f"building a wheel of {DISTRIBUTION} from the tracked files")
        wheel = build_wheel(work)
        say(f"new virtual environment in {work / 'venv'} ({wheel.name})")
        python = new_environment(work)
        env = environment(work)
        for notebook in args.notebooks:
            t0, c0 = time.monotonic(), os.times()
            say(f"{notebook.name}: its first cell installs the wheel and fetches its data")
            data = install_by_first_cell(python, notebook, wheel, work, env)
            fetched = sorted(p.name for p in data.iterdir()) if data.is_dir() else []
            say(f"{notebook.name}: lib from the new environment; data in {data}: {fetched}")
            result = run_chapter(python, notebook, work, env)
            lines = [l for l in result.stdout.strip().splitlines() if l.strip()]
            cpu = sum(os.times()[2:4]) - sum(c0[2:4])
            status = "passed" if result.returncode == 0 else "FAILED"
            say(f"{notebook.name}: strict nbval {status} in {time.monotonic() - t0:.0f} s "
                f"(CPU {cpu:.0f} s): {(lines[-1:] or ['(no output)'])[0].strip('= ')}")
            if result.returncode == 0:
                passed.append(notebook)
            else:
                failed.append(notebook)
                print(result.stdout[-20000:], flush=True)
                print(result.stderr[-5000:], file=sys.stderr, flush=True)
            # the next chapter starts from a fresh environment too
            run([python, "-m", "pip", "uninstall", "--yes", "--quiet", DISTRIBUTION],
                "uninstall", env=env)
            shutil.rmtree(Path(env["HOME"]))
            Path(env["HOME"]).mkdir()
    except StepError as err:
        print(err, file=sys.stderr, flush=True)
        failed = [n for n in args.notebooks if n not in passed]
    finally:
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"fresh environment: {len(passed)} passed, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
