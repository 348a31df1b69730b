"""Who owns the release's fields: the field managers (`metadata.managedFields`) of its
CronJob and policy ConfigMap, for the evidence.

Helm 4 installs with server-side apply (manager `helm`, operation `Apply`); Helm 3 patches
client-side (manager `helm`, operation `Update`). The runbook's emergency stop
(`kubectl patch cronjob ... '{"spec":{"suspend":true}}'`) writes as a manager of its own
(`kubectl-patch`). Which manager owns `spec.suspend` decides what the next `helm upgrade` or
`helm rollback` does to a stopped CronJob, and is what the runbook's "hand back field
ownership" step needs (docs/helm.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SUSPEND = ("spec", "suspend")
POLICY = ("data", "policy.yaml")
HELM_MANAGER = "helm"  # Helm 3 and 4 name their writes after the binary: ours is `helm`


def _entries(managed_fields: Iterable[Any] | None) -> list[dict[str, Any]]:
    """managedFields as plain dicts, from the Python client's objects or from JSON."""
    out = []
    for e in managed_fields or ():
        if isinstance(e, Mapping):
            out.append(
                {
                    "manager": e.get("manager") or "",
                    "operation": e.get("operation") or "",
                    "fields": e.get("fieldsV1") or e.get("fields_v1") or {},
                }
            )
        else:
            out.append(
                {
                    "manager": getattr(e, "manager", "") or "",
                    "operation": getattr(e, "operation", "") or "",
                    "fields": getattr(e, "fields_v1", None) or {},
                }
            )
    return out


def _holds(fields: Mapping[str, Any], path: Sequence[str]) -> bool:
    node: Any = fields
    for part in path:
        if not isinstance(node, Mapping) or f"f:{part}" not in node:
            return False
        node = node[f"f:{part}"]
    return True


def owners(managed_fields: Iterable[Any] | None, path: Sequence[str]) -> list[str]:
    """The managers whose field set holds `path` ("manager (Operation)", each once)."""
    found: list[str] = []
    for e in _entries(managed_fields):
        label = f"{e['manager']} ({e['operation']})"
        if _holds(e["fields"], path) and label not in found:
            found.append(label)
    return found


def managers(managed_fields: Iterable[Any] | None) -> list[str]:
    """Every manager of an object, "manager (Operation)", in managedFields order."""
    return list(
        dict.fromkeys(f"{e['manager']} ({e['operation']})" for e in _entries(managed_fields))
    )


def apply_method(managed_fields: Iterable[Any] | None) -> str:
    """How helm wrote the object: server-side (Apply), client-side (Update), or unknown."""
    ops = {e["operation"] for e in _entries(managed_fields) if e["manager"] == HELM_MANAGER}
    if "Apply" in ops:
        return "server-side"
    return "client-side" if "Update" in ops else "unknown"


def suspend_notes(suspend_owners: Sequence[str], major: str) -> list[str]:
    """What another manager on `spec.suspend` means for helm (measured with chart 0.36.0,
    which renders `suspend` only when true: tests/e2e/test_helm_ownership.py)."""
    others = [o for o in suspend_owners if not o.startswith(f"{HELM_MANAGER} (")]
    if not others:
        return []
    said = (
        f"spec.suspend is owned by {', '.join(others)}"
        + (" as well as helm" if len(others) < len(suspend_owners) else ", not helm")
        + ": the next helm upgrade or rollback keeps the value it set"
    )
    if major == "4":  # server-side apply: the other manager keeps the field
        said += (
            "; under Helm 4 re-enabling through helm (--set suspend=false) leaves the CronJob "
            "suspended, and a helm upgrade that sets another value fails with a conflict, "
            "until the field is handed back"
        )
    return [f"{said} (docs/helm.md#emergency-stop-and-field-ownership)"]


def helm_evidence(version: str, cronjob: Any, configmap: Any) -> dict[str, Any]:
    """The Helm that wrote the release and the field managers of its CronJob and ConfigMap."""
    cj_fields = cronjob.metadata.managed_fields if cronjob is not None else None
    cm_fields = configmap.metadata.managed_fields if configmap is not None else None
    suspend = owners(cj_fields, SUSPEND)
    out: dict[str, Any] = {
        "version": version,
        "major": version.lstrip("v").split(".")[0],
        "apply": apply_method(cj_fields),
        "cronjob": {
            "name": cronjob.metadata.name if cronjob is not None else None,
            "managers": managers(cj_fields),
            "spec.suspend": suspend,
        },
        "configmap": {
            "name": configmap.metadata.name if configmap is not None else None,
            "managers": managers(cm_fields),
            "data.policy.yaml": owners(cm_fields, POLICY),
        },
    }
    notes = suspend_notes(suspend, out["major"])
    if notes:
        out["notes"] = notes
    return out
