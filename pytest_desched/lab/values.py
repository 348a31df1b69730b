"""Lab values below the workloads: checked inputs and the pod-level values they carry.

Taints, tolerations, topology spread, anti-affinity and volume claims are frozen values whose
inputs are checked when made (LabConfigError naming the input and the fix), so a bad one
fails before anything on a cluster changes; `workloads` and `budgets` build on them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_desched.lab.inputs import LabConfigError, workload_name
from pytest_desched.lab.snapshot import WORKLOAD_LABEL

LAB_STORAGE_CLASS = "desched-lab"  # statically provisioned: the lab creates pre-bound PVs
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
MAX_USER_PRIORITY = 1_000_000_000  # above this PriorityClass values are reserved for system-*


# --- input checks (raise LabConfigError naming the input and the fix) ----------------------
def config_error(what: str, problem: str, fix: str) -> LabConfigError:
    """The one wording of a refused lab input: `what: problem; fix`."""
    return LabConfigError(f"{what}: {problem}; {fix}")


def check_name(what: str, name: Any) -> str:
    """`name` as an object name (an RFC 1123 label, also a label value), or refused."""
    if not isinstance(name, str) or len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
        raise config_error(
            what,
            f"name {name!r} is not an RFC 1123 label",
            "use at most 63 lower-case letters, digits and '-', starting and ending with a "
            "letter or digit (it is also a label value)",
        )
    return name


def check_label_key(what: str, key: Any) -> str:
    """`key` as a label key (`[dns-prefix/]name`), or refused."""
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
        raise config_error(
            what, f"label key {key!r} is invalid", "use [dns-prefix/]name, name <= 63 chars"
        )
    return key


def check_labels(what: str, labels: Any) -> dict[str, str]:
    """`labels` as a label mapping (valid keys and values), or refused."""
    if not isinstance(labels, Mapping):
        raise config_error(
            what, f"labels must be a mapping, got {type(labels).__name__}", "pass a dict"
        )
    for k, v in labels.items():
        check_label_key(what, k)
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.fullmatch(v):
            raise config_error(
                what, f"label {k}={v!r} has an invalid value", "use a string of <= 63 chars"
            )
    return dict(labels)


def check_quantity(what: str, value: Any) -> str:
    """`value` as a Kubernetes quantity (`500m`, `2Gi`), or refused."""
    from kubernetes.utils.quantity import parse_quantity

    try:
        if isinstance(value, bool):
            raise ValueError
        parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError):
        raise config_error(
            what, f"{value!r} is not a Kubernetes quantity", "write e.g. '500m' or '2Gi'"
        ) from None
    return str(value)


def check_int(what: str, value: Any, low: int, high: int | None = None) -> int:
    """`value` as an int in [low, high] (a bool is no int here), or refused."""
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise config_error(what, f"must be an integer {bound}, got {value!r}", "pass an int")
    return value


def check_one_of(what: str, value: Any, allowed: Sequence[str]) -> str:
    """`value` as one of `allowed`, or refused naming them."""
    if value not in allowed:
        raise config_error(what, f"{value!r} is not allowed", f"use one of {list(allowed)}")
    return value


def as_tuple(value: Any) -> tuple[Any, ...]:
    """A sequence field as a tuple (hashable in a frozen value); one item stands alone."""
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
        check_label_key(f"Taint {self.key!r}", self.key)
        check_one_of(f"Taint {self.key!r} effect", self.effect, TAINT_EFFECTS)
        if self.value is not None:
            check_labels(f"Taint {self.key!r}", {"v": self.value})

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
        check_one_of(f"{what} operator", self.operator, ("Exists", "Equal"))
        if self.effect is not None:
            check_one_of(f"{what} effect", self.effect, TAINT_EFFECTS)
        if self.operator == "Exists" and self.value is not None:
            raise config_error(what, "operator Exists takes no value", "drop value or use 'Equal'")
        if self.operator == "Equal" and not self.key:
            raise config_error(what, "operator Equal needs a key", "give key= or use 'Exists'")

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
        check_label_key(what, self.topology_key)
        check_int(f"{what} max_skew", self.max_skew, 1)
        check_one_of(
            f"{what} when_unsatisfiable",
            self.when_unsatisfiable,
            ("DoNotSchedule", "ScheduleAnyway"),
        )
        for k in ("node_affinity_policy", "node_taints_policy"):
            if getattr(self, k) is not None:
                check_one_of(f"{what} {k}", getattr(self, k), ("Honor", "Ignore"))
        if self.match_labels is not None:
            object.__setattr__(self, "match_labels", check_labels(what, self.match_labels))
        if self.min_domains is not None:
            check_int(f"{what} min_domains", self.min_domains, 1)

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
        object.__setattr__(self, "match_labels", check_labels(what, self.match_labels))
        if not self.match_labels:
            raise config_error(
                what, "match_labels is empty", "name the labels of the pods to avoid"
            )
        check_label_key(what, self.topology_key)
        check_int(f"{what} weight", self.weight, 1, 100)

    @classmethod
    def to(cls, workload: Any, **kw: Any) -> AntiAffinity:
        """Away from the pods of `workload` (its name, or the lab workload itself)."""
        return cls({WORKLOAD_LABEL: str(workload_name(workload, "AntiAffinity.to"))}, **kw)

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
        check_name(f"VolumeClaim {self.name!r}", self.name)
        check_quantity(f"VolumeClaim {self.name!r} size", self.size)
