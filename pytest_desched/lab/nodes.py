"""Node changes a lab makes (pool labels, taints, cordons), each remembered once and restored."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_desched.kube import wait_for
from pytest_desched.lab.base import UNSCHEDULABLE_TAINT, LabBase, taint_dicts
from pytest_desched.lab.inputs import POOL_LABEL, LabConfigError, node_name
from pytest_desched.lab.values import ZONE_KEY, Taint, check_labels


class NodeSteps(LabBase):
    """Node labels, taints and cordons; the original of each is kept for teardown."""

    def _node_label(self, node: str) -> str | None:
        return (self.cluster.core.read_node(node).metadata.labels or {}).get(POOL_LABEL)

    def _remember_label(self, node: str) -> None:
        """The node's original pool label, read once (teardown puts it back)."""
        if node not in self._labelled:
            self._labelled[node] = self._node_label(node)

    def label_node(self, node: str, value: str | None = None) -> None:
        """The runbook's step: put the pool label (this lab's pool by default) on `node`."""
        node = node_name(node, "Lab.label_node")
        self._remember_label(node)
        self.cluster.core.patch_node(
            node, {"metadata": {"labels": {POOL_LABEL: value or self.pool}}}
        )

    def unlabel_node(self, node: str) -> None:
        node = node_name(node, "Lab.unlabel_node")
        self._remember_label(node)
        self.cluster.core.patch_node(node, {"metadata": {"labels": {POOL_LABEL: None}}})

    def labelled_nodes(self) -> list[str]:
        return sorted(
            n.metadata.name
            for n in self.cluster.core.list_node(label_selector=f"{POOL_LABEL}={self.pool}").items
        )

    def set_node_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        """Set (a value) or remove (None) node labels; the originals come back on teardown."""
        node = node_name(node, "Lab.set_node_labels")
        what = f"Lab.set_node_labels({node!r})"
        check_labels(what, {k: v for k, v in labels.items() if v is not None})
        check_labels(what, dict.fromkeys(labels, "x"))  # the keys of removals too
        current = self.cluster.core.read_node(node).metadata.labels or {}
        kept = self._node_labels.setdefault(node, {})
        for k in labels:
            kept.setdefault(k, current.get(k))
        self.cluster.core.patch_node(node, {"metadata": {"labels": dict(labels)}})

    def _remember_spec(self, node: str) -> Any:
        n = self.cluster.core.read_node(node)
        self._node_specs.setdefault(
            node, {"taints": taint_dicts(n), "unschedulable": bool(n.spec.unschedulable)}
        )
        return n

    def taint(self, node: str, taint: Taint) -> None:
        """Add (or replace, same key and effect) a taint on `node`."""
        node = node_name(node, "Lab.taint")
        if not isinstance(taint, Taint):
            raise LabConfigError(f"Lab.taint({node!r}): {taint!r} is not a Taint; use Taint(...)")
        n = self._remember_spec(node)
        keep = [
            t
            for t in taint_dicts(n)
            if not (t["key"] == taint.key and t.get("effect") == taint.effect)
        ]
        self.cluster.core.patch_node(node, {"spec": {"taints": [*keep, taint.manifest()]}})

    def untaint(self, node: str, key: str) -> None:
        node = node_name(node, "Lab.untaint")
        n = self._remember_spec(node)
        keep = [t for t in taint_dicts(n) if t["key"] != key]
        self.cluster.core.patch_node(node, {"spec": {"taints": keep or None}})

    def _cordon_taint(self, node: str) -> bool:
        n = self.cluster.core.read_node(node)
        return any(t.key == UNSCHEDULABLE_TAINT for t in n.spec.taints or [])

    def cordon(self, node: str, wait: bool = True) -> None:
        """`kubectl cordon`; waits until the node controller's taint shows it was seen."""
        node = node_name(node, "Lab.cordon")
        self._remember_spec(node)
        self.cluster.core.patch_node(node, {"spec": {"unschedulable": True}})
        if wait:
            wait_for(f"node {node} cordoned", lambda: self._cordon_taint(node), bool, self.timeout)

    def uncordon(self, node: str, wait: bool = True) -> None:
        """`kubectl uncordon`; waits until the unschedulable taint is gone again."""
        node = node_name(node, "Lab.uncordon")
        self._remember_spec(node)
        self.cluster.core.patch_node(node, {"spec": {"unschedulable": None}})
        if wait:
            wait_for(
                f"node {node} schedulable (taint {UNSCHEDULABLE_TAINT} gone)",
                lambda: not self._cordon_taint(node),
                bool,
                self.timeout,
            )

    @contextlib.contextmanager
    def only_on(self, node: str) -> Iterator[None]:
        """Every other worker cordoned while the block runs (placement without pinning)."""
        node = node_name(node, "Lab.only_on")
        workers = list(self.cluster.workers)
        if node not in workers:
            raise LabConfigError(
                f"only_on={node!r} is not a worker of this cluster; use one of {workers}"
            )
        others = [w for w in workers if w != node]
        was = {w: bool(self.cluster.core.read_node(w).spec.unschedulable) for w in others}
        try:
            for w in others:
                if not was[w]:
                    self.cordon(w)
            yield
        finally:
            for w in others:
                if not was[w]:
                    self.uncordon(w)

    def topology(self, key: str = ZONE_KEY) -> dict[str, str]:
        """Each worker's value of a topology label (its domain for skew checks)."""
        out = {}
        for n in self.cluster.core.list_node().items:
            if n.metadata.name in self.cluster.workers:
                out[n.metadata.name] = (n.metadata.labels or {}).get(key, "<none>")
        return out
