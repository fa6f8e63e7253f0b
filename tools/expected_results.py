"""Expected results, per chapter, in one table; and a learner's run compared with it.

    python tools/expected_results.py --write          # `make expected-results` (and `make execute`)
    python tools/expected_results.py --check-mine DIR # `make check-my-results MY_NOTEBOOKS=DIR`
    python tools/expected_results.py --check          # exit 1 if the committed table is stale

Every value a chapter checks with `lib.check_band` is stored in the executed
notebook (an output of type `lib.RESULT_MIME`: the metric, the value of that run,
the band). `--write` collects them from book/*.ipynb, with each chapter's run time
(its nbval time recorded in site/run_times.json by
`make record-times` on an idle machine, else the cell timings `make execute` stored), into `site/expected_results.json`
and the page `book/expected_results.md`. `--check-mine` reads the same records from
a learner's executed notebooks and says, chapter by chapter, whether each value
falls inside the band.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from run_notebooks import chapter_seconds  # noqa: E402

RESULT_MIME = "application/vnd.transformer-course.result+json"  # = lib.RESULT_MIME
DATA = ROOT / "site" / "expected_results.json"
PAGE = ROOT / "book" / "expected_results.md"
TOC = ROOT / "_toc.yml"


def records(path: Path) -> list[dict]:
    """The lib.check_band records stored in one executed notebook, in cell order."""
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if RESULT_MIME in data:
                raw = data[RESULT_MIME]
                found.append(json.loads(raw) if isinstance(raw, str) else raw)
    return found


def chapter_titles() -> dict[str, str]:
    """File stem -> "N. Title", from the notebooks' first heading and the file number."""
    titles = {}
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        first = json.loads(path.read_text())["cells"][0]
        head = next((l for l in "".join(first["source"]).splitlines() if l.startswith("# ")), path.stem)
        titles[path.stem] = f"{int(path.stem[:2])}. {head[2:].strip()}"
    return titles


def hardware() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine()
    threads = os.environ.get("OMP_NUM_THREADS", "2")
    return f"{model}, {threads} threads (OMP_NUM_THREADS), no GPU"


def collect() -> dict:
    chapters = []
    titles = chapter_titles()
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        chapters.append({
            "file": path.name,
            "chapter": titles[path.stem],
            "seconds": round(chapter_seconds(path)),
            "results": records(path),
        })
    return {"hardware": hardware(), "chapters": chapters}


def fmt(x: float) -> str:
    return f"{x:.4g}"


def page(data: dict) -> str:
    lines = [
        "# Expected results",
        "",
        "Each chapter checks the numbers of its own runs against a band: the range that every",
        "tested setting produced (a CPU with and without AVX-512 kernels, 1, 2 and 4 threads).",
        "This table lists them, so you can answer \"is my number right?\" without reading code.",
        "The *value* column is the run stored with the book; yours may differ in the last digits",
        "and is right if it falls inside the band. `make check-my-results` compares your executed",
        "notebooks with this table (`MY_NOTEBOOKS=folder` for notebooks saved elsewhere).",
        "",
        f"Stored run: {data['hardware']}. The time is the chapter's whole run on that machine.",
        "",
        "| Chapter | Run time | Result | Value | Band |",
        "|---|---|---|---|---|",
    ]
    def cell(text: str) -> str:  # a "|" inside a cell (|dL/dq|) would end it
        return text.replace("|", "\\|")

    for ch in data["chapters"]:
        secs = ch["seconds"]
        took = f"{secs / 60:.1f} min" if secs >= 90 else f"{secs} s"
        if not ch["results"]:
            lines.append(f"| {ch['chapter']} | {took} | (exact results only: compared as printed) | | |")
        for i, r in enumerate(ch["results"]):
            name = ch["chapter"] if i == 0 else ""
            when = took if i == 0 else ""
            unit = r.get("unit", "")
            lines.append(
                f"| {name} | {when} | {cell(r['name'])} | {fmt(r['value'])}{unit} | "
                f"{fmt(r['low'])} to {fmt(r['high'])}{unit} |"
            )
    return "\n".join(lines) + "\n"


def without_hardware(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "hardware"}


def write() -> None:
    data = collect()
    DATA.write_text(json.dumps(data, indent=1) + "\n")
    PAGE.write_text(page(data))
    print(f"wrote {DATA.relative_to(ROOT)} and {PAGE.relative_to(ROOT)}")


def check() -> list[str]:
    if not DATA.exists():
        return [f"{DATA.relative_to(ROOT)} is missing: run `make expected-results`"]
    stored = json.loads(DATA.read_text())
    fresh = collect()
    problems = []
    if without_hardware(stored) != without_hardware(fresh):
        problems.append("the expected-results table is older than the notebooks: run `make expected-results`")
    if PAGE.read_text() != page(stored):
        problems.append(f"{PAGE.relative_to(ROOT)} does not match its data: run `make expected-results`")
    return problems


def check_mine(folder: Path) -> int:
    """Compare a learner's executed notebooks with the table; 1 if any value is outside."""
    if not folder.is_dir():
        print(f"MY_NOTEBOOKS: {folder} is not a folder", file=sys.stderr)
        return 2
    expected = json.loads(DATA.read_text())
    outside = 0
    for ch in expected["chapters"]:
        if not ch["results"]:
            continue
        mine = folder / ch["file"]
        if not mine.exists():
            print(f"{ch['chapter']}: not found ({mine})")
            continue
        got = {r["name"]: r["value"] for r in records(mine)}
        bad, missing = [], []
        for r in ch["results"]:
            if r["name"] not in got:
                missing.append(r["name"])
            elif not r["low"] <= got[r["name"]] <= r["high"]:
                bad.append(f"{r['name']} = {fmt(got[r['name']])}, expected {fmt(r['low'])} to {fmt(r['high'])}")
        if bad:
            outside += 1
            print(f"{ch['chapter']}: OUTSIDE the band: " + "; ".join(bad))
        elif missing and len(missing) == len(ch["results"]):
            print(f"{ch['chapter']}: no results stored (run the chapter to the end and save it)")
        elif missing:
            print(f"{ch['chapter']}: inside the band; not run: " + ", ".join(missing))
        else:
            print(f"{ch['chapter']}: all {len(ch['results'])} results inside their bands")
    return 1 if outside else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true")
    group.add_argument("--check", action="store_true")
    group.add_argument("--check-mine", type=Path, metavar="DIR")
    args = parser.parse_args()
    if args.write:
        write()
        return 0
    if args.check_mine:
        return check_mine(args.check_mine)
    problems = check()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
