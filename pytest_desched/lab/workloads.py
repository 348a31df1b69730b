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

import re
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from pytest_desched.lab.inputs import OPT_IN_LABEL, LabConfigError
from pytest_desched.lab.snapshot import WORKLOAD_LABEL

LAB_STORAGE_CLASS = "desched-lab"  # statically provisioned: the lab creates pre-bound PVs
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_MAX_USER_PRIORITY = 1_000_000_000  # above this PriorityClass values are reserved for system-*


# --- input checks (raise LabConfigError naming the input and the fix) ----------------------
def _fail(what: str, problem: str, fix: str) -> LabConfigError:
    return LabConfigError(f"{what}: {problem}; {fix}")


def _name(what: str, name: Any) -> str:
    if not isinstance(name, str) or len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
        raise _fail(
            what,
            f"name {name!r} is not an RFC 1123 label",
            "use at most 63 lower-case letters, digits and '-', starting and ending with a "
            "letter or digit (it is also a label value)",
        )
    return name


def _label_key(what: str, key: Any) -> str:
    prefix, _, name = key.rpartition("/") if isinstance(key, str) else ("", "", None)
    ok = (
        isinstance(name, str)
        and len(name) <= 63
        and bool(_LABEL_NAME.fullmatch(name))
        and (
            not prefix
            or (len(prefix) <= 253 and all(_DNS1123_LABEL.fullmatch(p) for p in prefix.split(".")))
        )
    )
    if not ok:
        raise _fail(
            what, f"label key {key!r} is invalid", "use [dns-prefix/]name, name <= 63 chars"
        )
    return key


def _labels(what: str, labels: Any) -> dict[str, str]:
    if not isinstance(labels, Mapping):
        raise _fail(what, f"labels must be a mapping, got {type(labels).__name__}", "pass a dict")
    for k, v in labels.items():
        _label_key(what, k)
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.fullmatch(v):
            raise _fail(
                what, f"label {k}={v!r} has an invalid value", "use a string of <= 63 chars"
            )
    return dict(labels)


def _quantity(what: str, value: Any) -> str:
    from kubernetes.utils.quantity import parse_quantity

    try:
        if isinstance(value, bool):
            raise ValueError
        parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError):
        raise _fail(
            what, f"{value!r} is not a Kubernetes quantity", "write e.g. '500m' or '2Gi'"
        ) from None
    return str(value)


def _int(what: str, value: Any, low: int, high: int | None = None) -> int:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise _fail(what, f"must be an integer {bound}, got {value!r}", "pass an int")
    return value


def _one_of(what: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise _fail(what, f"{value!r} is not allowed", f"use one of {list(allowed)}")
    return value


def _tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        return (value,)
    return tuple(value)


# --- pod-level values ----------------------------------------------------------------------
@dataclass(frozen=True)
class Taint:
    """A node taint; `toleration()` is the matching toleration."""

    key: str
    value: str | None = None
    effect: str = "NoSchedule"

    def __post_init__(self) -> None:
        _label_key(f"Taint {self.key!r}", self.key)
        _one_of(f"Taint {self.key!r} effect", self.effect, TAINT_EFFECTS)
        if self.value is not None:
            _labels(f"Taint {self.key!r}", {"v": self.value})

    def manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "effect": self.effect}
        if self.value is not None:
            out["value"] = self.value
        return out

    def toleration(self) -> Toleration:
        if self.value is None:
            return Toleration(self.key, "Exists", effect=self.effect)
        return Toleration(self.key, "Equal", self.value, self.effect)


@dataclass(frozen=True)
class Toleration:
    """A pod toleration (`Toleration()` with no key tolerates everything)."""

    key: str | None = None
    operator: str = "Exists"
    value: str | None = None
    effect: str | None = None

    def __post_init__(self) -> None:
        what = f"Toleration {self.key!r}"
        _one_of(f"{what} operator", self.operator, ("Exists", "Equal"))
        if self.effect is not None:
            _one_of(f"{what} effect", self.effect, TAINT_EFFECTS)
        if self.operator == "Exists" and self.value is not None:
            raise _fail(what, "operator Exists takes no value", "drop value or use 'Equal'")
        if self.operator == "Equal" and not self.key:
            raise _fail(what, "operator Equal needs a key", "give key= or use 'Exists'")

    def manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        for k in ("key", "value", "effect"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out


@dataclass(frozen=True)
class TopologySpread:
    """A topologySpreadConstraint; `match_labels=None` selects the workload's own pods."""

    topology_key: str = ZONE_KEY
    max_skew: int = 1
    when_unsatisfiable: str = "DoNotSchedule"
    match_labels: Mapping[str, str] | None = None
    node_affinity_policy: str | None = None  # Honor (default) | Ignore
    node_taints_policy: str | None = None  # Ignore (default) | Honor
    min_domains: int | None = None

    def __post_init__(self) -> None:
        what = f"TopologySpread {self.topology_key!r}"
        _label_key(what, self.topology_key)
        _int(f"{what} max_skew", self.max_skew, 1)
        _one_of(
            f"{what} when_unsatisfiable",
            self.when_unsatisfiable,
            ("DoNotSchedule", "ScheduleAnyway"),
        )
        for k in ("node_affinity_policy", "node_taints_policy"):
            if getattr(self, k) is not None:
                _one_of(f"{what} {k}", getattr(self, k), ("Honor", "Ignore"))
        if self.match_labels is not None:
            object.__setattr__(self, "match_labels", _labels(what, self.match_labels))
        if self.min_domains is not None:
            _int(f"{what} min_domains", self.min_domains, 1)

    def manifest(self, own: Mapping[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "maxSkew": self.max_skew,
            "topologyKey": self.topology_key,
            "whenUnsatisfiable": self.when_unsatisfiable,
            "labelSelector": {"matchLabels": dict(self.match_labels or own)},
        }
        if self.node_affinity_policy:
            out["nodeAffinityPolicy"] = self.node_affinity_policy
        if self.node_taints_policy:
            out["nodeTaintsPolicy"] = self.node_taints_policy
        if self.min_domains is not None:
            out["minDomains"] = self.min_domains
        return out


@dataclass(frozen=True)
class AntiAffinity:
    """Pod anti-affinity to pods with `match_labels` (`AntiAffinity.to("db")` for a workload)."""

    match_labels: Mapping[str, str]
    topology_key: str = HOSTNAME_KEY
    required: bool = True
    weight: int = 100

    def __post_init__(self) -> None:
        what = f"AntiAffinity {dict(self.match_labels) if isinstance(self.match_labels, Mapping) else self.match_labels!r}"
        object.__setattr__(self, "match_labels", _labels(what, self.match_labels))
        if not self.match_labels:
            raise _fail(what, "match_labels is empty", "name the labels of the pods to avoid")
        _label_key(what, self.topology_key)
        _int(f"{what} weight", self.weight, 1, 100)

    @classmethod
    def to(cls, workload: str, **kw: Any) -> AntiAffinity:
        return cls({WORKLOAD_LABEL: workload}, **kw)

    def term(self) -> dict[str, Any]:
        return {
            "labelSelector": {"matchLabels": dict(self.match_labels)},
            "topologyKey": self.topology_key,
        }


@dataclass(frozen=True)
class VolumeClaim:
    """A StatefulSet volumeClaimTemplate, bound to a PV the lab provisions itself."""

    name: str = "data"
    size: str = "1Gi"

    def __post_init__(self) -> None:
        _name(f"VolumeClaim {self.name!r}", self.name)
        _quantity(f"VolumeClaim {self.name!r} size", self.size)


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

    kind: ClassVar[str] = ""
    api_version: ClassVar[str] = "apps/v1"
    restart_policy: ClassVar[str] = "Always"

    def __post_init__(self) -> None:
        what = f"{self.kind or type(self).__name__} {self.name!r}"
        _name(what, self.name)
        if self.namespace is not None:
            _name(f"{what} namespace", self.namespace)
        for attr in ("labels", "annotations", "node_selector"):
            value = getattr(self, attr)
            if attr == "annotations":
                if not isinstance(value, Mapping) or not all(
                    isinstance(v, str) for v in value.values()
                ):
                    raise _fail(what, "annotations must map keys to strings", "pass a dict of str")
                value = dict(value)
            else:
                value = _labels(f"{what} {attr}", value)
            object.__setattr__(self, attr, value)
        reserved = {"app", WORKLOAD_LABEL} & set(self.labels)
        if reserved:
            raise _fail(what, f"labels {sorted(reserved)} are set by the lab", "use other keys")
        if not isinstance(self.requests, Mapping):
            raise _fail(what, "requests must be a mapping", "pass e.g. {'memory': '2Gi'}")
        object.__setattr__(
            self,
            "requests",
            {str(k): _quantity(f"{what} requests[{k}]", v) for k, v in self.requests.items()},
        )
        aff: dict[str, tuple[str, ...]] = {}
        if not isinstance(self.node_affinity, Mapping):
            raise _fail(
                what,
                "node_affinity must map a label key to allowed values",
                "pass e.g. {'zone': ['a']}",
            )
        for k, vals in self.node_affinity.items():
            _label_key(f"{what} node_affinity", k)
            vals = _tuple(vals)
            if not vals or not all(isinstance(v, str) for v in vals):
                raise _fail(
                    what, f"node_affinity[{k!r}] needs at least one string value", "list the values"
                )
            aff[k] = vals
        object.__setattr__(self, "node_affinity", aff)
        for attr, typ in (
            ("anti_affinity", AntiAffinity),
            ("tolerations", Toleration),
            ("topology_spread", TopologySpread),
        ):
            items = _tuple(getattr(self, attr))
            bad = [x for x in items if not isinstance(x, typ)]
            if bad:
                raise _fail(what, f"{attr} holds {bad[0]!r}", f"use {typ.__name__}(...) values")
            object.__setattr__(self, attr, items)
        claims = _tuple(self.claims)
        for c in claims:
            _name(f"{what} claim", c)
        object.__setattr__(self, "claims", claims)
        if self.priority_class is not None and not str(self.priority_class).startswith("system-"):
            _name(f"{what} priority_class", self.priority_class)
        if self.empty_dir not in (False, True):
            _quantity(f"{what} empty_dir", self.empty_dir)
        if self.host_path is not None and not (
            isinstance(self.host_path, str) and self.host_path.startswith("/")
        ):
            raise _fail(
                what, f"host_path {self.host_path!r} is not absolute", "pass a path like /var/lib/x"
            )
        if self.grace_period is not None:
            _int(f"{what} grace_period", self.grace_period, 0)
        if not isinstance(self.image, (str, type(None))) or self.image == "":
            raise _fail(
                what, f"image {self.image!r} is not an image reference", "pass a string or None"
            )

    # -- rendering -------------------------------------------------------------------------
    def selector(self) -> dict[str, str]:
        return {WORKLOAD_LABEL: self.name}

    def pod_labels(self) -> dict[str, str]:
        out = {"app": self.name, WORKLOAD_LABEL: self.name}
        if self.opt_in:
            out[OPT_IN_LABEL] = "true"
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
        return spec

    def pod_template(self, image: str = DEFAULT_IMAGE) -> dict[str, Any]:
        meta: dict[str, Any] = {"labels": self.pod_labels()}
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
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
        _int(f"{self.kind} {self.name!r} replicas", self.replicas, 0)

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
        claims = _tuple(self.volume_claims)
        bad = [c for c in claims if not isinstance(c, VolumeClaim)]
        if bad:
            raise _fail(
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
        _int(f"Job {self.name!r} completions", self.completions, 1)
        _int(f"Job {self.name!r} backoff_limit", self.backoff_limit, 0)
        if self.parallelism is not None:
            _int(f"Job {self.name!r} parallelism", self.parallelism, 1)

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
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": self.pod_spec(image)}

    def expected_pods(self) -> int | None:
        return 1


# --- other namespaced and cluster-scoped objects -------------------------------------------
@dataclass(frozen=True)
class PodDisruptionBudget:
    """A PDB over one workload's pods (`selects=`) or over `match_labels`."""

    name: str
    _: KW_ONLY
    selects: str | None = None
    match_labels: Mapping[str, str] | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    namespace: str | None = None

    kind: ClassVar[str] = "PodDisruptionBudget"

    def __post_init__(self) -> None:
        what = f"PodDisruptionBudget {self.name!r}"
        _name(what, self.name)
        if (self.selects is None) == (self.match_labels is None):
            raise _fail(what, "select pods by exactly one of selects= or match_labels=", "pass one")
        if self.selects is not None:
            _name(f"{what} selects", self.selects)
        else:
            object.__setattr__(self, "match_labels", _labels(what, self.match_labels))
        if (self.min_available is None) == (self.max_unavailable is None):
            raise _fail(what, "set exactly one of min_available and max_unavailable", "pass one")
        for k in ("min_available", "max_unavailable"):
            v = getattr(self, k)
            if v is None:
                continue
            if isinstance(v, str):
                if not re.fullmatch(r"\d{1,3}%", v) or int(v[:-1]) > 100:
                    raise _fail(f"{what} {k}", f"{v!r} is not a percentage", "write e.g. '50%'")
            else:
                _int(f"{what} {k}", v, 0)
        if self.namespace is not None:
            _name(f"{what} namespace", self.namespace)

    def manifest(self, namespace: str) -> dict[str, Any]:
        labels = dict(self.match_labels or {WORKLOAD_LABEL: self.selects})
        spec: dict[str, Any] = {"selector": {"matchLabels": labels}}
        if self.min_available is not None:
            spec["minAvailable"] = self.min_available
        else:
            spec["maxUnavailable"] = self.max_unavailable
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": self.name, "namespace": self.namespace or namespace},
            "spec": spec,
        }


@dataclass(frozen=True)
class PriorityClass:
    """A cluster-scoped PriorityClass the lab deletes again (priorityThreshold experiments)."""

    name: str
    value: int
    _: KW_ONLY
    preemption_policy: str | None = None
    description: str = "pytest-desched lab"

    kind: ClassVar[str] = "PriorityClass"

    def __post_init__(self) -> None:
        what = f"PriorityClass {self.name!r}"
        _name(what, self.name)
        if self.name.startswith("system-"):
            raise _fail(what, "system- names are reserved", "pick another name")
        _int(f"{what} value", self.value, -2_147_483_648, _MAX_USER_PRIORITY)
        if self.preemption_policy is not None:
            _one_of(
                f"{what} preemption_policy",
                self.preemption_policy,
                ("PreemptLowerPriority", "Never"),
            )

    def manifest(self, managed: Mapping[str, str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": self.name, "labels": dict(managed or {})},
            "value": self.value,
            "globalDefault": False,
            "description": self.description,
        }
        if self.preemption_policy:
            out["preemptionPolicy"] = self.preemption_policy
        return out


LabObject = Workload | PodDisruptionBudget | PriorityClass

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
