# Two commands on a fresh machine:  make demo   |   make test
# Both create .venv and install the project on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test test-fast lint bench chromium clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# A demo release of the project's own census-like sample (it starts the local Prefect server
# that later runs reuse), with the design `sdc design configs/census_demo.yaml` recommends
# (it changes < 20% of records).
# --force: the demo replaces its own previous demo release (only after the new one is complete).
demo: install
	$(VENV)/bin/sdc release configs/census_demo_design.yaml --force

# The report test renders HTML in headless Chromium; install it with apt when it is missing.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium (apt) for the report rendering test"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium could not be installed; the rendering test will be skipped"; \
	else echo "no apt-get: the rendering test will be skipped"; fi

# The suite runs one pytest-xdist worker more than there are cores (at most 4), each worker with
# its own temp folder, all with one Prefect server and one Dask cluster that xdist's controller
# starts (tests/shared_services.py); tests marked
# xdist_group(NAME) share one worker. Many tests wait (a subprocess release killed at a
# checkpoint, a server started and stopped, a Dask worker killed): with one worker per core
# 1.44 of 2 cores were busy (16 min 7 s in a fresh clone), with 3 workers 1.57 (13 min 49 s;
# docs/TESTING.md). TEST_WORKERS=0: one process, as before.
# Measured in CPU seconds, not wall (a shared machine): /usr/bin/time of `make test` in a fresh
# clone (12-06 08:11, quiet, 3,553 tests: 13 min 53 s, user 1,333 s + sys 68 s; the session's
# Prefect servers daemonize and are not in it: `python tests/durations.py --reap make test`
# counts them, 1,444 s for 3,576 tests at 12-06 09:53 under load), and per test with the CPU
# plugin: SDC_TEST_CPU=f.jsonl ... pytest -p tests.durations, then
# python tests/durations.py --cpu f.jsonl (docs/TESTING.md "Measuring CPU per test").
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 1)); [ $$n -gt 4 ] && n=4; echo $$n)
# --no-loadscope-reorder: the workers take the tests in the order tests/conftest.py sets
# (the longest group or test first, by tests/durations.json)
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# PYTHONDONTWRITEBYTECODE= (empty: off): each xdist worker would otherwise rewrite the asserts
# of every test module again (pytest caches them beside the .pyc files), ~9 s CPU per worker
test: install chromium
	PYTHONDONTWRITEBYTECODE= $(PYTEST)

test-fast: install
	PYTHONDONTWRITEBYTECODE= $(PYTEST) -m "not slow"

lint: install
	$(VENV)/bin/ruff check sdc flows tests benchmarks

bench: install
	$(PY) benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) .pytest_cache
