"""The fail-closed check of a chart render, on documents shaped like the pinned chart's output.

The shapes mirror `helm template` of descheduler-0.36.0 with `--set suspend=true`: one
CronJob whose container reads /policy-dir/policy.yaml from the `policy-volume` ConfigMap
volume, and the ConfigMap holding `policy.yaml`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from pytest_desched.descheduler.policy import load_default
from pytest_desched.descheduler.render_checks import check_render, cronjob_args, parse_manifests
from pytest_desched.errors import UnsafeRender
from pytest_desched.tools.versions import load_versions

IMAGE = load_versions().descheduler_image
POLICY = load_default()


def policy_yaml(doc: dict[str, Any]) -> str:
    """What the chart's configmap.yaml renders: apiVersion, kind, then the values body."""
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
    return f'apiVersion: "{doc["apiVersion"]}"\nkind: "DeschedulerPolicy"\n' + yaml.safe_dump(
        body, sort_keys=True
    )


def render(dry_run: bool = True, policy_doc: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    policy_doc = policy_doc or POLICY.to_dict()
    labels = {"app.kubernetes.io/name": "descheduler", "app.kubernetes.io/instance": "descheduler"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "descheduler"}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "descheduler", "namespace": "kube-system", "labels": labels},
            "data": {"policy.yaml": policy_yaml(policy_doc)},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "descheduler", "namespace": "kube-system", "labels": labels},
            "spec": {
                "schedule": "*/2 * * * *",
                "suspend": True,
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "metadata": {"name": "descheduler", "labels": labels},
                            "spec": {
                                "serviceAccountName": "descheduler",
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "descheduler",
                                        "image": IMAGE,
                                        "command": ["/bin/descheduler"],
                                        "args": [
                                            "--policy-config-file=/policy-dir/policy.yaml",
                                            f"--dry-run={'true' if dry_run else 'false'}",
                                            "--logging-format=json",
                                            "--v=4",
                                        ],
                                        "volumeMounts": [
                                            {"mountPath": "/policy-dir", "name": "policy-volume"}
                                        ],
                                    }
                                ],
                                "volumes": [
                                    {"name": "policy-volume", "configMap": {"name": "descheduler"}}
                                ],
                            },
                        }
                    }
                },
            },
        },
    ]


def cronjob(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "CronJob")


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return cronjob(docs)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]


def problems(docs: list[dict[str, Any]], **kw: Any) -> str:
    kw.setdefault("dry_run", True)
    kw.setdefault("image", IMAGE)
    with pytest.raises(UnsafeRender) as ei:
        check_render(docs, **kw)
    msg = str(ei.value)
    assert msg.startswith("unsafe chart render, nothing installed:")
    return msg


# -- safe renders pass ------------------------------------------------------------------
def test_first_install_render_passes() -> None:
    passed = check_render(render(dry_run=True), dry_run=True, image=IMAGE)
    assert passed == [
        "cronjob.suspend=true",
        "args --dry-run=true",
        f"image {IMAGE}",
        "policy ConfigMap descheduler mounted",
    ]


def test_active_render_with_matching_policy_passes() -> None:
    passed = check_render(render(dry_run=False), dry_run=False, image=IMAGE, policy=POLICY)
    assert "args --dry-run=false" in passed
    assert f"policy digest {POLICY.digest()[:12]}" in passed


def test_render_text_round_trip() -> None:
    text = "---\n# Source: descheduler/templates/cronjob.yaml\n" + "---\n".join(
        yaml.safe_dump(d) for d in render()
    )
    text += "---\n# empty document\n"
    docs = parse_manifests(text)
    assert [d["kind"] for d in docs] == ["ServiceAccount", "ConfigMap", "CronJob"]
    assert cronjob_args(cronjob(docs))[:2] == [
        "--policy-config-file=/policy-dir/policy.yaml",
        "--dry-run=true",
    ]
    assert check_render(docs, dry_run=True, image=IMAGE, policy=POLICY)


# -- each safety rule fails closed --------------------------------------------------------
def test_suspend_missing() -> None:
    docs = render()
    del cronjob(docs)["spec"]["suspend"]
    msg = problems(docs)
    assert "CronJob descheduler: spec.suspend is None; set --set suspend=true" in msg


def test_suspend_false() -> None:
    docs = render()
    cronjob(docs)["spec"]["suspend"] = False
    assert "CronJob descheduler: spec.suspend is False; set --set suspend=true" in problems(docs)


def test_suspend_must_be_boolean_true() -> None:
    docs = render()
    cronjob(docs)["spec"]["suspend"] = "true"
    assert "spec.suspend is 'true'" in problems(docs)


def test_active_args_at_first_install() -> None:
    msg = problems(render(dry_run=False), dry_run=True)
    assert "CronJob descheduler: args ['--dry-run=false']; expected exactly --dry-run=true" in msg


def test_dry_run_args_when_active_expected() -> None:
    msg = problems(render(dry_run=True), dry_run=False, policy=POLICY)
    assert "expected exactly --dry-run=false" in msg


def test_dry_run_flag_missing() -> None:
    docs = render()
    container(docs)["args"].remove("--dry-run=true")
    assert "CronJob descheduler: args lack --dry-run; expected exactly --dry-run=true" in problems(
        docs
    )


def test_contradicting_dry_run_flags() -> None:
    docs = render()
    container(docs)["args"].append("--dry-run=false")  # the last flag wins in the binary
    assert "['--dry-run=true', '--dry-run=false']" in problems(docs)


def test_wrong_image_tag() -> None:
    docs = render()
    container(docs)["image"] = IMAGE.rsplit(":", 1)[0] + ":v0.35.0"
    msg = problems(docs)
    assert f"CronJob descheduler: image '{IMAGE.rsplit(':', 1)[0]}:v0.35.0'" in msg
    assert f"pinned is '{IMAGE}'" in msg


def test_policy_file_not_read() -> None:
    docs = render()
    container(docs)["args"][0] = "--policy-config-file=/etc/other.yaml"
    assert "CronJob descheduler: args do not read /policy-dir/policy.yaml" in problems(docs)


def test_no_policy_configmap() -> None:
    docs = [d for d in render() if d["kind"] != "ConfigMap"]
    msg = problems(docs)
    assert "render has 0 policy ConfigMaps, expected 1 (deschedulerPolicy empty?)" in msg


def test_configmap_without_policy_key_does_not_count() -> None:
    docs = render()
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    cm["data"] = {"other.yaml": "x: 1"}
    assert "render has 0 policy ConfigMaps" in problems(docs)


def test_two_policy_configmaps() -> None:
    docs = render()
    extra = copy.deepcopy(next(d for d in docs if d["kind"] == "ConfigMap"))
    extra["metadata"]["name"] = "descheduler-2"
    assert "render has 2 policy ConfigMaps" in problems([*docs, extra])


def test_configmap_not_mounted() -> None:
    docs = render()
    cronjob(docs)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"] = [
        {"name": "policy-volume", "configMap": {"name": "someone-elses"}}
    ]
    assert "CronJob descheduler does not mount ConfigMap descheduler" in problems(docs)


def test_no_volumes_at_all() -> None:
    docs = render()
    del cronjob(docs)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
    assert "does not mount ConfigMap descheduler" in problems(docs)


def test_rendered_policy_differs_from_written_policy() -> None:
    other = POLICY.to_dict()
    other["maxNoOfPodsToEvictTotal"] = other["maxNoOfPodsToEvictTotal"] + 5
    msg = problems(render(dry_run=False, policy_doc=other), dry_run=False, policy=POLICY)
    assert "rendered policy.yaml differs from the policy written into values" in msg


def test_policy_not_compared_when_not_given() -> None:
    other = POLICY.to_dict()
    other["maxNoOfPodsToEvictTotal"] = 99
    assert check_render(render(policy_doc=other), dry_run=True, image=IMAGE)


@pytest.mark.parametrize("count", [0, 2])
def test_exactly_one_cronjob(count: int) -> None:
    docs = [d for d in render() if d["kind"] != "CronJob"]
    docs += [cronjob(render())] * count
    with pytest.raises(UnsafeRender, match=rf"render has {count} CronJobs, expected 1"):
        check_render(docs, dry_run=True, image=IMAGE)


def test_all_problems_reported_together() -> None:
    docs = render(dry_run=False)
    cronjob(docs)["spec"]["suspend"] = False
    container(docs)["image"] = "example.com/descheduler:latest"
    msg = problems(docs, dry_run=True)
    assert len(msg.splitlines()) == 4  # header + three problems
    assert "spec.suspend is False" in msg
    assert "expected exactly --dry-run=true" in msg
    assert "image 'example.com/descheduler:latest'" in msg


def test_check_does_not_modify_the_render() -> None:
    docs = render()
    before = copy.deepcopy(docs)
    check_render(docs, dry_run=True, image=IMAGE, policy=POLICY)
    assert docs == before
