"""A policy upgrade skips helm's OpenAPI validation only for the shape of a render helm
validated on the same release (chart_shape); any other difference keeps it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.descheduler import chart as release_mod
from pytest_desched.descheduler.chart_shape import SKIP_FLAG, shape, validation_flags
from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.checker import CheckResult
from tests.unit.descheduler.test_bad_input import FakeReleaseCluster, _release
from tests.unit.descheduler.test_chart_checks import render

OTHER_POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [{"name": "other", "pluginConfig": [], "plugins": {}}],
}


def _cronjob(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "CronJob")


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec = _cronjob(docs)["spec"]["jobTemplate"]["spec"]["template"]
    return spec["spec"]["containers"][0]


def test_the_policy_the_checksum_and_the_dry_run_flag_do_not_change_the_shape() -> None:
    first = render(dry_run=True)
    _cronjob(first)["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"] = {
        "checksum/config": "aaaa"
    }
    active = copy.deepcopy(render(dry_run=False, policy_doc=OTHER_POLICY))
    _cronjob(active)["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"] = {
        "checksum/config": "bbbb"
    }
    assert first != active
    assert shape(first) == shape(active)
    assert shape(list(reversed(active))) == shape(active)  # helm's document order is not shape


@pytest.mark.parametrize(
    "change",
    [
        lambda docs: _container(docs)["args"].append("--v=5"),  # another argument
        lambda docs: _container(docs).update(image="example.com/other:v1"),  # another value
        lambda docs: _container(docs).update(resources={"limits": {"cpu": "1"}}),  # a field
        lambda docs: _cronjob(docs)["spec"].update(suspend="true"),  # a type
        lambda docs: _container(docs)["args"].__setitem__(1, "--dry-run=maybe"),  # not a flag
        lambda docs: docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {}}),
        lambda docs: next(d for d in docs if d["kind"] == "ConfigMap")["data"].update(x="1"),
    ],
)
def test_any_other_difference_keeps_helms_validation(change: Any) -> None:
    validated = {shape(render(dry_run=True))}
    docs = render(dry_run=False, policy_doc=OTHER_POLICY)
    assert validation_flags(docs, validated) == [SKIP_FLAG]
    change(docs)
    assert validation_flags(docs, validated) == []
    assert validation_flags(render(dry_run=False), set()) == []  # nothing validated yet


class ChartWithNewArgs(FakeReleaseCluster):
    """The fake chart, rendering one more container argument once `extra_arg` is set."""

    extra_arg: str | None = None

    def _docs(self, args: tuple[str, ...]) -> list[dict[str, Any]]:
        docs = super()._docs(args)
        if self.extra_arg:
            _container(docs)["args"].append(self.extra_arg)
        return docs


def test_apply_policy_skips_the_validation_only_after_helm_validated_that_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(release_mod, "lint_or_refuse", lambda *a: ([], CheckResult("", True)))
    cluster = ChartWithNewArgs()
    rel = _release(tmp_path, cluster)
    policy = Policy.coerce(OTHER_POLICY)

    def upgrades() -> list[tuple[str, ...]]:
        return [c for c in cluster.calls if c[0] == "upgrade"]

    step = rel.apply_policy(policy, dry_run=False)  # no validated render yet: helm validates
    assert SKIP_FLAG not in upgrades()[-1] and step["openapi_validation"] == "helm"
    step = rel.apply_policy(None, dry_run=True)  # the same shape, validated by the first
    assert SKIP_FLAG in upgrades()[-1]
    assert step["openapi_validation"].startswith("skipped")
    cluster.extra_arg = "--client-qps=50"  # a new argument: a new shape, validated again
    step = rel.apply_policy(policy, dry_run=False)
    assert SKIP_FLAG not in upgrades()[-1] and step["openapi_validation"] == "helm"
    assert [c for c in cluster.calls if c[0] == "diff"]  # the diff still runs before each
    assert all("--server-side" in c for c in cluster.calls if c[0] == "diff")


def test_the_upgrades_verify_reads_the_live_configmap_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(release_mod, "lint_or_refuse", lambda *a: ([], CheckResult("", True)))
    cluster = FakeReleaseCluster()
    rel = _release(tmp_path, cluster)
    reads: list[str] = []
    read = cluster.core.read_namespaced_config_map
    cluster.core.read_namespaced_config_map = lambda n, ns: reads.append(n) or read(n, ns)
    step = rel.apply_policy(Policy.coerce(OTHER_POLICY), dry_run=False)
    assert len(reads) == 1  # its sha256 and its policy digest from the same read
    assert step["policy_digest"] == Policy.coerce(OTHER_POLICY).digest()
    assert len(step["configmap_sha256"]) == 64
