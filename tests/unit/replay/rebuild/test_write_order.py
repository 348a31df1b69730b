"""The etcd restore's write order (replay/rebuild/etcd_restore.py write_order): every owner before its
dependents, each owner's pods right after it, everything exactly once."""

from __future__ import annotations

import datetime as dt

from pytest_desched.replay.gen.generator import Shape, generate
from pytest_desched.replay.rebuild import etcd_restore
from pytest_desched.replay.rebuild.etcd_restore import CHAIN_MAX, write_order
from pytest_desched.replay.rebuild.plan import plan_restore

NOW = dt.datetime(2026, 12, 2, 4, 0, 0, tzinfo=dt.UTC)


def _sequence(order: etcd_restore.WriteOrder) -> list[list[dict]]:
    """The order's phases as etcd_restore writes them: each phase completes before the next;
    within a chain objects go one after another."""
    return [order.first, *order.chains, order.owners_after, order.pods_after]


def test_every_object_once_and_every_owner_before_its_dependents() -> None:
    snap = generate(Shape(seed=1, nodes=200, pods=2000))
    plan = plan_restore(snap, now=NOW)
    order = write_order(plan)
    flat = [o for phase in _sequence(order) for o in phase]
    objects = [*(o for objs in plan.owners.values() for o in objs), *plan.pods]
    assert sorted(map(id, flat)) == sorted(map(id, objects))
    # an object's position: (phase, index); chains run concurrently, so an owner and its
    # dependent in different chains would be unordered: there must be none
    where = {}
    for i, phase in enumerate(_sequence(order)):
        for j, o in enumerate(phase):
            where[o["metadata"]["uid"]] = (i, j)
    chain_phases = range(1, 1 + len(order.chains))
    for o in flat:
        for ref in o["metadata"].get("ownerReferences") or []:
            parent = where.get(ref["uid"])
            if parent is None:
                continue  # a node or a kind not restored
            mine = where[o["metadata"]["uid"]]
            if mine[0] in chain_phases:
                same_chain_before = parent[0] == mine[0] and parent[1] < mine[1]
                assert same_chain_before or parent[0] == 0, o["metadata"]["name"]
            else:  # first, owners_after, pods_after: after the parent's phase completed
                assert parent[0] < mine[0] or (parent[0] == mine[0] == 0 and o["kind"] != "Pod"), o[
                    "metadata"
                ]["name"]
    assert order.chains and max(map(len, order.chains)) <= CHAIN_MAX
    # a ReplicaSet's pods follow it directly in its chain
    chain = next(c for c in order.chains if c[0]["kind"] == "Deployment" and len(c) > 3)
    assert [o["kind"] for o in chain][:3] == ["Deployment", "ReplicaSet", "Pod"]


def test_a_long_chain_is_split_owners_first_pods_concurrently() -> None:
    snap = generate(Shape(seed=1, nodes=200, pods=2000))
    plan = plan_restore(snap, now=NOW)
    order = write_order(plan)
    daemonsets = plan.owners["DaemonSet"]
    assert daemonsets and all(any(o is d for o in order.first) for d in daemonsets)
    ds_uids = {d["metadata"]["uid"] for d in daemonsets}
    singles = [c for c in order.chains if len(c) == 1 and c[0]["kind"] == "Pod"]
    ds_pods = [
        p
        for p in plan.pods
        if {r["uid"] for r in p["metadata"].get("ownerReferences") or []} & ds_uids
    ]
    assert len(ds_pods) > CHAIN_MAX and {id(p) for p in ds_pods} <= {id(c[0]) for c in singles}
