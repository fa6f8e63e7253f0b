"""The GitHub Actions workflow for forks (.github/workflows/book.yml) and .ci/run.

The workflow cannot run here, so these tests read it: it must be valid YAML,
run on pushes and pull requests, run the same script as CI, and publish the
built site to GitHub Pages only from main.
"""

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"


@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(WORKFLOW.read_text())


def _triggers(workflow):
    # YAML 1.1 reads a bare `on:` key as the boolean True.
    return workflow.get("on", workflow.get(True))


def _steps(job):
    return job.get("steps", [])


def test_runs_on_every_push_and_pull_request(workflow):
    triggers = _triggers(workflow)
    assert "push" in triggers and "pull_request" in triggers
    # No branch filter: every push and every pull request.
    assert not (triggers["push"] or {}).get("branches")
    assert not (triggers["pull_request"] or {}).get("branches")


def test_test_job_runs_the_ci_script(workflow):
    job = workflow["jobs"]["test"]
    commands = [step.get("run", "") for step in _steps(job)]
    assert any(".ci/run" in c for c in commands), commands
    assert any(step.get("uses", "").startswith("actions/checkout@") for step in _steps(job))
    # A Debian container as root, so .ci/run can apt-get install chromium like on CI.
    assert "bookworm" in str(job.get("container", ""))


def test_ci_script_runs_make_test_and_installs_chromium():
    script = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert "make test" in lines
    assert "set -euo pipefail" in lines
    assert "chromium" in script and "chromium-driver" in script and "apt-get install" in script


def test_make_test_includes_the_site_test():
    makefile = (ROOT / "Makefile").read_text()
    # make test hands every check to tools/run_tests.py: the library tests, nbval on every
    # notebook, the AVX2 pass and `make test-site`, unless told to skip one
    test_rule = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "tools/run_tests.py" in test_rule and "$(NOTEBOOKS)" in test_rule
    assert "--avx2" in test_rule and "--no-" not in test_rule
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import run_tests
    finally:
        sys.path.pop(0)
    names = [c.name for c in run_tests.plan([], [], lib=True, site=True)]
    assert names == ["book build and browser test", "library tests"]
    site_check = run_tests.plan([], [], lib=False, site=True)[0]
    assert site_check.argv[-1] == "test-site"
    site_rule = makefile.split("\ntest-site:", 1)[1].split("\n\n", 1)[0]
    assert site_rule.split("\n", 1)[0].split() == ["book"]  # builds the book first
    assert "tests/browser" in site_rule and "COURSE_SITE_TEST=1" in site_rule


def test_pages_are_uploaded_and_deployed_from_main_only(workflow):
    test_job, deploy = workflow["jobs"]["test"], workflow["jobs"]["deploy"]
    upload = next(s for s in _steps(test_job) if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_build/html"
    main_only = "github.ref == 'refs/heads/main'"
    assert main_only in upload["if"] and "push" in upload["if"]
    assert deploy["needs"] == "test" and main_only in deploy["if"]
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in _steps(deploy))
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    # Elsewhere the token can only read.
    assert workflow["permissions"] == {"contents": "read"}


# ---------------------------------------------------------------- the Python matrix

def _matrix_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("test_matrix_script", ROOT / "tools" / "test_matrix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lib_matrix_job_runs_the_matrix_script_per_python(workflow):
    job = workflow["jobs"]["lib-matrix"]
    versions = job["strategy"]["matrix"]["python-version"]
    # Strings: an unquoted 3.10 in YAML is the float 3.1.
    assert versions == list(_matrix_script().VERSIONS) == ["3.10", "3.11", "3.12", "3.13"]
    assert all(isinstance(v, str) for v in versions)
    assert job["strategy"]["fail-fast"] is False  # one failing Python does not hide the others
    setup = next(s for s in _steps(job) if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "${{ matrix.python-version }}"
    assert any(s.get("uses", "").startswith("actions/checkout@") for s in _steps(job))
    runs = [s["run"] for s in _steps(job) if "run" in s]
    assert runs == ["python tools/test_matrix.py ${{ matrix.python-version }}"]
    # CPU-only torch wheels on a runner without a GPU.
    assert job["env"]["TORCH_INDEX_URL"].endswith("/cpu")
    assert 0 < job["timeout-minutes"] <= 60
    # The book job is still there and still the one Pages waits for.
    assert workflow["jobs"]["deploy"]["needs"] == "test"


def test_make_test_matrix_runs_the_script_and_is_not_part_of_make_test():
    makefile = (ROOT / "Makefile").read_text()
    rule = makefile.split("\ntest-matrix:", 1)[1].split("\n\n", 1)[0]
    assert "tools/test_matrix.py $(MATRIX_PYTHONS)" in rule
    assert re.search(r"^MATRIX_PYTHONS \?= 3\.10 3\.11 3\.12 3\.13$", makefile, re.M)
    test_line = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert "test-matrix" not in test_line


def test_matrix_installs_torch_alone_then_the_rest():
    script = _matrix_script()
    requirements = "# pinned\ntorch==2.13.0  # the CPU wheel\nnumpy>=1.26\ntorchvision==0.1\n-e .\nhypothesis>=6\n"
    assert script.torch_requirement(requirements) == "torch==2.13.0"
    rest = script.other_requirements(requirements)
    assert "torch==" not in rest and "-e ." not in rest
    assert "numpy>=1.26" in rest and "torchvision==0.1" in rest and "hypothesis>=6" in rest
    pinned = script.torch_requirement((ROOT / "requirements.txt").read_text())
    assert re.fullmatch(r"torch==\d+\.\d+\.\d+", pinned)


@pytest.mark.parametrize(
    "closing, expected",
    [
        ("===== 412 passed, 3 skipped in 98.10s (0:01:38) =====", (412, 0, 3, 0)),
        ("2 failed, 410 passed, 3 skipped, 1 error in 99.0s", (410, 2, 3, 1)),
        ("410 passed, 2 errors in 5s", (410, 0, 0, 2)),
        ("no tests ran in 0.01s", (0, 0, 0, 0)),
    ],
)
def test_matrix_reads_pytests_closing_line(closing, expected):
    counts = _matrix_script().parse_summary("tests/test_a.py ....\n" + closing + "\n")
    assert (counts["passed"], counts["failed"], counts["skipped"], counts["errors"]) == expected


def test_matrix_finds_pyenvs_newest_patch_release(tmp_path, monkeypatch):
    for version in ("3.12.1", "3.12.10", "3.12.9", "3.1.5", "3.12.3-dev"):
        python = tmp_path / "versions" / version / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text("")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    script = _matrix_script()
    assert script.find_python("3.12") == str(tmp_path / "versions" / "3.12.10" / "bin" / "python")
    monkeypatch.setattr(script.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert script.find_python("3.13") == "/usr/bin/python3.13"  # no pyenv 3.13: the PATH


def test_matrix_table_has_a_row_per_python():
    rows = [
        {"version": "3.10", "python": "3.10.13", "torch": "2.13.0", "passed": 400, "failed": 0, "skipped": 2,
         "errors": 0, "install_s": 95.2, "download_mb": 734.6, "venv_mb": 5120.0, "test_s": 180.4, "result": "ok"},
        {"version": "3.13", "reused": True, "python": "3.13.0", "torch": "2.13.0", "passed": 399, "failed": 1,
         "skipped": 2, "errors": 0, "test_s": 190.0, "result": "FAILED"},
        {"version": "3.9", "result": "no interpreter"},
    ]
    lines = _matrix_script().table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert [c.strip() for c in lines[0].strip("|").split("|")][:4] == ["Python", "torch", "passed", "failed"]
    assert "3.10.13" in lines[2] and "| 400 " in lines[2] and "| 735 " in lines[2] and "| ok " in lines[2]
    assert "cached" in lines[3] and "FAILED" in lines[3]
    assert "no interpreter" in lines[4]
