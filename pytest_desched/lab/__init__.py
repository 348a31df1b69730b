"""The lab: namespace, node labels, workload, PDB, snapshots and watch recorders."""

from __future__ import annotations

from pytest_desched.errors import LabApiError
from pytest_desched.lab.inputs import (
    MANAGED_BY,
    MANAGER,
    OPT_IN_LABEL,
    POOL_LABEL,
    POOL_VALUE,
    LabInputError,
    check_lab_inputs,
    check_namespace,
)
from pytest_desched.lab.lab import Lab
from pytest_desched.lab.recorder import Recorder
from pytest_desched.lab.snapshot import PodInfo, Snapshot

__all__ = [
    "MANAGED_BY",
    "MANAGER",
    "OPT_IN_LABEL",
    "POOL_LABEL",
    "POOL_VALUE",
    "Lab",
    "LabApiError",
    "LabInputError",
    "PodInfo",
    "Recorder",
    "Snapshot",
    "check_lab_inputs",
    "check_namespace",
]
