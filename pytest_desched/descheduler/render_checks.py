"""The fail-closed checks of a chart's render: suspended, dry-run as asked, the image, the
policy ConfigMap mounted and matching the policy applied; nothing installs when one fails."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.descheduler.policy import Policy, digest_of_rendered
from pytest_desched.errors import UnsafeRender

if TYPE_CHECKING:
    pass


# -- rendering and checks ---------------------------------------------------
def parse_manifests(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind")]


def find(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d.get("kind") == kind]


def cronjob_args(cj: dict) -> list[str]:
    c = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    return [str(a) for a in c.get("args", [])]


def check_render(
    docs: list[dict], *, dry_run: bool, image: str, policy: Policy | None = None
) -> list[str]:
    """All safety checks of one render; returns the checks that passed (raises on any failure)."""
    problems: list[str] = []
    passed: list[str] = []
    cjs = find(docs, "CronJob")
    if len(cjs) != 1:
        raise UnsafeRender(
            f"render has {len(cjs)} CronJobs, expected 1 (values `kind` must be CronJob)"
        )
    cj = cjs[0]
    name = cj["metadata"]["name"]
    if cj["spec"].get("suspend") is not True:
        problems.append(
            f"CronJob {name}: spec.suspend is {cj['spec'].get('suspend')!r}; set --set suspend=true"
        )
    else:
        passed.append("cronjob.suspend=true")
    args = cronjob_args(cj)
    want = f"--dry-run={'true' if dry_run else 'false'}"
    dry = [a for a in args if a.startswith("--dry-run")]
    if dry != [want]:
        problems.append(f"CronJob {name}: args {dry or 'lack --dry-run'}; expected exactly {want}")
    else:
        passed.append(f"args {want}")
    c = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    if c.get("image") != image:
        problems.append(f"CronJob {name}: image {c.get('image')!r}, pinned is {image!r}")
    else:
        passed.append(f"image {image}")
    if "--policy-config-file=/policy-dir/policy.yaml" not in args:
        problems.append(f"CronJob {name}: args do not read /policy-dir/policy.yaml")
    cms = [d for d in find(docs, "ConfigMap") if "policy.yaml" in (d.get("data") or {})]
    if len(cms) != 1:
        problems.append(
            f"render has {len(cms)} policy ConfigMaps, expected 1 (deschedulerPolicy empty?)"
        )
    else:
        vols = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"].get("volumes", [])
        refs = [v.get("configMap", {}).get("name") for v in vols]
        if cms[0]["metadata"]["name"] not in refs:
            problems.append(f"CronJob {name} does not mount ConfigMap {cms[0]['metadata']['name']}")
        else:
            passed.append(f"policy ConfigMap {cms[0]['metadata']['name']} mounted")
        if policy is not None:
            live = digest_of_rendered(cms[0]["data"]["policy.yaml"])
            if live != policy.digest():
                problems.append(
                    f"ConfigMap {cms[0]['metadata']['name']}: rendered policy.yaml differs from the "
                    "policy written into values (a chart template changed it; compare the render)"
                )
            else:
                passed.append(f"policy digest {policy.digest()[:12]}")
    if problems:
        raise UnsafeRender(
            "unsafe chart render, nothing installed:\n  - " + "\n  - ".join(problems)
        )
    return passed


RELEASE_TAG = re.compile(r"v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")
