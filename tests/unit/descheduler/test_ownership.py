"""Field managers of the release's objects, as the evidence names them (descheduler.ownership).

The managedFields here have the shapes the API server wrote in tests/e2e/test_helm_ownership.py:
Helm 4's server-side apply, Helm 3's client-side patch and `kubectl patch`'s own entry.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubernetes import client

from pytest_desched.descheduler.ownership import (
    POLICY,
    SUSPEND,
    apply_method,
    helm_evidence,
    managers,
    owners,
    suspend_notes,
)

HELM_APPLY = {
    "manager": "helm",
    "operation": "Apply",
    "fieldsV1": {"f:spec": {"f:schedule": {}, "f:suspend": {}}},
}
HELM_UPDATE = {
    "manager": "helm",
    "operation": "Update",
    "fieldsV1": {"f:spec": {"f:schedule": {}, "f:suspend": {}}},
}
KUBECTL_PATCH = {
    "manager": "kubectl-patch",
    "operation": "Update",
    "fieldsV1": {"f:spec": {"f:suspend": {}}},
}
CONTROLLER = {
    "manager": "kube-controller-manager",
    "operation": "Update",
    "subresource": "status",
    "fieldsV1": {"f:status": {"f:lastScheduleTime": {}}},
}


def test_owners_reads_the_field_sets() -> None:
    fields = [HELM_APPLY, KUBECTL_PATCH, CONTROLLER]
    assert owners(fields, SUSPEND) == ["helm (Apply)", "kubectl-patch (Update)"]
    assert owners(fields, ("spec", "schedule")) == ["helm (Apply)"]
    assert owners(fields, ("spec", "jobTemplate")) == []
    assert managers(fields) == [
        "helm (Apply)",
        "kubectl-patch (Update)",
        "kube-controller-manager (Update)",
    ]


def test_apply_method_is_helms_operation() -> None:
    assert apply_method([HELM_APPLY, KUBECTL_PATCH]) == "server-side"
    assert apply_method([HELM_UPDATE]) == "client-side"
    assert apply_method([KUBECTL_PATCH]) == "unknown"  # nobody named helm wrote it
    assert apply_method(None) == "unknown"


def test_the_python_clients_objects_read_like_json() -> None:
    entries = [
        client.V1ManagedFieldsEntry(
            manager=e["manager"], operation=e["operation"], fields_v1=e["fieldsV1"]
        )
        for e in (HELM_APPLY, KUBECTL_PATCH)
    ]
    assert owners(entries, SUSPEND) == owners([HELM_APPLY, KUBECTL_PATCH], SUSPEND)


def _obj(name: str, fields: list[dict[str, Any]]) -> Any:
    return SimpleNamespace(metadata=SimpleNamespace(name=name, managed_fields=fields))


def test_helm_evidence_names_version_major_and_owners() -> None:
    cm_fields = [
        {"manager": "helm", "operation": "Apply", "fieldsV1": {"f:data": {"f:policy.yaml": {}}}}
    ]
    ev = helm_evidence("v4.3.2", _obj("descheduler", [HELM_APPLY]), _obj("descheduler", cm_fields))
    assert ev["version"] == "v4.3.2" and ev["major"] == "4" and ev["apply"] == "server-side"
    assert ev["cronjob"]["spec.suspend"] == ["helm (Apply)"]
    assert ev["configmap"]["data.policy.yaml"] == ["helm (Apply)"]
    assert owners(cm_fields, POLICY) == ["helm (Apply)"]
    assert "notes" not in ev  # helm alone owns suspend: nothing to say


def test_a_manager_other_than_helm_on_suspend_is_said() -> None:
    ev = helm_evidence("v4.3.2", _obj("d", [HELM_APPLY, KUBECTL_PATCH]), _obj("d", []))
    assert ev["notes"] and "kubectl-patch (Update)" in ev["notes"][0]
    assert "as well as helm" in ev["notes"][0] and "handed back" in ev["notes"][0]
    only = suspend_notes(["kubectl-patch (Update)"], "3")
    assert only and ", not helm" in only[0] and "Helm 4" not in only[0]
    assert suspend_notes(["helm (Apply)"], "4") == [] and suspend_notes([], "3") == []
