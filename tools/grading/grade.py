"""Grade a folder of submitted chapter notebooks into a gradebook (CSV and HTML).

    python tools/grading/grade.py SUBMISSIONS --out gradebook [--chapter N]   # `make grade`

Every `*.ipynb` under SUBMISSIONS (a folder of files, a course platform's export, or one
folder per learner as GitHub Classroom clones them) is one submission; its chapter comes
from --chapter, else from its file name (`02_...ipynb`). The chapter's nbgrader release
(tools/grading/assignment.py) is made afresh from book/, so the graded version is the
committed one. From a submission only the nbgrader answer cells (found by `grade_id`) are
taken; every other cell, the checks included, is the release's.

Containment, per submission: a fresh process (sandbox.py) in its own temporary folder,
with rlimits (CPU seconds, address space, file size, open files), a per-cell timer and a
wall-clock limit for the notebook (the process group is killed), prints kept to 64 KB.
When the grader runs as root on Linux (the course's machines and CI) the process also
gets a new network namespace (no interface but a down loopback: no network) and a new
mount namespace in which the course, the submissions and the gradebook folder are
read-only, and it drops every capability (so it cannot remount them). Elsewhere only the
in-process audit hook of sandbox.py refuses writes outside the folder and network use.
Rows are appended to `gradebook.partial.csv` as each submission finishes; a re-run keeps
those rows and grades only the rest, then writes the sorted `gradebook.csv` and
`gradebook.html` (no timestamps: the same submissions give the same bytes).
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import html
import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat
from nbgrader.utils import compute_checksum

sys.path.insert(0, str(Path(__file__).resolve().parent))
import assignment  # noqa: E402

ROOT = assignment.ROOT
SANDBOX = Path(__file__).resolve().parent / "sandbox.py"
COLUMNS = ("submission", "chapter", "exercise", "points", "max_points", "status", "mistake",
           "detail")
LIMITS = {"cell_timeout": 20.0, "notebook_timeout": 300.0, "setup_timeout": 60.0,
          "cpu_seconds": 90, "memory_bytes": 3 * 2**30, "file_bytes": 16 * 2**20,
          "submission_bytes": 10 * 2**20, "printed_bytes": 64 * 1024}
CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38


_NAMESPACES: list[bool] = []


def namespaces() -> bool:
    """True when this grader can give a process its own network and mount namespaces
    (root on Linux, outside a container that forbids unshare): tried once, on `true`."""
    if not _NAMESPACES:
        ok = os.geteuid() == 0 and sys.platform == "linux"
        if ok:
            try:
                with tempfile.TemporaryDirectory() as folder:
                    subprocess.run(["/bin/true"], check=True, preexec_fn=_contain(
                        [folder], folder, LIMITS, isolate=True))
            except (OSError, subprocess.SubprocessError):
                ok = False
        _NAMESPACES.append(ok)
    return _NAMESPACES[0]


def _contain(protect: list[str], folder: str, limits: dict, isolate: bool | None = None):
    """The preexec function of a submission's process (runs in the child, before exec)."""
    isolate = namespaces() if isolate is None else isolate

    def preexec():
        if isolate:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWNS | CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
            for path in protect:
                p = path.encode()
                if libc.mount(p, p, None, MS_BIND | MS_REC, None) != 0 or libc.mount(
                        None, p, None, MS_BIND | MS_REMOUNT | MS_RDONLY, None) != 0:
                    raise OSError(ctypes.get_errno(), f"read-only mount of {path}")
            f = folder.encode()  # its own folder stays writable (it may sit under /tmp)
            libc.mount(f, f, None, MS_BIND, None)
            for cap in range(64):
                if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                    break
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"],) * 2)
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"],) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    return preexec


def containment() -> str:
    """What this machine's grading protects, in a sentence (shown in the gradebook)."""
    base = ("one process per submission in its own temporary folder; rlimits on CPU time, "
            "memory, file size and open files; per-cell and per-notebook time limits; "
            "an audit hook refusing os.system, subprocesses, sockets and writes outside "
            "the folder; the checks re-run with the checkers captured before the "
            "learner's code, and monkey-patching detected")
    if namespaces():
        return base + ("; its own network namespace (no network) and mount namespace (the "
                       "course, the submissions and the gradebook read-only), no capabilities")
    return base + "; no network or mount namespace here (not root on Linux): the audit hook only"


def _rows_for(sub: str, chapter, exercises, status, mistake, detail):
    return [dict(submission=sub, chapter=chapter, exercise=ex["grade_id"], points=0,
                 max_points=ex["points"], status=status, mistake=mistake, detail=detail)
            for ex in exercises]


def grade_one(path: Path, sub: str, chapter: int, release, protect: list[str]) -> list[dict]:
    """The gradebook rows of one submission (never raises for anything the learner did)."""
    meta = release.metadata["transformer_course"]
    exercises = meta["exercises"]
    if path.stat().st_size > LIMITS["submission_bytes"]:
        return _rows_for(sub, chapter, exercises, "refused", "too large",
                         f"the file is over {LIMITS['submission_bytes'] // 2**20} MB")
    try:
        nb = json.loads(path.read_bytes())
        cells = nb["cells"]
        assert isinstance(cells, list)
    except (ValueError, KeyError, TypeError, AssertionError) as err:
        return _rows_for(sub, chapter, exercises, "refused", "not valid JSON",
                         f"not a valid notebook: {type(err).__name__}: {str(err)[:120]}")
    by_id: dict[str, list] = {}
    for cell in cells:
        meta_nb = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if isinstance(meta_nb, dict) and isinstance(meta_nb.get("grade_id"), str):
            by_id.setdefault(meta_nb["grade_id"], []).append(cell)
    expected = {c.metadata.nbgrader.grade_id: c for c in release.cells if "nbgrader" in c.metadata}
    rows, jobs, edited = {}, [], []
    for ex in exercises:
        gid = ex["grade_id"]
        found = [c for c in by_id.get(gid, []) if c.get("cell_type") == "code"]
        if len(found) != 1:
            rows[gid] = _rows_for(sub, chapter, [ex], "refused", "cell deleted or renamed",
                                  f"{'no' if not found else len(found)} answer cell with "
                                  f"nbgrader id {gid}")[0]
            continue
        source = found[0].get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        jobs.append(dict(ex, source=source))
        check = by_id.get(f"{gid}_check", [])
        if len(check) != 1 or _checksum(check[0]) != \
                expected[f"{gid}_check"].metadata.nbgrader.checksum:
            edited.append(gid)
    results, note = _run(jobs, release, protect) if jobs else ({}, "")
    for ex in exercises:
        gid = ex["grade_id"]
        if gid in rows:
            continue
        r = results.get(gid) or {"status": "error", "detail": note or "no result"}
        status, events = r["status"], r.get("events", [])
        detail = r.get("detail", "")
        mistake = r.get("mistake") or ""
        if status == "tampered":
            mistake = "tampered with lib or the checker"
        elif status == "error":
            mistake = _classify(detail, events)
        if events and status != "tampered":
            detail = "; ".join(events) + ". " + detail
        if gid in edited:
            detail += " (its check cell was edited or deleted: the release's was used)"
        if status == "failed" and not mistake:
            mistake = "not implemented" if "not implemented" in detail else "unrecognised"
        rows[gid] = dict(submission=sub, chapter=chapter, exercise=gid,
                         points=ex["points"] if status == "passed" else 0,
                         max_points=ex["points"], status=status, mistake=mistake,
                         detail=" ".join(detail.split())[:300])
    return [rows[ex["grade_id"]] for ex in exercises]


def _checksum(cell: dict) -> str | None:
    """nbgrader's checksum of a submitted cell (None when the cell is malformed)."""
    try:
        cell = dict(cell, source="".join(cell["source"]) if isinstance(cell["source"], list)
                    else cell["source"])
        return compute_checksum(nbformat.from_dict(cell))
    except Exception:  # noqa: BLE001
        return None


def _classify(detail: str, events: list[str]) -> str:
    for key, name in (("os.system", "called os.system"), ("subprocess", "started a process"),
                      ("outside its folder", "wrote outside its folder"),
                      ("network", "used the network"), ("socket", "used the network")):
        if any(key in e for e in events):
            return name
    for key, name in (("syntax error", "syntax error"), ("limit", "time limit"),
                      ("memory", "memory limit"), ("defines no function", "no function"),
                      ("printed", "printed too much")):
        if key in detail:
            return "memory limit" if "memory" in detail else name
    return "raised an error"


def _run(jobs: list[dict], release, protect: list[str]) -> tuple[dict, str]:
    """Run sandbox.py on the jobs; (results by grade_id, a note when it ended early)."""
    job = {"setup": assignment.setup_sources(release), "exercises": jobs,
           "cell_timeout": LIMITS["cell_timeout"], "setup_timeout": LIMITS["setup_timeout"]}
    results, note = {}, ""
    with tempfile.TemporaryDirectory(prefix="grade-") as folder:
        read_fd, write_fd = os.pipe()
        job["result_fd"] = write_fd
        env = {"PATH": "/usr/bin:/bin", "HOME": folder, "TMPDIR": folder, "MPLBACKEND": "Agg",
               "MPLCONFIGDIR": folder, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        with open(Path(folder, "stdout.txt"), "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-I", str(SANDBOX)], stdin=subprocess.PIPE, stdout=log,
                stderr=log, cwd=folder, env=env, pass_fds=(write_fd,), start_new_session=True,
                preexec_fn=_contain(protect, folder, LIMITS))
            os.close(write_fd)
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
            lines, deadline = [], time.monotonic() + LIMITS["notebook_timeout"]
            with os.fdopen(read_fd, "rb") as pipe:
                os.set_blocking(read_fd, False)
                buffer = b""
                while True:
                    try:
                        chunk = pipe.read()
                    except BlockingIOError:
                        chunk = None
                    if chunk:
                        buffer += chunk[: 2**20]
                    if proc.poll() is not None and not chunk:
                        break
                    if time.monotonic() > deadline:
                        os.killpg(proc.pid, 9)
                        proc.wait()
                        note = (f"the notebook ran past its {LIMITS['notebook_timeout']:g} s "
                                "limit: stopped")
                        break
                    time.sleep(0.05)
            lines = buffer.decode("utf-8", "replace").splitlines()
    done = None
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("done"):
            done = done or record  # the first: the sandbox writes one
        elif record.get("grade_id") in results:  # a second line for an id: forged
            results[record["grade_id"]] = {"status": "tampered",
                                           "detail": "wrote to the grader's result channel"}
        elif "grade_id" in record:
            results[record["grade_id"]] = record
    if done and done.get("printed", 0) > LIMITS["printed_bytes"]:
        for r in results.values():
            r["events"] = r.get("events", []) + [
                f"printed {done['printed'] / 2**20:.1f} MB (kept the first 64 KB)"]
    if not note and done is None:
        code = proc.returncode
        note = ("the process was killed by the CPU limit" if code == -24 else
                "the notebook's process ended before its checks finished"
                f" (exit {code})")
    elif done and done.get("setup_error"):
        note = "the chapter's setup failed: " + done["setup_error"]
    elif done and done.get("crash"):
        note = "the grader's process crashed: " + done["crash"].splitlines()[-1]
    return results, note


def chapter_of(path: Path, forced: int | None) -> int | None:
    if forced:
        return forced
    m = re.match(r"(\d\d)_", path.name)
    return int(m.group(1)) if m else None


def grade(submissions: Path, out: Path, chapter: int | None = None) -> list[dict]:
    """Grade every notebook under `submissions`; write `out`/gradebook.{csv,html}."""
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    if not submissions.is_dir():
        raise ValueError(f"submissions={submissions}: not a folder")
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "gradebook.partial.csv"
    done_rows = list(csv.DictReader(partial.open())) if partial.exists() else []
    graded = {r["submission"] for r in done_rows}
    protect = sorted({str(ROOT), str(submissions), str(out)})
    releases: dict[int, object] = {}
    files = sorted(p for p in submissions.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    new_file = not partial.exists()
    with partial.open("a", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        if new_file:
            writer.writeheader()
        for path in files:
            sub = path.relative_to(submissions).with_suffix("").as_posix()
            if sub in graded:
                continue
            number = chapter_of(path, chapter)
            if number is None:
                rows = [dict(submission=sub, chapter="", exercise="", points=0, max_points=0,
                             status="refused", mistake="unknown chapter",
                             detail="name it NN_....ipynb or pass CHAPTER=N")]
            else:
                if number not in releases:
                    releases[number] = assignment.release_notebook(
                        assignment.source_notebook(number))
                try:
                    rows = grade_one(path, sub, number, releases[number], protect)
                except Exception as err:  # noqa: BLE001  (a grader bug: this row says so)
                    rows = [dict(submission=sub, chapter=number, exercise="", points=0,
                                 max_points=0, status="error", mistake="grader error",
                                 detail=f"{type(err).__name__}: {str(err)[:200]}")]
            writer.writerows(rows)
            f.flush()
            os.fsync(f.fileno())
            done_rows += [{k: str(v) for k, v in r.items()} for r in rows]
    rows = sorted(({k: str(r[k]) for k in COLUMNS} for r in done_rows),
                  key=lambda r: (r["submission"], r["chapter"], r["exercise"]))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (out / "gradebook.csv").write_text(buf.getvalue())
    (out / "gradebook.html").write_text(render_html(rows))
    partial.unlink()
    return rows


def render_html(rows: list[dict]) -> str:
    """The gradebook as a page: per exercise, how many learners made each named mistake,
    then every row."""
    e = html.escape
    per: dict[str, Counter] = {}
    for r in rows:
        per.setdefault(r["exercise"], Counter())[r["mistake"] or r["status"]] += 1
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>Gradebook</title><style>body{font-family:sans-serif;max-width:72em;"
             "margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
             "padding:2px 6px;text-align:left;vertical-align:top}</style></head><body>",
             "<h1>Gradebook</h1>", f"<p>Containment: {e(containment())}.</p>",
             "<h2>What to re-teach: learners per exercise and outcome</h2>",
             "<table><tr><th>exercise</th><th>outcome (named mistake)</th>"
             "<th>learners</th></tr>"]
    for ex in sorted(per):
        for outcome, n in sorted(per[ex].items(), key=lambda kv: (-kv[1], kv[0])):
            parts.append(f"<tr><td>{e(ex)}</td><td>{e(outcome)}</td><td>{n}</td></tr>")
    parts.append("</table><h2>Every learner and exercise</h2><table><tr>"
                 + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr>")
    for r in rows:
        parts.append("<tr>" + "".join(f"<td>{e(r[c])}</td>" for c in COLUMNS) + "</tr>")
    parts.append("</table></body></html>\n")
    return "\n".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--out", type=Path, default=Path("gradebook"))
    parser.add_argument("--chapter", type=int)
    args = parser.parse_args(argv)
    start = time.process_time(), time.monotonic()
    rows = grade(args.submissions, args.out, args.chapter)
    subs = len({r["submission"] for r in rows})
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - start[0] + children.ru_utime + children.ru_stime
    print(f"{subs} submissions, {len(rows)} rows -> {args.out}/gradebook.csv and .html "
          f"({cpu:.0f} CPU s, {time.monotonic() - start[1]:.0f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
