"""JupyterLab, set up as `make lab` sets it up, in headless Chromium: opening a
chapter must not mark it modified (issue 27, item 8).

Run by `make test-lab` (after `make lab-install`, which writes JupyterLab's settings
with tools/lab_settings.py), which sets COURSE_LAB_TEST=1; without it every test here
is skipped. About 5 minutes on 2 loaded cores: one kernel per chapter, one at a time.
COURSE_LAB_CHAPTERS="04_multi_head_attention.ipynb ..." limits it to those chapters.

What runs: the JupyterLab of .venv, with the app settings `make lab` installs
(.venv/share/jupyter/lab/settings/overrides.json), on 127.0.0.1 with a token, on a
free port, serving a temporary copy of the chapters' folder (the `root_dir` of the
Makefile's `lab` recipe), so that nothing it might save touches the repository. The
reader's own settings, trust database and workspaces are replaced by empty temporary
folders (a fresh machine: every chapter untrusted, JupyterLab's defaults, autosave on).

Each chapter is opened as a reader opens it (a kernel starts; nothing is run); the
test waits for the kernel to be idle, then watches the document for SETTLE seconds:
it fails if the notebook model was marked dirty at any moment (the model's
stateChanged signal, so a dirty flag that autosave clears again is caught too) or
if its tab shows JupyterLab's modified mark (``jp-mod-dirty``). The chapters that store
widgets are then trusted (``jupyter trust``, as File > Trust Notebook) and opened again:
each stored widget must now be drawn by its own JavaScript (every cell is drawn at once,
``windowingMode: none``, since a headless window never scrolls), with no "Error displaying
widget", and again nothing may be marked modified. At the end no chapter file of the copy
may have been rewritten.

Why it can fail: with "Save Widget State Automatically" on (what `make lab` used to
install), the widget manager marks every notebook that stores a widget modified
while it restores the stored widgets (chapters 2, 4, 6 and 8), and autosave then
rewrites the file without them. tools/lab_settings.py explains the mechanism.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

if os.environ.get("COURSE_LAB_TEST") != "1":
    pytest.skip(
        "JupyterLab in a browser: run `make test-lab` (sets COURSE_LAB_TEST=1)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SETTLE = 5.0  # seconds a chapter is watched once its kernel is idle (dirty came within 0.6 s)
OPEN_TIMEOUT = 120  # seconds for a chapter to open and its kernel to be idle (2 loaded cores)


def lab_root() -> Path:
    """The folder `make lab` serves (its --ServerApp.root_dir)."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^lab:.*\n\t(.*)$", makefile, re.M)
    assert recipe, "the Makefile has no `lab` target"
    found = re.search(r"--ServerApp\.root_dir=(\S+)", recipe.group(1))
    assert found, f"`make lab` names no root_dir: {recipe.group(1)}"
    return ROOT / found.group(1)


def chapters(root: Path) -> list[str]:
    skip = {"_build", ".ipynb_checkpoints"}
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.ipynb")
        if not skip & set(p.relative_to(root).parts)
    )


# COURSE_LAB_CHAPTERS="04_multi_head_attention.ipynb 06_positional_encoding.ipynb": only these
CHAPTERS = os.environ.get("COURSE_LAB_CHAPTERS", "").split() or chapters(lab_root())


def _find(env: str, *names: str) -> str:
    for candidate in (os.environ.get(env), *names):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    pytest.fail(f"{names[0]} not found (set {env}); .ci/run installs Debian's chromium and chromium-driver")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token, served folder, {chapter: its bytes when copied}): JupyterLab on
    127.0.0.1, stopped afterwards."""
    lab_bin = BIN / "jupyter-lab"
    if not lab_bin.exists():
        pytest.fail(f"{lab_bin} missing: `make lab-install` installs JupyterLab")
    tmp = tmp_path_factory.mktemp("lab")
    served = tmp / "served"
    shutil.copytree(lab_root(), served, ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    copied = {p: (served / p).read_bytes() for p in CHAPTERS}
    env = dict(os.environ)
    for var, name in [("JUPYTERLAB_SETTINGS_DIR", "user-settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
                      ("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"),
                      ("JUPYTER_CONFIG_DIR", "config"), ("IPYTHONDIR", "ipython")]:
        env[var] = str(tmp / name)
    # Draw every cell at once (JupyterLab's default draws only those near the view, and a
    # headless window never scrolls): every stored output, widgets included, is drawn.
    tracker = tmp / "user-settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), secrets.token_hex(16)
    command = [str(lab_bin), "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={served}", "--LabApp.expose_app_in_browser=True"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=served)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited ({proc.returncode}):\n{(tmp / 'lab.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not answer within 90 s")
                time.sleep(0.5)
        yield base, token, served, copied
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory, lab):
    base, token, _, _ = lab
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never download anything
    options = webdriver.ChromeOptions()
    options.binary_location = _find("CHROMIUM", "chromium", "chromium-browser")
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        "--window-size=1280,900",
        # only loopback: no other name resolves, anything else goes to a dead proxy
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--proxy-server=http://127.0.0.1:9",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=_find("CHROMEDRIVER", "chromedriver")))
    driver.set_page_load_timeout(OPEN_TIMEOUT)
    driver.set_script_timeout(OPEN_TIMEOUT + 2 * SETTLE)
    driver.get(f"{base}/lab?reset&token={token}")
    deadline = time.monotonic() + OPEN_TIMEOUT
    while not driver.execute_script(
            "return !!(window.jupyterapp && window.jupyterapp.shell && document.querySelector('#jp-main-dock-panel'))"):
        assert time.monotonic() < deadline, "JupyterLab's page did not start"
        time.sleep(0.5)
    driver.execute_async_script("window.jupyterapp.restored.then(arguments[0])")
    yield driver
    driver.quit()


# Opens `path`, waits for its kernel to be idle, watches it for `settle` ms, then shuts the
# kernel down and closes the tab. Reports whether the model was ever dirty, and when.
OPEN_AND_WATCH = r"""
const [path, settleMs, timeoutMs, roots, done] = arguments;
const app = window.jupyterapp;
const t0 = Date.now();
const report = {path, dirtyAt: null, tabDirty: false, modelDirty: null, kernel: null, error: null,
                views: null, widgetErrors: []};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  const widget = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  await widget.context.ready;
  const model = widget.context.model;
  const mark = () => { if (model.dirty && report.dirtyAt === null) report.dirtyAt = Date.now() - t0; };
  model.stateChanged.connect(mark);
  mark();
  await widget.sessionContext.ready;
  while (!(widget.sessionContext.session && widget.sessionContext.session.kernel &&
           widget.sessionContext.session.kernel.status === 'idle')) {
    if (Date.now() - t0 > timeoutMs) throw new Error('kernel not idle after ' + timeoutMs + ' ms');
    await sleep(200);
  }
  report.kernel = Date.now() - t0;
  await sleep(settleMs);
  mark();
  const node = widget.content.node;
  const cells = widget.content.model.cells;
  report.views = 0;
  for (let i = 0; i < cells.length; i++) {
    const outputs = cells.get(i).type === 'code' ? cells.get(i).toJSON().outputs : [];
    if (!outputs.some((o) => o.data && o.data['application/vnd.jupyter.widget-view+json'])) continue;
    const cellNode = widget.content.widgets[i].node;
    const t = Date.now();
    let count = 0;
    while (Date.now() - t < settleMs) {
      count = roots.reduce((n, sel) => n + cellNode.querySelectorAll('.jp-OutputArea-output ' + sel).length, 0);
      if (count > 0) break;
      await sleep(200);
    }
    report.views += count;
  }
  mark();
  report.modelDirty = model.dirty;
  report.widgetErrors = (node.textContent.match(/Error displaying widget[^\n]{0,80}/g) || []);
  report.tabDirty = widget.title.className.includes('jp-mod-dirty') ||
    Array.from(document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab.jp-mod-dirty')).length > 0;
  model.stateChanged.disconnect(mark);
  await widget.sessionContext.shutdown();
  model.dirty = false;  // close without JupyterLab's "save your work?" dialog
  widget.dispose();
})().catch((err) => { report.error = String(err && err.stack || err); }).then(() => done(report));
"""


def widget_roots() -> list[str]:
    """CSS selectors of the course's widgets' root elements (lib/widgets/static/*.js)."""
    found = []
    for js in sorted((ROOT / "lib" / "widgets" / "static").glob("*.js")):
        found += re.findall(r'const root = el\("div", \{ class: "([\w-]+)"', js.read_text())
    assert found, "no widget root class found in lib/widgets/static"
    return ["." + c for c in found]


def stored_views(path: Path) -> int:
    """How many widget views the notebook's stored outputs show."""
    cells = json.loads(path.read_text())["cells"]
    return sum("application/vnd.jupyter.widget-view+json" in out.get("data", {})
               for cell in cells for out in cell.get("outputs", []))


def _open_all(browser, paths) -> dict:
    reports = {}
    for path in paths:
        reports[path] = browser.execute_async_script(
            OPEN_AND_WATCH, path, int(SETTLE * 1000), OPEN_TIMEOUT * 1000, widget_roots())
        print(json.dumps(reports[path]))
    return reports


@pytest.fixture(scope="module")
def opened(lab, browser):
    """Every chapter opened once, in order, as a fresh clone has them (untrusted: JupyterLab
    restores the stored widgets but does not draw them): path -> report."""
    return _open_all(browser, CHAPTERS)


WIDGET_CHAPTERS = [p for p in CHAPTERS if stored_views(lab_root() / p)]


@pytest.fixture(scope="module")
def opened_trusted(lab, browser, opened):
    """The chapters that store widgets, trusted (as after File > Trust Notebook, or once run)
    and opened again: the stored widgets are now drawn, by their own JavaScript."""
    _, _, served, _ = lab
    env = dict(os.environ, JUPYTER_DATA_DIR=str(served.parent / "data"))
    for path in WIDGET_CHAPTERS:
        subprocess.run([str(BIN / "jupyter-trust"), str(served / path)], env=env, check=True,
                       capture_output=True)
    return _open_all(browser, WIDGET_CHAPTERS)


SUBSET = bool(os.environ.get("COURSE_LAB_CHAPTERS"))


@pytest.mark.skipif(SUBSET, reason="COURSE_LAB_CHAPTERS names the chapters")
def test_there_are_chapters_to_open():
    assert len(CHAPTERS) >= 16, CHAPTERS


@pytest.mark.parametrize("path", CHAPTERS)
def test_opening_a_chapter_does_not_mark_it_modified(opened, path):
    report = opened[path]
    assert report["error"] is None, f"{path} did not open: {report['error']}"
    assert report["dirtyAt"] is None and not report["modelDirty"] and not report["tabDirty"], (
        f"{path} was marked modified {report['dirtyAt']} ms after it was opened (kernel idle at "
        f"{report['kernel']} ms), without anything run: see tools/lab_settings.py")


@pytest.mark.skipif(SUBSET, reason="COURSE_LAB_CHAPTERS names the chapters")
def test_the_chapters_with_widgets_are_known():
    assert len(WIDGET_CHAPTERS) >= 4, WIDGET_CHAPTERS


@pytest.mark.parametrize("path", WIDGET_CHAPTERS)
def test_a_trusted_chapter_draws_its_widgets_and_stays_unmodified(opened_trusted, path):
    report = opened_trusted[path]
    assert report["error"] is None, f"{path} did not open: {report['error']}"
    assert report["dirtyAt"] is None and not report["modelDirty"] and not report["tabDirty"], (
        f"{path}, trusted, was marked modified {report['dirtyAt']} ms after it was opened")
    assert not report["widgetErrors"], report["widgetErrors"]
    assert report["views"] == stored_views(lab_root() / path), (
        f"{path}: {report['views']} widgets drawn, {stored_views(lab_root() / path)} stored")


def test_jupyterlab_wrote_no_chapter(opened, opened_trusted, lab):
    _, _, served, copied = lab
    changed = [p for p in CHAPTERS if (served / p).read_bytes() != copied[p]]
    assert not changed, f"JupyterLab rewrote {changed} while they were only opened"
