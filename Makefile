# pytest-desched: every target installs what it needs (venv, pinned tools) first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTEST := $(PY) -m pytest
# No reruns: a test that fails once fails the run (a rerun would hide a flaky check).

.PHONY: venv tools browser e2e test unit lint bench clean-clusters

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[kind,dev]'
	touch $@

venv: $(VENV)/.installed

## Build (or find) every pinned binary: kube-apiserver, kube-controller-manager,
## kube-scheduler, kubectl, etcd, kwok, kwokctl, descheduler, helm, and the policy checker
## (policycheck: the project's Go helper built against the same descheduler source).
tools: venv
	$(PY) -m pytest_desched.tools.toolchain

## Headless Chromium and its driver for the HTML report's browser test (Debian packages,
## installed only when missing; never a browser download at run time).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver; \
	else echo "make browser: chromium/chromedriver missing and cannot apt-get as $$(id -un);" \
	  "run: sudo apt-get install -y chromium chromium-driver (the browser test fails without them)" >&2; fi

## The main job: the runbook's experiments on the embedded cluster.
e2e: tools
	$(PYTEST) -m descheduler_e2e -p no:cacheprovider $(PYTEST_ARGS)

## Everything: unit tests and end-to-end tests.
test: tools browser
	$(PYTEST) -p no:cacheprovider $(PYTEST_ARGS)

unit: venv
	$(PYTEST) tests/unit -p no:cacheprovider $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check pytest_desched tests bench
	$(VENV)/bin/ruff format --check pytest_desched tests bench

bench: tools
	$(PY) bench/run_bench.py $(BENCH_ARGS)
