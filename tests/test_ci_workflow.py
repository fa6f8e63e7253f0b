"""The GitHub Actions workflow for forks (.github/workflows/book.yml) and .ci/run.

The workflow cannot run here, so these tests read it: it must be valid YAML,
run on pushes and pull requests, run the same script as CI, and publish the
built site to GitHub Pages only from main.
"""

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
    test_line = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert {"test-lib", "test-notebooks", "test-site"} <= set(test_line.split(":", 1)[1].split())
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
