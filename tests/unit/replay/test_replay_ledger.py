"""The fate ledger from real descheduler v0.36.0 logs, records, and comparisons: no cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.evidence.compare import NOT_COMPARABLE
from pytest_desched.evidence.record import RoundRecord
from pytest_desched.replay.ledger import (
    NOT_PICKED,
    Ledger,
    PodFate,
    compare,
    ledger_from_log,
    ledger_from_record,
    round_fates,
)
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "descheduler-v0.36.0"
LAB = "descheduler-lab/spread-demo-5d48967fdd-"


def _log(name: str) -> str:
    return (DATA / name).read_text()


def test_positive_round_evicted_one_and_the_cap_stopped_the_rest() -> None:
    ledger = ledger_from_log(_log("positive-evicted.log"), "v0.36.0")
    fates = ledger.fates()
    assert fates[f"{LAB}pkdjv"].fate == "evicted" and fates[f"{LAB}pkdjv"].layer == "api-server"
    wv = fates[f"{LAB}wv7ds"]
    assert (wv.fate, wv.layer, wv.detail, wv.inferred) == (
        "limited",
        "eviction-limits",
        "maxNoOfPodsToEvictTotal",
        False,
    )
    # weighed by nodeFit, then the total cap returned from the plugin: maybe never reached
    for pod in ("9lt5j", "kvvkh"):
        f = fates[f"{LAB}{pod}"]
        assert (f.fate, f.layer, f.inferred) == ("undecided", None, True)
        assert "maxNoOfPodsToEvictTotal" in f.detail and "nodeFit weighed it" in f.detail
    fig = ledger.rounds[0]
    assert fig.total_evicted == 1 and fig.by_fate == {"evicted": 1, "limited": 1, "undecided": 2}


@pytest.mark.parametrize(
    ("log", "fate", "layer", "code", "checks"),
    [
        ("pdb-429.log", "refused", "api-server", 429, []),
        ("rbac-403.log", "refused", "api-server", 403, []),
        ("nodefit-prefilter.log", "nodefit", "evictor-prefilter-nodefit", None, ["nodeFit"]),
        ("minpodage-filtered.log", "filtered", "evictor-filter", None, ["minPodAge"]),
        ("pdb-runbook-bug1882.log", "filtered", "evictor-filter", None, ["PodsWithoutPDB"]),
        ("dry-run-candidates.log", "dry-run", "dry-run", None, []),
    ],
)
def test_every_lab_pod_gets_the_layer_its_log_proves(
    log: str, fate: str, layer: str, code: int | None, checks: list[str]
) -> None:
    ledger = ledger_from_log(_log(log), "v0.36.0")
    lab = [r for r in ledger.rows if r.pod.startswith(LAB)]
    assert len(lab) == 3
    for row in lab:
        f = row.fates[0]
        assert (f.fate, f.layer, f.status_code, f.checks) == (fate, layer, code, checks), row
    # the descheduler's own round pod is always a filtered bystander
    own = [r for r in ledger.rows if r.pod.startswith("kube-system/")]
    assert own and all("SystemCriticalPods" in r.fates[0].checks for r in own)


def test_a_skipped_cycle_decides_nothing() -> None:
    ledger = ledger_from_log(_log("dry-run-skipped-mirror-race.log"), "v0.36.0")
    assert ledger.rows == [] and ledger.rounds[0].skipped.startswith("Skipping")


def test_a_log_compared_with_itself_agrees() -> None:
    text = _log("pdb-429.log")
    fates = round_fates(parse_log(text, "v0.36.0"), text)
    c = compare(fates, fates)
    assert c["same_evictions"] and c["same_refusals"] and c["same_fates_up_to_order"]
    assert c["differ"] == []


def test_differences_are_named_with_a_reason() -> None:
    text = _log("positive-evicted.log")
    incident = round_fates(parse_log(text, "v0.36.0"), text)
    replay = dict(incident)
    # the cap cut another pod: same fates up to order, but two pods differ
    replay[f"{LAB}pkdjv"], replay[f"{LAB}wv7ds"] = incident[f"{LAB}wv7ds"], incident[f"{LAB}pkdjv"]
    c = compare(incident, replay, {"versions": {"incident": "v0.36.0", "replay": "v0.36.0"}})
    assert c["same_fates_up_to_order"] and not c["same_evictions"]
    assert {d["pod"] for d in c["differ"]} == {f"{LAB}pkdjv", f"{LAB}wv7ds"}
    assert all("informer order" in d["why"] for d in c["differ"])
    # a 429 where the incident evicted: the PDB budget, with the snapshot's PDB status
    replay[f"{LAB}pkdjv"] = PodFate("refused", "api-server", status_code=429)
    c = compare(
        incident,
        replay,
        {
            "pdbs": {f"{LAB}pkdjv": {"disruptionsAllowed": 0}},
            "versions": {"incident": "v0.35.0", "replay": "v0.36.0"},
        },
    )
    why = next(d["why"] for d in c["differ"] if d["pod"] == f"{LAB}pkdjv")
    assert "PDB budget" in why and "disruptionsAllowed" in why and "v0.35.0" in why
    # pods outside the replay (not restored) are listed, never compared
    c = compare(incident, {}, {"compare_only": set(), "not_restored": {f"{LAB}pkdjv": "a Job pod"}})
    assert c["differ"] == [] and any(
        n["why"] == "not restored: a Job pod" for n in c["not_compared"]
    )


def test_a_quiet_incident_log_compares_only_what_it_can_show() -> None:
    incident = {"a/x": PodFate("evicted", "api-server")}
    replay = {
        "a/x": PodFate("evicted", "api-server"),
        "a/y": PodFate("filtered", "evictor-filter", checks=["DaemonSetPods"]),
    }
    c = compare(incident, replay, incident_verbose=False)  # a -v=3 log never shows filtered pods
    assert c["differ"] == [] and c["same_evictions"]
    assert compare(incident, replay)["differ"][0]["incident"] == NOT_PICKED


def test_ledger_from_a_record_with_and_without_its_log(tmp_path: Path) -> None:
    text = _log("pdb-429.log")
    log = tmp_path / "round.log"
    log.write_text(text)
    rec = RoundRecord.from_round(
        "pdb[workaround]",
        "descheduler-negative-pdb",
        "embedded",
        parse_log(text, "v0.36.0"),
        namespace="descheduler-lab",
        versions={"descheduler": "v0.36.0"},
        caps={"total": 2},
        log_path=str(log),
    ).to_dict()
    path = tmp_path / "round.json"
    path.write_text(json.dumps(rec))
    full = ledger_from_record(path)
    assert full.source == "record" and len(full.rows) == 4  # every namespace, from the log
    assert full.rounds[0].caps == {"total": 2}
    log.unlink()
    lab_only = ledger_from_record(rec)
    assert len(lab_only.rows) == 3 and all(r.fates[0].status_code == 429 for r in lab_only.rows)
    assert "keeps only namespace descheduler-lab" in lab_only.notes[0]


def test_markdown_and_text_show_every_row() -> None:
    ledger = ledger_from_log(_log("positive-evicted.log"), "v0.36.0")
    md, text = ledger.to_markdown(), ledger.to_text()
    for row in ledger.rows:
        assert row.pod in md and row.pod in text
    assert "undecided (inferred)" in md and "| pod | node | owner |" in md


def test_an_eviction_moved_to_another_namespace_is_not_the_same_up_to_order() -> None:
    """Issue 27 hole 8: the old tally counted (fate, code, checks) over the whole cluster, so
    an eviction swapped between prod/web and kube-system/coredns compared as the same."""
    web, dns = "prod/web-7c9d-abcde", "kube-system/coredns-5d78-fghij"
    evicted = PodFate("evicted", "api-server", strategy="PodLifeTime")
    kept = PodFate(NOT_PICKED, "policy")
    ids = {
        web: {"owner": "ReplicaSet/web-7c9d", "node": "n1"},
        dns: {"owner": "ReplicaSet/coredns-5d78", "node": "n2"},
    }
    c = compare({web: evicted, dns: kept}, {web: kept, dns: evicted}, {"identities": ids})
    assert not c["same_fates_up_to_order"]
    got = {(d["identity"]["namespace"], d["identity"]["owner"]): d for d in c["identities_differ"]}
    assert got[("prod", "ReplicaSet/web-7c9d")]["incident"] == [web]
    assert got[("kube-system", "ReplicaSet/coredns-5d78")]["replay"] == [dns]
    assert {d["pod"] for d in c["differ"]} == {web, dns}


def test_a_sibling_cut_by_a_cap_is_the_same_up_to_order_a_pod_on_another_node_is_not() -> None:
    a, b = "prod/web-7c9d-aaaaa", "prod/web-7c9d-bbbbb"
    evicted = PodFate("evicted", "api-server", strategy="PodLifeTime")
    limited = PodFate("limited", "eviction-limits", strategy="PodLifeTime")
    same_node = {p: {"owner": "ReplicaSet/web-7c9d", "node": "n1"} for p in (a, b)}
    c = compare({a: evicted, b: limited}, {a: limited, b: evicted}, {"identities": same_node})
    assert c["same_fates_up_to_order"] and c["identities_differ"] == []
    assert {d["pod"] for d in c["differ"]} == {a, b}  # each pod that differs is still named
    other_node = {**same_node, b: {"owner": "ReplicaSet/web-7c9d", "node": "n2"}}
    c = compare({a: evicted, b: limited}, {a: limited, b: evicted}, {"identities": other_node})
    assert not c["same_fates_up_to_order"] and len(c["identities_differ"]) == 4
    md = Ledger("replay", "v0.36.0", comparison=c).to_markdown()
    assert "prod ReplicaSet/web-7c9d@n2: evicted by PodLifeTime (api-server)" in md


def test_evictions_the_snapshot_no_longer_holds_are_not_comparable_never_same() -> None:
    """Issue 39 case 4: a snapshot taken after the incident lacks the pods it evicted; they
    went to `not_compared` (which ledger.md never printed) and "same evictions" said True."""
    gone = [f"prod/web-7c9d-{i:05d}" for i in range(14)]
    incident = {p: PodFate("evicted", "api-server", strategy="PodLifeTime") for p in gone}
    kept = {"prod/db-0": PodFate(NOT_PICKED, "policy")}
    incident.update(kept)
    ctx = {"compare_only": set(kept), "pods": set(kept)}
    c = compare(incident, dict(kept), ctx)
    assert c["same_evictions"] == NOT_COMPARABLE
    assert c["same_fates_up_to_order"] == NOT_COMPARABLE
    assert c["coverage"]["evicted"]["line"] == "compared 0 of 14 evicted pods: not comparable"
    assert c["coverage"]["pods"]["line"] == "compared 1 of 15 pods"
    md = Ledger("replay", "v0.36.0", comparison=c).to_markdown()
    assert "- same evictions: not comparable (compared 0 of 14 evicted pods: not comparable)" in md
    assert "## Not compared (14 pods)" in md
    assert f"- `{gone[0]}` evicted: not in the snapshot" in md
    # half of them compared: the answer holds over those, and says how much that was
    ctx = {"compare_only": set(kept) | set(gone[:7])}
    c = compare(incident, {**kept, **{p: incident[p] for p in gone[:7]}}, ctx)
    assert c["same_evictions"] is True
    assert c["coverage"]["evicted"]["line"] == "compared 7 of 14 evicted pods"


def test_identity_counts_skip_what_a_quiet_log_cannot_show_as_differ_does() -> None:
    """Issue 39: `identities_differ` ignored the incident_verbose rule `differ` applies, so a
    -v=3 incident log 'differed' by every pod the replay's evictor filtered."""
    incident = {"a/x": PodFate("evicted", "api-server")}
    replay = {
        "a/x": PodFate("evicted", "api-server"),
        "a/y": PodFate("filtered", "evictor-filter", checks=["DaemonSetPods"]),
    }
    ids = {p: {"owner": "DaemonSet/agent", "node": "n1"} for p in ("a/x", "a/y")}
    c = compare(incident, replay, {"identities": ids}, incident_verbose=False)
    assert c["identities_differ"] == [] and c["same_fates_up_to_order"] is True
    assert not compare(incident, replay, {"identities": ids})["same_fates_up_to_order"]


def test_a_skipped_replay_round_is_not_comparable_even_when_nothing_was_evicted() -> None:
    """A replay round skipped ('requires >=2 nodes') decided nothing: an incident that evicted
    nothing is not 'the same' as it."""
    quiet = {"prod/db-0": PodFate(NOT_PICKED, "policy")}
    skipped = {"prod/db-0": PodFate("round-skipped", None, "requires >=2 nodes")}
    assert compare(quiet, skipped)["same_evictions"] is True  # the two sides alone
    c = compare(quiet, skipped, {"skipped": {"replay": "requires >=2 nodes"}})
    assert c["same_evictions"] == NOT_COMPARABLE == c["same_fates_up_to_order"]
    assert c["not_compared"] == [
        {"pod": "(replay round)", "fate": "", "why": "skipped: requires >=2 nodes"}
    ]
