"""PodDisruptionBudgets and PriorityClasses as lab values, each rendering its manifest."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_desched.lab.inputs import workload_name
from pytest_desched.lab.snapshot import WORKLOAD_LABEL
from pytest_desched.lab.values import (
    MAX_USER_PRIORITY,
    check_int,
    check_labels,
    check_name,
    check_one_of,
    config_error,
)

if TYPE_CHECKING:
    from pytest_desched.lab.workloads import Workload


# --- other namespaced and cluster-scoped objects -------------------------------------------
@dataclass(frozen=True)
class PodDisruptionBudget:
    """A PDB over one workload's pods (`selects=`) or over `match_labels`."""

    name: str
    _: KW_ONLY
    selects: str | Workload | None = (
        None  # a workload: its name, or the lab object (kept as its name)
    )
    match_labels: Mapping[str, str] | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    namespace: str | None = None

    kind: ClassVar[str] = "PodDisruptionBudget"

    def __post_init__(self) -> None:
        what = f"PodDisruptionBudget {self.name!r}"
        check_name(what, self.name)
        if (self.selects is None) == (self.match_labels is None):
            raise config_error(
                what, "select pods by exactly one of selects= or match_labels=", "pass one"
            )
        if self.selects is not None:
            object.__setattr__(self, "selects", workload_name(self.selects, f"{what} selects"))
            check_name(f"{what} selects", self.selects)
        else:
            object.__setattr__(self, "match_labels", check_labels(what, self.match_labels))
        if (self.min_available is None) == (self.max_unavailable is None):
            raise config_error(
                what, "set exactly one of min_available and max_unavailable", "pass one"
            )
        for k in ("min_available", "max_unavailable"):
            v = getattr(self, k)
            if v is None:
                continue
            if isinstance(v, str):
                if not re.fullmatch(r"\d{1,3}%", v) or int(v[:-1]) > 100:
                    raise config_error(
                        f"{what} {k}", f"{v!r} is not a percentage", "write e.g. '50%'"
                    )
            else:
                check_int(f"{what} {k}", v, 0)
        if self.namespace is not None:
            check_name(f"{what} namespace", self.namespace)

    def manifest(self, namespace: str) -> dict[str, Any]:
        # exactly one is set (__post_init__)
        labels = dict(self.match_labels or {WORKLOAD_LABEL: str(self.selects)})
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
        check_name(what, self.name)
        if self.name.startswith("system-"):
            raise config_error(what, "system- names are reserved", "pick another name")
        check_int(f"{what} value", self.value, -2_147_483_648, MAX_USER_PRIORITY)
        if self.preemption_policy is not None:
            check_one_of(
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
