"""Lab objects as values: the manifests they render, the inputs they refuse, and the Lab's
order of work (checks before the first call, teardown in dependency order) on a fake API."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pytest_desched.errors import ConfigError, LabInputError
from pytest_desched.lab import (
    EVICTABLE_LABEL,
    WORKLOAD_LABEL,
    AntiAffinity,
    DaemonSet,
    Deployment,
    Job,
    Lab,
    LabConfigError,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    ReplicaSet,
    ReplicationController,
    StatefulSet,
    Taint,
    Toleration,
    TopologySpread,
    VolumeClaim,
)

NS = "lab"


def _spec(m: dict[str, Any]) -> dict[str, Any]:
    return m["spec"]["template"]["spec"]


# -- manifests --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("obj", "api", "kind"),
    [
        (Deployment("w", replicas=3), "apps/v1", "Deployment"),
        (ReplicaSet("w", replicas=3), "apps/v1", "ReplicaSet"),
        (StatefulSet("w", replicas=3), "apps/v1", "StatefulSet"),
    ],
)
def test_replicated_workloads_select_their_own_pods(obj: Any, api: str, kind: str) -> None:
    m = obj.manifest(NS, "img:1")
    assert (m["apiVersion"], m["kind"], m["metadata"]["namespace"]) == (api, kind, NS)
    assert m["spec"]["replicas"] == 3
    assert m["spec"]["selector"] == {"matchLabels": {WORKLOAD_LABEL: "w"}}
    labels = m["spec"]["template"]["metadata"]["labels"]
    assert labels == {"app": "w", WORKLOAD_LABEL: "w", EVICTABLE_LABEL: "true"}
    assert _spec(m)["containers"] == [{"name": "app", "image": "img:1"}]


def test_replication_controller_has_a_plain_map_selector() -> None:
    m = ReplicationController("rc", replicas=2).manifest(NS)
    assert (m["apiVersion"], m["kind"]) == ("v1", "ReplicationController")
    assert m["spec"]["selector"] == {WORKLOAD_LABEL: "rc"}


def test_every_pod_field_renders() -> None:
    taint = Taint("dedicated", "lab", "NoSchedule")
    d = Deployment(
        "web",
        namespace="other",
        labels={"tier": "front"},
        annotations={"note": "x"},
        image="my/image:2",
        requests={"cpu": "500m", "memory": "2Gi"},
        node_selector={"disk": "ssd"},
        node_affinity={"zone": ["a", "b"]},
        anti_affinity=[AntiAffinity.to("db"), AntiAffinity({"x": "y"}, required=False, weight=5)],
        tolerations=[taint.toleration(), Toleration()],
        topology_spread=[TopologySpread(max_skew=2, when_unsatisfiable="ScheduleAnyway")],
        priority_class="high",
        empty_dir="1Gi",
        host_path="/var/x",
        claims=["data"],
        grace_period=0,
        opt_in=False,
    )
    m = d.manifest(NS)
    assert m["metadata"]["namespace"] == "other"
    tmpl = m["spec"]["template"]
    assert tmpl["metadata"] == {
        "labels": {"app": "web", WORKLOAD_LABEL: "web", "tier": "front"},
        "annotations": {"note": "x"},
    }
    s = tmpl["spec"]
    c = s["containers"][0]
    assert c["image"] == "my/image:2"
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "2Gi"}}
    assert [v["name"] for v in c["volumeMounts"]] == ["scratch", "host", "claim-data"]
    assert s["volumes"] == [
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "host", "hostPath": {"path": "/var/x"}},
        {"name": "claim-data", "persistentVolumeClaim": {"claimName": "data"}},
    ]
    assert s["nodeSelector"] == {"disk": "ssd"}
    terms = s["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
        ]
    }
    anti = s["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {
            "labelSelector": {"matchLabels": {WORKLOAD_LABEL: "db"}},
            "topologyKey": "kubernetes.io/hostname",
        }
    ]
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 5
    assert s["tolerations"] == [
        {"operator": "Equal", "key": "dedicated", "value": "lab", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ]
    assert s["topologySpreadConstraints"] == [
        {
            "maxSkew": 2,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {WORKLOAD_LABEL: "web"}},
        }
    ]
    assert (s["priorityClassName"], s["terminationGracePeriodSeconds"]) == ("high", 0)


def test_statefulset_claims_get_pre_bound_volumes() -> None:
    sts = StatefulSet("db", replicas=2, volume_claims=[VolumeClaim("data", "2Gi")])
    m = sts.manifest(NS)
    assert m["spec"]["serviceName"] == "db"
    (tmpl,) = m["spec"]["volumeClaimTemplates"]
    assert tmpl["metadata"]["name"] == "data"
    assert tmpl["spec"]["storageClassName"] == "desched-lab"
    assert tmpl["spec"]["resources"] == {"requests": {"storage": "2Gi"}}
    pvs = sts.persistent_volumes(NS, {"m": "x"})
    assert [p["spec"]["claimRef"] for p in pvs] == [
        {"namespace": NS, "name": "data-db-0"},
        {"namespace": NS, "name": "data-db-1"},
    ]
    assert all(p["spec"]["storageClassName"] == "desched-lab" for p in pvs)
    assert all(p["spec"]["persistentVolumeReclaimPolicy"] == "Retain" for p in pvs)
    assert all(p["metadata"]["labels"] == {"m": "x"} for p in pvs)


def test_daemonset_job_pod_pdb_priorityclass() -> None:
    ds = DaemonSet("agent").manifest(NS)
    assert "replicas" not in ds["spec"] and ds["spec"]["selector"]["matchLabels"]
    job = Job("batch", completions=3, parallelism=2).manifest(NS)
    assert (job["apiVersion"], job["spec"]["completions"], job["spec"]["backoffLimit"]) == (
        "batch/v1",
        3,
        0,
    )
    assert _spec(job)["restartPolicy"] == "Never"
    # pause runs until killed on a real kubelet; `pause -v` exits 0, so the Job completes
    assert _spec(job)["containers"][0]["args"] == ["-v"]
    own = Job("own", image="example.org/batch:1").manifest(NS)
    assert "args" not in _spec(own)["containers"][0]  # a user's image runs as given
    assert "args" not in _spec(Deployment("web").manifest(NS))["containers"][0]
    pod = Pod("bare", node_name="w1").manifest(NS)
    assert (pod["kind"], pod["spec"]["nodeName"]) == ("Pod", "w1")
    assert pod["metadata"]["labels"][WORKLOAD_LABEL] == "bare"
    pdb = PodDisruptionBudget("b", selects="web", max_unavailable="50%").manifest(NS)
    assert pdb["spec"] == {
        "selector": {"matchLabels": {WORKLOAD_LABEL: "web"}},
        "maxUnavailable": "50%",
    }
    pc = PriorityClass("high", 1000, preemption_policy="Never").manifest({"l": "v"})
    assert (pc["value"], pc["globalDefault"], pc["preemptionPolicy"]) == (1000, False, "Never")
    assert pc["metadata"]["labels"] == {"l": "v"}


def test_taint_toleration_pairs() -> None:
    assert Taint("k", effect="NoExecute").toleration().manifest() == {
        "operator": "Exists",
        "key": "k",
        "effect": "NoExecute",
    }
    assert Taint("k", "v").manifest() == {"key": "k", "value": "v", "effect": "NoSchedule"}


def test_values_are_frozen() -> None:
    d = Deployment("w")
    with pytest.raises(AttributeError):
        d.replicas = 3  # type: ignore[misc]


# -- refused inputs -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Deployment("Web"), "'Web' is not an RFC 1123 label"),
        (lambda: Deployment("w" * 64), "is not an RFC 1123 label"),
        (lambda: Deployment("w", replicas=-1), "replicas: must be an integer >= 0"),
        (lambda: Deployment("w", replicas=True), "replicas: must be an integer"),
        (
            lambda: Deployment("w", requests={"memory": "lots"}),
            "'lots' is not a Kubernetes quantity",
        ),
        (lambda: Deployment("w", labels={"app": "x"}), r"labels \['app'\] are set by the lab"),
        (lambda: Deployment("w", labels={"k": "no spaces"}), "invalid value"),
        (lambda: Deployment("w", node_affinity={"zone": []}), "needs at least one string value"),
        (lambda: Deployment("w", tolerations=["k=v"]), "use Toleration"),
        (lambda: Deployment("w", host_path="relative"), "is not absolute"),
        (lambda: Deployment("w", namespace="Bad_NS"), "namespace: name"),
        (lambda: Taint("k", effect="Sometimes"), "'Sometimes' is not allowed"),
        (lambda: Toleration("k", "Exists", value="v"), "operator Exists takes no value"),
        (lambda: Toleration(None, "Equal", "v"), "operator Equal needs a key"),
        (lambda: TopologySpread(when_unsatisfiable="Maybe"), "'Maybe' is not allowed"),
        (lambda: TopologySpread(max_skew=0), "max_skew: must be an integer >= 1"),
        (lambda: AntiAffinity({}), "match_labels is empty"),
        (lambda: PodDisruptionBudget("b", selects="w"), "exactly one of min_available"),
        (
            lambda: PodDisruptionBudget("b", selects="w", min_available=1, max_unavailable=1),
            "exactly one of min_available",
        ),
        (lambda: PodDisruptionBudget("b", min_available=1), "exactly one of selects="),
        (lambda: PodDisruptionBudget("b", selects="w", min_available="150%"), "not a percentage"),
        (lambda: PriorityClass("system-x", 1), "system- names are reserved"),
        (lambda: PriorityClass("p", 2_000_000_000), "value: must be an integer between"),
        (lambda: StatefulSet("s", volume_claims=["data"]), "use VolumeClaim"),
        (lambda: VolumeClaim("data", "big"), "is not a Kubernetes quantity"),
        (lambda: Job("j", completions=0), "completions: must be an integer >= 1"),
    ],
)
def test_bad_inputs_are_refused_with_the_fix(make: Any, match: str) -> None:
    with pytest.raises(LabConfigError, match=match) as ei:
        make()
    assert isinstance(ei.value, ConfigError) and isinstance(ei.value, LabInputError)
    assert "; " in str(ei.value)  # "<what>: <problem>; <fix>"


# -- the Lab's order of work on a fake API -------------------------------------------------------
class _Boom:
    """Any API call fails loudly: proves a step was refused before the first call."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"API call {name} made before the inputs were checked")


def _fake_cluster(**apis: Any) -> Any:
    boom = _Boom()
    return SimpleNamespace(
        workers=["w1", "w2", "w3"],
        core=apis.get("core", boom),
        apps=apis.get("apps", boom),
        batch=apis.get("batch", boom),
        policy=apis.get("policy", boom),
        api_client=boom,
    )


@pytest.mark.parametrize(
    ("objects", "kw", "match"),
    [
        ((Deployment("w"), Deployment("w")), {}, "Deployment 'w' twice"),
        ((Deployment("w"),), {"only_on": "w9"}, "only_on='w9' is not a worker"),
        ((Pod("p", node_name="w9"),), {}, "node_name 'w9' is not a worker"),
        (("Deployment w",), {}, "is not a lab object"),
        ((Deployment("w", namespace="kube-system"),), {}, "is reserved"),
    ],
)
def test_apply_checks_every_input_before_the_first_call(
    objects: tuple[Any, ...], kw: dict[str, Any], match: str
) -> None:
    lab = Lab(_fake_cluster(), NS)
    with pytest.raises(LabInputError, match=match):
        lab.apply(*objects, **kw)


def _404() -> ApiException:
    return ApiException(status=404, reason="Not Found")


class _Recorder:
    """One fake API group: records calls; pods keep coming back until the namespace goes."""

    def __init__(self, log: list[str], state: dict[str, Any], name: str) -> None:
        self.log, self.state, self.name = log, state, name

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            self.log.append(method)
            st = self.state
            if method == "delete_namespace":
                st["ns_deleting"] = True
            if method == "read_namespace":
                st["reads"] += 1
                if st["ns_deleting"] and st["reads"] > 2:
                    raise _404()
                return SimpleNamespace()
            if method == "list_namespaced_pod":  # an unknown owner kind recreates its pod
                owner = SimpleNamespace(kind="SomethingUnknown")
                meta = SimpleNamespace(name="p", owner_references=[owner])
                return SimpleNamespace(items=[SimpleNamespace(metadata=meta)])
            if method == "read_node":
                spec = SimpleNamespace(taints=None, unschedulable=None)
                return SimpleNamespace(metadata=SimpleNamespace(labels={}), spec=spec)
            return SimpleNamespace(items=[])

        return call


def test_teardown_order_and_no_wait_on_an_unknown_owner_kind() -> None:
    log: list[str] = []
    state = {"ns_deleting": False, "reads": 0}
    groups = {g: _Recorder(log, state, g) for g in ("core", "apps", "batch", "policy")}
    lab = Lab(_fake_cluster(**groups), NS, timeout=5)
    lab.pod_settle_s = 0.3  # its pods never go: the namespace must go regardless
    lab.created_namespace = True
    lab.set_node_labels("w1", {"probe": "yes"})
    log.clear()
    lab.teardown()
    controllers = [
        m for m in log if m.startswith("delete_collection_namespaced_") and "pod" not in m
    ]
    assert len(controllers) == 6 and log.index(controllers[-1]) < log.index("delete_namespace")
    pod_deletes = [i for i, m in enumerate(log) if m == "delete_collection_namespaced_pod"]
    assert pod_deletes[0] < log.index("delete_namespace") < pod_deletes[-1]
    assert log[-1] == "patch_node"  # the node label comes back last
    assert not lab.created_namespace
