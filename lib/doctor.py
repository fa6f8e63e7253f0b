"""Check this machine for what the course needs: ``make doctor`` or ``python -m lib.doctor``.

Prints one line per piece, ``OK``, ``WARN`` or ``FAIL``, and under every FAIL or WARN
the command that fixes it. Exits with status 1 when a required piece fails:

- Python in the tested range (3.10 to 3.13);
- PyTorch importable (the course is checked against the version ``requirements.txt`` pins);
- the course's library ``lib`` importable;
- ipywidgets 8 and anywidget, for the chapters' widgets;
- a Jupyter kernel named ``python3``, the one the notebooks ask for.

Optional pieces never fail the check: what ``make lab`` needs (JupyterLab 4.4 or 4.5 and
jupyterlab-myst, which renders the chapters' MyST markup; both pinned in requirements-lab.txt),
and what building and testing the web book needs: Node.js and npm (the site's front-end
files), Chromium and chromedriver (the browser test).

This file imports nothing from ``lib`` (``lib`` itself imports torch), so
``python lib/doctor.py`` runs even where torch is missing; ``make doctor`` runs it that way.
Each probe is a small module-level function, so the tests replace them one at a time.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["TESTED_PYTHON", "TESTED_TORCH", "Result", "run_checks", "main"]

# What tools/test_matrix.py runs the library tests on (`make test-matrix`).
TESTED_PYTHON = ((3, 10), (3, 13))
# The torch that requirements.txt pins (tests/test_doctor.py keeps the two equal).
TESTED_TORCH = "2.13.0"
# What requirements-lab.txt pins for `make lab` (tests/test_doctor.py keeps them equal):
# JupyterLab from LAB_RANGE[0] up to, not including, LAB_RANGE[1]; jupyterlab-myst MYST_VERSION.
LAB_RANGE = ((4, 4), (4, 6))
MYST_VERSION = "2.7.0"
LAB_FIX = (
    "make lab-install   (or: pip install -r requirements-lab.txt, with the Python that runs "
    "the course)"
)

OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclass
class Result:
    name: str
    status: str  # OK, WARN or FAIL
    detail: str
    fix: str = ""
    required: bool = True


# ---------------------------------------------------------------- probes (replaced in tests)


def _python_version() -> tuple[int, int, int]:
    return tuple(sys.version_info[:3])


def _import(module: str):
    """Import a module; return it, or the exception that stopped it."""
    try:
        return importlib.import_module(module)
    except Exception as err:  # ImportError, or a broken install raising anything else
        return err


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _kernel_specs() -> dict[str, list[str]] | Exception:
    """Kernel name -> its argv, as Jupyter finds them (jupyter_client's KernelSpecManager)."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except Exception as err:
        return err
    manager = KernelSpecManager()
    specs = {}
    for name in manager.find_kernel_specs():
        try:
            specs[name] = list(manager.get_kernel_spec(name).argv)
        except Exception:  # a broken kernel.json: listed without argv
            specs[name] = []
    return specs


def _which(program: str) -> str | None:
    return shutil.which(program)


def _program_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "?"
    words = (out.stdout or out.stderr).split()
    return next((w for w in words if any(c.isdigit() for c in w)), "?")  # "v20.1.0", "ChromeDriver 1.2 (..)"


# ---------------------------------------------------------------- checks


def _major_minor(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_python() -> Result:
    version = _python_version()
    shown = ".".join(map(str, version))
    low, high = TESTED_PYTHON
    tested = f"{low[0]}.{low[1]} to {high[0]}.{high[1]}"
    fix = (
        f"install Python {high[0]}.{high[1]} (python.org, your package manager, or `pyenv install "
        f"{high[0]}.{high[1]}`), then recreate the environment: `make distclean && make install "
        f"PYTHON=python{high[0]}.{high[1]}`"
    )
    if tuple(version[:2]) < low:
        return Result("Python", FAIL, f"Python {shown} is older than the course supports ({tested})", fix)
    if tuple(version[:2]) > high:
        return Result(
            "Python", WARN, f"Python {shown} is newer than the versions tested ({tested}); it may work",
            "if something fails: " + fix,
        )
    return Result("Python", OK, f"Python {shown} (tested: {tested})")


def check_torch() -> Result:
    torch = _import("torch")
    if isinstance(torch, Exception):
        return Result(
            "torch", FAIL, f"PyTorch is not importable ({type(torch).__name__}: {torch})",
            f"pip install torch=={TESTED_TORCH}   (in Colab it is already there: run the chapter's first cell)",
        )
    version = getattr(torch, "__version__", "?")
    devices = ["cpu"]
    try:
        if torch.cuda.is_available():
            devices.append("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            devices.append("mps")
    except Exception:  # a device probe that fails says nothing about the CPU path
        pass
    detail = f"torch {version} (devices: {', '.join(devices)})"
    if _major_minor(version)[:2] != _major_minor(TESTED_TORCH)[:2]:
        return Result(
            "torch", WARN, detail + f"; the course is checked against {TESTED_TORCH}: stored outputs may "
            "differ in the last digits and newer APIs may be missing",
            f"pip install torch=={TESTED_TORCH}",
        )
    return Result("torch", OK, detail)


def check_lib() -> Result:
    lib = _import("lib")
    if isinstance(lib, Exception):
        return Result(
            "lib", FAIL, f"the course's library is not importable ({type(lib).__name__}: {lib})",
            "from the course's folder: pip install -e .   (or `make install`; in Colab run the "
            "chapter's first cell)",
        )
    return Result("lib", OK, f"the course's library ({os.path.dirname(getattr(lib, '__file__', '') or '?')})")


def check_widgets() -> Result:
    problems = []
    ipywidgets = _import("ipywidgets")
    if isinstance(ipywidgets, Exception):
        problems.append("ipywidgets is missing")
    elif _major_minor(getattr(ipywidgets, "__version__", "0"))[0] < 8:
        problems.append(f"ipywidgets {ipywidgets.__version__} is older than 8")
    anywidget = _import("anywidget")
    if isinstance(anywidget, Exception):
        problems.append("anywidget is missing")
    if problems:
        return Result(
            "widgets", FAIL, "; ".join(problems) + " (the chapters' interactive widgets need both)",
            'pip install "ipywidgets>=8.1,<9" "anywidget>=0.9,<0.12"   (then restart the kernel)',
        )
    return Result(
        "widgets", OK,
        f"ipywidgets {getattr(ipywidgets, '__version__', '?')}, anywidget {_version('anywidget') or '?'}",
    )


def check_kernel() -> Result:
    fix = (
        "python -m ipykernel install --user --name python3   (with the Python that has the course "
        "installed; `make install` does it for .venv)"
    )
    specs = _kernel_specs()
    if isinstance(specs, Exception):
        return Result(
            "Jupyter kernel", FAIL, f"jupyter_client is not importable ({specs})",
            "pip install ipykernel   (it brings jupyter_client), then " + fix,
        )
    if "python3" not in specs:
        found = ", ".join(sorted(specs)) or "none"
        return Result("Jupyter kernel", FAIL, f"no Jupyter kernel named python3 (found: {found})", fix)
    argv = specs["python3"]
    executable = argv[0] if argv else ""
    if executable in ("python", "python3", "{python}"):  # ipykernel's own spec: the running Python
        executable = sys.executable
    if not executable or (os.path.sep in executable and not os.path.exists(executable)):
        return Result(
            "Jupyter kernel", FAIL, f"the python3 kernel runs {executable or 'nothing'}, which does not exist", fix
        )
    if os.path.realpath(executable) != os.path.realpath(sys.executable):
        return Result(
            "Jupyter kernel", WARN,
            f"the python3 kernel runs {executable}, not this Python ({sys.executable}): the notebooks "
            "will see that Python's packages", fix,
        )
    return Result("Jupyter kernel", OK, f"python3 runs {executable}")


def _check_programs(name: str, programs: list[list[str]], purpose: str, fix: str) -> Result:
    """Each entry of `programs` is a list of alternative names (chromium or chromium-browser)."""
    found, missing = [], []
    for alternatives in programs:
        path = next((p for p in map(_which, alternatives) if p), None)
        if path is None:
            missing.append(alternatives[0])
        else:
            found.append(f"{os.path.basename(path)} {_program_version(path)}")
    if missing:
        return Result(name, FAIL, f"optional, {purpose}: {', '.join(missing)} not found", fix, required=False)
    return Result(name, OK, ", ".join(found), required=False)


def check_node() -> Result:
    return _check_programs(
        "Node.js", [["node", "nodejs"], ["npm"]], "only to build the web book (make book)",
        "Debian/Ubuntu: sudo apt-get install nodejs npm; macOS: brew install node; "
        "Windows: the installer from nodejs.org",
    )


def check_chromium() -> Result:
    return _check_programs(
        "Chromium", [["chromium", "chromium-browser", "google-chrome"], ["chromedriver"]],
        "only to test the built web book in a browser (make test-site)",
        "Debian/Ubuntu: sudo apt-get install chromium chromium-driver; macOS: brew install --cask "
        "chromium chromedriver",
    )


def check_jupyterlab() -> Result:
    """`make lab` serves the chapters with JupyterLab; jupyterlab-myst 2.7 needs 4.4 or 4.5."""
    version = _version("jupyterlab")
    low, high = LAB_RANGE
    wanted = f"{low[0]}.{low[1]} or {high[0]}.{high[1] - 1}"
    if version is None:
        return Result(
            "JupyterLab", FAIL, f"optional, only to run the chapters with `make lab`: JupyterLab is not "
            f"installed (the course uses {wanted})", LAB_FIX, required=False,
        )
    if not low <= _major_minor(version)[:2] < high:
        return Result(
            "JupyterLab", FAIL, f"optional, for `make lab`: JupyterLab {version} is installed, but "
            f"jupyterlab-myst {MYST_VERSION} works with {wanted} only", LAB_FIX, required=False,
        )
    return Result("JupyterLab", OK, f"JupyterLab {version} (make lab)", required=False)


def check_jupyterlab_myst() -> Result:
    """Without jupyterlab-myst, JupyterLab shows the chapters' MyST markup as raw text."""
    version = _version("jupyterlab-myst")
    if version is None:
        return Result(
            "jupyterlab-myst", FAIL, "optional, for `make lab`: jupyterlab-myst is not installed, so "
            "JupyterLab would show the chapters' markup as raw text, exercise solutions included",
            LAB_FIX, required=False,
        )
    if version != MYST_VERSION:
        return Result(
            "jupyterlab-myst", WARN, f"jupyterlab-myst {version}; the course is checked with {MYST_VERSION}",
            LAB_FIX, required=False,
        )
    return Result("jupyterlab-myst", OK, f"jupyterlab-myst {version} (renders the chapters' markup)",
                  required=False)


CHECKS = (
    check_python, check_torch, check_lib, check_widgets, check_kernel, check_jupyterlab,
    check_jupyterlab_myst, check_node, check_chromium,
)


def run_checks() -> list[Result]:
    return [check() for check in CHECKS]


def report(results: list[Result]) -> str:
    lines = ["The course's environment (python -m lib.doctor):"]
    for r in results:
        lines.append(f"{r.status:<4}  {r.name}: {r.detail}")
        if r.status != OK and r.fix:
            lines.append(f"      fix: {r.fix}")
    failed = [r.name for r in results if r.status == FAIL and r.required]
    if failed:
        lines.append(f"{len(failed)} required piece(s) failed: {', '.join(failed)}.")
    else:
        lines.append("Everything the chapters need is here.")
    return "\n".join(lines)


def main() -> int:
    results = run_checks()
    print(report(results))
    return 1 if any(r.status == FAIL and r.required for r in results) else 0


if __name__ == "__main__":
    if not __package__:  # `python lib/doctor.py`: import lib from this checkout, not from lib/ itself
        sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
