"""A round's moments on the experiment's clock: what the HTML report's timeline and PDB chart show.

The watches stamp with `time.monotonic()`, the API server's audit and the round pods with wall
clock; everything here becomes seconds since the experiment start (like `started_s`), so one
axis holds the Job, the eviction requests and the replacement pod. No clock is read here: the
caller gives the wall-minus-monotonic offset it read (evidence/assemble.py: pure). The applied policy's evidence
(its effective form after the descheduler's defaults and its lint) is computed here too, once per
policy. Kept out of the framework so the runner only passes what it already has.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.policy.checker import checker_for
from pytest_desched.descheduler.policy.lint import lint_policy_doc
from pytest_desched.descheduler.policy.model import canonical_json
from pytest_desched.errors import DeschedError, InputError
from pytest_desched.inputs_safe import load_yaml

if TYPE_CHECKING:
    from pytest_desched.descheduler.rounds import Round
    from pytest_desched.tools.toolchain import Toolchain


# The timeline entry naming a pod the round's own eviction created; the canary reads it back.
REPLACEMENT_SCHEDULED = "replacement-scheduled"


def _rel(t: float, t0: float) -> float:
    return round(t - t0, 3)


def _wall_rel(ts: datetime | None, t0: float, offset: float) -> float | None:
    """A wall-clock instant on the monotonic clock `t0` counts from (offset = wall - mono)."""
    return None if ts is None else round(ts.timestamp() - offset - t0, 3)


def round_timeline(
    rnd: Round,
    pod_events: Iterable[Mapping[str, Any]],
    old_uids: Collection[str],
    t0: float,
    offset: float,
) -> list[dict[str, Any]]:
    """Job created, round pod started, eviction requests, replacement scheduled/Ready, Job done.

    `pod_events`: the round's pod watch (Recorder.pod_events); `old_uids`: the pods before the
    Job (a pod not among them is a replacement); `offset`: wall clock - monotonic clock."""
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
    scheduled: dict[str, float] = {}
    ready: dict[str, float] = {}
    names: dict[str, str] = {}
    for e in pod_events:
        uid = e["uid"]
        if uid in old_uids:
            continue
        names[uid] = e["name"]
        if e.get("node") and uid not in scheduled:
            scheduled[uid] = e["t"]
        if e.get("ready") and uid not in ready:
            ready[uid] = e["t"]
    for what, seen in ((REPLACEMENT_SCHEDULED, scheduled), ("replacement-ready", ready)):
        for uid, t in seen.items():
            out.append({"t_s": _rel(t, t0), "what": what, "pod": names[uid], "code": None})
    out.append({"t_s": _rel(rnd.ended, t0), "what": "job-complete", "pod": None, "code": None})
    out.sort(key=lambda e: (e["t_s"] is None, e["t_s"] or 0.0))
    return out


def pdb_series(statuses: Iterable[tuple[float, int, int, int]], t0: float) -> list[dict[str, Any]]:
    """Every PDB status the watch saw (Recorder.pdb_statuses), in order."""
    return [
        {
            "t_s": _rel(t, t0),
            "currentHealthy": cur,
            "desiredHealthy": want,
            "disruptionsAllowed": allowed,
        }
        for t, cur, want, allowed in statuses
    ]


# One entry per (descheduler version, policy digest): every round of an experiment reads the same
# live policy, and the helper's verdict on it cannot change within a process.
_POLICY_EVIDENCE: dict[tuple[str, str], dict[str, Any]] = {}


def policy_evidence(
    policy_yaml: str, version: str, toolchain: Toolchain | None = None
) -> dict[str, Any]:
    """The live policy as descheduler ``version`` runs it, for a round record.

    ``effective_policy`` is the policy after that descheduler's own defaults (the policycheck
    helper); ``policy_lint`` its lint findings (``DL0xx name: path: message; fix: ...``), warnings
    included. Computed once per policy digest and version.
    """
    import hashlib

    try:
        doc = load_yaml(policy_yaml, "policy.yaml") or {}
    except InputError as exc:  # not YAML, or past a bound (never expanded)
        return {"effective_policy": {}, "policy_lint": [f"not YAML: {exc}"]}
    if not isinstance(doc, dict):
        return {"effective_policy": {}, "policy_lint": ["not YAML of a mapping"]}
    key = (version, hashlib.sha256(canonical_json(doc).encode()).hexdigest())
    if key not in _POLICY_EVIDENCE:
        try:
            findings, res = lint_policy_doc(doc, "policy.yaml", checker_for(version, toolchain))
        except DeschedError as exc:  # no helper for this version: say so, never guess
            return {"effective_policy": {}, "policy_lint": [f"policycheck unavailable: {exc}"]}
        _POLICY_EVIDENCE[key] = {
            "effective_policy": res.effective if res.accepted else {},
            "policy_lint": [
                f"{f.rule} {f.name}: {f.path}: {f.message}; fix: {f.fix}" for f in findings
            ],
        }
    return copy.deepcopy(_POLICY_EVIDENCE[key])


def live_policy_lint(
    policy_yaml: str,
    digest: str,
    applied: Mapping[str, Any] | None,
    version: str,
    toolchain: Toolchain | None = None,
) -> dict[str, Any]:
    """A round record's ``effective_policy`` and ``policy_lint``: the lint apply_policy made
    of this very policy (``applied``, Release.applied_lint, same digest) handed down as it is;
    only a policy it did not apply (the chart's default, for dry-run rounds) is linted here."""
    if applied is not None and applied.get("digest") == digest:
        return {
            "effective_policy": copy.deepcopy(applied["effective_policy"]),
            "policy_lint": list(applied["policy_lint"]),
        }
    return policy_evidence(policy_yaml, version, toolchain)


def policy_lint(policy_yaml: str, version: str, toolchain: Toolchain | None = None) -> list[str]:
    """The lint findings (errors, warnings, notes) on the policy as applied; none when clean."""
    return policy_evidence(policy_yaml, version, toolchain)["policy_lint"]
