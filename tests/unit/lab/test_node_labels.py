"""The lab reads a node's original pool label once, however many label steps touch it, and
puts that original back on teardown."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pytest_desched.lab import Lab
from pytest_desched.lab.inputs import POOL_LABEL


class _Nodes:
    """Two nodes' labels; counts the reads."""

    def __init__(self) -> None:
        self.labels: dict[str, dict[str, str]] = {"w-1": {}, "w-2": {POOL_LABEL: "theirs"}}
        self.reads: list[str] = []

    def read_node(self, name: str) -> Any:
        self.reads.append(name)
        return SimpleNamespace(metadata=SimpleNamespace(labels=dict(self.labels[name])))

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        for k, v in body["metadata"]["labels"].items():
            if v is None:
                self.labels[name].pop(k, None)
            else:
                self.labels[name][k] = v


def test_each_nodes_original_label_is_read_once_and_restored() -> None:
    core = _Nodes()
    lab = Lab(SimpleNamespace(core=core, workers=["w-1", "w-2"]), "descheduler-lab")  # type: ignore[arg-type]
    lab.label_node("w-1")  # the runbook's moves: source on, target on, source off
    lab.label_node("w-2")
    lab.unlabel_node("w-1")
    lab.label_node("w-1", "again")
    assert core.reads == ["w-1", "w-2"]  # one read per node, before its first change
    assert core.labels == {"w-1": {POOL_LABEL: "again"}, "w-2": {POOL_LABEL: lab.pool}}
    lab.restore_labels()
    assert core.labels == {"w-1": {}, "w-2": {POOL_LABEL: "theirs"}}
