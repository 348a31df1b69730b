"""Usage in snapshots and replays (issue 50), the pure parts: recording from metrics.k8s.io's
answers, the file (old snapshots still load), redaction, what the replay serves per pod and
per node, the refusal of a metrics policy without usage, and the generated incident. The
cluster side is tests/e2e/test_replay_usage_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.lint_metrics import sources_read
from pytest_desched.errors import ConfigError, InputError
from pytest_desched.replay.capture import usage as capture
from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.capture.redact import redact_snapshot
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.gen.utilization_incident import (
    NODE_CPU_M,
    TARGET,
    evicted,
    utilization_hotspot,
)
from pytest_desched.replay.inputs import check_usage
from pytest_desched.replay.rebuild.usage import (
    USAGE_ANNOTATIONS,
    annotate,
    check_assumption,
    served_usage,
)
from pytest_desched.replay.rows import born_rows, is_usage_pod


# -- recording -------------------------------------------------------------------------------
class _Api:
    """metrics.k8s.io's answers by path (a double of the list the snapshot makes)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers


def _fake_list(monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any]) -> list[str]:
    asked: list[str] = []

    def list_all(api: Any, path: str, query: Any = None) -> list[dict[str, Any]]:
        asked.append(path)
        a = answers[path]
        if isinstance(a, int):
            raise ApiException(status=a, reason="x")
        return a

    from pytest_desched.replay import kubeapi

    monkeypatch.setattr(kubeapi, "list_all", list_all)
    return asked


def _node_metrics(name: str, cpu: str, mem: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "usage": {"cpu": cpu, "memory": mem}}


def _pod_metrics(ns: str, name: str, *containers: tuple[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": name},
        "containers": [
            {"name": f"c{i}", "usage": {"cpu": c, "memory": m}}
            for i, (c, m) in enumerate(containers)
        ],
    }


def test_usage_is_recorded_from_metrics_k8s_io_for_the_snapshot_s_objects_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _fake_list(
        monkeypatch,
        {
            capture.NODES_PATH: [
                _node_metrics("n1", "1500000000n", "2Gi"),
                _node_metrics("other", "1", "1Gi"),  # not in the snapshot: left out
            ],
            capture.PODS_PATH: [
                _pod_metrics("shop", "web-1", ("250m", "100Mi"), ("1250000n", "28Mi")),
                _pod_metrics("shop", "gone", ("1", "1Gi")),
            ],
        },
    )
    reads: list[tuple[str, str]] = []
    said: list[str] = []
    usage, why = capture.read_usage(
        object(), None, {"n1"}, {"shop/web-1"}, lambda v, w: reads.append((v, w)), said.append, "T"
    )
    assert why is None and usage is not None
    assert usage["nodes"] == {"n1": {"cpu": "1500m", "memory": str(2 * 1024**3)}}
    assert usage["pods"] == {"shop/web-1": {"cpu": "252m", "memory": str(128 * 1024**2)}}
    assert {v for v, _ in reads} == {"list"} and asked == [capture.NODES_PATH, capture.PODS_PATH]
    assert any("usage of 1/1 nodes and 1/1 pods recorded" in s for s in said), said


@pytest.mark.parametrize(
    ("status", "words"),
    [(404, "serves no metrics.k8s.io"), (503, "unavailable"), (403, "may not list")],
)
def test_no_metrics_api_means_no_usage_recorded_and_says_why(
    monkeypatch: pytest.MonkeyPatch, status: int, words: str
) -> None:
    _fake_list(monkeypatch, {capture.NODES_PATH: status})
    said: list[str] = []
    usage, why = capture.read_usage(
        object(), None, {"n1"}, set(), lambda v, w: None, said.append, "T"
    )
    assert usage is None and why is not None
    assert why.startswith(capture.NO_USAGE) and words in why
    assert any(capture.NO_USAGE in s for s in said)


def test_a_scoped_snapshot_lists_pod_usage_per_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    ns_path = "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods"
    asked = _fake_list(
        monkeypatch,
        {capture.NODES_PATH: [_node_metrics("n1", "1", "1Gi")], ns_path: []},
    )
    capture.read_usage(object(), ["shop"], {"n1"}, set(), lambda v, w: None, lambda s: None, "T")
    assert asked == [capture.NODES_PATH, ns_path]


# -- the file ----------------------------------------------------------------------------------
def test_usage_round_trips_and_an_old_snapshot_without_it_still_loads(tmp_path: Path) -> None:
    inc = utilization_hotspot()
    back = Snapshot.load(inc.snapshot.write(tmp_path / "u.yaml"))
    assert back.usage == inc.snapshot.usage and back.header["usage"]["recorded"] is True
    old = label_move().snapshot  # written as before issue 50: no usage section
    assert "usage" not in old.to_doc()
    assert Snapshot.load(old.write(tmp_path / "old.yaml")).usage is None


def test_a_usage_section_of_the_wrong_shape_is_refused_by_path(tmp_path: Path) -> None:
    doc = utilization_hotspot().snapshot.to_doc()
    doc["usage"]["nodes"]["node-001"] = {"cpu": "1"}  # no memory
    with pytest.raises(InputError, match=r"usage\.nodes\.node-001"):
        Snapshot.from_doc(doc, "bad.yaml")
    doc = utilization_hotspot().snapshot.to_doc()
    doc["usage"]["nodes"]["node-001"] = {"cpu": "lots", "memory": "1Gi"}
    with pytest.raises(ConfigError, match=r"usage\.nodes\.node-001"):
        Snapshot.from_doc(doc, "bad.yaml")
    doc = utilization_hotspot().snapshot.to_doc()
    doc["usage"]["nodes"]["ghost"] = {"cpu": "1", "memory": "1Gi"}
    with pytest.raises(ConfigError, match=r"usage\.nodes names 1 nodes the snapshot lacks"):
        Snapshot.from_doc(doc, "bad.yaml")


def test_redaction_renames_the_usage_keys_with_the_objects() -> None:
    snap = utilization_hotspot().snapshot
    red = redact_snapshot(snap)
    assert red.usage is not None
    nodes = {n["metadata"]["name"] for n in red.nodes}
    pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in red.pods}
    assert set(red.usage["nodes"]) == nodes and set(red.usage["pods"]) == pods
    assert snap.usage is not None
    pairs = [
        (o["metadata"]["name"], n["metadata"]["name"])
        for o, n in zip(snap.nodes, red.nodes, strict=True)
    ]
    assert any(o != n for o, n in pairs)  # renamed
    for o, n in pairs:  # each figure follows its node
        assert red.usage["nodes"][n] == snap.usage["nodes"][o]


# -- what the replay serves -----------------------------------------------------------------------
def test_the_node_is_served_at_its_recorded_figure_not_its_pods_sum() -> None:
    snap = utilization_hotspot().snapshot
    served = served_usage(snap)
    assert served is not None and served.origin == "recorded"
    assert served.nodes["node-001"] == (3380, 3678404608)  # as recorded
    assert served.node_rest["node-001"] == (150, 512 * 1024 * 1024)  # beyond its pods
    assert not served.below_sum and served.pods_without == 0
    pod = next(p for p in snap.pods if p["metadata"]["name"].startswith("checkout"))
    assert served.pod_annotations(pod) == {
        USAGE_ANNOTATIONS["cpu"]: "2000m",
        USAGE_ANNOTATIONS["memory"]: str(900 * 1024 * 1024),
    }
    (node_pod,) = [p for p in served.node_pods("img") if p["spec"]["nodeName"] == "node-001"]
    assert node_pod["metadata"]["annotations"][USAGE_ANNOTATIONS["cpu"]] == "150m"
    assert is_usage_pod(f"kube-system/{node_pod['metadata']['name']}")


def test_a_pod_of_several_containers_is_split_evenly_and_rounded_up() -> None:
    snap = utilization_hotspot().snapshot
    pod = next(p for p in snap.pods if p["metadata"]["name"].startswith("web"))
    pod["spec"]["containers"].append({"name": "sidecar", "image": "x"})
    snap.usage["pods"][f"shop/{pod['metadata']['name']}"]["cpu"] = "451m"  # type: ignore[index]
    served = served_usage(snap)
    assert served is not None
    ann = served.pod_annotations(pod)
    assert ann[USAGE_ANNOTATIONS["cpu"]] == "226m"  # 2 x 226m = 452m served
    annotate([pod], served)
    assert pod["metadata"]["annotations"][USAGE_ANNOTATIONS["cpu"]] == "226m"


def test_a_node_recorded_below_its_pods_sum_is_named() -> None:
    snap = utilization_hotspot().snapshot
    snap.usage["nodes"]["node-050"] = {"cpu": "10m", "memory": "1Mi"}  # type: ignore[index]
    served = served_usage(snap)
    assert served is not None and served.below_sum == ["node-050"]
    assert served.node_rest["node-050"] == (1, 1024 * 1024)
    assert "1 nodes recorded below their pods' sum" in served.note()


def test_assume_requests_serves_each_pod_its_requests() -> None:
    snap = label_move().snapshot
    assert served_usage(snap) is None  # nothing recorded, nothing assumed: nothing served
    served = served_usage(snap, "requests")
    assert served is not None and served.origin == "assumed: requests"
    pod = snap.pods[0]
    req = pod["spec"]["containers"][0]["resources"]["requests"]
    assert served.pod_annotations(pod)[USAGE_ANNOTATIONS["cpu"]] == f"{capture.cpu_m(req['cpu'])}m"
    assert "ASSUMED" in served.note()
    with pytest.raises(ConfigError, match="--assume-usage 'idle'"):
        check_assumption("idle")


def test_the_provider_s_and_the_replay_s_usage_pods_are_machinery_not_rows() -> None:
    seen = [
        {
            "metadata": {"namespace": "kube-system", "name": "desched-node-usage-n1"},
            "spec": {"nodeName": "n1"},
        },
        {"metadata": {"namespace": "shop", "name": "web-1"}, "spec": {"nodeName": "n1"}},
    ]
    rows = born_rows(seen, {}, {}, 1)
    assert [r.pod for r in rows] == ["shop/web-1"]


# -- the refusal --------------------------------------------------------------------------------
def test_a_metrics_policy_without_usage_is_refused_in_one_line_unless_assumed() -> None:
    inc = utilization_hotspot()
    sources = tuple(sources_read(Policy.from_yaml(inc.policy).to_dict()))
    assert sources == ("KubernetesMetrics",)
    old = label_move().snapshot
    old.header["usage"] = {
        "recorded": False,
        "why": "no usage recorded: the cluster serves no metrics.k8s.io",
    }
    with pytest.raises(ConfigError) as err:
        check_usage(old, Path("snap.yaml"), sources, None)
    msg = str(err.value)
    assert "\n" not in msg and "--assume-usage requests" in msg and "serves no metrics" in msg
    check_usage(old, Path("snap.yaml"), sources, "requests")  # stated: allowed
    check_usage(inc.snapshot, Path("u.yaml"), sources, None)  # recorded: allowed
    check_usage(old, Path("snap.yaml"), (), None)  # a requests policy needs none
    assert sources_read(Policy.from_yaml(label_move().policy).to_dict()) == []


# -- the generated incident ------------------------------------------------------------------------
def test_the_utilization_incident_has_100_nodes_usage_and_three_hot_nodes() -> None:
    inc = utilization_hotspot()
    snap = inc.snapshot
    assert len(snap.nodes) >= 100 and snap.usage is not None
    assert set(snap.usage["pods"]) == {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in snap.pods
    }
    pct = {n: capture.cpu_m(f["cpu"]) * 100 / NODE_CPU_M for n, f in snap.usage["nodes"].items()}
    over = {n for n, p in pct.items() if p > TARGET}
    want = {
        next(p["spec"]["nodeName"] for p in snap.pods if f"shop/{p['metadata']['name']}" == k)
        for k in evicted(inc)
    }
    assert over == want and len(over) == 3
    # by requests nothing is over the target: the recorded usage is what makes the incident
    req = served_usage(snap, "requests")
    assert req is not None and all(c * 100 / NODE_CPU_M < TARGET for c, _ in req.nodes.values())
    assert utilization_hotspot().snapshot.dump() == snap.dump()  # same seed, same file


def test_usage_not_read_by_the_policy_is_served_without_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_desched.replay.rebuild import usage_live

    made: list[dict[str, Any]] = []
    monkeypatch.setattr(usage_live, "create_all", lambda api, bodies, **kw: made.extend(bodies))

    def never(*a: Any, **kw: Any) -> Any:
        raise AssertionError("waited for metrics-server although the policy reads no usage")

    monkeypatch.setattr(usage_live, "wait_for", never)
    served = served_usage(utilization_hotspot(nodes=16).snapshot)
    assert served is not None
    said: list[str] = []
    facts = usage_live.serve(object(), served, "img", "runner", 5, said.append, wait=False)
    assert facts["waited"] is False and facts["served_in_s"] is None
    assert {p["spec"]["nodeName"] for p in made} == {*served.nodes, "runner"}
    assert any("not waited for" in s for s in said)
