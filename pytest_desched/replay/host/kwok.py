"""kwok in the host cluster, for one host replay: the controller manages this run's fake nodes
(and the pods on them) and nothing else.

`--manage-all-nodes=false --manage-nodes-with-label-selector=RUN_LABEL=<run id>`: kwok watches
only the nodes this run created, so a host's real nodes, and another run's fake nodes, are
never its business. Its own pod runs on a real node (it does not tolerate the fake-node
taint). Every object carries the run label and `ROLE_LABEL=kwok`, so teardown removes it last
(`host.teardown`).
"""

from __future__ import annotations

from typing import Any

from pytest_desched.replay.host.plan import ROLE_LABEL, RUN_LABEL
from pytest_desched.tools.kind_runtime import kwok_image_tag

_CONFIG_DIR = "/etc/kwok"
_PORT = 10247


def kwok_namespace(run_id: str) -> str:
    return f"desched-host-kwok-{run_id}"


def kwok_image(version: str) -> str:
    """The default image (`make kind-image` builds it from the pinned module: dev/kind_node)."""
    return kwok_image_tag(version)


def kwok_objects(run_id: str, image: str, stages: str) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, ConfigMap (the `stages`,
    kwok's configuration: without it kwok exits), Deployment, in that order."""
    ns = kwok_namespace(run_id)
    name = f"desched-host-kwok-{run_id}"
    labels = {RUN_LABEL: run_id, ROLE_LABEL: "kwok"}
    rules = [
        {
            "apiGroups": [""],
            "resources": ["nodes"],
            "verbs": ["get", "list", "watch", "patch", "update"],
        },
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["get", "list", "watch", "patch", "update", "delete"],
        },
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
    ]
    args = [
        "--kubeconfig=",  # in-cluster: its ServiceAccount
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=",
        f"--manage-nodes-with-label-selector={RUN_LABEL}={run_id}",
        "--node-ip=$(POD_IP)",
        "--node-lease-duration-seconds=40",
        f"--config={_CONFIG_DIR}/kwok.yaml",
        f"--server-address=0.0.0.0:{_PORT}",
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "kwok-controller", "namespace": ns, "labels": labels},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "kwok-controller", "namespace": ns}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kwok-config", "namespace": ns, "labels": labels},
            "data": {"kwok.yaml": stages},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "kwok-controller", "namespace": ns, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "kwok-controller"}},
                "template": {
                    "metadata": {"labels": {"app": "kwok-controller", **labels}},
                    "spec": {
                        "serviceAccountName": "kwok-controller",
                        "containers": [
                            {
                                "name": "kwok-controller",
                                "image": image,
                                "imagePullPolicy": "IfNotPresent",
                                "args": args,
                                "env": [
                                    {
                                        "name": "POD_IP",
                                        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                                    }
                                ],
                                # Ready means serving, not merely started: a kwok that exits
                                # (a bad config) is never counted ready
                                "readinessProbe": {
                                    "httpGet": {"path": "/healthz", "port": _PORT},
                                    "periodSeconds": 2,
                                },
                                "volumeMounts": [
                                    {"name": "config", "mountPath": _CONFIG_DIR, "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "kwok-config"}}],
                    },
                },
            },
        },
    ]
