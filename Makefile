# pytest-desched: every target installs what it needs (venv, pinned tools) first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTEST := $(PY) -m pytest
# No reruns: a test that fails once fails the run (a rerun would hide a flaky check).

.PHONY: venv tools helm3 test-releases actionlint wheel-lint browser e2e test unit lint typecheck bench clean-clusters kind-image e2e-kind e2e-kubernetes test-kubernetes

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

## Build (or find) every pinned binary: kube-apiserver, kube-controller-manager,
## kube-scheduler, kubectl, etcd, kwok, kwokctl, descheduler, helm, and the policy checker
## (policycheck: the project's Go helper built against the same descheduler source).
## The metrics sources of the utilization experiments too: metrics-server and Prometheus
## (built without its service-discovery plugins; docs/utilization.md#prometheus), so no
## test builds one.
tools: venv
	$(VENV)/bin/desched tools

## Helm 3 (helm.sh/helm/v3 v3.21.4) beside the default Helm 4: `make test` runs the runbook's
## positive experiment and the lint on it (tests/e2e/test_helm3_e2e.py); built once, cached by
## version, before the tests rather than inside one (docs/helm.md).
helm3: venv
	$(VENV)/bin/desched tools --helm 3 helm

## The project's own check of its CI recipe (tests/unit/test_ci_recipe.py): actionlint, pinned
## and built from its Go module like the tools above; nothing a user's lint or e2e run needs.
actionlint: venv
	$(VENV)/bin/desched tools actionlint

## The pytest-desched-lint-bin wheel into dist/: helm, the policy checker and the pinned chart,
## copied from the tool cache (built first when missing), static, tagged for this platform, with
## a manifest of versions and sha256. Installed next to pytest-desched, `desched lint` needs no
## Go (docs/lint.md#first-use). Nothing is published: this is how to get it here.
wheel-lint: venv
	$(PY) -m dev.lint_wheel --dist dist

## Headless Chromium and its driver for the HTML report's browser test (Debian packages,
## installed only when missing; never a browser download at run time).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver; \
	else echo "make browser: chromium/chromedriver missing and cannot apt-get as $$(id -un);" \
	  "run: sudo apt-get install -y chromium chromium-driver (the browser test fails without them)" >&2; fi

## The main job: the runbook's experiments (positive, nodefit, pdb; the runbook's policy and
## the pdb-lister workaround) on the embedded cluster, with the HTML report and the summary.
## The project's own end-to-end suite is `desched_selftest` and runs in `make test`.
E2E_MARK := descheduler_e2e and not desched_selftest
e2e: tools
	$(PYTEST) -m "$(E2E_MARK)" -p no:cacheprovider $(PYTEST_ARGS)

## Everything: unit tests and end-to-end tests.
## The one non-pinned Kubernetes `make test` uses (tests/e2e/test_kubernetes_version_e2e.py),
## built before the first test like every other tool (docs/kubernetes-versions.md: its cost).
TEST_KUBERNETES := v1.37.2
test-kubernetes: venv
	$(VENV)/bin/desched tools --kubernetes $(TEST_KUBERNETES) kube-apiserver kube-controller-manager kube-scheduler kubectl

## The release trees `make test` runs as releases (tests/e2e/test_canary_upgrade_e2e.py: the
## v0.35.0 -> v0.35.1 canary on the embedded cluster): each tree's descheduler and policy
## checker from ../shared/upstream, built once before the first test, cached by commit
## (docs/known-bugs.md: their cold cost).
TEST_RELEASES := v0.35.0 v0.35.1
test-releases: venv
	$(PY) -m tests.upstream $(TEST_RELEASES)

## Concurrent by default (pytest-xdist, tests/concurrency.py): `auto` picks the workers from the
## machine's cores and memory (DESCHED_TEST_WORKERS=N overrides); TEST_WORKERS=0 runs one process.
TEST_WORKERS ?= auto
test: tools helm3 test-kubernetes actionlint browser test-releases
	$(PYTEST) -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

unit: venv
	$(PYTEST) tests/unit -p no:cacheprovider $(PYTEST_ARGS)

lint: venv typecheck
	$(VENV)/bin/ruff check pytest_desched tests bench dev
	$(VENV)/bin/ruff format --check pytest_desched tests bench dev

## mypy over the engine (pyproject.toml [tool.mypy]: the ground floor strict). CI runs it as a
## step of its own (.ci/run), not inside `make test`: from a cold cache it takes ~40 s on a
## loaded 2-core machine, too close to the 60 s a test-time check may add.
typecheck: venv
	$(PY) -m mypy

bench: tools
	$(PY) bench/run_bench.py $(BENCH_ARGS)

## kind, run for real, offline: missing Debian packages (docker.io, mmdebstrap, gcc; as root),
## a Docker engine (started on a socket of its own if none answers; on a VM lacking
## CAP_SYS_RESOURCE with the `desched-vm` runtime), the node image kindest/node:<pin> and the
## descheduler image built here from Debian packages and Go modules, cached by version.
## KIND_KUBERNETES=vX.Y.Z (a served version, docs/kubernetes-versions.md): the node image at that
## Kubernetes instead of the pin (kindest/node:vX.Y.Z, cached beside the pinned one), and
## `make e2e-kind` runs the suite on it (--desched-kubernetes).
KIND_KUBERNETES ?=
kind-image: tools
	$(PY) -m dev.kind_node $(if $(KIND_KUBERNETES),--kubernetes $(KIND_KUBERNETES))

## The runbook's experiments and the project's own e2e suite on real kind (KIND_KUBERNETES also
## as DESCHED_KUBERNETES, so the nested pytest runs and `desched` commands the suite starts
## run at that version too, not at the pin whose node image may not be built). The tool's own
## dockerd (started by this target or by `make kind-image` before it) is stopped at the end
## (DESCHED_KEEP_ENGINE=1 keeps it, e.g. with PYTEST_ARGS=--desched-keep=always); an engine
## that was answering before either is never touched. `make kind-image` leaves its engine
## running for this target and says so on its last line.
e2e-kind: tools
	@engine=$$($(PY) -m dev.kind_node engine --print-env) || exit 1; eval "$$engine"; \
	rc=0; $(PY) -m dev.kind_node build $(if $(KIND_KUBERNETES),--kubernetes $(KIND_KUBERNETES)) || rc=$$?; \
	[ $$rc -ne 0 ] || $(if $(KIND_KUBERNETES),DESCHED_KUBERNETES=$(KIND_KUBERNETES)) $(PYTEST) -m "descheduler_e2e or desched_selftest" -p no:cacheprovider --desched-provider=kind $(if $(KIND_KUBERNETES),--desched-kubernetes $(KIND_KUBERNETES)) $(PYTEST_ARGS) || rc=$$?; \
	if [ "$$DESCHED_ENGINE_OWN" = yes ] && [ -z "$$DESCHED_KEEP_ENGINE" ]; then \
	  $(PY) -m dev.kind_node stop-engine; \
	elif [ "$$DESCHED_ENGINE_OWN" = yes ]; then \
	  echo "left running: dockerd on $$DOCKER_HOST (DESCHED_KEEP_ENGINE); stop it: $(PY) -m dev.kind_node stop-engine"; fi; \
	exit $$rc

## The runbook's experiments at other Kubernetes versions than the pin (docs/kubernetes-versions.md),
## outside `make test`: each version's control plane is built (and cached) first, ~10-20 min cold.
## Then the combined upgrade canaried: v0.35.1 on COMBINED_FROM against the pin on the pinned
## Kubernetes (tests/e2e/test_kubernetes_version_e2e.py, skipped at any other version).
KUBE_VERSIONS ?= v1.34.4 v1.35.4
COMBINED_FROM := v1.35.4
e2e-kubernetes: tools
	@rc=0; for v in $(KUBE_VERSIONS); do \
	  echo "== the runbook's experiments at Kubernetes $$v"; \
	  $(PYTEST) -m "$(E2E_MARK)" -p no:cacheprovider --desched-kubernetes=$$v $(PYTEST_ARGS) || rc=$$?; \
	done; \
	echo "== the combined upgrade: v0.35.1 on $(COMBINED_FROM) against the pin"; \
	$(PYTEST) "tests/e2e/test_kubernetes_version_e2e.py::test_the_combined_upgrade_is_canaried" \
	  -p no:cacheprovider --desched-kubernetes=$(COMBINED_FROM) $(PYTEST_ARGS) || rc=$$?; \
	exit $$rc
