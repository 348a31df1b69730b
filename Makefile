# pytest-desched: every target installs what it needs (venv, pinned tools) first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTEST := $(PY) -m pytest
# No reruns: a test that fails once fails the run (a rerun would hide a flaky check).

.PHONY: venv tools e2e test unit lint bench clean-clusters

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[kind,dev]'
	touch $@

venv: $(VENV)/.installed

## Build (or find) every pinned binary: kube-apiserver, kube-controller-manager,
## kube-scheduler, kubectl, etcd, kwok, kwokctl, descheduler, helm.
tools: venv
	$(PY) -m pytest_desched.toolchain

## The main job: the runbook's experiments on the embedded cluster.
e2e: tools
	$(PYTEST) -m descheduler_e2e -p no:cacheprovider $(PYTEST_ARGS)

## Everything: unit tests and end-to-end tests.
test: tools
	$(PYTEST) -p no:cacheprovider $(PYTEST_ARGS)

unit: venv
	$(PYTEST) tests/unit -p no:cacheprovider $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check pytest_desched tests bench
	$(VENV)/bin/ruff format --check pytest_desched tests bench

bench: tools
	$(PY) bench/run_bench.py $(BENCH_ARGS)
