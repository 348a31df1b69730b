"""The minimal read-only RBAC `desched snapshot` and `desched record` need (`--print-rbac`).

Derived from the tables the capture code reads with, not written out by hand: every section
in `snapshot.RESOURCES` (listed by the snapshot, listed and watched by record), the one GET of
the descheduler's policy ConfigMap (`snapshot.read_policy`), the list of NodeMetrics and
PodMetrics (`usage.read_usage`), and GET /version plus discovery.
A new read added to those tables lands in the printed role by itself; the verbs are
`snapshot.READ_VERBS` and nothing else (tests/e2e/test_rbac_e2e.py proves it from the audit log).
"""

from __future__ import annotations

from typing import Any

import yaml

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import SECTIONS
from pytest_desched.replay.capture.snapshot import READ_VERBS, RESOURCES
from pytest_desched.replay.capture.usage import USAGE_GROUP, USAGE_RESOURCES
from pytest_desched.replay.objects import KINDS

ROLE_NAME = "desched-snapshot-reader"
DEFAULT_SERVICE_ACCOUNT = "desched-reader/desched-snapshot"
# Reads outside RESOURCES: (group, resource) -> verbs. The policy ConfigMap is read by name.
POINT_READS: dict[tuple[str, str], tuple[str, ...]] = {
    (KINDS["ConfigMap"].group, KINDS["ConfigMap"].plural): ("get",),
    # the usage metrics.k8s.io serves (capture/usage.py); without it: "no usage recorded"
    **{(USAGE_GROUP, res): ("list",) for res in USAGE_RESOURCES},
}
# GET /version (the snapshot's header) and discovery (the client and kwokctl's exporter).
# (RBAC globs over the discovery roots, not API paths: objects.py spells those.)
_DISCOVERY = ("/api", "/apis")
NON_RESOURCE_URLS = ("/version", *(u for root in _DISCOVERY for u in (root, f"{root}/*")))


def resource_reads() -> dict[tuple[str, str], tuple[str, ...]]:
    """(group, resource) -> verbs: what snapshot and record read, from their own tables."""
    reads: dict[tuple[str, str], tuple[str, ...]] = {}
    for section, (_, res, _) in RESOURCES.items():
        kind = KINDS[SECTIONS[section][1]]
        reads[(kind.group, res)] = READ_VERBS  # list (snapshot), list + watch (record), get (ns)
    for key, verbs in POINT_READS.items():
        reads[key] = tuple(dict.fromkeys(reads.get(key, ()) + verbs))
    return reads


def parse_service_account(value: str) -> tuple[str, str]:
    """`NS/NAME` -> (namespace, name)."""
    ns, sep, name = value.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ConfigError(f"--service-account {value!r}: give NAMESPACE/NAME")
    return ns, name


def rbac_objects(service_account: str = DEFAULT_SERVICE_ACCOUNT) -> list[dict[str, Any]]:
    """The ClusterRole and its ClusterRoleBinding to the ServiceAccount `NS/NAME`."""
    ns, name = parse_service_account(service_account)
    by_group: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, res), verbs in sorted(resource_reads().items()):
        by_group.setdefault((group, verbs), []).append(res)
    rules: list[dict[str, Any]] = [
        {"apiGroups": [group], "resources": resources, "verbs": list(verbs)}
        for (group, verbs), resources in by_group.items()
    ]
    rules.append({"nonResourceURLs": list(NON_RESOURCE_URLS), "verbs": ["get"]})
    labels = {"app.kubernetes.io/managed-by": "desched"}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": ROLE_NAME, "labels": labels},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{ROLE_NAME}-{ns}-{name}", "labels": labels},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": ROLE_NAME,
        },
        "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": name}],
    }
    return [role, binding]


def render_rbac(service_account: str = DEFAULT_SERVICE_ACCOUNT) -> str:
    """The objects as one multi-document YAML stream, for `kubectl apply -f -`."""
    head = (
        "# desched snapshot / desched record: read-only (get, list, watch), no Secrets.\n"
        "# The ServiceAccount itself is not created here: kubectl create serviceaccount.\n"
    )
    return head + yaml.safe_dump_all(rbac_objects(service_account), sort_keys=False)
