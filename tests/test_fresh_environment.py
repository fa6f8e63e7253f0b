"""Chapters outside a clone (issue 35, item 2): the first cell that installs `lib` and
fetches the chapter's data, `lib.course_data`'s data folder, the Binder configuration,
and `tools/fresh_env.py`, which `make test` runs on chapters 11 and 15 (its whole run
is that check, not a test here: it executes the chapters)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import lib.course_data as course_data

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import fresh_env  # noqa: E402
import install_cell  # noqa: E402
import run_tests  # noqa: E402

sys.path.pop(0)


def chapter(name: str) -> dict:
    return json.loads(next((ROOT / "book").glob(f"{name}_*.ipynb")).read_text())


def code_notebook(*sources: str) -> dict:
    return {"cells": [{"cell_type": "code", "source": s, "metadata": {}, "outputs": []}
                      for s in sources]}


# --------------------------------------------------------------------------- the first cell
def test_each_chapter_fetches_the_data_it_reads():
    """Written out by hand from what the chapters read, not from the detector itself."""
    expected = {"10": ("shakespeare",), "11": ("shakespeare",), "12": ("alignments",),
                "14": ("shakespeare",), "15": ("shakespeare", "smollm2"),
                "16": ("shakespeare", "smollm2")}
    for path in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
        number = path.name[:2]
        got = install_cell.data_sets(json.loads(path.read_text()))
        if number in expected:
            assert got == expected[number], path.name
        elif number != "17":  # the generating-text chapter reads what chapter 15 does
            assert got == (), path.name


def test_the_data_detector_reads_calls_not_words():
    nb = code_notebook("# we could call load_corpus here\nx = 'smollm2_path'",
                       "text = lib.load_corpus()\nm = load_smollm2( )")
    assert install_cell.data_sets(nb) == ("shakespeare", "smollm2")
    assert install_cell.data_sets(code_notebook("load_corpus_like = 1")) == ()
    # the install cell itself is not read (its own `lib.course_data` line names data sets)
    cell = install_cell.cell_source("https://example.org/x", ("alignments",))
    assert install_cell.data_sets(code_notebook(cell)) == ()


def test_the_cell_installs_then_fetches_and_does_nothing_where_installed():
    cell = install_cell.cell_source("https://example.org/fork", ("shakespeare", "smollm2"))
    lines = cell.splitlines()
    assert lines[0].startswith(install_cell.MARKER) and max(map(len, lines)) <= 88
    assert install_cell.SOURCE_LINE in lines
    body = lines[lines.index("except PackageNotFoundError:") + 1:]
    # both steps only where the distribution is missing, install before fetch
    assert body == ['    %pip install --quiet "transformer-course-lib @ {SOURCE}"',
                    "    !{sys.executable} -m lib.course_data shakespeare smollm2"]
    plain = install_cell.cell_source("https://example.org/fork", ())
    assert "course_data" not in plain and "import sys" not in plain


def test_the_troubleshooting_page_shows_the_cell_as_the_chapters_have_it():
    page = (ROOT / "book" / "troubleshooting.md").read_text()
    assert install_cell.cell_source(None, ("shakespeare", "smollm2")) in page


def test_fresh_env_replaces_the_repository_by_the_wheel(tmp_path):
    wheel = tmp_path / "transformer_course_lib-0.1.0-py3-none-any.whl"
    nb = code_notebook(install_cell.cell_source("https://example.org/fork", ("shakespeare",)),
                       "x = lib.load_corpus()")
    path = tmp_path / "10_x.ipynb"
    path.write_text(json.dumps(nb))
    cell = fresh_env.first_cell(path, wheel)
    assert f'SOURCE = "{wheel.as_uri()}"' in cell and "git+" not in cell.split("SOURCE")[1]
    # a cell without the line is refused by name, not run against the network
    nb["cells"][0]["source"] = nb["cells"][0]["source"].replace(install_cell.SOURCE_LINE, "")
    path.write_text(json.dumps(nb))
    with pytest.raises(fresh_env.StepError, match="SOURCE"):
        fresh_env.first_cell(path, wheel)


@pytest.mark.parametrize("name, hidden", [
    ("__editable__.transformer_course_lib-0.1.0.pth", True),
    ("__editable___transformer_course_lib_0_1_0_finder.py", True),
    ("transformer_course_lib-0.1.0.dist-info", True),
    ("lib", True),
    ("distutils-precedence.pth", True),
    ("transformers", False), ("transformers-5.24.0.dist-info", False),
    ("libfoo", False), ("torch", False), ("pip", False)])
def test_the_new_environment_sees_the_dependencies_but_not_the_course(name, hidden):
    assert fresh_env.is_hidden(name) is hidden


# --------------------------------------------------------------------------- the data folder
def test_the_data_folder_is_the_clones_else_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(course_data.DATA_HOME_ENV, raising=False)
    assert course_data.clone_root() == ROOT  # this checkout: an editable install
    assert course_data.data_root() == ROOT / "data"
    monkeypatch.setenv(course_data.DATA_HOME_ENV, str(tmp_path / "d"))
    assert course_data.data_root() == tmp_path / "d"
    monkeypatch.delenv(course_data.DATA_HOME_ENV)
    monkeypatch.setattr(course_data, "clone_root", lambda: None)  # as from a wheel
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert course_data.data_root() == tmp_path / "cache" / "transformer-course"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert course_data.data_root() == tmp_path / "home" / ".cache" / "transformer-course"


def test_lib_reads_every_data_set_from_the_data_folder(tmp_path, monkeypatch):
    for env in ("COURSE_DATA_DIR", "COURSE_ALIGNMENT_WHEEL", "COURSE_SMOLLM2_GGUF"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv(course_data.DATA_HOME_ENV, str(tmp_path))
    from lib.train.aligned_corpus import alignment_wheel_path
    from lib.train.corpus import corpus_dir
    assert corpus_dir() == tmp_path / "shakespeare"
    assert alignment_wheel_path() == tmp_path / "downloads" / course_data.WHEEL_NAME
    import lib
    with pytest.raises(FileNotFoundError, match=r"python -m lib\.course_data smollm2"):
        lib.smollm2_path()
    with pytest.raises(FileNotFoundError, match=r"python -m lib\.course_data shakespeare"):
        lib.load_corpus()


def test_the_command_fetches_only_the_named_data_sets(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(course_data, "fetch", lambda *a, **k: calls.append("shakespeare") or "present")
    monkeypatch.setattr(course_data, "fetch_alignments", lambda *a, **k: calls.append("alignments") or tmp_path)
    monkeypatch.setattr(course_data, "fetch_smollm2", lambda *a, **k: calls.append("smollm2") or tmp_path)
    monkeypatch.setenv(course_data.DATA_HOME_ENV, str(tmp_path))
    assert course_data.main(["smollm2", "shakespeare"]) == 0
    assert calls == ["shakespeare", "smollm2"]
    calls.clear()
    assert course_data.main([]) == 0
    assert calls == list(course_data.DATASETS)
    with pytest.raises(SystemExit):
        course_data.main(["shakespear"])


def test_the_data_module_runs_before_torch():
    """`python -m lib.course_data` must not need torch itself (only the package's
    `__init__` imports it): the module imports nothing from the rest of lib."""
    text = (ROOT / "lib" / "course_data.py").read_text()
    imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", text, re.M)
    assert not [m for m in imports if m.split(".")[0] in ("lib", "torch", "numpy")], imports


# --------------------------------------------------------------------------- Binder
def test_binder_builds_the_locked_environment_and_fetches_the_data():
    post = ROOT / "binder" / "postBuild"
    assert post.stat().st_mode & stat.S_IXUSR, "binder/postBuild must be executable"
    subprocess.run(["bash", "-n", str(post)], check=True)
    commands = [l for l in post.read_text().splitlines() if l and not l.startswith("#")]
    assert commands[0] == "set -euo pipefail"
    assert 'python tools/lock.py --install "$(command -v python)"' in commands
    assert any(re.fullmatch(r"python -m pip install .*-e \.", c) for c in commands)
    assert commands[-1] == "python -m lib.course_data"  # every data set, at build time
    version = (ROOT / "binder" / "runtime.txt").read_text().strip()
    minor = int(re.fullmatch(r"python-3\.(\d+)", version).group(1))
    low, high = re.search(r'requires-python = ">=3\.(\d+),<3\.(\d+)"',
                          (ROOT / "pyproject.toml").read_text()).groups()
    assert int(low) <= minor < int(high)


# --------------------------------------------------------------------------- make test's plan
def test_make_test_runs_the_fresh_chapters_there_instead_of_in_the_clone():
    checks = run_tests.plan([Path("book/11_language_model.ipynb"),
                             Path("book/09_why_self_attention.ipynb"),
                             Path("book/15_pretrained_model.ipynb")],
                            [Path("book/11_language_model.ipynb")], lib=False, site=False,
                            fresh=[Path("book/11_language_model.ipynb"),
                                   Path("book/15_pretrained_model.ipynb")], native="AVX512")
    names = sorted(c.name for c in checks)
    assert names == ["book/09_why_self_attention.ipynb", "book/11_language_model.ipynb (AVX2)",
                     "fresh environment: 11_language_model 15_pretrained_model"]
    fresh = next(c for c in checks if c.name.startswith("fresh"))
    assert fresh.argv[1].endswith("tools/fresh_env.py") and fresh.argv[2:] == [
        "book/11_language_model.ipynb", "book/15_pretrained_model.ipynb"]
    assert fresh.env["OMP_NUM_THREADS"] == "1"


def test_the_makefile_names_chapters_11_and_15_for_the_fresh_run():
    out = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT),
                          "--eval", "print-fresh: ; @echo $(FRESH_NOTEBOOKS)", "print-fresh"],
                         capture_output=True, text=True, env={**os.environ, "MAKEFLAGS": ""})
    assert out.stdout.split() == ["book/11_language_model.ipynb",
                                  "book/15_pretrained_model.ipynb"], out.stderr
