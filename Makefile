# sparkfleet.vllm — developer entry points. `make demo` and `make test` are the
# two commands the README promises; every tier ends with a pytest summary line.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)
PYTEST := $(BIN)/pytest -p no:cacheprovider --durations=10
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help venv lint lint-python lint-yaml lint-ansible sanity test test-unit \
        test-integration test-molecule test-cluster test-awx test-lowest-core test-times times-reset demo build release clean \
        vllm-serve-flags

help:
	@echo "make demo              deploy the local default (CPU vLLM, tiny model) end to end"
	@echo "make test              every test tier, in two lanes (lint, unit, integration | molecule, cluster; awx in the first free)"
	@echo "make venv              controller toolchain in $(VENV)"
	@echo "make lint | test-unit | test-integration | test-molecule | test-cluster | test-awx"
	@echo "make test-lowest-core  unit and lint tiers on the lowest ansible-core meta/runtime.yml claims"
	@echo "make test-times        per-tier wall time and costliest fixtures of the last runs"
	@echo "make release DRY_RUN=1 changelog release, build and tarball checks in a scratch copy (no tag)"

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

# MOLECULE_K: one part of the tier, as a pytest -k expression (tests/harness/lanes.sh splits the tier so).
MOLECULE_K ?=
test-molecule: $(STAMP)
	$(PYTEST) tests/molecule -q $(if $(MOLECULE_K),-k "$(MOLECULE_K)")

test-cluster: $(STAMP)
	$(PYTEST) tests/cluster -q

test-awx: $(STAMP)
	$(PYTEST) tests/awx -q

# The lowest ansible-core meta/runtime.yml claims (its lower bound), in a venv of its own: the unit and lint tiers
# (ruff, yamllint, ansible-lint, ansible-test sanity) on it. The other tiers run the newest patch release of the
# claimed range (requirements/dev.txt). Not part of `make test`: about 5 minutes more on a 2-core machine.
LOW_CORE := $(shell sed -n 's/^requires_ansible: *">=\([0-9.]*\),.*/\1/p' meta/runtime.yml)
LOW_VENV ?= .venv-core-low
# The `ansible` package only carries the collections (community.docker, awx.awx, ...), and each of its releases
# pins a newer ansible-core patch (12.0.0: ~=2.19.1): it goes in without its dependencies, as a Galaxy install of
# the collections beside that ansible-core would.
$(LOW_VENV)/.installed: requirements/dev.txt meta/runtime.yml
	$(PYTHON) -m venv $(LOW_VENV)
	$(LOW_VENV)/bin/pip install -q --upgrade pip
	echo "ansible-core==$(LOW_CORE)" > $(LOW_VENV)/constraints.txt
	grep -v '^ansible>=' requirements/dev.txt > $(LOW_VENV)/requirements.txt
	$(LOW_VENV)/bin/pip install -q -r $(LOW_VENV)/requirements.txt -c $(LOW_VENV)/constraints.txt
	$(LOW_VENV)/bin/pip install -q --no-deps "$$(grep '^ansible>=' requirements/dev.txt)"
	touch $@

test-lowest-core: $(LOW_VENV)/.installed
	$(LOW_VENV)/bin/python -c "import ansible.release; print('ansible-core', ansible.release.__version__)"
	PATH=$(CURDIR)/$(LOW_VENV)/bin:$$PATH $(LOW_VENV)/bin/pytest -p no:cacheprovider --durations=10 tests/unit -q
	PATH=$(CURDIR)/$(LOW_VENV)/bin:$$PATH VENV=$(LOW_VENV) $(LOW_VENV)/bin/pytest -p no:cacheprovider --durations=10 tests/lint -q

# Every tier, in two lanes side by side (tests/harness/lanes.sh says why; SPARKFLEET_TEST_LANES=1 runs them
# one after another), then where the minutes went.
test: times-reset
	bash tests/harness/lanes.sh
	@$(BIN)/python tests/timing.py
	@echo "make test: every tier passed"

times-reset:
	@rm -rf tests/output/times

# Where the minutes went in the last run of each tier (tests/output/times/*.json).
test-times: $(STAMP)
	$(BIN)/python tests/timing.py

# DEMO_ARGS go to ansible-playbook: make demo DEMO_ARGS='-e vllm_port=8001'
demo: $(STAMP)
	bash tests/harness/demo.sh $(DEMO_ARGS)

# data/vllm_serve_flags.yml from the real `vllm serve` parser (the planner's flag guards read it). Needs a vLLM
# environment: VLLM_PYTHON=<venv>/bin/python (default: the CPU build's .venv-vllm, tests/harness/vllm-cpu-env.sh).
VLLM_PYTHON ?= .venv-vllm/bin/python
vllm-serve-flags:
	$(VLLM_PYTHON) tests/harness/vllm_serve_flags.py data/vllm_serve_flags.yml

# The tarball, checked: installed content only, at galaxy.yml's version (tests/tarball_contents.py).
build: $(STAMP)
	$(BIN)/ansible-galaxy collection build --force --output-path build/
	$(BIN)/python tests/tarball_contents.py build/sparkfleet-vllm-$(VERSION).tar.gz $(VERSION)

# The changelog release for galaxy.yml's version, the build, checks on the tarball, a commit and tag v<version>.
# DRY_RUN=1 does every step in a scratch copy and tags nothing (tests/harness/release.sh).
DRY_RUN ?=
release: $(STAMP)
	DRY_RUN=$(DRY_RUN) bash tests/harness/release.sh

clean:
	rm -rf build plans results tests/output .pytest_cache
