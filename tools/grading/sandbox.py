"""The process that runs ONE learner's answers and checks them (started by grade.py).

Reads a job (JSON) on stdin: the chapter's setup code, then for each exercise its id,
function name, checker name and the learner's answer-cell source. Writes one JSON line
per exercise to the results pipe (job["result_fd"]) as soon as it is checked, then {"done": ...}.

What runs here, in order:
1. the chapter's import cells (trusted), then the checkers are looked up and a
   fingerprint of `lib`, `torch`, `math` and `builtins` is taken (the identity of every
   module attribute, and of every function's code and defaults, and of every class dict);
2. an audit hook (it cannot be removed from Python code) that refuses and records
   os.system, subprocess, fork/exec/spawn, sockets and any write, delete or rename
   outside this process's folder;
3. each answer cell, with a per-cell timer; the fingerprint is compared after every
   cell and after every check, so a learner who replaces a checker (or `lib`'s or
   torch's functions) to return ✓ gets "tampered" rows, not the points;
4. each check, with the checker captured in step 1 (not the name in the learner's
   namespace), its result required to be the `Verdict` class captured in step 1.
Learner prints go to a buffer that keeps the first OUTPUT_CAP bytes and counts the rest.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

OUTPUT_CAP = 64 * 1024
RESULTS = None  # the results pipe, opened from the job
EVENTS: list[str] = []


class CellTimeout(BaseException):
    """Raised by the per-cell timer (a BaseException: `except Exception` cannot hide it)."""


class Capped:
    """A stdout that keeps the first OUTPUT_CAP characters and counts all of them."""

    def __init__(self):
        self.kept, self.total = [], 0

    def write(self, text):
        text = str(text)
        room = OUTPUT_CAP - sum(map(len, self.kept))
        if room > 0:
            self.kept.append(text[:room])
        self.total += len(text)
        return len(text)

    def flush(self):
        pass


def emit(record: dict) -> None:
    RESULTS.write(json.dumps(record, sort_keys=True) + "\n")
    RESULTS.flush()


def fingerprint() -> dict:
    """(where, name) -> identities that change when anything is monkey-patched."""
    import builtins
    import math

    import torch
    import torch.nn.functional

    modules = {n: m for n, m in sys.modules.items() if n == "lib" or n.startswith("lib.")}
    modules.update(torch=torch, F=torch.nn.functional, math=math, builtins=builtins)
    spaces = {name: vars(m) for name, m in modules.items() if m is not None}
    spaces["torch.Tensor"] = dict(vars(torch.Tensor))
    for name, module in modules.items():
        if name.startswith("lib"):
            for attr, obj in list(vars(module).items()):
                if isinstance(obj, type) and obj.__module__ == name:
                    spaces[f"{name}.{attr}"] = dict(vars(obj))
    out = {}
    for where, space in spaces.items():
        for attr, obj in list(space.items()):
            out[where, attr] = (id(obj), id(getattr(obj, "__code__", None)),
                                id(getattr(obj, "__defaults__", None)),
                                id(getattr(obj, "__kwdefaults__", None)), obj)
    out["sys.modules", "lib"] = (id(sys.modules.get("lib")),)
    return out


def changed(before: dict, after: dict) -> list[str]:
    """Names replaced or deleted since `before` (names added later, e.g. torch's lazy
    submodules, are not tampering)."""
    def same(old, new) -> bool:
        if new is None or old[:4] == new[:4]:
            return new is not None
        # torch wraps some of its own functions when a submodule loads (torch._dynamo wraps
        # torch.manual_seed): a wrapper defined in torch around the very same function
        wrapped = getattr(new[4], "__wrapped__", None)
        return wrapped is old[4] and getattr(new[4], "__module__", "").startswith("torch")

    return sorted(a if w == "builtins" else f"{w}.{a}"
                  for (w, a), ident in before.items() if not same(ident, after.get((w, a))))


def install_audit_hook(folder: str) -> None:
    folder = os.path.realpath(folder)
    inside = lambda p: os.path.realpath(p).startswith(folder + os.sep) or p == "/dev/null"  # noqa: E731
    refused = {"os.system": "called os.system", "subprocess.Popen": "started a subprocess",
               "os.posix_spawn": "started a process", "os.exec": "called exec",
               "os.fork": "called fork", "os.forkpty": "called fork", "pty.spawn": "spawned",
               "socket.connect": "opened a network connection", "socket.bind": "opened a socket",
               "socket.getaddrinfo": "looked up a network address", "os.kill": "sent a signal",
               "os.killpg": "sent a signal"}
    writes = {"os.remove": "deleted", "os.rename": "renamed", "os.rmdir": "deleted",
              "shutil.rmtree": "deleted", "os.mkdir": "made a folder", "os.chmod": "chmod",
              "os.truncate": "truncated", "os.symlink": "linked", "os.link": "linked"}

    def hook(event, args):
        if event in refused:
            EVENTS.append(refused[event])
            raise PermissionError(f"grading: {refused[event]} is not allowed")
        if event == "open" and isinstance(args[0], (str, bytes)):
            path, mode, flags = os.fsdecode(args[0]), args[1] or "", args[2] or 0
            writing = any(c in str(mode) for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR)
            if writing and not inside(path):
                EVENTS.append(f"wrote outside its folder ({path})")
                raise PermissionError(f"grading: writing {path} is not allowed")
        elif event in writes and isinstance(args[0], (str, bytes)):
            path = os.fsdecode(args[0])
            if not inside(path):
                EVENTS.append(f"{writes[event]} outside its folder ({path})")
                raise PermissionError(f"grading: {writes[event]} {path} is not allowed")

    sys.addaudithook(hook)


def run(code: str, ns: dict, timeout: float, where: str) -> str | None:
    """Execute one cell; None when it ran, else what went wrong, in words."""
    try:
        compiled = compile(code, where, "exec")
    except SyntaxError as err:
        return f"syntax error: {err.msg} (line {err.lineno})"
    signal.setitimer(signal.ITIMER_PROF, timeout)
    try:
        exec(compiled, ns)  # noqa: S102  (the learner's code: contained by the caller)
    except CellTimeout:
        return f"the cell ran past its {timeout:g} CPU s limit"
    except MemoryError:
        return "ran out of memory (the memory limit)"
    except BaseException as err:  # noqa: BLE001
        if isinstance(err, RuntimeError) and "alloc" in str(err).lower():
            return "ran out of memory (the memory limit)"
        return f"raised {type(err).__name__}: {str(err)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    return None


def main() -> int:
    global RESULTS
    sys.dont_write_bytecode = True  # the course is read-only to this process (-I ignores env)
    job = json.loads(sys.stdin.read())
    RESULTS = os.fdopen(job["result_fd"], "w", buffering=1, encoding="utf-8")
    real_stdout = sys.stdout

    def on_alarm(signum, frame):
        raise CellTimeout()

    signal.signal(signal.SIGPROF, on_alarm)
    ns: dict = {"__name__": "__main__"}
    for i, code in enumerate(job["setup"]):
        problem = run(code, ns, job["setup_timeout"], f"<setup {i}>")
        if problem:
            emit({"done": True, "setup_error": problem})
            return 1
    import lib
    from lib.teach.checking import Verdict

    checkers = {ex["grade_id"]: getattr(lib, ex["checker"]) for ex in job["exercises"]}
    before = fingerprint()
    sys.modules["__main__"] = type(sys)("__main__")  # this module is not the learner's to reach
    install_audit_hook(os.getcwd())
    out = Capped()
    sys.stdout = sys.stderr = out
    tampered: list[str] = []
    for ex in job["exercises"]:
        gid, record = ex["grade_id"], {"grade_id": ex["grade_id"]}
        events_before = len(EVENTS)
        problem = run(ex["source"], ns, job["cell_timeout"], f"<{gid}>")
        tampered = tampered or changed(before, fingerprint())
        verdict = None
        if not problem and not tampered:
            fn = ns.get(ex["function"])
            if not callable(fn):
                problem = f"defines no function {ex['function']}"
            else:
                signal.setitimer(signal.ITIMER_PROF, job["cell_timeout"])
                try:
                    verdict = checkers[gid](fn)
                except CellTimeout:
                    problem = f"the check ran past its {job['cell_timeout']:g} CPU s limit"
                except MemoryError:
                    problem = "ran out of memory (the memory limit)"
                except BaseException as err:  # noqa: BLE001
                    problem = f"the check raised {type(err).__name__}: {str(err)[:200]}"
                finally:
                    signal.setitimer(signal.ITIMER_PROF, 0)
                tampered = tampered or changed(before, fingerprint())
                if verdict is not None and type(verdict) is not Verdict:
                    tampered = tampered or ["the checker's result (not a Verdict)"]
        record["events"] = sorted(set(EVENTS[events_before:]))
        if tampered:
            record.update(status="tampered", detail="replaced " + ", ".join(tampered[:5]))
        elif problem:
            record.update(status="error", detail=problem)
        else:
            record.update(status="passed" if verdict.passed else "failed",
                          mistake=verdict.mistake, detail=verdict.message)
        emit(record)
    sys.stdout = real_stdout
    emit({"done": True, "printed": out.total})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001  (report what broke; grade.py names the rest)
        if RESULTS is not None:
            emit({"done": True, "crash": traceback.format_exc(limit=3)[-500:]})
        raise
