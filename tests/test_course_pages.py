"""The pages a newcomer reads first (README.md, book/intro.md, book/troubleshooting.md):
every command they give exists and works as written, and the intro's table of chapters
is current (issue 27).

Commands are read from the pages' code blocks and inline code:
- `make TARGET`: make knows the target (`make -n TARGET` succeeds);
- `python tools/x.py`, `python lib/x.py`, `python -m lib.x`, `bash .ci/run`: the file exists;
- `jupyter lab`: only right after an install of JupyterLab (requirements-lab.txt, or `make
  install`, whose lock has it; `.venv/bin/jupyter lab book/` after `make book` once failed);
- `pip install "name>=a,<b"` and `name==version`: the version the course pins
  (requirements.lock, or lib/course_data.py for the data wheel) satisfies the spec.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "book/intro.md", "book/troubleshooting.md"]
STARTS = ("make", "python", "python3", "py", ".venv/bin/", "pip", "!pip", "%pip", "bash", "jupyter", "LAB_", "MY_",
          "ATEN_", "OMP_", "COURSE_")


def _code(text: str) -> list[tuple[str, int]]:
    """(command line, offset in the page) from fenced blocks and inline code."""
    found = []
    for block in re.finditer(r"```[^\n`]*\n(.*?)```", text, re.S):  # ```bash, ```{raw} html
        offset = block.start(1)
        for line in block.group(1).splitlines(keepends=True):
            found.append((line.split("  #")[0].strip(), offset))
            offset += len(line)
    outside = re.sub(r"```.*?```", lambda m: " " * len(m.group(0)), text, flags=re.S)
    for span in re.finditer(r"`([^`\n]+)`", outside):
        found.append((span.group(1).strip(), span.start()))
    return [(c, at) for c, at in found if c.startswith(STARTS) or " make " in f" {c} "]


def commands(page: str) -> list[tuple[str, int]]:
    return _code((ROOT / page).read_text())


def make_targets(command: str) -> list[str]:
    words = command.split()
    if "make" not in words:
        return []
    after = [w for w in words[words.index("make") + 1:] if "=" not in w and not w.startswith("-")]
    # the target: the first word after make and its options (`make` alone: the default target)
    return [after[0]] if after and re.fullmatch(r"[a-z][a-z0-9-]*", after[0]) else [""]


def test_the_pages_give_commands():
    """The extraction finds the commands it must check (a parser that finds none checks nothing)."""
    found = {c for page in PAGES for c, _ in commands(page)}
    for expected in ["make book", "make test", "make lab", "make doctor", "python lib/doctor.py"]:
        assert any(c.startswith(expected) for c in found), (expected, sorted(found))


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("page", PAGES)
def test_every_make_target_exists(page):
    targets = sorted({t for c, _ in commands(page) for t in make_targets(c)})
    assert targets, f"{page}: no make command found"
    unknown = []
    for target in targets:
        result = subprocess.run(["make", "-n", *([target] if target else [])], cwd=ROOT, capture_output=True,
                                text=True, timeout=60)
        if result.returncode != 0 or "No rule to make target" in result.stderr:
            unknown.append(f"make {target}: {result.stderr.strip()[:200]}")
    assert not unknown, f"{page} gives make targets the Makefile lacks:\n" + "\n".join(unknown)


@pytest.mark.parametrize("page", PAGES)
def test_every_script_named_exists(page):
    missing = []
    for command, _ in commands(page):
        for path in re.findall(r"(?:python3?|py -3\.\d+|bash)\s+((?:tools|lib|\.ci)[/\\][\w./\\-]+)", command):
            if not (ROOT / path.replace("\\", "/")).exists():
                missing.append(f"{command}: {path}")
        for module in re.findall(r"python3? -m (lib(?:\.\w+)*)", command):
            if not (ROOT / (module.replace(".", "/") + ".py")).exists():
                missing.append(f"{command}: {module}")
    assert not missing, f"{page} names scripts that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", PAGES)
def test_jupyterlab_is_started_only_after_installing_it(page):
    """JupyterLab is in requirements-lab.txt (and so in requirements.lock): a page that starts it
    by hand says to install it first (`make lab` does both)."""
    text = (ROOT / page).read_text()
    bad = []
    for command, at in commands(page):
        if re.search(r"\bjupyter(-lab| lab)\b(?! *extension)", command) and not command.startswith("make"):
            before = text[max(0, at - 400):at]
            if not any(i in before for i in ("requirements-lab.txt", "make install", "make lab-install")):
                bad.append(command)
    assert not bad, f"{page} starts JupyterLab without installing it first: {bad}"


def test_the_intro_runs_the_chapters_with_make_lab():
    intro = (ROOT / "book" / "intro.md").read_text()
    assert ".venv/bin/jupyter lab" not in intro
    assert "make lab" in intro


def _pins() -> dict[str, str]:
    pins = {}
    lock = (ROOT / "requirements.lock").read_text()
    for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)", lock, re.M):
        pins[name.lower().replace("_", "-")] = version
    fetch = (ROOT / "lib" / "course_data.py").read_text()
    for name, version in re.findall(r"([a-z][a-z0-9\-]+)==(\d[\w.]*)", fetch):
        pins.setdefault(name, version)
    return pins


@pytest.mark.parametrize("page", PAGES)
def test_version_specs_match_what_the_course_pins(page):
    pins = _pins()
    wrong = []
    for command, _ in commands(page):
        if not re.search(r"\bpip3?\b.*\b(install|download)\b", command):
            continue
        specs = re.findall(r'"([A-Za-z0-9_.\-]+\s*[<>=!~][^"]*)"', command)
        specs += [s for s in command.split() if re.fullmatch(r"[A-Za-z0-9_.\-]+==[\w.]+", s)]
        for spec in specs:
            requirement = Requirement(spec)
            name = requirement.name.lower().replace("_", "-")
            if name not in pins:
                wrong.append(f"{spec}: the course pins no {name}")
            elif not requirement.specifier.contains(pins[name], prereleases=True):
                wrong.append(f"{spec}: the course pins {name}=={pins[name]}")
    assert not wrong, f"{page}:\n" + "\n".join(wrong)


def test_pip_specs_are_checked():
    """The version check above sees the widget packages' spec of the troubleshooting page."""
    found = [c for c, _ in commands("book/troubleshooting.md") if "anywidget>=" in c]
    assert found


# --------------------------------------------------------------------------- the chapters' table

sys.path.insert(0, str(ROOT / "tools"))
import chapter_table  # noqa: E402

sys.path.remove(str(ROOT / "tools"))


def test_intro_includes_the_generated_chapter_table():
    intro = (ROOT / "book" / "intro.md").read_text()
    assert "```{include} _chapters_table.md" in intro
    assert "2 CPU cores" in intro and "shared machine" not in intro


def test_chapter_table_lists_every_chapter_in_order():
    rows = re.findall(r"^\| (\d+)\. \{doc\}`(\w+)` \| (\d+) min \| ([^|]+) \| ([^|]+) \|$",
                      chapter_table.TABLE.read_text(), re.M)
    notebooks = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    assert [r[1] for r in rows] == notebooks
    assert [int(r[0]) for r in rows] == list(range(1, len(notebooks) + 1))
    # every chapter has its prerequisites; a chapter being written may be listed ahead
    assert set(range(1, len(notebooks) + 1)) <= set(chapter_table.PREREQUISITES)
    assert max(chapter_table.PREREQUISITES) <= len(notebooks) + 1


def test_reading_times_are_computed_from_the_text(tmp_path):
    """Words of the markdown cells at 200 a minute, shown code lines at 60, rounded up to 5
    minutes; folded or removed code cells and HTML comments do not count."""
    def cell(kind, text, tags=()):
        return {"cell_type": kind, "source": [text], "metadata": {"tags": list(tags)}}
    nb = tmp_path / "01_x.ipynb"
    cells = [cell("markdown", "word " * 1000 + "<!-- not read " + "x " * 5000 + "-->"),
             cell("code", "a = 1\n\nb = 2\n" * 300),  # 600 shown lines
             cell("code", "hidden\n" * 5000, ["hide-input"]),
             cell("code", "gone\n" * 5000, ["remove-cell"])]
    nb.write_text(json.dumps({"cells": cells}))
    assert chapter_table.reading_load(nb) == (1000, 600)
    assert chapter_table.reading_minutes(1000, 600) == 15  # 5 + 10 minutes
    assert chapter_table.reading_minutes(1001, 600) == 20  # just over 15: rounded up
    assert chapter_table.reading_minutes(3, 0) == 5
    text = chapter_table.TABLE.read_text()
    for stem in ("01_from_rnns_to_attention", "08_training"):
        words, lines = chapter_table.reading_load(ROOT / "book" / f"{stem}.ipynb")
        shown = re.search(rf"`{stem}` \| (\d+) min \|", text)
        assert shown, (stem, "the table gives no reading time: run `make chapter-table`")
        assert int(shown.group(1)) == chapter_table.reading_minutes(words, lines), stem


def _seconds(shown: str) -> float:
    value, unit = shown.split()
    return float(value) * (60 if unit == "min" else 1)


def test_chapter_table_times_are_the_stored_ones():
    """Each time is within rounding (and a quarter, for re-executions since) of the time the
    notebook's cells took when it was last executed, summed from its cell metadata here."""
    rows = re.findall(r"^\| (\d+)\. \{doc\}`(\w+)` \| \d+ min \| ([^|]+) \|", chapter_table.TABLE.read_text(), re.M)
    stale = []
    for _, stem, shown in rows:
        cells = json.loads((ROOT / "book" / f"{stem}.ipynb").read_text())["cells"]
        recorded = ROOT / "site" / "run_times.json"
        if recorded.exists() and f"{stem}.ipynb" in json.loads(recorded.read_text()):
            cells = []  # the time `make record-times` measured
            total = float(json.loads(recorded.read_text())[f"{stem}.ipynb"])
        else:
            total = 0.0
        for cell in cells:
            run = cell.get("metadata", {}).get("execution", {})
            if "iopub.execute_input" in run and "shell.execute_reply" in run:
                total += (chapter_table._time(run["shell.execute_reply"])
                          - chapter_table._time(run["iopub.execute_input"])).total_seconds()
        assert total > 0, f"{stem}: no stored cell timings (execute it with `make execute`)"
        if abs(_seconds(shown.strip()) - total) > max(15, 0.25 * total):
            stale.append(f"{stem}: table says {shown.strip()}, the notebook's cells took {total:.0f} s")
    assert not stale, "run `make chapter-table`:\n" + "\n".join(stale)


def test_rounding_of_run_times():
    assert [chapter_table.rounded(s) for s in (2, 8, 12.4, 57, 61, 100, 158.5, 600)] == [
        "5 s", "10 s", "10 s", "55 s", "1 min", "1.5 min", "2.5 min", "10 min"]


def test_prerequisites_cover_every_earlier_chapter_linked():
    """A chapter that links to an earlier one builds on it: that chapter is among its
    prerequisites or theirs."""

    def closure(n: int) -> set[int]:
        seen, todo = set(), list(chapter_table.PREREQUISITES[n])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += chapter_table.PREREQUISITES[m]
        return seen

    missing = []
    for path in chapter_table.chapters():
        n = chapter_table.number(path)
        assert all(p < n for p in chapter_table.PREREQUISITES[n]), n
        for linked in chapter_table.links_to(path):
            if linked < n and linked not in closure(n):
                missing.append(f"chapter {n} links to chapter {linked}, not among its prerequisites")
    assert not missing, "\n".join(missing)
