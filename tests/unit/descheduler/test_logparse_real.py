"""The parser against real descheduler v0.36.0 logs (golden data from the e2e suite)."""

from __future__ import annotations

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer
from pytest_desched.descheduler.logparse import parse_log
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "descheduler-v0.36.0"
LAB = "descheduler-lab"


def load(name: str):
    r = parse_log((DATA / name).read_text())
    assert r.unparsed == 0, f"{name}: {r.unparsed} unparsed lines"
    return r


def test_positive_one_eviction_then_the_cap():
    r = load("positive-evicted.log")
    ev = r.by_fate(Fate.EVICTED, LAB)
    assert len(ev) == 1 and ev[0].strategy == "RemovePodsViolatingNodeAffinity"
    assert ev[0].layer == Layer.API_SERVER and ev[0].node
    lim = r.by_fate(Fate.LIMITED, LAB)
    assert lim and all(d.layer == Layer.LIMITS for d in lim)
    assert r.total_evicted == 1 and not r.dry_run


@pytest.mark.parametrize(
    "name",
    ["positive-runbook-bug1882.log", "nodefit-runbook-bug1882.log", "pdb-runbook-bug1882.log"],
)
def test_runbook_policy_rounds_show_the_bug_1882_signature(name):
    r = load(name)
    lab = r.in_namespace(LAB)
    assert lab and all(d.fate == Fate.FILTERED and d.checks == ["PodsWithoutPDB"] for d in lab)
    assert "*v1.PodDisruptionBudget" not in (DATA / name).read_text()
    assert r.total_evicted == 0


def test_nodefit_stops_every_pod_at_prefilter():
    lab = load("nodefit-prefilter.log").in_namespace(LAB)
    assert len(lab) == 3 and all(
        d.fate == Fate.NODEFIT and d.layer == Layer.EVICTOR_NODEFIT for d in lab
    )


def test_pdb_refusals_are_429_at_the_api_server():
    r = load("pdb-429.log")
    lab = r.in_namespace(LAB)
    assert lab and all(d.fate == Fate.REFUSED and d.status_code == 429 for d in lab)
    assert all(d.layer == Layer.API_SERVER for d in lab)


def test_rbac_refusals_are_403_naming_the_service_account():
    lab = load("rbac-403.log").in_namespace(LAB)
    assert lab and all(d.fate == Fate.REFUSED and d.status_code == 403 for d in lab)
    assert "system:serviceaccount:kube-system:" in (lab[0].message or "")


def test_minpodage_is_the_failing_check():
    lab = load("minpodage-filtered.log").in_namespace(LAB)
    assert len(lab) == 3 and all(d.checks == ["minPodAge"] for d in lab)


def test_dry_run_candidates_and_the_mirror_race_skip():
    r = load("dry-run-candidates.log")
    assert r.dry_run and len(r.by_fate(Fate.DRY_RUN, LAB)) == 3 and not r.by_fate(Fate.EVICTED)
    skipped = load("dry-run-skipped-mirror-race.log")
    assert skipped.dry_run and skipped.skipped and "found=0" in skipped.skipped
    assert not skipped.decisions
