"""Teardown: namespaces, cluster-scoped objects and node changes undone in dependency order."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.lab.base import CONTROLLERS, LabBase, ignore_404, owner_kind
from pytest_desched.lab.inputs import (
    POOL_LABEL,
)

if TYPE_CHECKING:
    pass


class TeardownSteps(LabBase):
    """Everything the lab made, deleted; every node change, restored."""

    def restore_labels(self) -> list[str]:
        """Put back every node label this lab changed; returns the nodes touched."""
        restored = []
        for node, original in self._labelled.items():
            self._node_labels.setdefault(node, {}).setdefault(POOL_LABEL, original)
        for node, originals in self._node_labels.items():
            try:
                self.cluster.core.patch_node(node, {"metadata": {"labels": dict(originals)}})
                restored.append(node)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self._labelled.clear()
        self._node_labels.clear()
        return restored

    def restore_nodes(self) -> list[str]:
        """Put back taints and cordons (after the labels); waits until the nodes show it."""
        restored = self.restore_labels()
        specs, self._node_specs = self._node_specs, {}
        for node, spec in specs.items():
            patch = {
                "spec": {
                    "taints": spec["taints"] or None,
                    "unschedulable": spec["unschedulable"] or None,
                }
            }
            if ignore_404(self.cluster.core.patch_node, node, patch) is None:
                continue
            want = {t["key"] for t in spec["taints"]}
            cordoned = spec["unschedulable"]

            def keys(node: str = node) -> set[str]:
                return {t.key for t in self.cluster.core.read_node(node).spec.taints or []}

            def back(have: set[str], want: set[str] = want, cordoned: bool = cordoned) -> bool:
                return have >= want if cordoned else have == want

            wait_for(f"node {node} back to taints {sorted(want)}", keys, back, self.timeout)
            restored.append(node)
        return sorted(set(restored))

    def delete_namespace_in_background(self) -> list[str]:
        """Start deleting the lab's namespaces and hand them to the cluster's reaper.

        The namespace goes Terminating first: from then on the API server refuses new objects
        in it, so no controller can bring a pod back. Then its pods are force-deleted (no
        kubelet honours a grace period here), so no lab pod outlives this call; the rest
        (controllers, PDB, events) is the namespace controller's, and the session's final scan
        (NamespaceReaper.wait_all) fails if a namespace never goes.
        """
        mine = ([self.namespace] if self.created_namespace else []) + list(self._extra_namespaces)
        for ns in mine:
            ignore_404(self.cluster.core.delete_namespace, ns)
        for ns in mine:
            ignore_404(
                self.cluster.core.delete_collection_namespaced_pod, ns, grace_period_seconds=0
            )
        self.cluster.namespace_reaper.hand_over(mine)
        self.created_namespace = False
        self._extra_namespaces.clear()
        return mine

    def delete_namespace(self, timeout: float = 60) -> None:
        """Delete the lab's namespaces; pods are force-deleted until each namespace is gone.

        Controllers of the known kinds go first so none recreates a pod; anything else
        (an owner kind nobody listed) goes with its namespace, whose controller refuses new
        pods once it terminates, so nothing here waits on a kind it does not know.
        """
        mine = ([self.namespace] if self.created_namespace else []) + list(self._extra_namespaces)
        if not mine:
            return
        for ns in mine:
            for group, method in CONTROLLERS:
                api = getattr(self.cluster, group)
                ignore_404(getattr(api, method), ns, propagation_policy="Background")

        def pods_left() -> list[str]:
            names = []
            for ns in mine:
                pods = self.cluster.core.list_namespaced_pod(ns).items
                if pods:  # without grace: no kubelet honours it, the namespace waits for them
                    self.cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
                names += [f"{ns}/{p.metadata.name} (owner {owner_kind(p)})" for p in pods]
            return names

        # Pods first: an empty namespace is finalized in one pass of its controller, which
        # otherwise requeues itself for seconds. An owner kind not deleted above may keep
        # making pods; after a short window the namespace goes regardless (see below).
        with contextlib.suppress(WaitTimeout):
            wait_for("lab pods gone", pods_left, lambda names: not names, self.pod_settle_s)
        for ns in mine:
            ignore_404(self.cluster.core.delete_namespace, ns)

        def left() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for ns in mine:
                if ignore_404(self.cluster.core.read_namespace, ns) is None:
                    continue
                pods = self.cluster.core.list_namespaced_pod(ns).items
                if pods:  # without grace: no kubelet honours it, the namespace waits for them
                    self.cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
                out[ns] = [f"{p.metadata.name} (owner {owner_kind(p)})" for p in pods]
            return out

        wait_for(
            f"namespaces {mine} deleted",
            left,
            lambda remaining: not remaining,
            timeout,
            describe=lambda remaining: f"still there, with pods: {remaining}",
        )
        self.created_namespace = False
        self._extra_namespaces.clear()

    def delete_cluster_objects(self, timeout: float = 60) -> list[str]:
        """PersistentVolumes, StorageClasses and PriorityClasses this lab made (after its
        namespaces)."""
        from kubernetes import client

        gone = []
        sched = client.SchedulingV1Api(self.cluster.api_client)
        pvs = [name for kind, _, name in self._objects if kind == "PersistentVolume"]
        for name in pvs:
            ignore_404(self.cluster.core.delete_persistent_volume, name)
        if pvs:
            wait_for(
                f"PersistentVolumes {pvs} deleted",
                lambda: [n for n in pvs if ignore_404(self.cluster.core.read_persistent_volume, n)],
                lambda remaining: not remaining,
                timeout,
            )
            gone += [f"PersistentVolume/{n}" for n in pvs]
        storage = client.StorageV1Api(self.cluster.api_client)
        for kind, _, name in self._objects:
            if kind == "PriorityClass":
                ignore_404(sched.delete_priority_class, name)
                gone.append(f"PriorityClass/{name}")
            if kind == "StorageClass":
                ignore_404(storage.delete_storage_class, name)
                gone.append(f"StorageClass/{name}")
        self._objects = [o for o in self._objects if o[1] is not None]
        return gone

    def teardown(self, background: bool = False) -> None:
        """Reverse dependency order: namespaces, cluster-scoped objects, nodes.

        `background`: the namespaces are left Terminating with no pod in them and handed to
        the cluster's reaper instead of waited for (see delete_namespace_in_background);
        a lab that made PersistentVolumes still waits, since those go only after their claims.
        Every step runs even when an earlier one failed; the first error is raised after.
        """
        errors: list[BaseException] = []
        has_volumes = any(kind == "PersistentVolume" for kind, _, _ in self._objects)
        delete: Callable[[], Any] = (
            self.delete_namespace_in_background
            if background and not has_volumes
            else self.delete_namespace
        )
        for step in (delete, self.delete_cluster_objects, self.restore_nodes):
            try:
                step()
            except Exception as exc:
                errors.append(exc)
        self._objects.clear()
        if errors:
            raise errors[0]
