"""The canary's static comparison: each compare_* on small hand-made inputs, then the real charts.

The real-chart tests compare the pinned chart (0.36.0, packaged from the v0.36.0 module) with
the charts inside the two upstream snapshots in ../shared/upstream (sha256 checked against its
README). Read by hand first (`diff -r` of the chart trees): master 7d2b28bf2 drops `delete`
from the ClusterRole's pods rule and adds an opt-in PodDisruptionBudget (values
`podDisruptionBudget.enabled: false`; the template renders only with `kind: Deployment` and
`enabled: true`); pr1883 5f6c6d7b0 differs only in Chart.yaml key order and a tests/.gitignore,
so nothing that `helm show values` or `helm template` produces differs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched.canary.static import (
    Difference,
    StaticComparison,
    chart_label,
    compare_charts,
    compare_defaults,
    compare_lint,
    compare_manifests,
    compare_metric_names,
    compare_values,
    default_protections_from_source,
    effective_protections,
    render_chart,
)
from pytest_desched.descheduler.chart_source import obtain_chart
from pytest_desched.descheduler.policy.checker import facts_for
from pytest_desched.descheduler.policy.lint import Finding
from pytest_desched.proc import helm_env
from pytest_desched.tools.toolchain import Toolchain
from tests.upstream import SNAPSHOTS, tarball, upstream_dir

Row = tuple[str, str, str, str]  # area, path, change, severity
CJ = "CronJob/kube-system/descheduler"
CR = "ClusterRole/descheduler"
CM = "ConfigMap/kube-system/descheduler"


def rows(diffs: list[Difference]) -> set[Row]:
    return {(d.area, d.path, d.change, d.severity) for d in diffs}


# -- values ------------------------------------------------------------------------------------


def chart_values() -> dict[str, Any]:
    """A trimmed `helm show values` of the pinned chart."""
    return {
        "kind": "CronJob",
        "image": {"repository": "registry.k8s.io/descheduler/descheduler", "tag": ""},
        "schedule": "*/2 * * * *",
        "suspend": False,
        "leaderElection": {"enabled": False},
        "cmdOptions": {"v": 3},
        "deschedulerPolicy": {
            "profiles": [
                {
                    "name": "default",
                    "pluginConfig": [
                        {
                            "name": "DefaultEvictor",
                            "args": {
                                "podProtections": {
                                    "defaultDisabled": ["PodsWithLocalStorage"],
                                    "extraEnabled": ["PodsWithPVC"],
                                }
                            },
                        },
                        {"name": "RemoveDuplicates"},
                    ],
                }
            ]
        },
        "serviceAccount": {"create": True, "name": None},
    }


EVICTOR_ARGS = ("deschedulerPolicy", "profiles", 0, "pluginConfig", 0, "args", "podProtections")
POLICY_PATH = (
    "values.deschedulerPolicy.profiles[default].pluginConfig[DefaultEvictor].args.podProtections"
)


def edit(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    if value is DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return out


DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("cmdOptions", "v"), 2, ("values", "values.cmdOptions.v", "changed", "review")),
        (
            ("podDisruptionBudget",),
            {"enabled": False, "minAvailable": 1, "maxUnavailable": "", "annotations": {}},
            ("values", "values.podDisruptionBudget", "added", "info"),
        ),
        (("newFeature",), {"mode": "on"}, ("values", "values.newFeature", "added", "review")),
        (("leaderElection",), DELETE, ("values", "values.leaderElection", "removed", "review")),
        (
            ("serviceAccount", "name"),
            "",
            ("values", "values.serviceAccount.name", "changed", "info"),
        ),
        (
            (*EVICTOR_ARGS, "defaultDisabled"),
            ["PodsWithLocalStorage", "DaemonSetPods"],
            ("values", f"{POLICY_PATH}.defaultDisabled", "changed", "rollback"),
        ),
        (
            (*EVICTOR_ARGS, "extraEnabled"),
            [],
            ("values", f"{POLICY_PATH}.extraEnabled", "changed", "rollback"),
        ),
        (
            (*EVICTOR_ARGS, "defaultDisabled"),
            [],  # a protection turned back on: a change to review, never a rollback trigger
            ("values", f"{POLICY_PATH}.defaultDisabled", "changed", "review"),
        ),
    ],
)
def test_compare_values(path: tuple[Any, ...], value: Any, expected: Row) -> None:
    base = chart_values()
    assert rows(compare_values(base, edit(base, path, value))) == {expected}


def test_compare_values_identical_and_subtree_protection() -> None:
    base = chart_values()
    assert compare_values(base, copy.deepcopy(base)) == []
    # A whole DefaultEvictor entry appearing is one row, judged by the leaves inside it.
    no_evictor = edit(base, ("deschedulerPolicy", "profiles", 0, "pluginConfig"), [])
    with_lowered = edit(
        no_evictor,
        ("deschedulerPolicy", "profiles", 0, "pluginConfig"),
        [{"name": "DefaultEvictor", "args": {"podProtections": {"defaultDisabled": ["X"]}}}],
    )
    (d,) = compare_values(no_evictor, with_lowered)
    assert (d.change, d.severity) == ("changed", "rollback")
    assert "default protection(s) X disabled" in d.message


ARGS_PATH = ("deschedulerPolicy", "profiles", 0, "pluginConfig", 0, "args")
CHART_033_ARGS = {"ignorePvcPods": True, "evictLocalStoragePods": True}  # chart 0.33.0's default


def test_the_booleans_renamed_to_pod_protections_lower_nothing() -> None:
    """Chart 0.33.0 -> 0.36.0: the same protections active, so no rollback row; the rows that
    remain are renames to review."""
    base = edit(chart_values(), ARGS_PATH, dict(CHART_033_ARGS))
    diffs = compare_values(base, chart_values())
    assert diffs, "the rename itself is still shown"
    assert not [d for d in diffs if d.severity == "rollback"], [d.message for d in diffs]
    assert all("protection" not in d.message or "lowers" not in d.message for d in diffs)


def test_a_protection_list_beside_the_booleans_overrides_them_and_is_named() -> None:
    """podProtections set next to ignorePvcPods: the descheduler reads the list only, so the
    PVC protection the boolean gave is gone although no leaf about PVCs changed."""
    base = edit(chart_values(), ARGS_PATH, dict(CHART_033_ARGS))
    cand = edit(base, (*ARGS_PATH, "podProtections"), {"defaultDisabled": ["PodsWithLocalStorage"]})
    (d,) = compare_values(base, cand)
    assert d.severity == "rollback"
    assert "PodsWithPVC no longer active" in d.message


def test_a_boolean_that_really_drops_a_protection_is_still_a_rollback() -> None:
    base = edit(chart_values(), ARGS_PATH, dict(CHART_033_ARGS))
    cand = edit(base, (*ARGS_PATH, "ignorePvcPods"), False)
    (d,) = compare_values(base, cand)
    assert (d.severity, d.message.count("PodsWithPVC")) == ("rollback", 1)


def test_the_policy_configmap_rename_lowers_nothing() -> None:
    old = copy.deepcopy(POLICY)
    old["profiles"][0]["pluginConfig"][0]["args"] = {"evictLocalStoragePods": True}
    diffs = compare_manifests(render_with_policy(old), render_with_policy(POLICY))
    assert diffs and not [d for d in diffs if d.severity == "rollback"], [d.message for d in diffs]


def render_with_policy(policy: dict[str, Any]) -> list[dict[str, Any]]:
    docs = render()
    doc(docs, "ConfigMap")["data"]["policy.yaml"] = yaml.safe_dump(policy)
    return docs


def test_values_secret_never_shown() -> None:
    secret_a, secret_b = "s3cr3t-a-0123456789abcdef", "s3cr3t-b-0123456789abcdef"
    base = {"metrics": {"authToken": secret_a, "header": f"Bearer {secret_a}"}}
    cand = {"metrics": {"authToken": secret_b, "header": f"Bearer {secret_b}"}}
    diffs = compare_values(base, cand)
    assert rows(diffs) == {
        ("values", "values.metrics.authToken", "changed", "review"),
        ("values", "values.metrics.header", "changed", "review"),
    }
    comparison = StaticComparison({"version": "a"}, {"version": "b"}, diffs)
    shown = json.dumps(comparison.to_dict()) + comparison.markdown() + repr(diffs)
    assert secret_a not in shown and secret_b not in shown
    assert "<redacted>" in shown


# -- manifests ---------------------------------------------------------------------------------

LABELS = {
    "app.kubernetes.io/name": "descheduler",
    "helm.sh/chart": "descheduler-0.36.0",
    "app.kubernetes.io/version": "0.36.0",
}
POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "default",
            "pluginConfig": [
                {
                    "name": "DefaultEvictor",
                    "args": {"podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]}},
                }
            ],
        }
    ],
}


def render() -> list[dict[str, Any]]:
    """The shape of `helm template` of the pinned chart with the runbook's first-install flags."""
    meta = {"name": "descheduler", "namespace": "kube-system", "labels": dict(LABELS)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": copy.deepcopy(meta),
            "data": {"policy.yaml": yaml.safe_dump(POLICY)},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "descheduler", "labels": dict(LABELS)},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "list"]},
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "watch", "list", "delete"],
                },
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "descheduler", "labels": dict(LABELS)},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "descheduler",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "descheduler", "namespace": "kube-system"}
            ],
        },
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": copy.deepcopy(meta),
            "spec": {
                "schedule": "*/2 * * * *",
                "suspend": True,
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "metadata": {"annotations": {"checksum/config": "aaa"}},
                            "spec": {
                                "serviceAccountName": "descheduler",
                                "containers": [
                                    {
                                        "name": "descheduler",
                                        "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
                                        "command": ["/bin/descheduler"],
                                        "args": [
                                            "--policy-config-file=/policy-dir/policy.yaml",
                                            "--dry-run=true",
                                            "--v=3",
                                        ],
                                    }
                                ],
                            },
                        }
                    }
                },
            },
        },
    ]


def doc(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind)


def rule(docs: list[dict[str, Any]], resource: str) -> dict[str, Any]:
    return next(r for r in doc(docs, "ClusterRole")["rules"] if r["resources"] == [resource])


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec = doc(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec["containers"][0]


def cand_with(mutate: Callable[[list[dict[str, Any]]], Any]) -> list[Difference]:
    cand = render()
    mutate(cand)
    return compare_manifests(render(), cand)


def test_manifests_identical() -> None:
    assert compare_manifests(render(), render()) == []


def test_rbac_narrowed_pods_delete() -> None:
    (d,) = cand_with(lambda c: rule(c, "pods").update(verbs=["get", "watch", "list"]))
    assert (d.area, d.path, d.change, d.severity) == (
        "rbac",
        f"{CR} rules[pods]",
        "narrowed",
        "review",
    )
    assert (d.baseline, d.candidate) == (
        ["delete", "get", "list", "watch"],
        ["get", "list", "watch"],
    )
    assert "no longer grants delete on pods" in d.message


def test_rbac_widened_verb_and_new_rule() -> None:
    def widen(c: list[dict[str, Any]]) -> None:
        rule(c, "nodes")["verbs"].append("patch")
        doc(c, "ClusterRole")["rules"].append(
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}
        )

    diffs = cand_with(widen)
    assert rows(diffs) == {
        ("rbac", f"{CR} rules[nodes]", "widened", "rollback"),
        ("rbac", f"{CR} rules[apps/deployments]", "widened", "rollback"),
    }
    nodes = next(d for d in diffs if d.path.endswith("[nodes]"))
    assert nodes.candidate == ["get", "list", "patch", "watch"]
    assert "grants patch on nodes" in nodes.message


@pytest.mark.parametrize(
    ("base_rule", "cand_rule", "expected"),
    [
        # A wildcard covers explicit verbs: only the lost wildcard is reported.
        (
            {"resources": ["pods"], "verbs": ["*"]},
            {"resources": ["pods"], "verbs": ["get", "list"]},
            {("rbac", f"{CR} rules[pods]", "narrowed", "review")},
        ),
        (
            {"resources": ["pods"], "verbs": ["get", "list"]},
            {"resources": ["pods"], "verbs": ["*"]},
            {("rbac", f"{CR} rules[pods]", "widened", "rollback")},
        ),
        (
            {"resources": ["*"], "verbs": ["get"]},
            {"resources": ["pods", "pods/log"], "verbs": ["get"]},
            {("rbac", f"{CR} rules[*]", "narrowed", "review")},
        ),
        # resourceNames narrow a rule: dropping them widens it.
        (
            {"resources": ["leases"], "resourceNames": ["descheduler"], "verbs": ["get"]},
            {"resources": ["leases"], "verbs": ["get"]},
            {("rbac", f"{CR} rules[leases]", "widened", "rollback")},
        ),
        (
            {"resources": ["leases"], "verbs": ["get"]},
            {"resources": ["leases"], "resourceNames": ["descheduler"], "verbs": ["get"]},
            {("rbac", f"{CR} rules[leases]", "narrowed", "review")},
        ),
    ],
)
def test_rbac_wildcards_and_names(
    base_rule: dict[str, Any], cand_rule: dict[str, Any], expected: set[Row]
) -> None:
    def with_rule(r: dict[str, Any]) -> list[dict[str, Any]]:
        docs = render()
        doc(docs, "ClusterRole")["rules"] = [{"apiGroups": [""], **r}]
        return docs

    assert rows(compare_manifests(with_rule(base_rule), with_rule(cand_rule))) == expected


def test_binding_subjects_and_role_ref() -> None:
    def edit_binding(c: list[dict[str, Any]]) -> None:
        b = doc(c, "ClusterRoleBinding")
        b["subjects"].append({"kind": "Group", "name": "system:authenticated"})
        b["roleRef"]["name"] = "cluster-admin"

    assert rows(cand_with(edit_binding)) == {
        ("rbac", "ClusterRoleBinding/descheduler subjects", "widened", "rollback"),
        ("rbac", "ClusterRoleBinding/descheduler roleRef", "changed", "rollback"),
    }


def test_objects_added_and_removed() -> None:
    def change(c: list[dict[str, Any]]) -> None:
        c.remove(doc(c, "ServiceAccount"))
        c.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "descheduler", "namespace": "kube-system"},
                "spec": {"minAvailable": 1},
            }
        )
        c.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "extra", "namespace": "lab"},
                "rules": [],
            }
        )

    diffs = cand_with(change)
    assert rows(diffs) == {
        ("object", "ServiceAccount/kube-system/descheduler", "removed", "review"),
        ("object", "PodDisruptionBudget/kube-system/descheduler", "added", "review"),
        ("rbac", "Role/lab/extra", "added", "rollback"),
    }


def test_cronjob_fields() -> None:
    def change(c: list[dict[str, Any]]) -> None:
        spec = doc(c, "CronJob")["spec"]
        spec["schedule"] = "*/5 * * * *"
        spec["concurrencyPolicy"] = "Allow"
        spec["jobTemplate"]["spec"]["backoffLimit"] = 0

    assert rows(cand_with(change)) == {
        ("cronjob", f"{CJ} spec.schedule", "changed", "review"),
        ("cronjob", f"{CJ} spec.concurrencyPolicy", "changed", "review"),
        ("cronjob", f"{CJ} spec.jobTemplate.spec.backoffLimit", "added", "review"),
    }
    # A candidate chart that ignores the runbook's suspend=true would run on its schedule.
    (d,) = cand_with(lambda c: doc(c, "CronJob")["spec"].update(suspend=False))
    assert (d.path, d.severity) == (f"{CJ} spec.suspend", "rollback")


def test_args_and_image() -> None:
    def change(c: list[dict[str, Any]]) -> None:
        ct = container(c)
        ct["args"] = ["--policy-config-file=/policy-dir/policy.yaml", "--v=4", "--new-flag"]
        ct["image"] = "registry.k8s.io/descheduler/descheduler:v0.37.0"

    diffs = cand_with(change)
    where = f"{CJ} containers[descheduler]"
    assert rows(diffs) == {
        ("args", f"{where}.args --v", "changed", "review"),
        ("args", f"{where}.args --dry-run", "removed", "rollback"),
        ("args", f"{where}.args --new-flag", "added", "review"),
        ("image", f"{where}.image", "changed", "review"),
    }
    v = next(d for d in diffs if d.path.endswith("--v"))
    assert (v.baseline, v.candidate) == ("3", "4")


def test_chart_labels_are_one_info_row_per_object() -> None:
    def bump(c: list[dict[str, Any]]) -> None:
        for d in c:
            d["metadata"]["labels"].update(
                {"helm.sh/chart": "descheduler-0.37.0", "app.kubernetes.io/version": "0.37.0"}
            )
        tmpl = doc(c, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]
        tmpl["metadata"]["annotations"]["checksum/config"] = "bbb"

    diffs = cand_with(bump)
    assert {d.severity for d in diffs} == {"info"}
    assert rows(diffs) == {
        ("object", "ServiceAccount/kube-system/descheduler metadata.labels", "changed", "info"),
        ("object", f"{CM} metadata.labels", "changed", "info"),
        ("rbac", f"{CR} metadata.labels", "changed", "info"),
        ("rbac", "ClusterRoleBinding/descheduler metadata.labels", "changed", "info"),
        ("cronjob", f"{CJ} metadata.labels", "changed", "info"),
        (
            "cronjob",
            f"{CJ} spec.jobTemplate.spec.template.metadata.annotations",
            "changed",
            "info",
        ),
    }
    cj = next(d for d in diffs if d.path == f"{CJ} metadata.labels")
    assert cj.candidate == {
        "helm.sh/chart": "descheduler-0.37.0",
        "app.kubernetes.io/version": "0.37.0",
    }


def test_policy_configmap_lowered_protection() -> None:
    lowered = copy.deepcopy(POLICY)
    lowered["profiles"][0]["pluginConfig"][0]["args"]["podProtections"]["defaultDisabled"] += [
        "SystemCriticalPods"
    ]
    (d,) = cand_with(
        lambda c: doc(c, "ConfigMap")["data"].update({"policy.yaml": yaml.safe_dump(lowered)})
    )
    assert d.path == (
        f'{CM} data["policy.yaml"].profiles[default].pluginConfig[DefaultEvictor]'
        ".args.podProtections.defaultDisabled"
    )
    assert (d.area, d.severity) == ("object", "rollback")
    assert "SystemCriticalPods" in d.message


# -- lint --------------------------------------------------------------------------------------


def finding(rule_id: str, severity: str, path: str, message: str = "m") -> Finding:
    return Finding(rule_id, severity, "policy.yaml", path, message, "fix")  # type: ignore[arg-type]


def test_compare_lint() -> None:
    base = [
        finding("DL010", "warning", "evictionFailureEventNotification"),
        finding("DL012", "warning", "profiles[0]", "issue-1882 on v0.36.0"),
        finding("DL011", "warning", "profiles[0].pluginConfig[0].args.minPodAge", "old wording"),
    ]
    cand = [
        finding("DL010", "warning", "evictionFailureEventNotification"),
        finding("DL011", "warning", "profiles[0].pluginConfig[0].args.minPodAge", "new wording"),
        finding("DL001", "error", "<root>", "descheduler v0.37.0 refuses it"),
        finding("DL009", "warning", "maxNoOfPodsToEvictTotal"),
        finding("DL008", "note", "profiles[0]"),
    ]
    assert rows(compare_lint(base, cand)) == {
        ("policy-lint", "DL012 known-bug profiles[0]", "removed", "info"),
        (
            "policy-lint",
            "DL011 min-pod-age-missing profiles[0].pluginConfig[0].args.minPodAge",
            "changed",
            "info",
        ),
        ("policy-lint", "DL001 rejected-by-descheduler <root>", "added", "rollback"),
        ("policy-lint", "DL009 no-eviction-cap maxNoOfPodsToEvictTotal", "added", "review"),
        ("policy-lint", "DL008 protections-lowered profiles[0]", "added", "info"),
    }
    worse = [finding("DL010", "error", "evictionFailureEventNotification")]
    (d,) = compare_lint(base[:1], worse)
    assert (d.change, d.severity) == ("changed", "rollback")
    assert compare_lint(base, list(base)) == []


# -- defaults ----------------------------------------------------------------------------------


def effective(
    evictor: dict[str, Any] | None = None,
    deschedule: list[str] | None = None,
    balance: list[str] | None = None,
    preevictionfilter: list[str] | None = None,
    **top: Any,
) -> dict[str, Any]:
    """The shape policycheck's `effective` has (converted, defaulted v1alpha2)."""
    args = {"priorityThreshold": {"value": 2000000000, "name": ""}, "podProtections": {}}
    args.update(evictor or {})
    return {
        "kind": "DeschedulerPolicy",
        "apiVersion": "descheduler/v1alpha2",
        "maxNoOfPodsToEvictPerNode": 1,
        "maxNoOfPodsToEvictTotal": 2,
        "gracePeriodSeconds": 30,
        **top,
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": "DefaultEvictor", "args": args}],
                "plugins": {
                    "sort": {"enabled": None, "disabled": None},
                    "deschedule": {
                        "enabled": ["RemovePodsViolatingNodeAffinity"]
                        if deschedule is None
                        else deschedule,
                        "disabled": None,
                    },
                    "balance": {"enabled": balance, "disabled": None},
                    "filter": {"enabled": ["DefaultEvictor"], "disabled": None},
                    "preevictionfilter": {
                        "enabled": ["DefaultEvictor"]
                        if preevictionfilter is None
                        else preevictionfilter,
                        "disabled": None,
                    },
                },
            }
        ],
    }


RUNBOOK_EVICTOR = {
    "nodeFit": True,
    "minReplicas": 2,
    "minPodAge": "10m0s",
    "podProtections": {"extraEnabled": ["PodsWithPVC", "PodsWithoutPDB"]},
}
PROT = "profiles[p].DefaultEvictor.protections"
ARGS = "profiles[p].pluginConfig[DefaultEvictor].args"


@pytest.mark.parametrize(
    ("cand", "expected"),
    [
        (effective(RUNBOOK_EVICTOR), set()),
        (
            effective(
                {
                    **RUNBOOK_EVICTOR,
                    "podProtections": {
                        "extraEnabled": ["PodsWithPVC", "PodsWithoutPDB"],
                        "defaultDisabled": ["DaemonSetPods"],
                    },
                }
            ),
            {("defaults", f"{PROT}[DaemonSetPods]", "removed", "rollback")},
        ),
        (
            effective({**RUNBOOK_EVICTOR, "podProtections": {"extraEnabled": ["PodsWithPVC"]}}),
            {("defaults", f"{PROT}[PodsWithoutPDB]", "removed", "rollback")},
        ),
        (
            effective(
                {
                    **RUNBOOK_EVICTOR,
                    "podProtections": {
                        "extraEnabled": ["PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims"]
                    },
                }
            ),
            {("defaults", f"{PROT}[PodsWithResourceClaims]", "added", "review")},
        ),
        (
            effective({**RUNBOOK_EVICTOR, "nodeFit": False}),
            {("defaults", f"{ARGS}.nodeFit", "changed", "rollback")},
        ),
        (
            effective({**RUNBOOK_EVICTOR, "minPodAge": "5m0s", "minReplicas": 1}),
            {
                ("defaults", f"{ARGS}.minPodAge", "changed", "rollback"),
                ("defaults", f"{ARGS}.minReplicas", "changed", "rollback"),
            },
        ),
        (
            effective({**RUNBOOK_EVICTOR, "minPodAge": "1h0m0s"}),
            {("defaults", f"{ARGS}.minPodAge", "changed", "review")},
        ),
        (
            effective({**RUNBOOK_EVICTOR, "priorityThreshold": {"value": 2000000001, "name": ""}}),
            {("defaults", f"{ARGS}.priorityThreshold.value", "changed", "rollback")},
        ),
        (
            effective(RUNBOOK_EVICTOR, balance=["LowNodeUtilization"]),
            {("defaults", "profiles[p].plugins.balance.enabled", "added", "rollback")},
        ),
        (
            effective(RUNBOOK_EVICTOR, deschedule=[]),
            {("defaults", "profiles[p].plugins.deschedule.enabled", "removed", "review")},
        ),
        (
            effective(RUNBOOK_EVICTOR, preevictionfilter=[]),
            {("defaults", "profiles[p].plugins.preevictionfilter.enabled", "removed", "rollback")},
        ),
        (
            effective(RUNBOOK_EVICTOR, maxNoOfPodsToEvictTotal=5, gracePeriodSeconds=60),
            {
                ("defaults", "maxNoOfPodsToEvictTotal", "changed", "rollback"),
                ("defaults", "gracePeriodSeconds", "changed", "review"),
            },
        ),
        (
            {
                k: v
                for k, v in effective(RUNBOOK_EVICTOR).items()
                if k != "maxNoOfPodsToEvictPerNode"
            },
            {("defaults", "maxNoOfPodsToEvictPerNode", "removed", "rollback")},
        ),
        (
            {**effective(RUNBOOK_EVICTOR), "profiles": []},
            {("defaults", "profiles[p]", "removed", "review")},
        ),
    ],
)
def test_compare_defaults(cand: dict[str, Any], expected: set[Row]) -> None:
    assert rows(compare_defaults(effective(RUNBOOK_EVICTOR), cand)) == expected


def test_compare_defaults_the_booleans_renamed_to_pod_protections_lower_nothing() -> None:
    """v0.33.0's defaulted chart policy (booleans) against v0.36.0's (podProtections): the
    same active set, so no row at all (the whole podProtections subtree is summarised as
    active protections, not read leaf by leaf)."""
    old = effective({"ignorePvcPods": True, "evictLocalStoragePods": True})
    del old["profiles"][0]["pluginConfig"][0]["args"]["podProtections"]  # v0.33.0 has no such field
    new = effective(
        {
            "podProtections": {
                "defaultDisabled": ["PodsWithLocalStorage"],
                "extraEnabled": ["PodsWithPVC"],
            }
        }
    )
    assert [d for d in compare_defaults(old, new) if d.severity == "rollback"] == []


def test_compare_defaults_candidate_drops_a_default_protection() -> None:
    """A candidate whose own defaultPodProtections lacks one: same policy, fewer protections."""
    pol = effective(RUNBOOK_EVICTOR)
    fewer = tuple(p for p in facts_for().default_pod_protections if p != "SystemCriticalPods")
    diffs = compare_defaults(pol, pol, candidate_protections=fewer)
    assert rows(diffs) == {("defaults", f"{PROT}[SystemCriticalPods]", "removed", "rollback")}
    # Without podProtections lists the deprecated booleans decide (defaultevictor.go), so the
    # default list does not apply: nothing differs.
    legacy = effective({"podProtections": {}})
    assert compare_defaults(legacy, legacy, candidate_protections=fewer) == []


@pytest.mark.parametrize(
    ("args", "active"),
    [
        ({}, set(facts_for().default_pod_protections)),
        (
            {"evictDaemonSetPods": True},
            set(facts_for().default_pod_protections) - {"DaemonSetPods"},
        ),
        ({"ignorePvcPods": True}, {*facts_for().default_pod_protections, "PodsWithPVC"}),
        (
            {
                "podProtections": {
                    "defaultDisabled": ["PodsWithLocalStorage"],
                    "extraEnabled": ["PodsWithPVC"],
                }
            },
            {"SystemCriticalPods", "FailedBarePods", "DaemonSetPods", "PodsWithPVC"},
        ),
    ],
)
def test_effective_protections(args: dict[str, Any], active: set[str]) -> None:
    assert set(effective_protections(args)) == active


def test_default_protections_from_source(tmp_path: Path) -> None:
    types_go = tmp_path / "pkg/framework/plugins/defaultevictor/types.go"
    types_go.parent.mkdir(parents=True)
    types_go.write_text(
        'const (\n\tPodsWithLocalStorage PodProtection = "PodsWithLocalStorage"\n'
        '\tDaemonSetPods PodProtection = "DaemonSetPods"\n)\n'
        "var defaultPodProtections = []PodProtection{\n\tPodsWithLocalStorage, // local\n"
        "\tDaemonSetPods,\n}\n"
    )
    assert default_protections_from_source(tmp_path) == ("PodsWithLocalStorage", "DaemonSetPods")
    types_go.write_text("package defaultevictor\n")
    with pytest.raises(ValueError, match="no defaultPodProtections"):
        default_protections_from_source(tmp_path)


# -- metrics and the result ----------------------------------------------------------------------


def test_compare_metric_names() -> None:
    base = {
        "descheduler_pods_evicted_total",
        "descheduler_loop_duration_seconds",
        "descheduler_build_info",
    }
    cand = {
        "descheduler_pods_evicted_totals",
        "descheduler_loop_duration_seconds",
        "descheduler_build_info",
        "descheduler_background_evictions_total",
    }
    diffs = compare_metric_names(base, cand)
    assert rows(diffs) == {
        ("metrics", "descheduler_pods_evicted_total", "removed", "rollback"),
        ("metrics", "descheduler_pods_evicted_totals", "added", "info"),
        ("metrics", "descheduler_background_evictions_total", "added", "info"),
    }
    assert "renamed to descheduler_pods_evicted_totals?" in diffs[0].message
    assert compare_metric_names(base, base) == []


def test_static_comparison_markdown_and_dict() -> None:
    diffs = [
        *compare_metric_names({"a_total"}, {"b_total"}),
        *cand_with(
            lambda c: rule(c, "pods").update(verbs=["get", "watch", "list", "delete", "patch"])
        ),
        *cand_with(lambda c: doc(c, "CronJob")["spec"].update(schedule="@hourly")),
    ]
    sc = StaticComparison(
        {"version": "v0.36.0", "chart_version": "0.36.0"}, {"version": "x"}, diffs
    )
    assert sc.counts() == {"rollback": 2, "review": 1, "info": 1}
    assert [d.path for d in sc.by_severity("rollback")] == ["a_total", f"{CR} rules[pods]"]
    md = sc.markdown()
    assert md.startswith("Baseline v0.36.0 (chart 0.36.0) against candidate x")
    # Areas by their worst row (ties in AREAS order), and inside an area the rollback rows lead.
    assert md.index("### rbac") < md.index("### metrics") < md.index("### cronjob")
    metrics = md[md.index("### metrics") : md.index("### cronjob")]
    assert metrics.index("| rollback |") < metrics.index("| info |")
    assert json.loads(json.dumps(sc.to_dict()))["counts"]["rollback"] == 2
    assert StaticComparison({}, {}, []).markdown().endswith("No static difference.")


# -- the real charts -----------------------------------------------------------------------------

TYPES_GO = "pkg/framework/plugins/defaultevictor/types.go"


def extract(name: str, dest: Path) -> Path:
    """The snapshot's chart and defaultevictor/types.go, into `dest` (never the repo)."""
    path = tarball(name)
    with tarfile.open(path) as tf:
        members = [
            m
            for m in tf.getmembers()
            if "/charts/descheduler/" in m.name or m.name.endswith(f"/{TYPES_GO}")
        ]
        tf.extractall(dest, members=members, filter="data")
    (root,) = [p for p in dest.iterdir() if p.is_dir()]
    return root


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tc = Toolchain()
    home = tmp_path_factory.mktemp("helm-home")
    return {
        "helm": tc.path("helm"),
        "env": helm_env(home),
        "pinned": obtain_chart(tc, tc.versions, source="module", report=lambda _m: None).path,
        "master": extract("master", tmp_path_factory.mktemp("master")),
        "pr1883": extract("pr1883", tmp_path_factory.mktemp("pr1883")),
    }


PDB_VALUES = {"kind": "Deployment", "podDisruptionBudget": {"enabled": True}}
NARROWED = ("rbac", f"{CR} rules[pods]", "narrowed", "review")
OPT_IN = ("values", "values.podDisruptionBudget", "added", "info")


def test_render_chart_uses_the_runbook_first_install_flags(real: dict[str, Any]) -> None:
    label = chart_label(real["pinned"], "v0.36.0", "module")
    assert label["chart_sha256"] == hashlib.sha256(real["pinned"].read_bytes()).hexdigest()
    assert (label["chart_version"], label["chart_app_version"]) == ("0.36.0", "0.36.0")
    shown, docs = render_chart(real["helm"], real["pinned"], None, real["env"])
    assert shown["suspend"] is False and shown["cmdOptions"] == {"v": 3}  # the chart's own
    (cj,) = [d for d in docs if d["kind"] == "CronJob"]
    assert cj["spec"]["suspend"] is True
    args = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert set(args) == {
        "--policy-config-file=/policy-dir/policy.yaml",
        "--dry-run=true",
        "--v=4",
        "--logging-format=json",
    }


def test_pinned_vs_master_chart(real: dict[str, Any]) -> None:
    """master 7d2b28bf2: ClusterRole without pods delete; the PDB is opt-in, so only values show it."""
    diffs = compare_charts(
        real["helm"], real["pinned"], real["master"] / "charts/descheduler", real["env"]
    )
    assert rows(diffs) == {NARROWED, OPT_IN}
    by = {d.area: d for d in diffs}
    assert (by["rbac"].baseline, by["rbac"].candidate) == (
        ["delete", "get", "list", "watch"],
        ["get", "list", "watch"],
    )
    assert by["values"].candidate == {
        "enabled": False,
        "minAvailable": 1,
        "maxUnavailable": "",
        "annotations": {},
    }
    assert not [d for d in diffs if d.severity == "rollback"]


def test_pinned_vs_master_chart_pdb_enabled(real: dict[str, Any]) -> None:
    """Enabled on a Deployment, the PDB is an object the baseline never creates."""
    diffs = compare_charts(
        real["helm"], real["pinned"], real["master"] / "charts/descheduler", real["env"], PDB_VALUES
    )
    pdb_row = ("object", "PodDisruptionBudget/kube-system/descheduler", "added", "review")
    assert rows(diffs) == {NARROWED, OPT_IN, pdb_row}
    (pdb,) = [d for d in diffs if d.area == "object"]
    assert pdb.candidate["apiVersion"] == "policy/v1"  # the lab clusters' API, not v1beta1
    assert pdb.candidate["spec"] == {
        "minAvailable": 1,
        "selector": {
            "matchLabels": {
                "app.kubernetes.io/name": "descheduler",
                "app.kubernetes.io/instance": "descheduler",
            }
        },
    }


@pytest.mark.parametrize("values", [None, PDB_VALUES], ids=["defaults", "deployment-pdb"])
def test_pinned_vs_pr1883_chart_renders_the_same(real: dict[str, Any], values: Any) -> None:
    """pr1883 5f6c6d7b0 changes no chart value or template (only Chart.yaml's key order)."""
    chart = real["pr1883"] / "charts/descheduler"
    assert compare_charts(real["helm"], real["pinned"], chart, real["env"], values) == []
    label = chart_label(chart, "5f6c6d7b0", "candidate-tree")
    assert (label["chart_version"], label["chart_app_version"]) == ("0.36.0", "0.36.0")


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_snapshots_keep_the_default_protections(real: dict[str, Any], name: str) -> None:
    assert default_protections_from_source(real[name]) == facts_for().default_pod_protections


@pytest.mark.policycheck
def test_defaults_through_the_real_policycheck() -> None:
    """The runbook policy against a copy that disables a default protection, both v0.36.0-defaulted."""
    from pytest_desched.descheduler.policy.checker import checker_for
    from pytest_desched.tools.resources import manifest_path

    doc_ = yaml.safe_load(manifest_path("policy-safe-rebalance.yaml").read_text())
    lowered = copy.deepcopy(doc_)
    lowered["profiles"][0]["pluginConfig"][0]["args"]["podProtections"]["defaultDisabled"] = [
        "DaemonSetPods"
    ]
    checker = checker_for()
    base, cand = checker.check_doc(doc_), checker.check_doc(lowered)
    assert base.accepted and cand.accepted
    assert rows(compare_defaults(base.effective, cand.effective)) == {
        (
            "defaults",
            "profiles[safe-rebalance].DefaultEvictor.protections[DaemonSetPods]",
            "removed",
            "rollback",
        )
    }


def test_v0_35_0_to_v0_35_1_charts_name_1839(real: dict[str, Any]) -> None:
    """The charts v0.35.0 and v0.35.1 shipped (../shared/upstream), rendered by the pinned
    helm with the user's PVC-protecting policy: the candidate's new PVC rule is a rollback
    trigger named as #1839's fix; the other way round, the candidate (chart 0.35.0 with
    v0.35.0) is DR009, #1839 itself."""
    up = upstream_dir()
    c350, c351 = up / "descheduler-chart-0.35.0.tgz", up / "descheduler-chart-0.35.1.tgz"
    policy = {
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {
                        "name": "DefaultEvictor",
                        "args": {"podProtections": {"extraEnabled": ["PodsWithPVC"]}},
                    }
                ],
            }
        ]
    }
    up_diffs = compare_charts(
        real["helm"],
        c350,
        c351,
        real["env"],
        releases=(("0.35.0", "v0.35.0"), ("0.35.1", "v0.35.1")),
        policies=[policy],
    )
    [pvc] = [d for d in up_diffs if d.rule == "DR001" and "persistentvolumeclaims" in d.path]
    assert pvc.severity == "rollback"
    assert "it is the fix of descheduler#1839" in pvc.message and "PodsWithPVC" in pvc.message
    assert not [d for d in up_diffs if d.rule == "DR009"]
    down = compare_charts(
        real["helm"],
        c351,
        c350,
        real["env"],
        releases=(("0.35.1", "v0.35.1"), ("0.35.0", "v0.35.0")),
    )
    [bug] = [d for d in down if d.rule == "DR009"]
    assert bug.message.startswith("descheduler#1839 on the candidate: chart 0.35.0's ClusterRole")
