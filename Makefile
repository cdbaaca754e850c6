# Both Quickstart commands install into the project's own virtual environment
# (.venv, made with `$(PY) -m venv`): Homebrew and Debian Pythons refuse a global
# `pip install` (PEP 668), and a venv leaves the system Python alone.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
DEMO_DB ?= .demo/capscan.db
SITE ?= site

.PHONY: demo test test-busy test-fast test-floors lint docs bench bench-linear native clean mutate

# Quickstart 1: install capscan into .venv, store the bundled examples in a database of the demo's own
# (the stock guest's llama-bench JSON, fixable; the same guest remedied; its host), compare the three,
# and say where they are. A fresh database each time, so the runs are 1, 2 and 3.
demo:
	@PY="$(PY)" ./scripts/make-venv "$(VENV)"
	$(VPY) -m pip install -q --disable-pip-version-check -e .
	@mkdir -p $(dir $(DEMO_DB))
	@rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm
	$(VENV)/bin/capscan --db $(DEMO_DB) < examples/m1-ultra-guest-stock-json.log
	$(VENV)/bin/capscan --db $(DEMO_DB) ingest examples/m1-ultra-guest-shim.log examples/m1-ultra-host.log
	$(VENV)/bin/capscan --db $(DEMO_DB) compare 1 2 3
	@echo
	@echo "The three runs are in $(DEMO_DB); capscan is in $(VENV)/bin ('. $(VENV)/bin/activate' puts it on PATH). Next:"
	@echo "  $(VENV)/bin/capscan --db $(DEMO_DB) show 1         # the stock guest's run with its evidence lines"
	@echo "  $(VENV)/bin/capscan --db $(DEMO_DB) remedy plan    # what the remedy would do for it"

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
# one way; only the TUI imports Textual), ruff and mypy on analyzer/, and actionlint on the workflows
# (the one in .github/workflows uses the Action as `uses: ./`, so actionlint checks action.yml too).
# `make test` installed the tools.
ACTIONLINT = $(if $(wildcard $(VENV)/bin/actionlint),$(VENV)/bin/actionlint,actionlint)
lint:
	$(RUNPY) -m ruff check analyzer action
	$(RUNPY) -m mypy
	$(RUNPY) -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
	$(ACTIONLINT) .github/workflows/*.yml examples/ci/*.yml

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
