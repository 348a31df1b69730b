"""A node-local volume as a lab value: the StorageClass, PV and PVC of a local-PV setup.

The runbook's incident lists volume topology among what took effect in the rebuild window:
a pod whose claim is bound to a volume that exists on one node only (a local PV) can start
nowhere else, so once that node cannot take it the replacement of an evicted pod stays
Pending, and the scheduler says why (`FailedScheduling`: "volume node affinity conflict").

No provisioner runs on a kwok cluster, and a local PV is made statically anyway: a
StorageClass with `kubernetes.io/no-provisioner` and `WaitForFirstConsumer` (the local-PV
recipe), one `local` PV with required node affinity to `node`, pre-bound to the claim, and
the PVC in the lab's namespace. A workload mounts it with `claims=(name,)`. Every input is
checked when the value is made; the cluster-scoped objects are named after the lab's
namespace, so concurrent labs on one cluster never share them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar

from pytest_desched.lab.values import HOSTNAME_KEY, check_name, check_quantity, config_error


@dataclass(frozen=True)
class LocalVolume:
    """PVC `name`, bound to a local PV that only `node` has."""

    name: str
    _: KW_ONLY
    node: str
    size: str = "1Gi"
    namespace: str | None = None

    kind: ClassVar[str] = "LocalVolume"

    def __post_init__(self) -> None:
        what = f"LocalVolume {self.name!r}"
        check_name(what, self.name)
        if not isinstance(self.node, str) or not self.node:
            raise config_error(what, f"node={self.node!r} is not a node name", "pass a worker")
        check_quantity(f"{what} size", self.size)
        if self.namespace is not None:
            check_name(f"{what} namespace", self.namespace)

    @staticmethod
    def storage_class_name(lab_namespace: str) -> str:
        return f"desched-local-{lab_namespace}"[:253]

    def pv_name(self, namespace: str) -> str:
        return f"desched-local-{namespace}-{self.name}"[:253]

    def storage_class(self, lab_namespace: str, managed: Mapping[str, str]) -> dict[str, Any]:
        """The lab's local StorageClass: no provisioner, bound when a pod first uses it."""
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": self.storage_class_name(lab_namespace), "labels": dict(managed)},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        }

    def persistent_volume(
        self, namespace: str, lab_namespace: str, managed: Mapping[str, str]
    ) -> dict[str, Any]:
        """The local PV on `node`, pre-bound to the claim (made statically, as local PVs are)."""
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": self.pv_name(namespace), "labels": dict(managed)},
            "spec": {
                "capacity": {"storage": self.size},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": self.storage_class_name(lab_namespace),
                "local": {"path": f"/mnt/desched-lab/{namespace}/{self.name}"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": HOSTNAME_KEY, "operator": "In", "values": [self.node]}
                                ]
                            }
                        ]
                    }
                },
                "claimRef": {"namespace": namespace, "name": self.name},
            },
        }

    def claim(self, namespace: str, lab_namespace: str) -> dict[str, Any]:
        """The PVC the workload mounts."""
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": self.name, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": self.storage_class_name(lab_namespace),
                "resources": {"requests": {"storage": self.size}},
            },
        }


__all__ = ["LocalVolume"]
