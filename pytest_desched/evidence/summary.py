"""Human and CI summaries of round records: the `.txt` beside each JSON, terminal lines, JUnit.

A reviewer reads these before (or instead of) the full JSON, so each states the verdict, the
deciding layer, evictions against caps and Ready latency in a fixed shape. They take either a
`RoundRecord` or its (possibly redacted) dict, because the writer summarises the redacted
data and the plugin summarises records read back from an experiment result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_desched.evidence.record import RoundRecord
from pytest_desched.outcome.availability import OwnerWindow


def _disruptions_allowed(pdb: Mapping[str, Any] | None) -> Any:
    if not pdb:
        return None
    for src in (pdb, pdb.get("status") or {}):
        for key in ("disruptionsAllowed", "disruptions_allowed"):
            if key in src:
                return src[key]
    return None


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):  # sub-second latencies (kwok is fast) keep their milliseconds
        return f"{value:.3f}{unit}" if abs(value) < 1 else f"{value:.1f}{unit}"
    return f"{value}{unit}"


def _as_dict(record: RoundRecord | Mapping[str, Any]) -> Mapping[str, Any]:
    return record.to_dict() if isinstance(record, RoundRecord) else record


def summary_text(record: RoundRecord | Mapping[str, Any]) -> str:
    """The ~15-line `.txt` next to each round's JSON: what happened and which link decided."""
    r = _as_dict(record)
    caps = r.get("caps") or {}
    cap = " ".join(f"{k}={_fmt(v)}" for k, v in caps.items()) or "-"
    counts = " ".join(f"{k}={v}" for k, v in sorted((r.get("counts") or {}).items())) or "-"
    fails = r.get("failures") or []
    fail_txt = "; ".join(
        f"{f.get('pod')} {_fmt(f.get('status_code'))} {f.get('reason') or '-'} ({f.get('layer')})"
        for f in fails[:5]
    ) + (f"; +{len(fails) - 5} more" if len(fails) > 5 else "")
    before, after = r.get("distribution_before") or {}, r.get("distribution_after") or {}
    dist = ", ".join(
        f"{n} {_fmt(before.get(n))}->{_fmt(after.get(n))}" for n in sorted({*before, *after})
    )
    metrics = r.get("metrics") or {}
    if metrics.get("available") is False:
        metrics_txt = f"unavailable ({metrics.get('why') or 'no reason given'})"
    else:
        metrics_txt = ", ".join(f"{k}={v}" for k, v in metrics.items() if k != "available")
    overrides = "; ".join(
        f"{o.get('path')}: {o.get('old')!r} -> {o.get('new')!r} ({o.get('why') or 'no reason'})"
        for o in r.get("policy_overrides") or []
    )
    job = r.get("job") or {}
    chart = r.get("chart") or {}
    pending = r.get("pending_pods") or []
    lines = [
        f"{r.get('experiment')}/{r.get('round_name')} on {r.get('provider')}: "
        f"verdict={r.get('verdict') or '-'}",
        f"window: {_fmt(r.get('started_s'), 's')} -> {_fmt(r.get('ended_s'), 's')}",
        f"evictions: {r.get('evictions', 0)} (caps {cap}); fates: {counts}",
        f"deciding layer: {r.get('deciding_layer') or '-'}; all blocking layers: "
        f"{', '.join(r.get('blocking_layers') or []) or 'none'}",
        f"failures: {fail_txt or 'none'}",
        f"replacement Ready latency: {_fmt(r.get('replacement_ready_latency_s'), 's')}",
        f"PDB disruptionsAllowed: before={_fmt(_disruptions_allowed(r.get('pdb_before')))} "
        f"after={_fmt(_disruptions_allowed(r.get('pdb_after')))} "
        f"min seen={_fmt(r.get('pdb_min_disruptions_allowed_seen'))}",
        f"pending pods: {len(pending)}{' ' + ', '.join(pending) if pending else ''}",
        f"distribution before->after: {dist or '-'}",
        f"metrics: {metrics_txt or '-'}",
        f"policy: digest={(r.get('policy_digest') or '-')[:12]} overrides: {overrides or 'none'}",
        f"job: {job.get('namespace') or '-'}/{job.get('name') or '-'} uid={job.get('uid') or '-'}"
        f" succeeded={_fmt(job.get('succeeded'))} exit={_fmt(job.get('exit_code'))}",
        f"chart: {chart.get('source') or '-'} {chart.get('version') or '-'} "
        f"app={chart.get('app_version') or '-'} digest={(chart.get('digest') or '-')[:19]}",
    ]
    if windows := r.get("availability") or {}:
        lines.append(
            "rebuild window: "
            + "; ".join(OwnerWindow.from_dict(w).line() for w in windows.values())
        )
    audit = r.get("audit") or {}
    if audit.get("available"):
        codes = " ".join(f"{c}x{n}" for c, n in sorted((audit.get("by_code") or {}).items()))
        dis = audit.get("disagreements") or []
        lines.append(
            f"API server audit: {audit.get('requests', 0)} eviction request(s) {codes or ''} by "
            f"{', '.join(audit.get('users') or []) or '-'}; "
            + ("agrees with the log" if not dis else f"DISAGREES: {'; '.join(dis)}")
        )
    else:
        lines.append(
            f"API server audit: unavailable ({audit.get('unavailable_why') or audit.get('why') or '-'})"
        )
    ev = r.get("events_delivered") or {}
    if ev:
        lines.append(f"EvictionFailed events delivered: {ev.get('delivered')} of {ev.get('owed')}")
    fid = r.get("fidelity") or {}
    if fid.get("summary"):  # either half of a fidelity run: the comparison's verdict
        lines.append(f"dry-run fidelity ({fid.get('half') or '-'} half): {fid['summary']}")
    lines += [f"known bug {k}: {v}" for k, v in (r.get("known_bugs") or {}).items()]
    lines += [f"note: {n}" for n in r.get("notes") or []]
    if r.get("log_path"):
        lines.append(f"log: {r['log_path']}")
    return "\n".join(lines) + "\n"


_OUTCOMES = {"passed": "PASSED", "failed": "FAILED", "xfailed": "XFAIL", "xfail": "XFAIL"}


def summary_line(record_or_experiment_result: Mapping[str, Any]) -> str:
    """One terminal line per experiment: outcome, evictions vs cap, deciding layer, Ready latency.

    Takes a round record dict, or `{"name", "outcome", "rounds": [record dicts]}`; for the
    latter evictions and caps add up and layer/latency come from the last round that has one.
    """
    d = record_or_experiment_result
    rounds = list(d.get("rounds") or [d])
    name = d.get("name") or d.get("experiment") or "?"
    outcome = str(d.get("outcome") or "-")
    outcome = _OUTCOMES.get(outcome.lower(), outcome.upper())
    evictions = sum(int(r.get("evictions") or 0) for r in rounds)
    totals: list[int | None] = [(r.get("caps") or {}).get("total") for r in rounds]
    known = [t for t in totals if t is not None]
    cap = str(sum(known)) if len(known) == len(totals) else "-"
    layer = rounds[-1].get("deciding_layer") or rounds[-1].get("verdict") or "none"
    latencies = [r.get("replacement_ready_latency_s") for r in rounds]
    ready = next((x for x in reversed(latencies) if x is not None), None)
    evicted = f"evictions={evictions}/{cap}"
    return f"{name}  {outcome}  {evicted}  layer={layer}  ready={_fmt(ready, 's')}"


def junit_properties(record: RoundRecord | Mapping[str, Any]) -> list[tuple[str, str]]:
    """Key figures for `record_property`, so CI dashboards show them without opening artifacts."""
    r = _as_dict(record)
    values = [
        ("evictions", r.get("evictions", 0)),
        ("blocking_layer", r.get("deciding_layer") or "none"),
        ("ready_latency_s", r.get("replacement_ready_latency_s")),
        ("policy_digest", (r.get("policy_digest") or "")[:12]),
        ("job_uid", (r.get("job") or {}).get("uid")),
        ("pdb_disruptions_allowed_after", _disruptions_allowed(r.get("pdb_after"))),
    ]
    audit = r.get("audit") or {}
    if audit.get("available"):
        codes = audit.get("by_code") or {}
        values.append(("audit_codes", ",".join(f"{c}x{n}" for c, n in sorted(codes.items()))))
    ev = r.get("events_delivered") or {}
    if ev:
        values.append(("events_delivered", f"{ev.get('delivered')}/{ev.get('owed')}"))
    if r.get("known_bugs"):
        values.append(("known_bugs_seen", ",".join(sorted(r["known_bugs"]))))
    return [(k, "" if v is None else str(v)) for k, v in values]
