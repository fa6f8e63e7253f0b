"""tools/run_tests.py, the runner of `make test`: checks side by side, never two of
the same notebook at once, a failure reported without stopping the others."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import run_tests  # noqa: E402

sys.path.pop(0)


def sleeper(name, seconds, notebook=None, code=0, log=None):
    script = (f"import time, pathlib; p = pathlib.Path({str(log)!r}); "
              f"p.open('a').write('start {name} ' + repr(time.time()) + '\\n'); "
              f"time.sleep({seconds}); "
              f"p.open('a').write('end {name} ' + repr(time.time()) + '\\n'); "
              f"raise SystemExit({code})")
    return run_tests.Check(name, [sys.executable, "-c", script], seconds, notebook=notebook)


def intervals(log):
    starts, ends = {}, {}
    for line in log.read_text().splitlines():
        kind, name, t = line.split()
        (starts if kind == "start" else ends)[name] = float(t)
    return {n: (starts[n], ends[n]) for n in starts}


def test_two_at_a_time_run_side_by_side(tmp_path):
    log = tmp_path / "log"
    checks = [sleeper(f"c{k}", 1.0, log=log) for k in range(4)]
    assert run_tests.run(checks, jobs=2) == []
    spans = intervals(log)
    assert len(spans) == 4
    overlapping = sum(a[0] < b[1] and b[0] < a[1] for n, a in spans.items()
                      for m, b in spans.items() if n < m)
    assert overlapping >= 2


def test_two_checks_of_one_notebook_never_overlap(tmp_path):
    log = tmp_path / "log"
    checks = [sleeper("native", 1.0, "ch.ipynb", log=log),
              sleeper("avx2", 1.0, "ch.ipynb", log=log),
              sleeper("other", 0.2, log=log)]
    assert run_tests.run(checks, jobs=2) == []
    spans = intervals(log)
    (a0, a1), (b0, b1) = spans["native"], spans["avx2"]
    assert a1 <= b0 or b1 <= a0


def test_a_failure_is_reported_and_the_rest_still_run(tmp_path, capsys):
    log = tmp_path / "log"
    checks = [sleeper("bad", 0.1, code=1, log=log), sleeper("good", 0.3, log=log),
              sleeper("late", 0.1, log=log)]
    failed = run_tests.run(checks, jobs=1)
    assert [c.name for c in failed] == ["bad"]
    assert set(intervals(log)) == {"bad", "good", "late"}
    out = capsys.readouterr().out
    assert "bad FAILED" in out and "good passed" in out


def test_the_longest_check_starts_first():
    nb = [ROOT / "book" / name for name in ("08_training.ipynb", "03_worked_examples.ipynb")]
    checks = run_tests.plan(nb, [nb[0]], lib=True, site=True, native="AVX512")
    expected = [c.expected for c in checks]
    assert expected == sorted(expected, reverse=True)
    assert [c.name for c in checks].count(f"{nb[0]} (AVX2)") == 1
    avx2 = next(c for c in checks if c.name.endswith("(AVX2)"))
    assert avx2.env == {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1",
                        "MKL_NUM_THREADS": "1"} and avx2.notebook == nb[0].name


def test_on_a_cpu_whose_own_kernels_are_avx2_the_avx2_runs_are_left_out(capsys):
    nb = [ROOT / "book" / name for name in ("08_training.ipynb", "03_worked_examples.ipynb")]
    names = [c.name for c in run_tests.plan(nb, [nb[0]], lib=False, site=False, native="AVX2")]
    assert sorted(names) == sorted(map(str, nb))
    assert "AVX2 runs of 1 chapters left out" in capsys.readouterr().out
    names = [c.name for c in run_tests.plan(nb, [nb[0]], lib=False, site=False,
                                            native="AVX512")]
    assert f"{nb[0]} (AVX2)" in names
    assert run_tests.native_capability() in {"AVX512", "AVX2", "DEFAULT", "ZVECTOR", "SVE256"}


def test_a_check_gets_one_thread_and_a_two_thread_chapter_waits_passively():
    nb = [ROOT / "book" / name for name in ("12_translation.ipynb", "15_pretrained_model.ipynb")]
    checks = {c.name: c for c in run_tests.plan(nb, [nb[0]], lib=True, site=True,
                                                  native="AVX512")}
    assert not any(c.alone for c in checks.values())
    for name in ("library tests", "book build and browser test", str(nb[1])):
        assert checks[name].env == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, name
    for name in (str(nb[0]), f"{nb[0]} (AVX2)"):
        assert checks[name].env["OMP_WAIT_POLICY"] == "PASSIVE"
        assert "OMP_NUM_THREADS" not in checks[name].env  # it sets two itself


def test_the_cpu_time_of_a_check_counts_its_child_processes():
    busy = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
            "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass'])")
    code, out, err, cpu = run_tests.run_one([sys.executable, "-c", busy], {})
    assert code == 0, err
    assert cpu >= 0.4  # the grandchild's busy loop is counted
    code, _, _, idle = run_tests.run_one([sys.executable, "-c", "import time; time.sleep(0.4)"], {})
    assert code == 0 and idle < 0.3  # sleeping is not CPU time


def test_a_check_that_must_run_alone_never_overlaps_another(tmp_path):
    log = tmp_path / "log"
    checks = [sleeper("a", 0.6, log=log), sleeper("b", 0.6, log=log),
              sleeper("solo", 0.6, "solo.ipynb", log=log), sleeper("c", 0.6, log=log)]
    checks[2].alone = True
    assert run_tests.run(checks, jobs=2) == []
    spans = intervals(log)
    s0, s1 = spans["solo"]
    for name in ("a", "b", "c"):
        o0, o1 = spans[name]
        assert o1 <= s0 or s1 <= o0, name


def test_the_translation_chapter_is_the_one_that_sets_two_threads():
    both = {p.name for p in (ROOT / "book").glob("*.ipynb") if run_tests.uses_both_cores(p)}
    assert "12_translation.ipynb" in both
    assert "08_training.ipynb" not in both


def test_the_cpu_settings_run_every_notebook_under_each_setting():
    nb = [ROOT / "book" / name for name in
          ("08_training.ipynb", "12_translation.ipynb", "15_pretrained_model.ipynb")]
    checks = {c.name: c for c in run_tests.plan_settings(nb, ["avx2", "omp1", "omp4"])}
    assert len(checks) == 9
    assert checks[f"{nb[0]} (avx2)"].env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert checks[f"{nb[0]} (omp4)"].env["OMP_NUM_THREADS"] == "4"
    assert not checks[f"{nb[0]} (omp4)"].alone  # chapter 8 pins one thread
    assert checks[f"{nb[2]} (omp4)"].alone  # four threads of its own: nothing beside it
    assert checks[f"{nb[2]} (omp1)"].env["OMP_NUM_THREADS"] == "1"
    assert not any(checks[f"{nb[1]} ({s})"].alone for s in ("avx2", "omp1", "omp4"))
    assert checks[f"{nb[1]} (avx2)"].env == {"OMP_WAIT_POLICY": "PASSIVE",
                                              "ATEN_CPU_CAPABILITY": "avx2"}


def test_an_unknown_cpu_setting_is_refused_by_name():
    import pytest
    with pytest.raises(ValueError, match="'avx512'"):
        run_tests.plan_settings([ROOT / "book" / "08_training.ipynb"], ["avx512"])


def test_a_light_check_runs_beside_the_full_places(tmp_path):
    log = tmp_path / "log"
    checks = [sleeper(name, 1.0, log=log) for name in ("site", "a", "b")]
    checks[0].light = True
    assert run_tests.run(checks, jobs=2) == []
    starts = [span[0] for span in intervals(log).values()]
    assert max(starts) - min(starts) < 0.5  # all three at once, not the third after 1 s


def test_the_browser_test_is_the_light_check():
    checks = run_tests.plan([], [], lib=True, site=True)
    assert [c.name for c in checks if c.light] == ["book build and browser test"]
