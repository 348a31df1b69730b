"""The runbook's experiments on the session cluster: `make e2e`, `pytest -m descheduler_e2e`.

Exactly the runbook's three stages (positive, nodefit, pdb), each with the runbook's policy
and with the pdb-lister workaround; everything else the project checks about itself is
`desched_selftest` (in `make test`). tests/unit/test_e2e_selection.py keeps it that way.
"""

from __future__ import annotations

import pytest

from pytest_desched.experiments import BUG_1882, KnownUpstreamBug

pytestmark = pytest.mark.descheduler_e2e

RUNBOOK_XFAIL = pytest.mark.xfail(raises=KnownUpstreamBug, strict=True, reason=BUG_1882)


@RUNBOOK_XFAIL
def test_positive_affinity_migration_runbook_policy(desched_experiment):
    desched_experiment("positive", variant="runbook")


def test_positive_affinity_migration(desched_experiment):
    res = desched_experiment("positive", variant="pdb-lister-workaround")
    assert res.evictions == 1
    assert res.ready_latency_s is not None


@RUNBOOK_XFAIL
def test_negative_nodefit_runbook_policy(desched_experiment):
    desched_experiment("nodefit", variant="runbook")


def test_negative_nodefit(desched_experiment):
    res = desched_experiment("nodefit", variant="pdb-lister-workaround")
    assert res.evictions == 0
    assert res.blocking_layer == "evictor-prefilter-nodefit"


@RUNBOOK_XFAIL
def test_negative_pdb_runbook_policy(desched_experiment):
    desched_experiment("pdb", variant="runbook")


def test_negative_pdb(desched_experiment):
    res = desched_experiment("pdb", variant="pdb-lister-workaround")
    assert res.evictions == 0
    assert res.blocking_layer == "api-server"


@pytest.mark.desched_selftest  # not a runbook stage: `make test` runs it, `make e2e` does not
def test_minpodage_protects_young_pods(desched_experiment):
    res = desched_experiment("minpodage")
    assert res.evictions == 0
    assert res.blocking_layer == "evictor-filter"
