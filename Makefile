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

# The suite runs two pytest-xdist workers more than there are cores (at most 5), each worker with
# its own temp folder, all with one Prefect server and one Dask cluster that xdist's controller
# starts (tests/shared_services.py); tests marked xdist_group(NAME) share one worker. The tests
# that mostly sleep (group "waits": a real cron minute, servers and Dask workers killed and
# awaited) hold one worker for ~9 minutes, so the other workers need one per core and one for
# the tests that wait on a subprocess: a quiet fresh clone on 2 cores (12-06 13:28 / 13:42,
# 3,584 tests) took 12 min 6 s with 3 workers and 11 min 13 s with 4 (user 1,123 s + sys 57 s;
# docs/TESTING.md). TEST_WORKERS=0: one process. Measured in CPU seconds on a shared machine:
# /usr/bin/time of `make test` in a fresh clone (the run's Prefect server daemonizes and is not
# in it: `python tests/durations.py --reap make test` counts it), and per test with the CPU
# plugin: SDC_TEST_CPU=f.jsonl ... pytest -p tests.durations, then
# python tests/durations.py --cpu f.jsonl (docs/TESTING.md "Measuring CPU per test").
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 2)); [ $$n -gt 5 ] && n=5; echo $$n)
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
