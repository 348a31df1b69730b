"""The seeded churn window (issue 42): a valid timeline of a known size and steady rate, the
same for a seed, each change one `apply` applies the way its rules say."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from pytest_desched.replay.capture.format import SECTIONS, Snapshot
from pytest_desched.replay.capture.timeline import Timeline, obj_key
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.gen.timeline_gen import (
    MAINT_LABEL,
    MAINT_TAINT,
    MIX,
    Churn,
    churn_window,
)
from pytest_desched.replay.timeline.apply import create_body, observed_only, update_patch


@pytest.fixture(scope="module")
def snap() -> Snapshot:
    return generate(seed=5, nodes=40, pods=400)


def window(snap: Snapshot, **kw: Any) -> Timeline:
    return churn_window(copy.deepcopy(snap), Churn(**{"seed": 5, "window_s": 600, **kw}))


def test_a_window_is_a_valid_timeline_of_the_size_asked(snap: Snapshot) -> None:
    tl = window(snap, changes=1200)
    assert len(tl.changes) == 1200 and tl.window_s == 600
    back = Timeline.parse(tl.dump(), "gen")  # parse validates: order, objects, window
    assert [c.to_doc() for c in back.changes] == [c.to_doc() for c in tl.changes]
    ts = [c.t for c in tl.changes]
    assert ts == sorted(ts) and ts[0] >= 0 and ts[-1] <= 600
    assert tl.header["windowStart"] == snap.header["takenAt"]


def test_the_same_seed_gives_the_same_window_byte_for_byte(snap: Snapshot) -> None:
    assert window(snap, changes=300).dump() == window(snap, changes=300).dump()
    assert window(snap, changes=300).dump() != window(snap, changes=300, seed=6).dump()


def test_the_mix_follows_its_weights_and_the_rate_is_steady(snap: Snapshot) -> None:
    tl = window(snap, changes=3000)
    by_kind = tl.header["changesByKind"]
    assert sum(by_kind.values()) == 3000
    for kind, weight in MIX:
        assert abs(by_kind[kind] / 3000 - weight) < 0.03, (kind, by_kind)
    per_minute = Counter(int(c.t // 60) for c in tl.changes)  # 10 minutes, 300 each
    assert sorted(per_minute) == list(range(10))
    assert all(abs(n - 300) <= 1 for n in per_minute.values()), per_minute


def test_every_change_applies_by_apply_rules_on_the_state_before_it(snap: Snapshot) -> None:
    """Replayed on a model of the live objects: nothing is only observed, every update's
    patch is exactly the field its kind changes, every create names a new object and every
    delete a live one; the taint cap and the replica bounds hold throughout."""
    tl = window(snap, changes=2000)
    live: dict[str, dict[str, Any]] = {}
    for section, obj in snap.all_objects():
        m = obj["metadata"]
        live[obj_key(SECTIONS[section][1], m.get("namespace"), m["name"])] = obj
    start = {k: o["spec"]["replicas"] for k, o in live.items() if k.startswith("Deployment ")}
    seen = Counter()
    for c in tl.changes:
        assert observed_only(c) is None, c.key
        if c.verb == "delete":
            assert c.key in live, c.key
            del live[c.key]
        elif c.verb == "create":
            assert c.key not in live, c.key
            body = create_body(c)
            assert body["kind"] == c.kind and "uid" not in body["metadata"]
            if c.kind == "Pod":  # bound to a node that takes it: no NoSchedule taint on it
                taints = live[f"Node {body['spec']['nodeName']}"].get("spec", {}).get("taints")
                assert not any(t["effect"] == "NoSchedule" for t in taints or [])
            live[c.key] = c.object or {}
        else:
            assert c.verb == "update"
            patch = update_patch(c, live[c.key])
            if c.kind == "Deployment":
                new = c.object["spec"]["replicas"]
                assert patch == {"spec": {"replicas": new}}
                if c.key in start:
                    assert max(1, start[c.key] - 2) <= new <= start[c.key] + 3
            else:
                assert c.kind == "Node"
                assert patch in (
                    {"metadata": {"labels": {MAINT_LABEL: v}}} for v in ("planned", "urgent", None)
                ) or (set(patch) == {"spec"} and set(patch["spec"]) == {"taints"}), patch
            live[c.key] = c.object or {}
        seen[(c.verb, c.kind)] += 1
        tainted = [
            k
            for k, o in live.items()
            if k.startswith("Node ") and MAINT_TAINT in (o.get("spec") or {}).get("taints", [])
        ]
        assert len(tainted) <= max(1, int(40 * Churn().max_tainted_share))
    assert set(seen) == {
        ("update", "Deployment"),
        ("update", "Node"),
        ("create", "Pod"),
        ("delete", "Pod"),
        ("create", "Deployment"),
        ("delete", "Deployment"),
    }


def test_an_unknown_kind_or_an_empty_window_is_refused(snap: Snapshot) -> None:
    with pytest.raises(ValueError, match="unknown change kinds \\['resize'\\]"):
        window(snap, mix=(("scale", 1.0), ("resize", 1.0)))
    with pytest.raises(ValueError, match="changes >= 1"):
        window(snap, changes=0)
