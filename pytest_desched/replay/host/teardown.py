"""A host replay's teardown: in reverse order, by the run label, only what this run created.

Order (docs/replay-at-scale.md, point 6; the release goes first, with its session): the
replay's namespaces (their pods, owners, PDBs and claims with them; kwok still runs, so the
fake kubelet confirms each pod's deletion), then the fake nodes, the PersistentVolumes, the
StorageClasses and PriorityClasses, and last kwok (its namespace, ClusterRoleBinding and
ClusterRole). Every list asks the API server for `RUN_LABEL=<run id>` and every object is
checked again here before its DELETE: an object without this run's label is never deleted,
whatever a list returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.rest import ApiException

from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.log import Reporter, say
from pytest_desched.replay import kubeapi
from pytest_desched.replay.host.plan import ROLE_LABEL, RUN_LABEL
from pytest_desched.replay.objects import collection_path

# (what, collection path, which of this run's objects): the teardown order.
Step = tuple[str, str, Callable[[dict[str, Any]], bool]]


def _role(o: dict[str, Any]) -> str | None:
    return ((o.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL)


STEPS: list[Step] = [
    # an admission hold a killed owners-first restore left (rebuild/admission_hold.py): first,
    # so nothing of the host is held a moment longer
    (
        "admission hold bindings",
        collection_path("ValidatingAdmissionPolicyBinding"),
        lambda o: True,
    ),
    ("admission holds", collection_path("ValidatingAdmissionPolicy"), lambda o: True),
    ("namespaces", collection_path("Namespace"), lambda o: _role(o) != "kwok"),
    ("nodes", collection_path("Node"), lambda o: True),
    ("persistentvolumes", collection_path("PersistentVolume"), lambda o: True),
    ("storageclasses", collection_path("StorageClass"), lambda o: True),
    ("priorityclasses", collection_path("PriorityClass"), lambda o: True),
    ("kwok namespace", collection_path("Namespace"), lambda o: _role(o) == "kwok"),
    (
        "clusterrolebindings",
        collection_path("ClusterRoleBinding"),
        lambda o: True,
    ),
    ("clusterroles", collection_path("ClusterRole"), lambda o: True),
]


@dataclass
class Teardown:
    """What the teardown deleted, what it left (never ours), and what it could not delete."""

    deleted: dict[str, list[str]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # listed but without this run's label
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"deleted": self.deleted, "refused": self.refused, "errors": self.errors}


def is_ours(obj: dict[str, Any], run_id: str) -> bool:
    """True only for an object labelled with this run's id (the one deletion rule)."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL) == run_id


def teardown(api: Any, run_id: str, report: Reporter = say, timeout: float = 300) -> Teardown:
    """Delete this run's objects step by step (module docstring); each step waits until its
    objects are gone, so a namespace's pods are confirmed deleted while kwok still runs."""
    out = Teardown()
    selector = [("labelSelector", f"{RUN_LABEL}={run_id}")]
    for what, path, which in STEPS:
        try:
            listed = kubeapi.list_all(api, path, selector)
        except ApiException as exc:
            if exc.status == 404:  # an API the host does not serve holds nothing of ours
                continue
            out.errors.append(f"list {what}: {kubeapi.status_reason(exc)}")
            continue
        mine = []
        for o in listed:
            name = o["metadata"]["name"]
            if not is_ours(o, run_id):
                out.refused.append(f"{what} {name}: no {RUN_LABEL}={run_id} label, left alone")
                continue
            if which(o):
                mine.append(name)
        for name in mine:
            try:
                kubeapi.request(api, "DELETE", f"{path}/{name}")
            except ApiException as exc:
                if exc.status != 404:
                    out.errors.append(f"delete {what} {name}: {kubeapi.status_reason(exc)}")
        if mine:
            out.deleted[what] = mine
            _wait_gone(api, path, set(mine), what, timeout, out)
    report(
        f"host replay teardown (run {run_id}): deleted "
        + (", ".join(f"{len(v)} {k}" for k, v in out.deleted.items()) or "nothing")
        + (f"; {len(out.errors)} errors" if out.errors else "")
    )
    return out


def _wait_gone(
    api: Any, path: str, names: set[str], what: str, timeout: float, out: Teardown
) -> None:
    def left() -> list[str]:
        return sorted(names & {o["metadata"]["name"] for o in kubeapi.list_all(api, path)})

    try:
        wait_for(f"{what} deleted", left, lambda rest: not rest, timeout)
    except WaitTimeout:
        out.errors.append(f"{what} still there after {timeout:.0f}s: {left()[:5]}")
