# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export TORCHINDUCTOR_CACHE_DIR := $(CURDIR)/.torchinductor-cache
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test test-notorch venv browser lint mutation bench fuzz clean

$(STAMP): pyproject.toml setup.py src/seamscope/_speedups.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch is pinned here (a CPU build on this machine's disk); pyproject declares a range.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,models,plots]'
	# the editable install builds the C extension into src/ only when it is first made: rebuild it
	$(BIN)/python setup.py -q build_ext --inplace
	touch $(STAMP)

# The torch-free core: a venv without torch, running every test not marked `torch`.
NOTORCH := .venv-notorch
$(NOTORCH)/.installed-stamp: pyproject.toml setup.py src/seamscope/_speedups.c
	test -x $(NOTORCH)/bin/python || $(PY) -m venv $(NOTORCH)
	$(NOTORCH)/bin/python -m pip install -q -e . pytest pytest-timeout hypothesis jsonschema
	touch $@

test-notorch: $(NOTORCH)/.installed-stamp
	$(NOTORCH)/bin/python -m pytest -q -m "not torch" -p no:cacheprovider

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/seamscope demo --out seamscope-out

# Headless Chromium for the report's browser test (Debian packages; never a downloaded browser).
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		echo "installing chromium and chromium-driver"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

test: $(STAMP) browser test-notorch
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

# Fresh Hypothesis draws (make test is derandomized): pin any failure found here as an @example.
fuzz: $(STAMP)
	SEAMSCOPE_FUZZ=1 $(BIN)/python -m pytest -q -m "not inductor" $(shell grep -l "@given" tests/*.py)

mutation: $(STAMP)
	$(BIN)/python benchmarks/mutation.py

bench: $(STAMP)
	$(BIN)/python benchmarks/capture_overhead.py

clean:
	rm -rf $(VENV) $(NOTORCH) seamscope-out .torchinductor-cache .pytest_cache
