"""A replay's round 1 against the incident's own log (`replay --log`): the log read and
checked (`read_log`, also `replay --from-log`'s), the facts the comparison needs from the
snapshot and the restore, then `ledger.compare`, which judges through the comparison core
(`outcome/identity.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.errors import ConfigError, InputError
from pytest_desched.inputs_safe import json_lines, read_text
from pytest_desched.replay.capture.format import Snapshot, key
from pytest_desched.replay.capture.schema import first_problem
from pytest_desched.replay.ledger import (
    PodRow,
    compare,
    node_cuts,
    round_fates,
    total_cut,
    undecided,
)


def pdb_status_by_pod(snap: Snapshot) -> dict[str, Any]:
    """pod -> the snapshot status of a PDB whose matchLabels select it (for the reasons)."""
    out = {}
    for pdb in snap.items("podDisruptionBudgets"):
        sel = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        for p in snap.pods:
            labels = p["metadata"].get("labels") or {}
            if (
                p["metadata"]["namespace"] == pdb["metadata"]["namespace"]
                and sel
                and all(labels.get(k) == v for k, v in sel.items())
            ):
                out[key(p)] = pdb.get("status")
    return out


def compare_with_log(
    log: str,
    log_version: str | None,
    snap: Snapshot,
    restored: Any,
    rnd: Any,
    rows: Mapping[str, PodRow],
    version: str,
) -> dict[str, Any]:
    """Round 1 (`rnd`, a run_round Round) against the incident's log, over the restored pods;
    every other pod is in `not_compared` with its reason."""
    incident = parse_log(log, log_version)
    verbose = any('"v":4' in line for line in log.splitlines()[:5000])
    nodes = {key(p): (p.get("spec") or {}).get("nodeName") for p in snap.pods}
    a, b = round_fates(incident, log), round_fates(rnd.result, rnd.logs)
    ca, cb = ((total_cut(r), node_cuts(r)) for r in (incident, rnd.result))  # once each
    for pod in restored.expected:  # no decision: not picked, or not reached after a cap
        a.setdefault(pod, undecided(incident, nodes.get(pod), cuts=ca))
        b.setdefault(pod, undecided(rnd.result, nodes.get(pod), cuts=cb))
    return compare(
        a,
        b,
        {
            "versions": {"incident": log_version, "replay": version},
            "not_restored": {s["pod"]: s["why"] for s in restored.skipped},
            "compare_only": set(restored.expected),
            "pods": set(rows),
            "identities": {k: {"owner": r.owner, "node": r.node} for k, r in rows.items()},
            "pdbs": pdb_status_by_pod(snap),
            "ages": f"{restored.ages}, {restored.shift_s} s",
            "skipped": {"incident": incident.skipped, "replay": rnd.result.skipped},
        },
        incident_verbose=verbose,
    )


def read_log(path: str | Path, flag: str) -> str:
    """A descheduler JSON log, bounded (size, UTF-8, line depth); refused when it has none."""

    text = read_text(path, kind="bulk", what=f"{flag} log")
    lines = [(i, doc) for i, doc in json_lines(text, f"{path}") if "msg" in doc]
    for i, doc in lines:  # a line of the wrong types is no descheduler log: refused, not skipped
        found = first_problem("log line", doc)
        if found is not None:
            raise InputError(
                f"{flag} {path}",
                f"line {i}",
                f"{' '.join(filter(None, found))}: not a descheduler JSON log line",
                "give the log of a descheduler run with --logging-format=json",
            )
    if not lines:
        raise ConfigError(
            f'{flag} {path}: no descheduler JSON log line (an object with "msg"); give the '
            "log of a descheduler run with --logging-format=json"
        )
    return text
