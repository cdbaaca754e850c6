# Both Quickstart commands install into the project's own virtual environment
# (.venv, made with `$(PY) -m venv`): Homebrew and Debian Pythons refuse a global
# `pip install` (PEP 668), and a venv leaves the system Python alone.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
DEMO_DB ?= .demo/capscan.db
SITE ?= site

.PHONY: demo test test-busy test-fast test-floors lint docs bench bench-linear native clean mutate

# Quickstart 1: install capscan into .venv and pipe the bundled guest log through it.
demo:
	@PY="$(PY)" ./scripts/make-venv "$(VENV)"
	$(VPY) -m pip install -q --disable-pip-version-check -e .
	@mkdir -p $(dir $(DEMO_DB))
	$(VENV)/bin/capscan --db $(DEMO_DB) --force < examples/m1-ultra-guest-stock.log

# Quickstart 2: install everything the tests need into .venv and run the whole suite.
test:
	PY="$(PY)" ./scripts/install-test-deps "$(VENV)"
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VPY) -m pytest -q

# The suite twice in a row beside one busy loop per core (scripts/test-busy): green on a busy machine.
test-busy:
	PY="$(PY)" ./scripts/install-test-deps "$(VENV)"
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VPY) scripts/test-busy --runs 2

# Developer shortcuts: the project venv when there is one, else $(PY).
RUNPY = $(if $(wildcard $(VPY)),$(VPY),$(PY))

test-fast:
	$(RUNPY) -m pytest -q -x --ignore=tests/test_native_interposer.py

# The declared minimum versions (constraints-min.txt) in their own venv, against the
# suite minus the SVG snapshots (those are recorded with constraints-test.txt's versions)
# and the native tests (no Python dependency), with one bundled log in four of each
# per-fixture sweep (tests/conftest.py: the sweeps test capscan's reading, not the versions).
FLOORS_VENV ?= .venv-floors
test-floors:
	PY="$(PY)" CONSTRAINTS=constraints-min.txt NATIVE=0 ./scripts/install-test-deps "$(FLOORS_VENV)"
	CAPSCAN_SWEEP_SHARE=4 PATH="$(abspath $(FLOORS_VENV))/bin:$$PATH" $(FLOORS_VENV)/bin/python -m pytest -q -p no:cacheprovider \
		--ignore=tests/tui/test_snapshots.py --ignore=tests/test_native_interposer.py

# The house rules (run by .ci/run after the suite): import-linter's layers contract (the pipeline,
# one way; only the TUI imports Textual), ruff and mypy on analyzer/. `make test` installed the tools.
lint:
	$(RUNPY) -m ruff check analyzer
	$(RUNPY) -m mypy
	$(RUNPY) -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

# The documentation site into site/ (SITE=DIR elsewhere; open its index.html), strict as tests/docs builds it: a broken link
# fails. The docs extra is in .venv after `make test`; this installs it when it is not.
docs:
	@PY="$(PY)" ./scripts/make-venv "$(VENV)"
	@$(VPY) -c "import mkdocs" 2>/dev/null || $(VPY) -m pip install -q --disable-pip-version-check \
		-c constraints-test.txt -e '.[docs]'
	$(VPY) -m mkdocs build --strict -d $(SITE)

bench:
	$(RUNPY) bench/run.py

# Linear time on hostile input, timed (the suite counts work instead: tests/work_count.py).
bench-linear:
	$(RUNPY) bench/linearity.py --check

# On demand, not in CI: a targeted mutation run over the fixable path (scripts/mutate.py, CONTRIBUTING.md).
# MUTANTS="id id" runs only those; `$(RUNPY) scripts/mutate.py --list` lists them.
mutate:
	PATH="$(abspath $(VENV))/bin:$$PATH" $(RUNPY) scripts/mutate.py $(MUTANTS)

native:
	$(MAKE) -C native/interposer check

clean:
	rm -rf .demo .pytest_cache build site *.egg-info $(FLOORS_VENV)
	-$(MAKE) -C native/interposer clean
