"""A round's moments on the experiment's clock: what the HTML report's timeline and PDB chart show.

The watches stamp with `time.monotonic()`, the API server's audit and the round pods with wall
clock; everything here becomes seconds since the experiment start (like `started_s`), so one
axis holds the Job, the eviction requests and the replacement pod. Kept out of the framework
so the runner only passes what it already has.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_desched.descheduler.rounds import Round
    from pytest_desched.lab.recorder import Recorder
    from pytest_desched.lab.snapshot import Snapshot


def _rel(t: float, t0: float) -> float:
    return round(t - t0, 3)


def _wall_rel(ts: datetime | None, t0: float, offset: float) -> float | None:
    """A wall-clock instant on the monotonic clock `t0` counts from (offset = wall - mono)."""
    return None if ts is None else round(ts.timestamp() - offset - t0, 3)


def round_timeline(rnd: Round, rec: Recorder, before: Snapshot, t0: float) -> list[dict[str, Any]]:
    """Job created, round pod started, eviction requests, replacement scheduled/Ready, Job done."""
    offset = time.time() - time.monotonic()
    out: list[dict[str, Any]] = [
        {"t_s": _rel(rnd.started, t0), "what": "job-created", "pod": None, "code": None}
    ]
    for run in rnd.pod_runs:
        out.append(
            {
                "t_s": _wall_rel(run.started, t0, offset),
                "what": "pod-started",
                "pod": run.pod,
                "code": None,
            }
        )
    for req in rnd.audit_requests or []:
        if req.is_eviction:
            out.append(
                {
                    "t_s": _wall_rel(req.stage_ts, t0, offset),
                    "what": "eviction-request",
                    "pod": req.key,
                    "code": req.code,
                }
            )
    old = before.uids
    scheduled: dict[str, float] = {}
    ready: dict[str, float] = {}
    names: dict[str, str] = {}
    for e in rec.pod_events:
        uid = e["uid"]
        if uid in old:
            continue
        names[uid] = e["name"]
        if e.get("node") and uid not in scheduled:
            scheduled[uid] = e["t"]
        if e.get("ready") and uid not in ready:
            ready[uid] = e["t"]
    for what, seen in (("replacement-scheduled", scheduled), ("replacement-ready", ready)):
        for uid, t in seen.items():
            out.append({"t_s": _rel(t, t0), "what": what, "pod": names[uid], "code": None})
    out.append({"t_s": _rel(rnd.ended, t0), "what": "job-complete", "pod": None, "code": None})
    out.sort(key=lambda e: (e["t_s"] is None, e["t_s"] or 0.0))
    return out


def pdb_series(rec: Recorder, t0: float) -> list[dict[str, Any]]:
    """Every PDB status the watch saw, in order."""
    return [
        {
            "t_s": _rel(t, t0),
            "currentHealthy": cur,
            "desiredHealthy": want,
            "disruptionsAllowed": allowed,
        }
        for t, cur, want, allowed in rec.pdb_statuses
    ]


def policy_lint(policy_yaml: str, version: str) -> list[str]:
    """The schema's and the safety rules' findings on the policy as applied (none when clean)."""
    import yaml

    from pytest_desched.descheduler.policy.safety import safety_problems
    from pytest_desched.descheduler.policy.schema import schema_for

    try:
        doc = yaml.safe_load(policy_yaml) or {}
    except yaml.YAMLError as exc:
        return [f"not YAML: {exc}"]
    try:
        schema_problems = schema_for(version).problems(doc)
    except Exception as exc:  # an unknown version has no schema: say so, never guess
        schema_problems = [f"no schema for {version}: {exc}"]
    return [*schema_problems, *safety_problems(doc)]
