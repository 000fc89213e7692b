# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export TORCHINDUCTOR_CACHE_DIR := $(CURDIR)/.torchinductor-cache
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test test-notorch test-core test-torch venv browser prometheus lint mutation bench bench-smoke fuzz clean

# pytest-xdist workers per lane (this project's CI machines have two cores). loadgroup spreads
# single tests; tests/conftest.py keeps the tests that share a module fixture on one worker.
JOBS ?= 2
XDIST := -n $(JOBS) --dist loadgroup
# one PyTorch thread per process: two workers (and the processes they start) already fill two cores.
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: without it pytest rewrites the
# asserts of every test module in every worker (half of collection), and every process the tests
# start compiles seamscope's modules again.
LANE_ENV := OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=

$(STAMP): pyproject.toml setup.py src/seamscope/_speedups.c src/seamscope/_logscan.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch is pinned here (a CPU build on this machine's disk); pyproject declares a range.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q torch==2.13.0 -e '.[dev,models,plots,ecosystems,watch]'
	# the editable install builds the C extension into src/ only when it is first made: rebuild it
	$(BIN)/python setup.py -q build_ext --inplace
	touch $(STAMP)

# The torch-free core: a venv without torch, running every test not marked `torch`. It records the
# tests that passed there; the torch lane of `make test` skips exactly those (each test runs once).
NOTORCH := .venv-notorch
NOTORCH_PASSED := .lane-notorch-passed
$(NOTORCH)/.installed-stamp: pyproject.toml setup.py src/seamscope/_speedups.c src/seamscope/_logscan.c
	test -x $(NOTORCH)/bin/python || $(PY) -m venv $(NOTORCH)
	$(NOTORCH)/bin/python -m pip install -q -e . pytest pytest-timeout pytest-xdist hypothesis jsonschema tlparse
	touch $@

test-notorch: $(NOTORCH)/.installed-stamp
	rm -f $(NOTORCH_PASSED)
	$(LANE_ENV) $(NOTORCH)/bin/python -m pytest -q -m "not torch" -p no:cacheprovider $(XDIST) --record-passed $(NOTORCH_PASSED) tests

# The compatibility lane: every test marked `torch` on another PyTorch release, in its own venv
# (`make test-torch TORCH=2.15.0`). Run it on every PyTorch release and record the result in
# docs/compatibility.md. Not part of `make test`: a CUDA build from the registry is a 3 GB
# download. PIP_CONSTRAINT=/dev/null lifts this machine's torch cap for this venv only.
TORCH ?= 2.14.1
TORCH_VENV := .venv-torch-$(TORCH)
$(TORCH_VENV)/.installed-stamp: pyproject.toml setup.py src/seamscope/_speedups.c src/seamscope/_logscan.c
	test -x $(TORCH_VENV)/bin/python || $(PY) -m venv $(TORCH_VENV)
	PIP_CONSTRAINT=/dev/null $(TORCH_VENV)/bin/python -m pip install -q torch==$(TORCH)
	PIP_CONSTRAINT=/dev/null $(TORCH_VENV)/bin/python -m pip install -q -e '.[dev,models,plots,watch]'
	$(TORCH_VENV)/bin/python setup.py -q build_ext --inplace
	touch $@

test-torch: $(TORCH_VENV)/.installed-stamp browser prometheus
	OMP_NUM_THREADS=1 $(TORCH_VENV)/bin/python -m pytest -q -p no:cacheprovider -m torch

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/seamscope demo --out seamscope-out

# Headless Chromium for the report's browser test (Debian packages; never a downloaded browser).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		echo "installing chromium and chromium-driver"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# A Prometheus server for watch mode's scrape test (Debian's package; never a downloaded binary).
prometheus:
	@if ! command -v prometheus >/dev/null; then \
		echo "installing prometheus"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	fi

# Every test once: the torch-free lane, the extras lane, then the rest in .venv (the tests that
# passed in the torch-free lane are deselected here; those that skipped there for want of torch
# or an extra run here).
test: $(STAMP) browser prometheus test-notorch test-core
	$(LANE_ENV) $(BIN)/python -m pytest $(XDIST) --skip-passed $(NOTORCH_PASSED) tests

# The optional extras must degrade: a second venv with the core dependencies, torch and the test
# runner only (no matplotlib, transformers, selenium, jsonschema, IPython), running the tests that
# touch an optional extra. An optional package imported unguarded fails here.
CORE_VENV := .venv-core
CORE_STAMP := $(CORE_VENV)/.installed-stamp
CORE_TESTS := tests/test_imports.py tests/test_shapes.py tests/test_model_receipt.py \
	tests/test_import_trace_format.py tests/test_differential.py tests/test_report_browser.py \
	tests/test_capture_transformers.py tests/test_notebook.py tests/test_watch_serving.py

$(CORE_STAMP): pyproject.toml setup.py src/seamscope/_speedups.c src/seamscope/_logscan.c
	test -x $(CORE_VENV)/bin/python || $(PY) -m venv $(CORE_VENV)
	$(CORE_VENV)/bin/python -m pip install -q torch==2.13.0 pytest pytest-timeout pytest-xdist hypothesis
	$(CORE_VENV)/bin/python -m pip install -q -e .
	touch $(CORE_STAMP)

test-core: $(CORE_STAMP)
	$(LANE_ENV) $(CORE_VENV)/bin/python -m pytest -q -p no:cacheprovider $(XDIST) -m "not inductor" $(CORE_TESTS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# Fresh Hypothesis draws (make test is derandomized): pin any failure found here as an @example.
fuzz: $(STAMP)
	SEAMSCOPE_FUZZ=1 $(BIN)/python -m pytest -q -m "not inductor" $(shell grep -l "@given" tests/*.py)

mutation: $(STAMP)
	$(BIN)/python benchmarks/mutation.py

# The benchmarks still run (smoke: small sizes, nothing timed against a threshold), then the bench.
bench-smoke: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider benchmarks/test_smoke.py

bench: bench-smoke
	$(BIN)/python benchmarks/capture_overhead.py

clean:
	rm -rf $(VENV) $(NOTORCH) $(CORE_VENV) $(NOTORCH_PASSED) .venv-torch-* seamscope-out .torchinductor-cache .pytest_cache
