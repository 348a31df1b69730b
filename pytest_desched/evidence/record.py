"""The round record: everything a reviewer needs to audit one descheduler round.

`RoundRecord` is plain JSON data whose decision figures (decisions, counts, failures,
blocking layers, verdict) come only from the parsed descheduler log via `from_round`, never
from a caller, so a record cannot claim what the log does not show. Redaction, summaries and
writing live in their own modules; this one only defines the data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_desched.descheduler.decisions import Fate, RoundResult, blocking_layers, decide

_FAILURE_FATES = (Fate.REFUSED, Fate.ERROR, Fate.LIMITED)
_DERIVED = (
    "decisions",
    "counts",
    "cluster_counts",
    "evictions",
    "failures",
    "blocking_layers",
    "verdict",
    "deciding_layer",
)


@dataclass(frozen=True)
class RoundRecord:
    """Everything a reviewer needs to audit one descheduler round, as plain JSON data."""

    experiment: str
    round_name: str
    provider: str
    versions: dict[str, str] = field(default_factory=dict)
    chart: dict[str, Any] = field(default_factory=dict)  # source repo|module, version, digest..
    policy_digest: str = ""
    policy_overrides: list[dict[str, Any]] = field(default_factory=list)  # path/old/new/why
    job: dict[str, Any] = field(default_factory=dict)  # name, uid, namespace, succeeded, exit_code
    started_s: float | None = None  # relative to the experiment start
    ended_s: float | None = None
    namespace: str | None = None  # the lab's first namespace (where its runbook objects live)
    # Every namespace the lab owns: the decisions, counts and verdict are about all of them.
    namespaces: list[str] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    cluster_counts: dict[str, int] = field(default_factory=dict)  # every namespace's fates
    evictions: int = 0
    caps: dict[str, int | None] = field(default_factory=dict)  # perNode/perNamespace/total
    failures: list[dict[str, Any]] = field(default_factory=list)
    blocking_layers: list[str] = field(default_factory=list)
    replacement_ready_latency_s: float | None = None
    pdb_before: dict[str, Any] | None = None
    pdb_after: dict[str, Any] | None = None
    pdb_min_disruptions_allowed_seen: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # reason,type,kind,name,uid,..
    pending_pods: list[str] = field(default_factory=list)
    distribution_before: dict[str, int] = field(default_factory=dict)
    distribution_after: dict[str, int] = field(default_factory=dict)
    # Scraped values, or {"available": False, "why": ...}: an absent metric is never guessed.
    metrics: dict[str, Any] = field(
        default_factory=lambda: {"available": False, "why": "not collected"}
    )
    # The API server's own audit record of each eviction request beside the log's decisions
    # (audit.AuditView.to_dict()), or {"available": False, "why": ...}: never pretended.
    audit: dict[str, Any] = field(
        default_factory=lambda: {"available": False, "why": "not collected"}
    )
    events_delivered: dict[str, Any] = field(default_factory=dict)  # {"delivered", "owed"}
    known_bugs: dict[str, str] = field(default_factory=dict)  # bug id -> signature evidence
    verdict: str = ""
    deciding_layer: str | None = None  # decisions.decide(...).label: summaries and JUnit show it
    notes: list[str] = field(default_factory=list)
    log_path: str | None = None
    # For the HTML report (evidence/report.py), seconds relative to the experiment start like
    # started_s: Job created, round pod started, each eviction request (code, pod), replacement
    # scheduled/Ready, Job complete; and every PDB status the watch saw.
    timeline: list[dict[str, Any]] = field(default_factory=list)  # t_s, what, pod, code
    pdb_series: list[dict[str, Any]] = field(default_factory=list)  # t_s + PDB status counts
    policy_applied: str | None = None  # the live ConfigMap's policy YAML (policy_digest's text)
    # desched lint on it for the release's descheduler version: DL0xx findings, warnings too.
    policy_lint: list[str] = field(default_factory=list)
    # policy_applied after that descheduler's own defaults (policycheck), e.g. DefaultEvictor
    # at filter/preevictionfilter and a defaulted priorityThreshold; {} when it was refused.
    effective_policy: dict[str, Any] = field(default_factory=dict)
    # The runbook's pre-flight before the first install (descheduler.preflight): versions,
    # can-i create pods/eviction as the chart's ServiceAccount, the target's PDBs, the diff.
    preflight: dict[str, Any] | None = None
    # The user's inputs (descheduler.inputs): which policy and Helm values files ran (file
    # names and sha256 digests, never contents) and the lab's flags on top of them.
    inputs: dict[str, Any] | None = None
    # The Helm that installed the release (version, major, server- or client-side apply) and
    # the field managers of its CronJob and policy ConfigMap after the round: who owns
    # spec.suspend and data.policy.yaml (descheduler.ownership, docs/helm.md).
    helm: dict[str, Any] | None = None
    # In a multi-cycle run (experiments/cycles.py): this round's cycle, its number `cycle` of
    # `of`, every lab pod's fate, who left which node and who appeared where.
    cycle: dict[str, Any] | None = None
    # Either half's round of a fidelity run (fidelity/engine.py): its pods compared with the
    # other half's round of the same state, every difference with its explanation
    # (fidelity/compare.py); `half` says which this is, `other` the other half's label.
    fidelity: dict[str, Any] | None = None
    # A round on actual utilization (experiments/utilization.py): each node's usage as the
    # descheduler logged it, what metrics-server served before the round, the source's errors.
    utilization: dict[str, Any] | None = None
    # Each owner's available replicas from the Job's creation until the round was recorded
    # (outcome/availability.py): min against desired, time below desired, Pending, the series.
    availability: dict[str, Any] | None = None

    @property
    def events_by_reason(self) -> dict[str, list[str]]:
        """reason -> involved object uids (kind/name when an event carries no uid)."""
        out: dict[str, list[str]] = {}
        for e in self.events:
            obj = e.get("object") or e.get("involvedObject") or e.get("regarding") or {}
            uid = e.get("uid") or obj.get("uid")
            if not uid:
                kind = e.get("kind") or obj.get("kind") or "?"
                uid = f"{kind}/{e.get('name') or obj.get('name') or '?'}"
            seen = out.setdefault(str(e.get("reason") or "?"), [])
            if uid not in seen:
                seen.append(uid)
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["events_by_reason"] = self.events_by_reason
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_round(
        cls,
        experiment: str,
        round_name: str,
        provider: str,
        result: RoundResult,
        namespace: str | None = None,
        replacement: str | None = None,
        namespaces: Iterable[str] | None = None,
        **fields: Any,
    ) -> RoundRecord:
        """Build a record whose decision figures come only from the parsed log, never a caller.

        With `namespace` (and `namespaces`: every namespace the lab owns), decisions, counts
        and the verdict are the lab's own: pods of other namespaces (kube-system bystanders)
        only show in `cluster_counts`.
        """
        clash = sorted(set(fields) & set(_DERIVED))
        if clash:
            raise TypeError(f"{clash} are derived from the RoundResult and cannot be passed")
        owned = list(dict.fromkeys([*([namespace] if namespace else []), *(namespaces or [])]))
        ds = result.decisions if not owned else result.in_namespaces(owned)
        lab = RoundResult(decisions=ds)
        evictions = len(lab.by_fate(Fate.EVICTED))
        failures = [
            {
                "pod": d.key,
                "fate": d.fate.value,
                "status_code": d.status_code,
                "reason": d.reason,
                "layer": d.layer.value,
            }
            for d in ds
            if d.fate in _FAILURE_FATES
        ]
        notes = list(fields.pop("notes", []))
        if result.skipped:
            notes.append(f"round skipped: {result.skipped}")
        if result.dry_run:
            notes.append("dry run: no eviction reached the API server")
        cluster_evictions = len(result.by_fate(Fate.EVICTED))
        if result.total_evicted is not None and result.total_evicted != cluster_evictions:
            notes.append(
                f"log summary reports {result.total_evicted} evictions, "
                f"{cluster_evictions} evicted pods were parsed"
            )
        notes += [f"error without pod: {e}" for e in result.errors]
        if result.unparsed:
            notes.append(f"{result.unparsed} of {result.lines} log lines were not JSON")
        decided = decide(ds, result.skipped, replacement, result.errors)
        return cls(
            experiment=experiment,
            round_name=round_name,
            provider=provider,
            namespace=namespace,
            namespaces=owned,
            decisions=lab.to_dict()["decisions"],
            counts=lab.counts(),
            cluster_counts=result.counts(),
            evictions=evictions,
            failures=failures,
            blocking_layers=[layer.value for layer in blocking_layers(ds)],
            verdict=decided.verdict,
            deciding_layer=decided.label,
            notes=notes,
            **fields,
        )


def lab_namespaces(record: Mapping[str, Any]) -> set[str] | None:
    """The namespaces a record's lab owns (None: the record covers every namespace).

    Records written before `namespaces` existed name only `namespace`.
    """
    owned = record.get("namespaces") or ([record["namespace"]] if record.get("namespace") else [])
    return set(owned) or None
