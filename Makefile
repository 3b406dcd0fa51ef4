# sparkfleet.vllm — developer entry points. `make demo` and `make test` are the
# two commands the README promises; every tier ends with a pytest summary line.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST := $(BIN)/pytest -p no:cacheprovider --durations=10
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help venv lint lint-python lint-yaml lint-ansible sanity test test-unit \
        test-integration test-molecule test-cluster test-awx demo build clean

help:
	@echo "make demo              deploy the local default (CPU vLLM, tiny model) end to end"
	@echo "make test              every test tier in order: lint, unit, integration, molecule, cluster, awx"
	@echo "make venv              controller toolchain in $(VENV)"
	@echo "make lint | test-unit | test-integration | test-molecule | test-cluster | test-awx"

$(STAMP): requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements/dev.txt
	touch $@

venv: $(STAMP)

lint: $(STAMP)
	$(PYTEST) tests/lint -q

test-unit: $(STAMP)
	$(PYTEST) tests/unit -q

test-integration: $(STAMP)
	$(PYTEST) tests/integration -q

test-molecule: $(STAMP)
	$(PYTEST) tests/molecule -q

test-cluster: $(STAMP)
	$(PYTEST) tests/cluster -q

test-awx: $(STAMP)
	$(PYTEST) tests/awx -q

test: lint test-unit test-integration test-molecule test-cluster test-awx
	@echo "make test: every tier passed"

demo: $(STAMP)
	bash tests/harness/demo.sh

build: $(STAMP)
	$(BIN)/ansible-galaxy collection build --force --output-path build/

clean:
	rm -rf build plans results tests/output .pytest_cache
