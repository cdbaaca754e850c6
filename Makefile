PY ?= python3
DEMO_DB ?= .demo/capscan.db

.PHONY: demo test test-fast bench native clean

# Quickstart 1: install capscan and pipe the bundled guest log through it.
demo:
	$(PY) -m pip install -q --disable-pip-version-check -e .
	@mkdir -p $(dir $(DEMO_DB))
	capscan --db $(DEMO_DB) --force < examples/m1-ultra-guest-stock.log

# Quickstart 2: install everything the tests need and run the whole suite.
test:
	./scripts/install-test-deps
	$(PY) -m pytest -q

test-fast:
	$(PY) -m pytest -q -x --ignore=tests/test_native_interposer.py

bench:
	$(PY) bench/run.py

native:
	$(MAKE) -C native/interposer check

clean:
	rm -rf .demo .pytest_cache build *.egg-info
	-$(MAKE) -C native/interposer clean
