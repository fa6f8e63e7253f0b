# Two commands do everything on a fresh machine:
#   make book   create .venv if missing, install (pip, npm ci), build the HTML book into _build/html
#   make test   create .venv if missing, install, run pytest on tests/, nbval on every notebook,
#               then build the book and test it in headless Chromium (test-site)
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

.PHONY: book test test-lib test-notebooks test-site execute clean distclean install

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (course)" >/dev/null
	touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

# --all: a full rebuild every time, so a warning can never hide in a cached page.
book: $(STAMP) $(NODE_STAMP)
	$(BIN)/jupyter-book build . --toc $(TOC) --builder html --all -W -n --keep-going

test: test-lib test-notebooks test-site

test-lib: $(STAMP)
	$(BIN)/python -m pytest tests -q

test-notebooks: $(STAMP)
	$(BIN)/python -m pytest -q --nbval --nbval-current-env \
		--nbval-sanitize-with book/sanitize.cfg --nbval-cell-timeout=900 -p no:cacheprovider $(NOTEBOOKS)

# The built site in headless Chromium (Debian's chromium + chromium-driver; .ci/run
# installs them): every page offline, math, figures, widgets, the Q/K/V explorer.
# Plain `pytest tests` skips tests/browser unless COURSE_SITE_TEST=1.
test-site: book
	COURSE_SITE_TEST=1 COURSE_SITE_TOC=$(TOC) $(BIN)/python -m pytest tests/browser -q -p no:cacheprovider

execute: $(STAMP)
	for nb in $(NOTEBOOKS); do \
		echo "executing $$nb"; \
		$(BIN)/jupyter-execute --inplace --timeout=900 --kernel_name=python3 "$$nb" || exit 1; \
	done

clean:
	rm -rf _build .pytest_cache

distclean: clean
	rm -rf $(VENV) node_modules
