"""Lab objects as values: workloads, PDBs, PriorityClasses and taints, each rendering a manifest.

An experiment declares the cluster state it needs the way upstream's e2e tests build their
objects (`buildTestDeployment` and friends), but as frozen values: every input is checked
when the value is made, so a bad replica count or taint effect fails before anything on a
cluster changes, and the same value renders the same manifest in a unit test and on the
cluster. `Lab.apply` creates them, waits until they settle and deletes them in dependency
order at teardown.

Every pod a workload makes carries `app=<name>` and `desched.pytest.io/workload=<name>`
(snapshots, ledgers and assertions select by the latter) and, unless `opt_in=False`, the
runbook evictor's opt-in label, so the runbook's own policy sees lab workloads too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from pytest_desched.lab.budgets import PodDisruptionBudget, PriorityClass
from pytest_desched.lab.inputs import EVICTABLE_LABEL
from pytest_desched.lab.snapshot import WORKLOAD_LABEL
from pytest_desched.lab.startup import check_startup, startup_annotations
from pytest_desched.lab.termination import check_grace, grace_annotations
from pytest_desched.lab.usage_values import check_usage, usage_annotations
from pytest_desched.lab.values import (
    DEFAULT_IMAGE,
    HOSTNAME_KEY,
    LAB_STORAGE_CLASS,
    ZONE_KEY,
    AntiAffinity,
    Taint,
    Toleration,
    TopologySpread,
    VolumeClaim,
    as_tuple,
    check_int,
    check_label_key,
    check_labels,
    check_name,
    check_quantity,
    config_error,
)
from pytest_desched.lab.volumes import LocalVolume


# --- workloads -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """What every workload's pods can carry; subclasses add the controller's own fields."""

    name: str
    _: KW_ONLY
    namespace: str | None = None  # None: the lab's namespace
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    image: str | None = None  # None: the lab's workload image (pause)
    requests: Mapping[str, str] = field(default_factory=dict)
    # Actual usage (cpu, memory) kwok's emulated kubelet reports for each pod (lab/usage.py)
    usage: Mapping[str, str] = field(default_factory=dict)
    # Seconds each pod takes to become Ready (image pull, cold start; lab/startup.py), plus up
    # to `startup_jitter_seconds` more, picked per pod: kwok's pod-ready Stage delay.
    startup_seconds: float = 0
    startup_jitter_seconds: float = 0
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_name: str | None = None  # binds without the scheduler (a violation on purpose)
    node_affinity: Mapping[str, Sequence[str]] = field(default_factory=dict)  # key In values
    anti_affinity: Sequence[AntiAffinity] = ()
    tolerations: Sequence[Toleration] = ()
    topology_spread: Sequence[TopologySpread] = ()
    priority_class: str | None = None
    empty_dir: bool | str = False  # True or a sizeLimit: local storage (PodsWithLocalStorage)
    host_path: str | None = None  # local storage too
    claims: Sequence[str] = ()  # existing PVCs to mount (PodsWithPVC)
    opt_in: bool = True  # the runbook evictor's labelSelector opt-in label
    grace_period: int | None = None
    # Seconds an evicted pod stays Terminating (lab/termination.py): its
    # terminationGracePeriodSeconds, honoured by kwok's pod-delete-graceful Stage.
    termination_grace_seconds: int = 0

    kind: ClassVar[str] = ""
    api_version: ClassVar[str] = "apps/v1"
    restart_policy: ClassVar[str] = "Always"

    def __post_init__(self) -> None:
        what = f"{self.kind or type(self).__name__} {self.name!r}"
        check_name(what, self.name)
        if self.namespace is not None:
            check_name(f"{what} namespace", self.namespace)
        for attr in ("labels", "annotations", "node_selector"):
            value = getattr(self, attr)
            if attr == "annotations":
                if not isinstance(value, Mapping) or not all(
                    isinstance(v, str) for v in value.values()
                ):
                    raise config_error(
                        what, "annotations must map keys to strings", "pass a dict of str"
                    )
                value = dict(value)
            else:
                value = check_labels(f"{what} {attr}", value)
            object.__setattr__(self, attr, value)
        reserved = {"app", WORKLOAD_LABEL} & set(self.labels)
        if reserved:
            raise config_error(
                what, f"labels {sorted(reserved)} are set by the lab", "use other keys"
            )
        if not isinstance(self.requests, Mapping):
            raise config_error(what, "requests must be a mapping", "pass e.g. {'memory': '2Gi'}")
        object.__setattr__(
            self,
            "requests",
            {str(k): check_quantity(f"{what} requests[{k}]", v) for k, v in self.requests.items()},
        )
        object.__setattr__(self, "usage", check_usage(what, self.usage))
        clash = sorted(set(usage_annotations(self.usage)) & set(self.annotations))
        if clash:
            raise config_error(
                what, f"annotations {clash} are set from usage", "declare usage= only"
            )
        start = check_startup(what, self.startup_seconds, self.startup_jitter_seconds)
        object.__setattr__(self, "startup_seconds", start[0])
        object.__setattr__(self, "startup_jitter_seconds", start[1])
        clash = sorted(set(startup_annotations(1, 1)) & set(self.annotations))
        if clash:
            raise config_error(
                what, f"annotations {clash} are set from startup_seconds", "declare it only"
            )
        check_grace(what, self.termination_grace_seconds, self.grace_period)
        clash = sorted(set(grace_annotations(1)) & set(self.annotations))
        if clash:
            raise config_error(
                what,
                f"annotations {clash} are set from termination_grace_seconds",
                "declare it only",
            )
        aff: dict[str, tuple[str, ...]] = {}
        if not isinstance(self.node_affinity, Mapping):
            raise config_error(
                what,
                "node_affinity must map a label key to allowed values",
                "pass e.g. {'zone': ['a']}",
            )
        for k, vals in self.node_affinity.items():
            check_label_key(f"{what} node_affinity", k)
            vals = as_tuple(vals)
            if not vals or not all(isinstance(v, str) for v in vals):
                raise config_error(
                    what, f"node_affinity[{k!r}] needs at least one string value", "list the values"
                )
            aff[k] = vals
        object.__setattr__(self, "node_affinity", aff)
        for attr, typ in (
            ("anti_affinity", AntiAffinity),
            ("tolerations", Toleration),
            ("topology_spread", TopologySpread),
        ):
            items = as_tuple(getattr(self, attr))
            bad = [x for x in items if not isinstance(x, typ)]
            if bad:
                raise config_error(
                    what, f"{attr} holds {bad[0]!r}", f"use {typ.__name__}(...) values"
                )
            object.__setattr__(self, attr, items)
        claims = as_tuple(self.claims)
        for c in claims:
            check_name(f"{what} claim", c)
        object.__setattr__(self, "claims", claims)
        if self.priority_class is not None and not str(self.priority_class).startswith("system-"):
            check_name(f"{what} priority_class", self.priority_class)
        if self.empty_dir not in (False, True):
            check_quantity(f"{what} empty_dir", self.empty_dir)
        if self.host_path is not None and not (
            isinstance(self.host_path, str) and self.host_path.startswith("/")
        ):
            raise config_error(
                what, f"host_path {self.host_path!r} is not absolute", "pass a path like /var/lib/x"
            )
        if self.grace_period is not None:
            check_int(f"{what} grace_period", self.grace_period, 0)
        if not isinstance(self.image, (str, type(None))) or self.image == "":
            raise config_error(
                what, f"image {self.image!r} is not an image reference", "pass a string or None"
            )

    # -- rendering -------------------------------------------------------------------------
    def selector(self) -> dict[str, str]:
        return {WORKLOAD_LABEL: self.name}

    def pod_labels(self) -> dict[str, str]:
        out = {"app": self.name, WORKLOAD_LABEL: self.name}
        if self.opt_in:
            out[EVICTABLE_LABEL] = "true"
        return {**out, **self.labels}

    def _volumes(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        vols: list[dict[str, Any]] = []
        if self.empty_dir is not False:
            ed = {} if self.empty_dir is True else {"sizeLimit": self.empty_dir}
            vols.append({"name": "scratch", "emptyDir": ed})
        if self.host_path:
            vols.append({"name": "host", "hostPath": {"path": self.host_path}})
        vols += [
            {"name": f"claim-{c}", "persistentVolumeClaim": {"claimName": c}} for c in self.claims
        ]
        mounts = [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in vols]
        return vols, mounts

    def pod_spec(self, image: str = DEFAULT_IMAGE) -> dict[str, Any]:
        vols, mounts = self._volumes()
        container: dict[str, Any] = {"name": "app", "image": self.image or image}
        if self.requests:
            container["resources"] = {"requests": dict(self.requests)}
        if mounts:
            container["volumeMounts"] = mounts
        spec: dict[str, Any] = {"containers": [container], "restartPolicy": self.restart_policy}
        if vols:
            spec["volumes"] = vols
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.node_name:
            spec["nodeName"] = self.node_name
        affinity: dict[str, Any] = {}
        if self.node_affinity:
            exprs = [
                {"key": k, "operator": "In", "values": list(v)}
                for k, v in self.node_affinity.items()
            ]
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": exprs}]
                }
            }
        required = [a.term() for a in self.anti_affinity if a.required]
        preferred = [
            {"weight": a.weight, "podAffinityTerm": a.term()}
            for a in self.anti_affinity
            if not a.required
        ]
        if required or preferred:
            anti: dict[str, Any] = {}
            if required:
                anti["requiredDuringSchedulingIgnoredDuringExecution"] = required
            if preferred:
                anti["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
            affinity["podAntiAffinity"] = anti
        if affinity:
            spec["affinity"] = affinity
        if self.tolerations:
            spec["tolerations"] = [t.manifest() for t in self.tolerations]
        if self.topology_spread:
            spec["topologySpreadConstraints"] = [
                t.manifest(self.selector()) for t in self.topology_spread
            ]
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        if self.grace_period is not None:
            spec["terminationGracePeriodSeconds"] = self.grace_period
        if self.termination_grace_seconds:
            spec["terminationGracePeriodSeconds"] = self.termination_grace_seconds
        return spec

    def pod_annotations(self) -> dict[str, str]:
        """Every pod's annotations: the declared ones, usage, start-up time and grace."""
        return {
            **self.annotations,
            **usage_annotations(self.usage),
            **startup_annotations(self.startup_seconds, self.startup_jitter_seconds),
            **grace_annotations(self.termination_grace_seconds),
        }

    def pod_template(self, image: str = DEFAULT_IMAGE) -> dict[str, Any]:
        meta: dict[str, Any] = {"labels": self.pod_labels()}
        if ann := self.pod_annotations():
            meta["annotations"] = ann
        return {"metadata": meta, "spec": self.pod_spec(image)}

    def metadata(self, namespace: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace or namespace,
            "labels": {"app": self.name, WORKLOAD_LABEL: self.name},
        }

    def manifest(self, namespace: str, image: str = DEFAULT_IMAGE) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": self.metadata(namespace),
            "spec": self.controller_spec(image),
        }

    def controller_spec(self, image: str) -> dict[str, Any]:
        raise NotImplementedError

    def expected_pods(self) -> int | None:
        """Live pods once settled; None when the cluster decides (DaemonSet)."""
        return None


@dataclass(frozen=True)
class _Replicated(Workload):
    _: KW_ONLY
    replicas: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int(f"{self.kind} {self.name!r} replicas", self.replicas, 0)

    def controller_spec(self, image: str) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "selector": {"matchLabels": self.selector()},
            "template": self.pod_template(image),
        }

    def expected_pods(self) -> int | None:
        return self.replicas


@dataclass(frozen=True)
class Deployment(_Replicated):
    """A Deployment (pods owned through a ReplicaSet)."""

    kind: ClassVar[str] = "Deployment"


@dataclass(frozen=True)
class ReplicaSet(_Replicated):
    """A bare ReplicaSet."""

    kind: ClassVar[str] = "ReplicaSet"


@dataclass(frozen=True)
class ReplicationController(_Replicated):
    """A ReplicationController (core/v1, a plain-map selector)."""

    kind: ClassVar[str] = "ReplicationController"
    api_version: ClassVar[str] = "v1"

    def controller_spec(self, image: str) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "selector": self.selector(),
            "template": self.pod_template(image),
        }


@dataclass(frozen=True)
class StatefulSet(_Replicated):
    """A StatefulSet; each `VolumeClaim` becomes a PVC per replica, bound to a lab-made PV."""

    _: KW_ONLY
    volume_claims: Sequence[VolumeClaim] = ()
    kind: ClassVar[str] = "StatefulSet"

    def __post_init__(self) -> None:
        super().__post_init__()
        claims = as_tuple(self.volume_claims)
        bad = [c for c in claims if not isinstance(c, VolumeClaim)]
        if bad:
            raise config_error(
                f"StatefulSet {self.name!r}",
                f"volume_claims holds {bad[0]!r}",
                "use VolumeClaim(...)",
            )
        object.__setattr__(self, "volume_claims", claims)

    def controller_spec(self, image: str) -> dict[str, Any]:
        spec = super().controller_spec(image)
        spec["serviceName"] = self.name
        spec["podManagementPolicy"] = "Parallel"  # every replica at once: no ordered start-up
        if self.volume_claims:
            c = spec["template"]["spec"]["containers"][0]
            c.setdefault("volumeMounts", []).extend(
                {"name": v.name, "mountPath": f"/data/{v.name}"} for v in self.volume_claims
            )
            spec["volumeClaimTemplates"] = [
                {
                    "metadata": {"name": v.name},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": LAB_STORAGE_CLASS,
                        "resources": {"requests": {"storage": v.size}},
                    },
                }
                for v in self.volume_claims
            ]
        return spec

    def claim_names(self) -> list[tuple[str, VolumeClaim]]:
        """The PVC names the StatefulSet controller will create: <claim>-<set>-<ordinal>."""
        return [
            (f"{v.name}-{self.name}-{i}", v)
            for i in range(self.replicas)
            for v in self.volume_claims
        ]

    def persistent_volumes(
        self, namespace: str, managed: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """One PV per claim, pre-bound to it: no provisioner runs on a kwok cluster."""
        ns = self.namespace or namespace
        out = []
        for pvc, v in self.claim_names():
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"desched-lab-{ns}-{pvc}"[:253], "labels": dict(managed)},
                    "spec": {
                        "capacity": {"storage": v.size},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": LAB_STORAGE_CLASS,
                        "hostPath": {"path": f"/tmp/desched-lab/{ns}/{pvc}"},
                        "claimRef": {"namespace": ns, "name": pvc},
                    },
                }
            )
        return out


@dataclass(frozen=True)
class DaemonSet(Workload):
    """A DaemonSet: one pod per node that tolerates it (DaemonSetPods protection)."""

    kind: ClassVar[str] = "DaemonSet"

    def controller_spec(self, image: str) -> dict[str, Any]:
        return {"selector": {"matchLabels": self.selector()}, "template": self.pod_template(image)}


def _is_pause(image: str) -> bool:
    """The pause image under any registry or tag (the lab's default workload image)."""
    name = image.rsplit("/", 1)[-1]
    return name.split("@", 1)[0].split(":", 1)[0] == "pause"


@dataclass(frozen=True)
class Job(Workload):
    """A Job; on kwok its pods complete at once (the cluster's pod-complete stage)."""

    _: KW_ONLY
    completions: int = 1
    parallelism: int | None = None
    backoff_limit: int = 0
    kind: ClassVar[str] = "Job"
    api_version: ClassVar[str] = "batch/v1"
    restart_policy: ClassVar[str] = "Never"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int(f"Job {self.name!r} completions", self.completions, 1)
        check_int(f"Job {self.name!r} backoff_limit", self.backoff_limit, 0)
        if self.parallelism is not None:
            check_int(f"Job {self.name!r} parallelism", self.parallelism, 1)

    def pod_spec(self, image: str = DEFAULT_IMAGE) -> dict[str, Any]:
        spec = super().pod_spec(image)
        container = spec["containers"][0]
        if _is_pause(container["image"]):
            # On a real kubelet (kind, existing) pause runs until killed and the Job never
            # completes; `pause -v` prints its version and exits 0 (build/pause/linux/pause.c).
            container["args"] = ["-v"]
        return spec

    def controller_spec(self, image: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "completions": self.completions,
            "backoffLimit": self.backoff_limit,
            "template": self.pod_template(image),
        }
        if self.parallelism is not None:
            spec["parallelism"] = self.parallelism
        return spec


@dataclass(frozen=True)
class Pod(Workload):
    """A bare pod: no owner (FailedBarePods; the evictor never evicts an owner-less pod)."""

    kind: ClassVar[str] = "Pod"
    api_version: ClassVar[str] = "v1"

    def manifest(self, namespace: str, image: str = DEFAULT_IMAGE) -> dict[str, Any]:
        meta = self.metadata(namespace)
        meta["labels"] = self.pod_labels()
        if ann := self.pod_annotations():
            meta["annotations"] = ann
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": self.pod_spec(image)}

    def expected_pods(self) -> int | None:
        return 1


LabObject = Workload | PodDisruptionBudget | PriorityClass | LocalVolume

__all__ = [
    "DEFAULT_IMAGE",
    "HOSTNAME_KEY",
    "LAB_STORAGE_CLASS",
    "WORKLOAD_LABEL",
    "ZONE_KEY",
    "AntiAffinity",
    "DaemonSet",
    "Deployment",
    "Job",
    "LabObject",
    "Pod",
    "PodDisruptionBudget",
    "PriorityClass",
    "ReplicaSet",
    "ReplicationController",
    "StatefulSet",
    "Taint",
    "Toleration",
    "TopologySpread",
    "VolumeClaim",
    "Workload",
]
