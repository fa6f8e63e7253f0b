"""The first code cell of every chapter: install the course's library where it is missing.

Colab and other fresh environments open a chapter without the course installed.
The cell checks for the course's own distribution (``transformer-course-lib``),
not for any module named ``lib``, and installs it from the repository named in
``_config.yml`` (``repository.url``): the one place a fork changes.

    python tools/install_cell.py          # rewrite the cell in every chapter
    python tools/install_cell.py --check  # exit 1 if a chapter's cell is stale

`tests/test_notebook_style.py` runs the check, so a fork that changes the URL
and forgets this step is told what to run.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DISTRIBUTION = "transformer-course-lib"
MARKER = "# Colab or a fresh environment: install the course's library"


def repository_url(config: pathlib.Path = ROOT / "_config.yml") -> str:
    """`repository.url` from the book's configuration (no YAML parser needed)."""
    match = re.search(r"^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*(\S+)", config.read_text(), re.M)
    if match is None:
        raise ValueError(f"{config} has no repository.url")
    return match.group(1)


def cell_source(url: str | None = None) -> str:
    """The install cell's text, for the repository at `url` (default: _config.yml's)."""
    url = url or repository_url()
    return (
        f"{MARKER}\n"
        "# (skipped where it is installed).\n"
        "from importlib.metadata import PackageNotFoundError, version\n"
        "\n"
        f'REPOSITORY = "{url}"\n'
        "try:\n"
        f'    version("{DISTRIBUTION}")\n'
        "except PackageNotFoundError:\n"
        f'    %pip install --quiet "{DISTRIBUTION} @ git+{{REPOSITORY}}"'
    )


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
    want = cell_source()
    stale = []
    for path in chapters():
        nb = json.loads(path.read_text())
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
