"""LocalVolume: the local-PV recipe as values (StorageClass, PV with node affinity, PVC)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_desched.lab import Deployment, LabConfigError, LocalVolume


def test_the_manifests_are_the_local_pv_recipe() -> None:
    v = LocalVolume("db-data", node="kwok-w1", size="2Gi")
    sc = v.storage_class("lab-a", {"m": "x"})
    assert sc["provisioner"] == "kubernetes.io/no-provisioner"
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    pv = v.persistent_volume("lab-a", "lab-a", {"m": "x"})
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["kwok-w1"]}
    assert "local" in pv["spec"] and pv["spec"]["storageClassName"] == sc["metadata"]["name"]
    assert pv["spec"]["claimRef"] == {"namespace": "lab-a", "name": "db-data"}
    pvc = v.claim("lab-a", "lab-a")
    assert pvc["spec"]["storageClassName"] == sc["metadata"]["name"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "2Gi"
    # cluster-scoped names carry the lab's namespace: two labs never share one
    assert v.pv_name("lab-a") != v.pv_name("lab-b")
    assert v.storage_class_name("lab-a") != v.storage_class_name("lab-b")
    # a workload mounts it by the claim's name
    spec = Deployment("db", claims=(v.name,)).pod_spec()
    assert spec["volumes"] == [
        {"name": "claim-db-data", "persistentVolumeClaim": {"claimName": "db-data"}}
    ]


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"name": "Bad_Name", "node": "n"}, "Bad_Name"),
        ({"name": "d", "node": ""}, "node"),
        ({"name": "d", "node": "n", "size": "lots"}, "size"),
    ],
)
def test_bad_local_volume_fails_when_declared(kw: dict[str, Any], said: str) -> None:
    with pytest.raises(LabConfigError, match=said):
        LocalVolume(**kw)
