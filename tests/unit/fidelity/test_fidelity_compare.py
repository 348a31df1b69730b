"""Dry-run fidelity's comparison: pairing by namespace-relative identity, and each explanation
proven or the difference left unexplained (a failing verdict)."""

from __future__ import annotations

from dataclasses import replace

from pytest_desched.descheduler.decisions import FATE_LAYER, Fate, PodDecision
from pytest_desched.descheduler.known_bugs import PROOF_1917_SETTLED
from pytest_desched.evidence import compare as core
from pytest_desched.fidelity.compare import (
    BUG_1917,
    Budget,
    Half,
    PodRef,
    compare,
    fates_of,
    identity_of,
    table_rows,
)
from pytest_desched.fidelity.explain import NOT_COMPARABLE as FIDELITY_NOT_COMPARABLE

SRC, DST = "worker-0", "worker-1"
SA = "system:serviceaccount:kube-system:descheduler"
RBAC_403 = (
    f'pods "spread-demo-b0" is forbidden: User "{SA}" cannot create resource "pods/eviction" '
    'in API group "" in the namespace "lab-b"'
)
NA = "strategy-x"
CAPS = {"node": 1, "namespace": 1, "total": 2}


def _pods(ns: str, n: int = 3, node: str = SRC, workload: str = "spread-demo") -> list[PodRef]:
    return [
        PodRef(f"{ns}/{workload}-{ns[-1]}{i}", identity_of(ns, ns, workload, None, "x"), node, ns)
        for i in range(n)
    ]


def _d(
    pod: PodRef, fate: Fate, code: int | None = None, strategy: str = NA, message: str = ""
) -> PodDecision:
    ns, name = pod.key.split("/")
    return PodDecision(
        ns, name, fate, FATE_LAYER[fate], pod.node, strategy, status_code=code, message=message
    )


def _guarded(pods: list[PodRef], allowed: int | None = 0, pdb: str = "lab-pdb") -> list[PodRef]:
    """The pods with a PDB selecting them, at `allowed` disruptions before the round."""
    return [replace(p, budgets=(Budget(f"{p.namespace}/{pdb}", allowed),)) for p in pods]


def _half(mode, pods, decisions, **kw) -> Half:  # type: ignore[no-untyped-def]
    return Half(mode, fates_of(pods, decisions, mode), caps=kw.pop("caps", CAPS), **kw)


def test_identical_halves_in_two_namespaces_pair_by_identity() -> None:
    """Positive: one would-be eviction and two capped, the same in a real round elsewhere."""
    dp, rp = _pods("lab-a"), _pods("lab-b")
    dry = _half(
        "dry-run", dp, [_d(dp[0], Fate.DRY_RUN), _d(dp[1], Fate.LIMITED), _d(dp[2], Fate.LIMITED)]
    )
    # the real run picked another of the interchangeable pods first
    real = _half(
        "real", rp, [_d(rp[2], Fate.EVICTED), _d(rp[0], Fate.LIMITED), _d(rp[1], Fate.LIMITED)]
    )
    res = compare(dry, real)
    assert res.ok and not res.differences
    assert {r.identity for r in res.rows} == {"<lab>/spread-demo"}
    assert res.line() == "dry-run predicted 1 of 1 real evictions; 0 differences, each explained"


def test_pdb_at_zero_disruptions_is_the_429_layer_and_the_caps() -> None:
    """#1805: dry run evicts one (its cap then stops two); for real each gets 429."""
    dp, rp = _pods("lab-a"), _pods("lab-b")
    dry = _half(
        "dry-run", dp, [_d(dp[0], Fate.DRY_RUN), _d(dp[1], Fate.LIMITED), _d(dp[2], Fate.LIMITED)]
    )
    real = _half(
        "real",
        _guarded(rp),
        [_d(p, Fate.REFUSED, 429) for p in rp],
        pdb_disruptions_allowed=0,
    )
    res = compare(dry, real)
    assert res.ok, res.to_dict()
    assert sorted(r.explained_by for r in res.differences) == [
        "api-server(pdb-429)",
        "eviction-limits",
        "eviction-limits",
    ]
    caps = next(r for r in res.differences if r.explained_by == "eviction-limits")
    assert "maxNoOfPodsToEvictPerNode=1" in caps.proof and "by 0 in the real half" in caps.proof
    assert res.line() == "dry-run predicted 0 of 0 real evictions; 3 differences, each explained"
    assert {t["REAL"] for t in table_rows(res)} == {"refused(429)"}


def test_a_429_without_a_pdb_is_not_explained() -> None:
    dp, rp = _pods("lab-a", 1), _pods("lab-b", 1)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN)])
    real = _half("real", rp, [_d(rp[0], Fate.REFUSED, 429)], pdb_disruptions_allowed=None)
    res = compare(dry, real)
    assert not res.ok and len(res.unexplained) == 1
    assert res.line().endswith("1 difference, 1 unexplained")
    assert table_rows(res)[0]["EXPLAINED BY"] == "UNEXPLAINED"


def test_a_difference_no_layer_explains_fails() -> None:
    """Dry run said evict; the real run filtered the pod: no hidden layer does that."""
    dp, rp = _pods("lab-a", 1), _pods("lab-b", 1)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN)])
    real = _half("real", rp, [_d(rp[0], Fate.FILTERED)], pdb_disruptions_allowed=0)
    res = compare(dry, real)
    assert not res.ok
    assert res.unexplained[0].dry.fate == "evicted" and res.unexplained[0].real.fate == "filtered"


def test_a_different_strategy_is_a_difference() -> None:
    dp, rp = _pods("lab-a", 1), _pods("lab-b", 1)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN, strategy="A")])
    real = _half("real", rp, [_d(rp[0], Fate.EVICTED, strategy="B")])
    res = compare(dry, real)
    assert not res.ok and res.predicted == 0 and res.real_evictions == 1


def test_a_different_node_is_a_difference() -> None:
    dp, rp = _pods("lab-a", 1, node=SRC), _pods("lab-b", 1, node=DST)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN)])
    real = _half("real", rp, [_d(rp[0], Fate.EVICTED)])
    res = compare(dry, real)
    assert len(res.unexplained) == 2  # each half's pod has no counterpart on its node
    assert {(r.dry is None, r.real is None) for r in res.unexplained} == {
        (True, False),
        (False, True),
    }


def test_403_is_the_rbac_layer() -> None:
    dp, rp = _pods("lab-a", 1), _pods("lab-b", 1)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN)])
    real = _half("real", rp, [_d(rp[0], Fate.REFUSED, 403, message=RBAC_403)])
    res = compare(dry, real)
    assert res.ok and res.differences[0].explained_by == "api-server(rbac-403)"


def test_caps_the_other_way_round() -> None:
    """Dry run's cap went to a pod the PDB protects for real; for real the next one is evicted."""
    pa = _pods("lab-a", 1, workload="guarded") + _pods("lab-a", 1, node=DST, workload="free")
    pb = _pods("lab-b", 1, workload="guarded") + _pods("lab-b", 1, node=DST, workload="free")
    dry = _half("dry-run", pa, [_d(pa[0], Fate.DRY_RUN), _d(pa[1], Fate.LIMITED)])
    real = _half(
        "real",
        _guarded(pb[:1]) + pb[1:],  # the PDB selects the guarded workload only
        [_d(pb[0], Fate.REFUSED, 429), _d(pb[1], Fate.EVICTED)],
        pdb_disruptions_allowed=0,
    )
    res = compare(dry, real)
    assert res.ok, [r.to_dict() for r in res.unexplained]
    free = next(r for r in res.rows if r.identity == "<lab>/free")
    assert (
        free.explained_by == "eviction-limits" and "maxNoOfPodsToEvictPerNamespace=1" in free.proof
    )
    assert res.predicted == 0 and res.real_evictions == 1


def test_caps_are_not_an_excuse_when_the_other_half_filled_them_too() -> None:
    dp, rp = _pods("lab-a", 2), _pods("lab-b", 2)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN), _d(dp[1], Fate.LIMITED)])
    real = _half("real", rp, [_d(rp[0], Fate.EVICTED), _d(rp[1], Fate.EVICTED)], caps={"total": 1})
    res = compare(dry, real)
    assert not res.ok  # the real run evicted two under a cap of one: no cap explains that


def test_pending_after_eviction_is_the_scheduler_layer() -> None:
    dp, rp = _pods("lab-a", 1), _pods("lab-b", 1)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN)])
    real = _half(
        "real", rp, [_d(rp[0], Fate.EVICTED)], pending={"<lab>/spread-demo": ("spread-demo-new",)}
    )
    res = compare(dry, real)
    assert res.ok and len(res.differences) == 1
    assert res.differences[0].explained_by == "scheduler"
    assert res.predicted == 1 and res.real_evictions == 1


def test_1917_only_with_its_signature() -> None:
    dp, rp = _pods("lab-a", 2), _pods("lab-b", 2)
    real = _half("real", rp, [_d(rp[0], Fate.EVICTED), _d(rp[1], Fate.EVICTED)])
    bare = _half("dry-run", dp, [])
    assert len(compare(bare, real).unexplained) == 2  # an empty dry run alone proves nothing
    proven = _half("dry-run", dp, [], signatures={BUG_1917: "the evidence"})
    res = compare(proven, real)
    assert res.ok and {r.explained_by for r in res.differences} == {BUG_1917}
    assert res.line() == "dry-run predicted 0 of 2 real evictions; 2 differences, each explained"


def test_a_pod_named_twice_keeps_its_furthest_fate() -> None:
    dp = _pods("lab-a", 1)
    fates = fates_of(dp, [_d(dp[0], Fate.FILTERED), _d(dp[0], Fate.DRY_RUN)], "dry-run")
    assert fates[0].fate == "evicted"
    assert fates_of(dp, [_d(dp[0], Fate.EVICTED)], "dry-run")[0].fate == "error"


def test_pdb_at_zero_as_v0_36_0_logs_it() -> None:
    """v0.36.0's dry run: one would-be eviction fills the node cap, the next pod is limited
    and the strategy stops walking the node (the third is named nowhere); for real: 3 x 429."""
    dp, rp = _pods("lab-a"), _pods("lab-b")
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN), _d(dp[1], Fate.LIMITED)])
    real = _half(
        "real", _guarded(rp), [_d(p, Fate.REFUSED, 429) for p in rp], pdb_disruptions_allowed=0
    )
    res = compare(dry, real)
    assert res.ok, [r.to_dict() for r in res.unexplained]
    unnamed = next(r for r in res.rows if r.dry.fate == "not-picked")
    assert unnamed.explained_by == "eviction-limits" and "stopped there" in unnamed.proof


def test_untouched_is_not_a_cap_without_a_limited_pod_in_its_scope() -> None:
    dp, rp = _pods("lab-a", 2), _pods("lab-b", 2)
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN)])
    real = _half(
        "real", _guarded(rp), [_d(p, Fate.REFUSED, 429) for p in rp], pdb_disruptions_allowed=0
    )
    res = compare(dry, real)
    assert [r.dry.fate for r in res.unexplained] == ["not-picked"]


def _settled(pods, decisions):  # type: ignore[no-untyped-def]
    return fates_of(pods, decisions, "dry-run")


def test_1917_proven_by_the_settled_cycle_then_the_429() -> None:
    """The Job's cycle saw no pod (incomplete mirror); the same binary's settled cycle on the
    unchanged lab predicts evict + limited; against the real 429s those are hidden layers."""
    dp, rp = _pods("lab-a"), _pods("lab-b")
    settled = _settled(dp, [_d(dp[0], Fate.DRY_RUN), _d(dp[1], Fate.LIMITED)])
    dry = _half("dry-run", dp, [], settled=settled, settled_how="3 cycles")
    real = _half(
        "real", _guarded(rp), [_d(p, Fate.REFUSED, 429) for p in rp], pdb_disruptions_allowed=0
    )
    res = compare(dry, real)
    assert res.ok, [r.to_dict() for r in res.unexplained]
    assert {r.explained_by for r in res.differences} == {
        f"{BUG_1917}, then api-server(pdb-429)",
        f"{BUG_1917}, then eviction-limits",
    }
    assert all(r.proof.count(PROOF_1917_SETTLED) == 1 for r in res.differences)


def test_the_settled_cycle_excuses_nothing_it_does_not_predict() -> None:
    dp, rp = _pods("lab-a", 1), _pods("lab-b", 1)
    same = _settled(dp, [])  # the settled cycle names the pod nowhere either: not the mirror
    dry = _half("dry-run", dp, [], settled=same, settled_how="3 cycles")
    real = _half("real", rp, [_d(rp[0], Fate.EVICTED)])
    assert not compare(dry, real).ok
    wrong = _settled(dp, [_d(dp[0], Fate.FILTERED)])  # got further, yet still not the real fate
    dry = _half("dry-run", dp, [], settled=wrong, settled_how="3 cycles")
    assert not compare(dry, real).ok


def test_1882_in_the_real_round_explains_what_dry_run_predicted() -> None:
    """The runbook's policy at v0.36.0: the dry run's mirror PDB lister works, so it predicts
    an eviction; the real run filters every pod by PodsWithoutPDB (#1882, proven)."""
    from dataclasses import replace

    dp, rp = _pods("lab-a"), _pods("lab-b")
    dry = _half("dry-run", dp, [_d(dp[0], Fate.DRY_RUN), _d(dp[1], Fate.LIMITED)])
    filtered = [replace(_d(p, Fate.FILTERED), checks=["PodsWithoutPDB"]) for p in rp]
    unproven = _half("real", rp, filtered)
    assert len(compare(dry, unproven).unexplained) == 3  # no signature: no excuse
    real = _half("real", rp, filtered, signatures={"descheduler#1882": "every pod filtered"})
    res = compare(dry, real)
    assert res.ok and {r.explained_by for r in res.differences} == {"descheduler#1882"}
    other = [replace(_d(p, Fate.FILTERED), checks=["minReplicas"]) for p in rp]
    wrong = _half("real", rp, other, signatures={"descheduler#1882": "x"})
    assert not compare(dry, wrong).ok  # another check is not the bug's


def test_a_probe_that_found_no_complete_cycle_is_named_in_the_verdict() -> None:
    """No settled cycle (the probe's time ran out, or it cannot run on this provider): the
    difference stays unexplained and the line and the row say why #1917 is not proven."""
    dp, rp = _pods("lab-a", 1), _pods("lab-b", 1)
    real = _half("real", rp, [_d(rp[0], Fate.EVICTED)])
    for how in (
        "no complete dry-run cycle in 120s: ... named [5, 10, 0, 7] of its 17 pods",
        "the dry-run mirror probe did not run: the kind provider runs round pods from images",
    ):
        res = compare(_half("dry-run", dp, [], settled_how=how), real)
        assert not res.ok
        assert res.line() == (
            "dry-run predicted 0 of 1 real evictions; 1 difference, 1 unexplained "
            f"({BUG_1917} not proven: {how})"
        )
        assert res.unexplained[0].proof.startswith("UNEXPLAINED: no hidden layer")
        assert res.to_dict()["mirror_probe"] == how
    plain = compare(_half("dry-run", dp, []), real)  # the probe was not asked: no words on it
    assert plain.line().endswith("1 unexplained") and plain.unexplained[0].proof == ""


def test_pods_are_paired_by_the_comparison_cores_identity() -> None:
    """The halves' pods carry random names of their own; fidelity pairs them by the core's
    identity (evidence/compare.identity_of: owner kept, a controller's name dropped, a bare
    pod's own name kept) and says "not comparable" in its words, so a fix there lands here."""
    dry = identity_of("lab-a", "lab-a", None, "ReplicaSet/web-7d4f9c8b6", "web-7d4f9c8b6-x2kq9")
    real = identity_of("lab-b", "lab-b", None, "ReplicaSet/web-7d4f9c8b6", "web-7d4f9c8b6-q8wzt")
    ident = core.identity_of("<lab>/web-7d4f9c8b6-q8wzt", owner="ReplicaSet/web-7d4f9c8b6")
    assert dry == real == f"{ident.namespace}/{ident.owner}" == "<lab>/ReplicaSet/web-7d4f9c8b6"
    assert identity_of("lab-a", "lab-a", None, None, "bare") == "<lab>/bare"
    a, b = (
        PodRef("lab-a/web-x2kq9", dry, SRC, "lab-a"),
        PodRef("lab-b/web-q8wzt", real, SRC, "lab-b"),
    )
    result = compare(
        Half("dry-run", fates_of([a], [_d(a, Fate.DRY_RUN)], "dry-run")),
        Half("real", fates_of([b], [_d(b, Fate.EVICTED)], "real")),
    )
    rows = [r.to_dict() for r in result.rows]
    assert [(r["dry_pod"], r["real_pod"]) for r in rows] == [(a.key, b.key)]
    assert result.ok and not result.differences
    assert f"{core.NOT_COMPARABLE}: " == FIDELITY_NOT_COMPARABLE
