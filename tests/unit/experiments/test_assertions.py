"""The ready-made assertions: each holds on the evidence it should, fails on any other, says
what it saw, and an empty selection never passes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer, PodDecision
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.experiments import STRATEGY_EXPERIMENTS, ExperimentContext
from pytest_desched.experiments import assertions as A
from pytest_desched.experiments.results import ExperimentResult
from pytest_desched.lab.recorder import Recorder
from pytest_desched.lab.snapshot import PodInfo, Snapshot

NS = "descheduler-lab"


def pod(name: str, node: str | None = "w1", workload: str = "dup", **kw: Any) -> PodInfo:
    base = {
        "name": name,
        "uid": f"uid-{name}",
        "node": node,
        "phase": "Running",
        "ready": True,
        "owner": f"{workload}-rs",
        "deleting": False,
        "start_time": None,
        "namespace": NS,
        "owner_kind": "ReplicaSet",
        "workload": workload,
    }
    return PodInfo(**{**base, **kw})


def snap(*pods: PodInfo) -> Snapshot:
    return Snapshot(0.0, list(pods))


def view(
    before: Snapshot,
    after: Snapshot,
    decisions: list[PodDecision],
    codes: dict[str, list[int]] | None = None,
    audit: bool = True,
    rec: Recorder | None = None,
) -> Any:
    return SimpleNamespace(
        before=before,
        after=after,
        decisions=decisions,
        refused_by_api={(k if "/" in k else f"{NS}/{k}"): v for k, v in (codes or {}).items()},
        audit={"available": audit},
        rnd=SimpleNamespace(name="descheduler-probe"),
        rec=rec or Recorder(),
        extra={},
    )


def evicted_decision(name: str, strategy: str = "RemoveDuplicates") -> PodDecision:
    return PodDecision(NS, name, Fate.EVICTED, Layer.API_SERVER, node="w1", strategy=strategy)


def filtered(name: str, *checks: str) -> PodDecision:
    return PodDecision(NS, name, Fate.FILTERED, Layer.EVICTOR_FILTER, checks=list(checks))


# Four duplicates on w1; a and b evicted (201 each); c and d kept; two `few` pods filtered.
A_, B, C, D = (pod(n) for n in "abcd")
F1, F2 = pod("f1", workload="few"), pod("f2", workload="few")
BEFORE = snap(A_, B, C, D, F1, F2)
AFTER = snap(C, D, F1, F2, pod("e", node="w2"), pod("g", node="w3"))
DECISIONS = [
    evicted_decision("a"),
    evicted_decision("b"),
    filtered("f1", "minReplicas"),
    filtered("f2", "minReplicas"),
]
GOOD = view(BEFORE, AFTER, DECISIONS, {"a": [201], "b": [201]})


def ledger(v: Any = GOOD) -> A.Ledger:
    return A.Ledger.of(v)


def test_the_ledger_joins_log_audit_and_uids_per_pod() -> None:
    rows = {r.name: r for r in ledger().pods}
    assert set(rows) == {"a", "b", "c", "d", "f1", "f2"}
    assert (rows["a"].fate, rows["a"].deciding, rows["a"].audit_codes, rows["a"].live_after) == (
        "evicted",
        "api-server(evicted)",
        (201,),
        False,
    )
    assert (rows["c"].fate, rows["c"].deciding) == ("not-picked", "policy")
    assert rows["f1"].checks == ("minReplicas",) and rows["f1"].deciding == "evictor-filter"
    assert ledger().to_dict()["pods"][0]["name"] == "a"


def test_evicted_holds_and_fails_with_what_it_saw() -> None:
    lg = ledger()
    assert A.evicted(lg, workload="dup", count=2, strategy="RemoveDuplicates").ok
    assert A.evicted(lg, pods=["a", "b"]).ok
    wrong_count = A.evicted(lg, workload="dup", count=3)
    assert not wrong_count.ok and "2 of 4 evicted" in wrong_count.detail
    assert "(a@w1 evicted" in wrong_count.detail
    assert not A.evicted(lg, workload="dup", count=2, strategy="PodLifeTime").ok
    assert not A.evicted(lg, workload="dup").ok  # "all" of dup: c and d were kept


def test_evicted_needs_the_api_servers_201_when_it_has_an_audit_log() -> None:
    no_201 = view(BEFORE, AFTER, DECISIONS, {"a": [201]})  # b: the log claims, audit does not
    assert not A.evicted(ledger(no_201), workload="dup", count=2).ok
    no_audit = view(BEFORE, AFTER, DECISIONS, {}, audit=False)
    assert A.evicted(ledger(no_audit), workload="dup", count=2).ok


def test_evicted_needs_the_uid_gone() -> None:
    still_there = view(BEFORE, snap(A_, B, C, D, F1, F2), DECISIONS, {"a": [201], "b": [201]})
    check = A.evicted(ledger(still_there), workload="dup", count=2)
    assert not check.ok and "live" in check.detail


def test_kept_and_decided_by() -> None:
    lg = ledger()
    assert A.kept(lg, workload="few").ok
    assert A.kept(lg, pods=["c", "d"]).ok
    assert not A.kept(lg, workload="dup").ok
    assert A.decided_by(lg, "evictor-filter", workload="few", checks=["minReplicas"]).ok
    assert A.decided_by(lg, "policy", pods=["c", "d"]).ok
    wrong = A.decided_by(lg, "evictor-filter", workload="few", checks=["PodsWithLocalStorage"])
    assert not wrong.ok and "checks=['minReplicas']" in wrong.detail
    assert not A.decided_by(lg, "policy", workload="dup").ok


@pytest.mark.parametrize(
    "check",
    [
        lambda lg: A.evicted(lg, workload="nope"),
        lambda lg: A.kept(lg, workload="nope"),
        lambda lg: A.decided_by(lg, "policy", pods=["nope"]),
        lambda lg: A.refused(lg, workload="nope", count=0),
    ],
)
def test_an_empty_selection_never_passes(check: Any) -> None:
    c = check(ledger())
    assert not c.ok and "no such pod" in c.detail


def test_eviction_count_by_strategy_and_audit() -> None:
    lg = ledger()
    assert A.eviction_count(lg, 2, "RemoveDuplicates").ok
    assert A.eviction_count(lg, 2).ok
    assert not A.eviction_count(lg, 1).ok
    other = A.eviction_count(lg, 2, "LowNodeUtilization")
    assert not other.ok and "0 by LowNodeUtilization" in other.detail.replace("(", "")
    three_201 = view(BEFORE, AFTER, DECISIONS, {"a": [201], "b": [201], "c": [201]})
    assert not A.eviction_count(ledger(three_201), 2).ok  # the API server saw one more


# Real lines of a v0.36.0 round (RemoveDuplicates, PDB minAvailable 4): two 429s.
REFUSED_LOG = "\n".join(
    [
        '{"ts":1,"caller":"removeduplicates/removeduplicates.go:111","msg":"Processing node",'
        '"plugin":"RemoveDuplicates","ExtensionPoint":"Balance","v":2,"node":{"name":"w1"}}',
        '{"ts":2,"caller":"evictions/evictions.go:560","msg":"Error evicting pod","pod":{"name":'
        '"c","namespace":"descheduler-lab"},"reason":"","err":"error when evicting pod '
        '(ignoring) \\"c\\": Cannot evict pod as it would violate the pod\'s disruption budget."}',
        '{"ts":3,"caller":"evictions/evictions.go:560","msg":"Error evicting pod","pod":{"name":'
        '"d","namespace":"descheduler-lab"},"reason":"","err":"error when evicting pod '
        '(ignoring) \\"d\\": Cannot evict pod as it would violate the pod\'s disruption budget."}',
        '{"ts":4,"caller":"descheduler/descheduler.go:252","msg":"Number of evictions/requests",'
        '"v":1,"totalEvicted":0,"evictionRequests":0}',
    ]
)


def test_refused_from_a_real_log() -> None:
    decisions = parse_log(REFUSED_LOG).in_namespace(NS)
    before = snap(A_, B, C, D)
    v = view(before, before, decisions, {"c": [429], "d": [429]})
    lg = ledger(v)
    assert A.refused(lg, workload="dup", count=2, code=429).ok
    assert A.decided_by(lg, "api-server", pods=["c", "d"]).ok
    assert A.kept(lg, workload="dup").ok
    assert A.eviction_count(lg, 0).ok
    assert not A.refused(lg, workload="dup", count=2, code=403).ok
    no_audit_429 = view(before, before, decisions, {"c": [429]})
    assert not A.refused(ledger(no_audit_429), workload="dup", count=2).ok


def test_skew_counts_empty_domains() -> None:
    domains = {"w1": "zone-a", "w2": "zone-b", "w3": "zone-c"}
    balanced = snap(pod("x", "w1"), pod("y", "w2"), pod("z", "w3"))
    assert A.skew(balanced, domains, 1, workload="dup").ok
    crowded = snap(pod("x", "w1"), pod("y", "w1"), pod("z", "w2"))
    c = A.skew(crowded, domains, 1, workload="dup")
    assert not c.ok and "'zone-c': 0" in c.detail and "skew 2" in c.detail
    assert not A.skew(snap(), domains, 1, workload="dup").ok  # nothing to measure
    astray = snap(pod("x", "w1"), pod("y", "w9"))
    assert not A.skew(astray, domains, 5, workload="dup").ok


def test_pods_per_node_nothing_pending_replaced() -> None:
    s = snap(pod("x", "w1"), pod("y", "w1"), pod("z", "w2"))
    assert A.pods_per_node(s, {"w1": 2, "w2": 1, "w3": 0}, workload="dup").ok
    assert not A.pods_per_node(s, {"w1": 3}, workload="dup").ok
    assert A.nothing_pending(s).ok
    pending = snap(pod("p", None, phase="Pending", ready=False))
    c = A.nothing_pending(pending)
    assert not c.ok and "'p'" in c.detail
    before = snap(pod("x", "w1"))
    after = snap(pod("n", "w2"), pod("m", "w1"))
    assert A.replaced(before, after, workload="dup", count=2).ok
    r = A.replaced(before, after, workload="dup", count=2, avoid=["w1"])
    assert not r.ok and "('m', 'w1', True)" in r.detail


def test_pdb_never_below_desired() -> None:
    rec = Recorder()
    assert not A.pdb_never_below_desired(rec).ok  # no status seen: nothing proven
    rec.pdb_statuses = [(1.0, 4, 4, 0), (2.0, 4, 4, 0)]
    rec.pdb_by_name = {f"{NS}/dup": list(rec.pdb_statuses)}
    assert A.pdb_never_below_desired(rec).ok
    rec.pdb_by_name[f"{NS}/other"] = [(3.0, 1, 2, 0)]
    rec.pdb_statuses.append((3.0, 1, 2, 0))
    c = A.pdb_never_below_desired(rec)
    assert not c.ok and "other" in c.detail


def test_expect_records_each_check_and_require_raises() -> None:
    runner = SimpleNamespace(result=ExperimentResult("probe", "own-policy"))
    e = A.Expect(runner, GOOD)  # type: ignore[arg-type]
    assert e.evicted(workload="dup", count=2)
    assert not e.kept(workload="dup")
    assert [c.id for c in runner.result.checks] == ["evicted:dup", "kept:dup"]
    assert [c.id for c in runner.result.failed] == ["kept:dup"]
    A.require(*[c for c in runner.result.checks if c.ok])
    with pytest.raises(AssertionError, match=r"\[kept:dup\].*\(a@w1 evicted"):
        A.require(*runner.result.checks)


# -- the strategy experiments' own policies (what the assertions are run against) ---------------
@pytest.mark.policycheck
@pytest.mark.parametrize("name", STRATEGY_EXPERIMENTS)
def test_each_strategy_experiment_runs_a_valid_policy_of_its_own(name: str) -> None:
    from pytest_desched.experiments import REGISTRY, lab_policy
    from pytest_desched.experiments.strategies.base import OWN_POLICY, SAFETY_CAP

    override = ("maxNoOfPodsToEvictPerNode", 3, "caller override")
    caller = lab_policy("pdb-lister-workaround").override(override[0], override[1], why=override[2])
    namespaces = [SimpleNamespace(metadata=SimpleNamespace(name=n)) for n in (NS, "kube-system")]
    cluster = SimpleNamespace(
        lab_node_selector=None,
        core=SimpleNamespace(list_namespace=lambda: SimpleNamespace(items=namespaces)),
        workers=["w1", "w2", "w3"],
    )
    built = ExperimentContext(  # type: ignore[arg-type]
        cluster=cluster, release=None, policy=caller, source="w1", target="w2", namespace=NS
    )
    runner = SimpleNamespace(
        ctx=built, result=ExperimentResult(name, "pdb-lister-workaround"), lab=None
    )
    cls = REGISTRY[name]
    exp = cls(runner)  # type: ignore[arg-type]
    ctx = runner.ctx
    pol = ctx.policy
    assert exp.ctx is ctx is not built  # the experiment's copy (Experiment.policy_for) ...
    assert (built.policy, built.policy_label) == (caller, None)  # ... the caller's is as built
    assert runner.result.variant == ctx.policy_label == OWN_POLICY
    (profile,) = pol.to_dict()["profiles"]
    assert [p["name"] for p in profile["pluginConfig"]] == ["DefaultEvictor", cls.strategy]
    args = pol.plugin_args(cls.strategy)
    scoped = (  # held to the lab: by namespace, or (exclude) by namespace and label selector
        args.get("namespaces") == {"include": [NS]}
        or args.get("evictableNamespaces") == {"exclude": ["kube-system"]}
        or (args.get("namespaces", {}).get("exclude") and args.get("labelSelector"))
    )
    assert scoped, args
    assert pol.limits == {"node": 3, "namespace": None, "total": SAFETY_CAP}
    assert [(o["path"], o["new"], o["why"]) for o in pol.overrides] == [override]
    module_doc = __import__(cls.__module__, fromlist=["_"]).__doc__ or ""
    assert cls.upstream and "irrors" in module_doc  # says which upstream test it mirrors
