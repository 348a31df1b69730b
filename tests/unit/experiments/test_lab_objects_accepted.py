"""The lab's objects are accepted wherever their names are (issue 51 item 7).

`assertions.evicted(ledger, workload=Deployment("dup", ...), count=2)` said "no such pod in the
lab before round" while `workload="dup"` passed: the object matched no pod's workload name.
Now the object stands for its name in every assertion and lab step that takes a workload,
and a wrong type (a PDB as a workload, one string as `pods=`, a non-str node) is a TypeError
naming the fix instead of a selection of nothing.
"""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import pytest

import pytest_desched.lab.workloads as W
from pytest_desched.experiments import assertions as A
from pytest_desched.lab import Lab
from pytest_desched.lab.inputs import WORKLOAD_KINDS
from pytest_desched.lab.snapshot import PodInfo, Snapshot
from pytest_desched.lab.workloads import AntiAffinity, Deployment, Pod, PodDisruptionBudget

NS = "descheduler-lab"
DUP = Deployment("dup", replicas=2)


def _row(name: str, workload: str, fate: str, codes: tuple[int, ...], live: bool) -> Any:
    evicted = fate == "evicted"
    return A.PodFate(
        fate,
        "api-server" if evicted else "policy",
        namespace=NS,
        name=name,
        uid=f"uid-{name}",
        workload=workload,
        owner_kind="ReplicaSet" if workload != name else None,
        node="w1",
        strategy="RemoveDuplicates" if evicted else None,
        audit_codes=codes,
        live_after=live,
    )


LEDGER = A.Ledger.of_round(
    [
        _row("dup-a", "dup", "evicted", (201,), False),
        _row("dup-b", "dup", "evicted", (201,), False),
        _row("solo", "solo", "not-picked", (), True),
    ],
    audit_available=True,
    round_name="r1",
)


def _info(name: str, workload: str, node: str, uid: str | None = None) -> PodInfo:
    return PodInfo(
        name, uid or f"uid-{name}", node, "Running", True, None, False, None, NS, None, workload
    )


def test_evicted_takes_the_workload_object_as_its_name() -> None:
    by_name = A.evicted(LEDGER, workload="dup", count=2, strategy="RemoveDuplicates")
    by_object = A.evicted(LEDGER, workload=DUP, count=2, strategy="RemoveDuplicates")
    assert by_object.ok, by_object.detail
    assert (by_object.id, by_object.name, by_object.detail) == (
        by_name.id,
        by_name.name,
        by_name.detail,
    )


def test_every_ledger_assertion_takes_the_object() -> None:
    solo = Pod("solo")
    assert A.kept(LEDGER, workload=solo).ok
    assert A.kept(LEDGER, pods=[solo]).ok
    assert A.decided_by(LEDGER, "policy", workload=solo).ok
    assert not A.kept(LEDGER, workload=DUP).ok  # the object selects the pods, not nothing
    assert "no such pod" not in A.kept(LEDGER, workload=DUP).detail
    assert [r.name for r in LEDGER.select(DUP)] == ["dup-a", "dup-b"]
    refused = A.refused(LEDGER, workload=DUP, count=1)
    assert not refused.ok and "no such pod" not in refused.detail


def test_snapshot_assertions_and_lab_values_take_the_object() -> None:
    before = Snapshot(0.0, [_info("dup-a", "dup", "w1"), _info("dup-b", "dup", "w2")])
    after = Snapshot(1.0, [_info("dup-a", "dup", "w1"), _info("dup-c", "dup", "w2", "new")])
    assert before.of(DUP) == before.of("dup") != []
    assert A.skew(before, {"w1": "a", "w2": "b"}, 0, workload=DUP).ok
    assert A.pods_per_node(before, {"w1": 1, "w2": 1}, workload=DUP).ok
    check = A.replaced(before, after, workload=DUP, count=1)
    assert check.ok and check.id == "replaced:dup", check
    assert AntiAffinity.to(DUP) == AntiAffinity.to("dup")
    pdb = PodDisruptionBudget("dup-pdb", selects=DUP, min_available=1)
    assert pdb == PodDisruptionBudget("dup-pdb", selects="dup", min_available=1)


@pytest.mark.parametrize(
    ("call", "fix"),
    [
        (
            lambda: A.evicted(
                LEDGER, workload=PodDisruptionBudget("p", selects="dup", max_unavailable=1)
            ),
            "workload's name",
        ),
        (lambda: A.kept(LEDGER, pods="dup-a"), "pass ['dup-a']"),
        (lambda: A.kept(LEDGER, pods=[DUP]), "pass workload="),
        (lambda: Snapshot(0.0, []).of(42), "workload's name"),
        (lambda: Lab.cordon(SimpleNamespace(), _info("x", "x", "w1")), "pass its name"),  # type: ignore[arg-type]
        (lambda: Lab.label_node(SimpleNamespace(), None), "pass its name"),  # type: ignore[arg-type]
    ],
)
def test_a_wrong_type_is_refused_with_the_fix(call: Any, fix: str) -> None:
    with pytest.raises(TypeError, match=fix.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_the_workload_kinds_are_the_labs_workload_classes() -> None:
    """inputs.WORKLOAD_KINDS names each kind lab.workloads defines, and nothing else."""
    kinds = {
        cls.kind
        for cls in vars(W).values()
        if isinstance(cls, type) and issubclass(cls, W.Workload) and cls.kind
    }
    assert kinds == WORKLOAD_KINDS
    assert "name" in {f.name for f in fields(W.Workload)}
