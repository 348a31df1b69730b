"""bench/host_replay_scale.py: the host-unchanged claim and a deleted namespace's state (pure)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "bench_host_replay_scale",
    Path(__file__).resolve().parents[2] / "bench" / "host_replay_scale.py",
)
assert _SPEC and _SPEC.loader
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

BEFORE = {
    "namespaces": {"default": "u1", "kube-system": "u2"},
    "nodes": {"kind-control-plane": "n1"},
}


def test_same_fingerprint_is_unchanged() -> None:
    assert bench.host_changes(BEFORE, {k: dict(v) for k, v in BEFORE.items()}) == []


def test_every_kind_of_change_is_named() -> None:
    after = {
        "namespaces": {"default": "u9", "leftover": "u3"},  # replaced, kube-system gone, added
        "nodes": {"kind-control-plane": "n1"},
    }
    assert bench.host_changes(BEFORE, after) == [
        "namespaces default: replaced (new UID)",
        "namespaces kube-system: gone",
        "namespaces leftover: added",
    ]


def test_a_terminating_namespace_in_before_only_is_a_change() -> None:
    """The run of 2026-12-06: the ceiling's namespace still Terminating in the first
    fingerprint and gone in the second; the bench now waits for it to be gone first."""
    before = {"namespaces": {**BEFORE["namespaces"], "desched-bench-ceiling-1": "c"}, "nodes": {}}
    after = {"namespaces": dict(BEFORE["namespaces"]), "nodes": {}}
    assert bench.host_changes(before, after) == ["namespaces desched-bench-ceiling-1: gone"]


def test_namespace_state_names_what_holds_it() -> None:
    ns = {
        "metadata": {"name": "desched-bench-ceiling-1"},
        "status": {
            "phase": "Terminating",
            "conditions": [
                {"type": "NamespaceDeletionDiscoveryFailure", "status": "False"},
                {
                    "type": "NamespaceContentRemaining",
                    "status": "True",
                    "message": "Some resources are remaining: configmaps. has 12 resource instances",
                },
            ],
        },
    }
    assert bench.namespace_state(ns) == (
        "desched-bench-ceiling-1 Terminating (NamespaceContentRemaining: Some resources are"
        " remaining: configmaps. has 12 resource instances)"
    )
    assert bench.namespace_state(None) == "gone"
    assert bench.namespace_state({"metadata": {"name": "x"}, "status": {"phase": "Active"}}) == (
        "x Active"
    )
