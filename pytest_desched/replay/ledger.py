"""A replay's fate ledger built from logs: every pod, its fate in every round, and what decided it.

The types (PodFate, PodRow, RoundFigures, Ledger) are outcome/ledger.py's, imported here for
one release; this module builds them from descheduler logs and round records and compares two.

Pure: built from parsed descheduler logs (`logparse`), so the same code serves a replay on a
cluster, an incident's own log, and a round record from evidence, with no cluster at all.
One fate per pod and round: the decision that reached furthest along the runbook's chain
(an evicted pod that was also filtered by another plugin was evicted). A pod with no
decision was picked by no strategy (layer `policy`), except in a cycle the total cap
(`maxNoOfPodsToEvictTotal`) stopped: every plugin returns at once, so a pod without a
decision may never have been reached; the ledger then says `undecided` (no layer), marked
*inferred*, and says whether nodeFit weighed it first. Comparing two logs names each pod whose fate
differs and the likely reason, from the facts at hand (versions, PDB status in the snapshot,
caps, ages), never from English log text.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.decisions import PodDecision, RoundResult
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.errors import ConfigError, InputError
from pytest_desched.inputs_safe import load_json, read_text
from pytest_desched.outcome.fates import FATE_RANK, Fate, Layer
from pytest_desched.outcome.identity import (
    Coverage,
    Identity,
    NotCompared,
    answer,
    differences,
    generation,
    identity_of,
)
from pytest_desched.outcome.ledger import Ledger, PodFate, PodRow, RoundFigures, rank
from pytest_desched.replay.capture.schema import first_problem

# Today's words for these fates are outcome/fates.Fate's; the names stay for one release.
NOT_PICKED = Fate.NOT_PICKED  # no strategy selected the pod (layer policy)
UNDECIDED = Fate.UNDECIDED  # no decision, in a cycle the total cap stopped early
NOT_RESTORED = Fate.NOT_RESTORED
GONE = Fate.GONE  # evicted in an earlier round
SKIPPED = Fate.ROUND_SKIPPED
Cuts = tuple[bool, set[str]]  # the total cap stopped the cycle; the nodes the per-node cap cut
_FIT_MSGS = ("Pod fits on node", "Pod does not fit on node", "Pod does not fit on current node")


# -- one round ---------------------------------------------------------------------------
def best_decision(decisions: Iterable[PodDecision]) -> PodDecision | None:
    """The decision that got furthest along the chain (ties: the later one)."""
    best: PodDecision | None = None
    for d in decisions:
        if best is None or FATE_RANK[d.fate] >= FATE_RANK[best.fate]:
            best = d
    return best


def mentioned_pods(log_text: str) -> set[str]:
    """Pods a nodeFit detail line weighed: evaluated by a strategy, whatever came of it."""
    out: set[str] = set()
    for line in log_text.splitlines():
        if '"Pod ' not in line or not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        pod = rec.get("pod")
        if rec.get("msg") in _FIT_MSGS and isinstance(pod, dict) and pod.get("name"):
            out.add(f"{pod.get('namespace', '')}/{pod['name']}")
    return out


def _detail(d: PodDecision) -> str:
    if d.fate is Fate.REFUSED:
        return f"{d.status_code} {d.reason or ''}".strip()
    if d.fate is Fate.LIMITED:
        return f"{d.reason}"
    if d.fate in (Fate.FILTERED, Fate.NODEFIT):
        return ", ".join(d.checks)
    if d.fate is Fate.EVICTED:
        return f"by {d.strategy}" if d.strategy else ""
    return (d.message or "")[:160]


def round_fates(result: RoundResult, log_text: str = "") -> dict[str, PodFate]:
    """pod -> its fate this round, for every pod the log decided (plus inferred limits)."""
    by_pod: dict[str, list[PodDecision]] = {}
    for d in result.decisions:
        if d.name:
            by_pod.setdefault(d.key, []).append(d)
    out: dict[str, PodFate] = {}
    for pod, ds in by_pod.items():
        best = best_decision(ds)
        assert best is not None  # ds is never empty
        out[pod] = PodFate(
            fate=best.fate,
            layer=best.layer,
            detail=_detail(best),
            strategy=best.strategy,
            status_code=best.status_code,
            checks=list(best.checks),
        )
    if total_cut(result) and log_text:
        for pod in mentioned_pods(log_text) - set(out):
            out[pod] = undecided(result, None, weighed=True, cuts=(True, set()))
    return out


def total_cut(result: RoundResult) -> bool:
    """The cycle hit maxNoOfPodsToEvictTotal: every plugin stopped where it was."""
    return any(
        d.fate is Fate.LIMITED and d.reason == "maxNoOfPodsToEvictTotal" for d in result.decisions
    )


def node_cuts(result: RoundResult) -> set[str]:
    """Nodes where maxNoOfPodsToEvictPerNode broke a plugin's loop over the node's pods."""
    return {
        str(d.node)
        for d in result.decisions
        if d.fate is Fate.LIMITED and d.reason == "maxNoOfPodsToEvictPerNode" and d.node
    }


def undecided(
    result: RoundResult, node: str | None, weighed: bool = False, cuts: Cuts | None = None
) -> PodFate:
    """The fate of a pod its round's log never decided (the round's caps considered); `cuts`:
    (`total_cut`, `node_cuts`) of `result` read once for many pods (each scans every decision)."""
    if result.skipped:
        return PodFate(SKIPPED, None, result.skipped)
    seen = "nodeFit weighed it, then " if weighed else ""
    total, nodes = cuts or (total_cut(result), node_cuts(result))
    if total:
        why = f"{seen}the cycle stopped at maxNoOfPodsToEvictTotal, maybe before it"
    elif node and node in nodes:
        why = f"{seen}maxNoOfPodsToEvictPerNode ended the loop over its node, maybe before it"
    else:
        return PodFate(NOT_PICKED, Layer.POLICY, "no strategy selected it")
    return PodFate(UNDECIDED, None, f"no decision: {why}", inferred=True)


def no_decision(skipped: str | None = None) -> PodFate:
    """A pod no log decided, when nothing else is known (not picked, or a skipped round)."""
    return undecided(RoundResult(skipped=skipped), None)


def figures(name: str, result: RoundResult, log_text: str = "", **extra: Any) -> RoundFigures:
    fates = round_fates(result, log_text)
    return RoundFigures(
        name=name,
        by_fate=dict(Counter(str(f.fate) for f in fates.values())),
        by_layer=dict(Counter(str(f.layer) for f in fates.values())),
        total_evicted=result.total_evicted,
        eviction_requests=result.eviction_requests,
        skipped=result.skipped,
        dry_run=result.dry_run,
        errors=list(result.errors)[:20],
        **extra,
    )


# -- ledgers without a cluster -------------------------------------------------------------
def ledger_from_log(text: str, version: str | None = None, name: str = "incident") -> Ledger:
    """The fate ledger of one descheduler JSON log alone: every pod it decided."""
    result = parse_log(text, version)
    fates = round_fates(result, text)
    rows = [
        PodRow(pod=p, node=_node_of(result, p), origin="log", fates=[f])
        for p, f in sorted(fates.items())
    ]
    ledger = Ledger("log", version, rows, [figures(name, result, text)])
    if not any('"v":4' in line for line in text.splitlines()[:5000]):
        ledger.notes.append(
            "the log has no -v=4 lines: pods the DefaultEvictor filtered are not in it, so "
            "their absence here means nothing"
        )
    ledger.notes.append("pods the log never names were picked by no strategy, or not logged")
    return ledger


def _node_of(result: RoundResult, pod: str) -> str | None:
    return next((d.node for d in result.decisions if d.key == pod and d.node), None)


_RECORD_FIX = "give evidence/<experiment>/<round>.json as a run wrote it (a log: --from-log)"


def ledger_from_record(record: Mapping[str, Any] | str | Path) -> Ledger:
    """The ledger of a round record (evidence/<experiment>/<round>.json).

    The record keeps the lab namespace's decisions; when its log file is still there, the
    whole log is parsed instead, so every namespace's pods are in the ledger.
    """
    source = "round record"
    if not isinstance(record, Mapping):
        path = Path(record)
        source = f"round record {path}"
        text = read_text(path, kind="bulk", what="round record")
        record = load_json(text, str(path), kind="bulk")
        if not isinstance(record, Mapping):
            raise ConfigError(f"round record {path}: not a JSON object; give <round>.json")
    found = first_problem("round record", record)
    if found is not None:  # e.g. a log line: a ledger of nothing would say "nothing happened"
        at, problem = found
        if "msg" in record and "experiment" not in record:
            at, problem = "", "is a descheduler log line, not a round record"
        raise InputError(source, at, problem, _RECORD_FIX)
    version = (record.get("versions") or {}).get("descheduler")
    log_path = record.get("log_path")
    if log_path and Path(log_path).is_file():
        ledger = ledger_from_log(
            read_text(log_path, kind="bulk", what="round log"),
            version,
            record.get("round_name", "round"),
        )
        ledger.source = "record"
        ledger.notes.insert(0, f"parsed from the record's log {log_path}")
    else:
        rows: list[PodRow] = []
        for d in record.get("decisions") or []:
            f = PodFate(
                fate=d["fate"],
                layer=d["layer"],
                detail=", ".join(d.get("checks") or []) or (d.get("reason") or ""),
                strategy=d.get("strategy"),
                status_code=d.get("status_code"),
                checks=list(d.get("checks") or []),
            )
            key_ = f"{d['namespace']}/{d['name']}"
            prior = next((r for r in rows if r.pod == key_), None)
            if prior is None:
                rows.append(PodRow(key_, d.get("node"), origin="record", fates=[f]))
            elif rank(f.fate) >= rank(prior.fates[0].fate):
                prior.fates = [f]
        ledger = Ledger("record", version, sorted(rows, key=lambda r: r.pod))
        ledger.notes.append(
            f"the record keeps only namespace {record.get('namespace')}'s decisions "
            "(its log file is gone); other namespaces: "
            f"{record.get('cluster_counts')}"
        )
    fig = ledger.rounds[0] if ledger.rounds else RoundFigures(str(record.get("round_name")))
    fig.caps = dict(record.get("caps") or {})
    audit = record.get("audit") or {}
    fig.audit_by_code = audit.get("by_code") if audit.get("available") else None
    fig.extra = {"verdict": record.get("verdict"), "deciding_layer": record.get("deciding_layer")}
    if not ledger.rounds:
        fig.by_fate = dict(record.get("counts") or {})
        ledger.rounds = [fig]
    return ledger


# -- comparing two logs ----------------------------------------------------------------------
def shown(f: PodFate, verbose: bool = True) -> bool:
    """A decision a log can show: a pod no strategy picked is no decision, and a log below
    -v=4 never shows the pods the evictor filtered. The one rule for both the per-pod
    differences and the identity counts."""
    return f.fate != NOT_PICKED and (verbose or f.fate != Fate.FILTERED)


def compare(
    incident: Mapping[str, PodFate],
    replay: Mapping[str, PodFate],
    context: Mapping[str, Any] | None = None,
    incident_verbose: bool = True,
) -> dict[str, Any]:
    """Per pod, the incident's fate against the replay's, with a likely reason for each gap.

    `context`: what is known about the replay (`versions` {incident, replay},
    `not_restored` {pod: why}, `pdbs` {pod: snapshot PDB status}, `ages`, `limited`,
    `identities` {pod: {"owner": "Kind/name", "node": ...}} from the snapshot,
    `compare_only`: the pods the replay could decide, `skipped` {incident, replay}: a round
    that decided nothing, so nothing is comparable).

    Identities and "not comparable" come from the comparison core (`outcome/identity.py`).
    "Same fates up to order" means the same multiset of identities per outcome, so a cap that
    cut a sibling (same owner, same node) instead agrees, and an eviction moved from
    `prod/web` to `kube-system/coredns` does not. Every "same" is computed over what was
    compared and says how much of the incident's evictions that was: with none of them
    compared (a snapshot taken after the incident no longer holds the evicted pods), it is
    NOT_COMPARABLE, never True.
    """
    ctx = dict(context or {})
    only = ctx.get("compare_only")
    all_incident, every_pod = dict(incident), set(incident) | set(replay)
    not_compared: list[NotCompared] = []
    if only is not None:
        for pod in sorted((set(incident) | set(replay)) - set(only)):
            f = incident.get(pod) or replay.get(pod)
            nd = no_decision(None)
            not_compared.append(NotCompared(pod, _why(pod, f or nd, f or nd, ctx), _label(f)))
        incident = {p: f for p, f in incident.items() if p in only}
        replay = {p: f for p, f in replay.items() if p in only}

    def evicted(m: Mapping[str, PodFate]) -> set[str]:
        return {p for p, f in m.items() if f.fate == Fate.EVICTED}

    def refused(m: Mapping[str, PodFate]) -> set[tuple[str, int | None]]:
        return {(p, f.status_code) for p, f in m.items() if f.fate == Fate.REFUSED}

    facts = ctx.get("identities") or {}

    def ids(m: Mapping[str, PodFate]) -> dict[str, Identity]:
        return {
            p: fate_identity(p, f, facts.get(p)) for p, f in m.items() if shown(f, incident_verbose)
        }

    diffs = differences([ids(incident), ids(replay)])
    differ = []
    for pod in sorted(set(incident) | set(replay)):
        a = incident.get(pod) or no_decision(None)
        b = replay.get(pod) or no_decision(None)
        if not shown(a, incident_verbose) and not shown(b, incident_verbose):
            continue
        if (a.fate, a.status_code, sorted(a.checks)) == (b.fate, b.status_code, sorted(b.checks)):
            continue
        differ.append(
            {"pod": pod, "incident": a.label, "replay": b.label, "why": _why(pod, a, b, ctx)}
        )
    skipped = {side: why for side, why in (ctx.get("skipped") or {}).items() if why}
    not_compared += [NotCompared(f"({side} round)", f"skipped: {w}") for side, w in skipped.items()]
    anything = bool(incident) and bool(replay) and not skipped
    cov_ev = Coverage("evicted pods", len(evicted(incident)), len(evicted(all_incident)), anything)
    cov_ref = Coverage("refused pods", len(refused(incident)), len(refused(all_incident)), anything)
    cov_pods = Coverage("pods", len(set(incident) | set(replay)), len(every_pod), anything)
    cov_fates = cov_pods if cov_ev.comparable else cov_ev
    return {
        "same_evictions": answer(evicted(incident) == evicted(replay), cov_ev),
        "same_refusals": answer(refused(incident) == refused(replay), cov_ref),
        "coverage": {
            "evicted": cov_ev.to_dict(),
            "refused": cov_ref.to_dict(),
            "pods": cov_pods.to_dict(),
        },
        "evicted": {"incident": sorted(evicted(incident)), "replay": sorted(evicted(replay))},
        "refused": {
            "incident": sorted(f"{p} {c}" for p, c in refused(incident)),
            "replay": sorted(f"{p} {c}" for p, c in refused(replay)),
        },
        "differ": differ,
        "same_fates_up_to_order": answer(not diffs, cov_fates),
        "identities_differ": [d.to_dict(("incident", "replay")) for d in diffs],
        "not_compared": [n.to_dict() for n in not_compared],
    }


def _label(f: PodFate | None) -> str:
    return f.label if f else ""


def fate_identity(pod: str, f: PodFate, facts: Mapping[str, Any] | None = None) -> Identity:
    """A decided pod as the comparison core counts it; `facts`: owner, node, generation (a
    pod whose facts say no owner is bare; without facts its owner is unknown)."""
    known, facts = facts is not None, facts or {}
    return identity_of(
        pod,
        facts.get("owner"),
        int(facts.get("generation") or 0),
        facts.get("node"),
        f.fate,
        f.layer,
        f.strategy,
        f.status_code,
        f.checks,
        bare=known and not facts.get("owner"),
    )


# -- one replay as the core counts it (replay --repeat) --------------------------------------
REPLACEMENT_OF = "replacement of "


def replacement_origin(evicted: str) -> str:
    """A replacement row's origin: the pod it replaced (the controller's name is random)."""
    return f"{REPLACEMENT_OF}{evicted}"


def replaced(origin: str) -> str | None:
    """The pod a replacement row replaced, from its origin; None for any other row."""
    return (
        origin[len(REPLACEMENT_OF) :].split(" ", 1)[0]
        if origin.startswith(REPLACEMENT_OF)
        else None
    )


def evictions(ledger: Ledger) -> dict[str, Identity]:
    """Each pod evicted in any round of one replay -> its identity (generation included)."""
    parents = {r.pod: replaced(r.origin) for r in ledger.rows}
    out = {}
    for row in ledger.rows:
        for f in row.fates:
            if f.fate == Fate.EVICTED:
                gen = generation(row.pod, parents)
                out[row.pod] = fate_identity(
                    row.pod, f, {"owner": row.owner, "node": row.node, "generation": gen}
                )
    return out


def unmeasured(ledger: Ledger) -> str | None:
    """Why a replay measured nothing a comparison could use (no round, or every round
    skipped), else None."""
    if not ledger.rounds:
        return "no round ran"
    if all(r.skipped for r in ledger.rounds):
        return f"every round skipped: {ledger.rounds[0].skipped}"
    return None


def _why(pod: str, a: PodFate, b: PodFate, ctx: Mapping[str, Any]) -> str:
    reasons = []
    if pod in (ctx.get("not_restored") or {}):
        return f"not restored: {ctx['not_restored'][pod]}"
    if ctx.get("pods") is not None and pod not in ctx["pods"]:
        return "not in the snapshot (created after it was taken, or outside its scope)"
    v = ctx.get("versions") or {}
    if v.get("incident") and v.get("replay") and v["incident"] != v["replay"]:
        reasons.append(
            f"different descheduler versions (incident {v['incident']}, replay {v['replay']})"
        )
    fates = {a.fate, b.fate}
    if Fate.LIMITED in fates or UNDECIDED in fates:
        reasons.append(
            "a cap cut a different pod: the descheduler walks nodes and pods in informer order, "
            "which no snapshot fixes"
        )
    if Fate.REFUSED in fates and Fate.EVICTED in fates:
        pdb = (ctx.get("pdbs") or {}).get(pod)
        reasons.append(
            f"PDB budget differed (snapshot status: {pdb})" if pdb else "PDB budget differed"
        )
    if "minPodAge" in set(a.checks) ^ set(b.checks):
        reasons.append(f"pod age differs at the round (ages restored: {ctx.get('ages', '?')})")
    if Fate.NODEFIT in fates:
        reasons.append("another node's room or labels differed (nodeFit)")
    return "; ".join(reasons) or "state differs between the incident and the snapshot"
