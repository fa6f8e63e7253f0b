"""The first code cell of every chapter: install the course's library, and the data
the chapter reads, where they are missing.

Colab, Binder and other fresh environments open a chapter without the course.
The cell checks for the course's own distribution (``transformer-course-lib``),
not for any module named ``lib``; where it is missing it installs it from the
repository named in ``_config.yml`` (``repository.url``: the one place a fork
changes), then fetches the pinned data sets the chapter reads (``python -m
lib.course_data NAME ...``: the same PyPI files and SHA-256 as ``make data``, refused
on a mismatch) into the user's cache. In a clone, where the course is installed,
it does nothing. Which data sets a chapter reads is found from the `lib` calls in
its code (`DATA_CALLS`).

    python tools/install_cell.py          # rewrite the cell in every chapter
    python tools/install_cell.py --check  # exit 1 if a chapter's cell is stale

`tests/test_notebook_style.py` runs the check, so a fork that changes the URL
and forgets this step is told what to run; `tests/test_fresh_environment.py` runs
the cell in a new virtual environment with the repository replaced by a wheel.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DISTRIBUTION = "transformer-course-lib"
MARKER = "# Colab or a fresh environment: install the course's library"
# The line the fresh-environment test replaces with a local wheel or sdist.
SOURCE_LINE = 'SOURCE = f"git+{REPOSITORY}"'

# lib calls that read each data set (lib.course_data.DATASETS), directly or through
# the function named: a chapter whose code calls one gets that data set fetched.
DATA_CALLS = {
    "shakespeare": ("load_corpus", "load_works", "corpus_dir", "split_by_play"),
    "alignments": ("load_verse_pairs", "alignment_wheel_path"),
    "smollm2": ("load_smollm2", "smollm2_path", "load_gguf", "read_smollm2"),
}


def repository_url(config: pathlib.Path = ROOT / "_config.yml") -> str:
    """`repository.url` from the book's configuration (no YAML parser needed)."""
    match = re.search(r"^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*(\S+)", config.read_text(), re.M)
    if match is None:
        raise ValueError(f"{config} has no repository.url")
    return match.group(1)


def data_sets(nb: dict) -> tuple[str, ...]:
    """The data sets a chapter's code reads (in `DATA_CALLS` order), from its code
    cells other than the install cell."""
    code = "\n".join(
        "".join(c["source"]) for c in nb["cells"]
        if c["cell_type"] == "code" and not "".join(c["source"]).startswith(MARKER)
    )
    return tuple(
        name for name, calls in DATA_CALLS.items()
        if any(re.search(rf"\b{call}\s*\(", code) for call in calls)
    )


def cell_source(url: str | None = None, data: tuple[str, ...] = ()) -> str:
    """The install cell's text, for the repository at `url` (default: _config.yml's),
    fetching the data sets `data` after the install."""
    url = url or repository_url()
    lines = [
        MARKER + (" and this chapter's data" if data else ""),
        "# (skipped where it is installed).",
    ]
    if data:
        lines.append("import sys")
    lines += [
        "from importlib.metadata import PackageNotFoundError, version",
        "",
        f'REPOSITORY = "{url}"',
        SOURCE_LINE,
        "try:",
        f'    version("{DISTRIBUTION}")',
        "except PackageNotFoundError:",
        f'    %pip install --quiet "{DISTRIBUTION} @ {{SOURCE}}"',
    ]
    if data:
        lines.append(f"    !{{sys.executable}} -m lib.course_data {' '.join(data)}")
    return "\n".join(lines)


def chapters() -> list[pathlib.Path]:
    return sorted((ROOT / "book").glob("*.ipynb"))


def install_cell_index(nb: dict) -> int | None:
    """Index of the install cell: the first code cell, when it is one."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            text = "".join(cell["source"])
            return i if "%pip install" in text else None
    return None


def main(argv: list[str]) -> int:
    check = "--check" in argv
    url = repository_url()
    stale = []
    for path in chapters():
        nb = json.loads(path.read_text())
        want = cell_source(url, data_sets(nb))
        i = install_cell_index(nb)
        if i is None:
            stale.append(f"{path.name}: no install cell first")
            continue
        if "".join(nb["cells"][i]["source"]) == want:
            continue
        stale.append(path.name)
        if not check:
            nb["cells"][i]["source"] = want.splitlines(keepends=True)
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    if check and stale:
        print("install cell out of date (run `python tools/install_cell.py`):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
