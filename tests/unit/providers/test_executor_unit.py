"""The embedded executor's pure parts: volume files and argument paths; no pod is run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.providers.embedded.pod_run import materialize_volumes, rewrite_args

CHART_ARGS = [
    "--policy-config-file=/policy-dir/policy.yaml",
    "--dry-run=true",
    "--logging-format=json",
    "--v=4",
]


def test_policy_path_points_at_local_copy(tmp_path: Path) -> None:
    local = tmp_path / "volumes" / "policy-volume"
    out = rewrite_args(CHART_ARGS, {"/policy-dir": local})
    assert out == [f"--policy-config-file={local}/policy.yaml", *CHART_ARGS[1:]]


def test_args_without_mount_paths_unchanged(tmp_path: Path) -> None:
    args = ["--dry-run=true", "--policy-dir-like=/policy-directory/x", "/policy-dir", "--v=4"]
    assert rewrite_args(args, {"/policy-dir": tmp_path}) == args
    assert rewrite_args(CHART_ARGS, {}) == CHART_ARGS


def test_input_list_not_modified(tmp_path: Path) -> None:
    args = list(CHART_ARGS)
    rewrite_args(args, {"/policy-dir": tmp_path})
    assert args == CHART_ARGS


@pytest.mark.parametrize("reverse", [False, True])
def test_longest_mount_wins(tmp_path: Path, reverse: bool) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "inner"
    mounts = {"/etc/desched": outer, "/etc/desched/policy": inner}
    if reverse:
        mounts = dict(reversed(mounts.items()))
    out = rewrite_args(
        ["--policy-config-file=/etc/desched/policy/p.yaml", "--kubeconfig=/etc/desched/kc"],
        mounts,
    )
    assert out == [f"--policy-config-file={inner}/p.yaml", f"--kubeconfig={outer}/kc"]


def test_mount_matched_only_at_path_start(tmp_path: Path) -> None:
    args = ["--cert-dir=/var/policy-dir/certs"]
    assert rewrite_args(args, {"/policy-dir": tmp_path}) == args


# -- materialize_volumes with a pod shaped like the kubernetes client's models --------------
class FakeCore:
    def __init__(self, data: dict[str, dict[str, str]]) -> None:
        self.data, self.reads = data, []

    def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        self.reads.append((namespace, name))
        return SimpleNamespace(data=self.data[name])


def ns(**kw: Any) -> SimpleNamespace:
    return SimpleNamespace(**kw)


def test_configmap_volumes_written_and_rewritten(tmp_path: Path) -> None:
    policy = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
    core = FakeCore({"descheduler": {"policy.yaml": policy}, "extra": {"a": "1", "b": "2"}})
    pod = ns(
        metadata=ns(namespace="kube-system", name="round-1-abcde"),
        spec=ns(
            volumes=[
                ns(name="policy-volume", config_map=ns(name="descheduler", items=None)),
                ns(
                    name="picked",
                    config_map=ns(name="extra", items=[ns(key="b", path="renamed-b")]),
                ),
                ns(name="kube-api-access", config_map=None),
            ],
            containers=[
                ns(
                    volume_mounts=[
                        ns(name="policy-volume", mount_path="/policy-dir/"),
                        ns(name="picked", mount_path="/extra"),
                        ns(name="kube-api-access", mount_path="/var/run/secrets/x"),
                        ns(name="no-such-volume", mount_path="/nowhere"),
                    ]
                )
            ],
        ),
    )
    mounts = materialize_volumes(ns(core=core), pod, tmp_path)
    assert mounts == {
        "/policy-dir": tmp_path / "volumes" / "policy-volume",
        "/extra": tmp_path / "volumes" / "picked",
    }
    assert (mounts["/policy-dir"] / "policy.yaml").read_text() == policy
    assert [p.name for p in mounts["/extra"].iterdir()] == ["renamed-b"]
    assert (mounts["/extra"] / "renamed-b").read_text() == "2"
    assert core.reads == [("kube-system", "descheduler"), ("kube-system", "extra")]
    out = rewrite_args(CHART_ARGS, mounts)
    assert Path(out[0].split("=", 1)[1]).read_text() == policy
