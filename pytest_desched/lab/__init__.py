"""The lab: namespaces, node changes, workloads as values, PDBs, snapshots and watch recorders."""

from __future__ import annotations

from pytest_desched.errors import LabApiError
from pytest_desched.lab.base import LAB_LABEL, UNSCHEDULABLE_TAINT
from pytest_desched.lab.inputs import (
    EVICTABLE_LABEL,
    MANAGED_BY,
    MANAGER,
    POOL_LABEL,
    POOL_VALUE,
    LabConfigError,
    LabInputError,
    check_lab_inputs,
    check_namespace,
)
from pytest_desched.lab.lab import Lab
from pytest_desched.lab.recorder import Recorder
from pytest_desched.lab.snapshot import PodInfo, Snapshot
from pytest_desched.lab.workloads import (
    HOSTNAME_KEY,
    LAB_STORAGE_CLASS,
    WORKLOAD_LABEL,
    ZONE_KEY,
    AntiAffinity,
    DaemonSet,
    Deployment,
    Job,
    LabObject,
    LocalVolume,
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
    Workload,
)

__all__ = [
    "EVICTABLE_LABEL",
    "HOSTNAME_KEY",
    "LAB_LABEL",
    "LAB_STORAGE_CLASS",
    "MANAGED_BY",
    "MANAGER",
    "POOL_LABEL",
    "POOL_VALUE",
    "UNSCHEDULABLE_TAINT",
    "WORKLOAD_LABEL",
    "ZONE_KEY",
    "AntiAffinity",
    "DaemonSet",
    "Deployment",
    "Job",
    "Lab",
    "LabApiError",
    "LabConfigError",
    "LabInputError",
    "LabObject",
    "LocalVolume",
    "Pod",
    "PodDisruptionBudget",
    "PodInfo",
    "PriorityClass",
    "Recorder",
    "ReplicaSet",
    "ReplicationController",
    "Snapshot",
    "StatefulSet",
    "Taint",
    "Toleration",
    "TopologySpread",
    "VolumeClaim",
    "Workload",
    "check_lab_inputs",
    "check_namespace",
]
