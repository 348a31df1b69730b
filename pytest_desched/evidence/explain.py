"""`desched explain POD`: one pod's fate in every cycle, the deciding layer and the reason.

Reads what a run left, with no cluster: an experiment's `cycles.json` (experiments/cycles.py),
its evidence folder, one round record (`<round>.json`), or a replay ledger (`desched replay
... -o json`). Every row comes from the descheduler's own log as the record parsed it; a
cycle with no log line about the pod says so (no strategy selected it) instead of guessing,
and a cycle the descheduler skipped whole (its "requires >=2 nodes" line) says skipped, and
why: no strategy looked at any pod in it, so "not picked" would be a claim it never made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.evidence.loops import cycles_from_ledger, detect
from pytest_desched.outcome.fates import Fate, Layer
from pytest_desched.render import table

NOT_PICKED = "no log line names it: no strategy selected it"


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--record {path}: cannot read it ({exc.__class__.__name__})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--record {path}: not JSON (line {exc.lineno}); give cycles.json, a <round>.json "
            "record or a replay ledger (desched replay ... -o json)"
        ) from None


def _entry_of_record(rec: Mapping[str, Any], n: int) -> dict[str, Any]:
    """A round record as a cycle entry (its `cycle` when a multi-cycle run wrote it)."""
    if isinstance(rec.get("cycle"), Mapping):
        return dict(rec["cycle"])
    fates = [
        {
            "pod": d.get("namespace", "") + "/" + d.get("name", ""),
            "node": d.get("node"),
            **{k: d.get(k) for k in ("fate", "layer", "strategy", "reason", "status_code")},
            "checks": d.get("checks") or [],
            "message": d.get("message"),
        }
        for d in rec.get("decisions") or []
    ]
    verdict = str(rec.get("verdict") or "")
    return {
        "cycle": n,
        "round": rec.get("round_name"),
        "deciding_layer": rec.get("deciding_layer"),
        "skipped": verdict.split(":", 1)[1] if verdict.startswith("skipped:") else None,
        "exit_code": (rec.get("job") or {}).get("exit_code"),
        "fates": fates,
    }


def _entries_of_ledger(led: Mapping[str, Any]) -> list[dict[str, Any]]:
    rounds = led.get("rounds") or []
    entries = []
    for i, rnd in enumerate(rounds or [{}]):
        fates = []
        for row in led.get("rows") or []:
            fs = row.get("fates") or []
            if i < len(fs):
                f = fs[i]
                fates.append(
                    {
                        "pod": row.get("pod"),
                        "node": row.get("node"),
                        "fate": f.get("fate"),
                        "layer": f.get("layer"),
                        "strategy": f.get("strategy"),
                        "reason": f.get("detail") or None,
                        "status_code": f.get("status_code"),
                        "checks": f.get("checks") or [],
                        "owner_ref": row.get("owner"),
                    }
                )
        rnd = rnd or {}
        entries.append(
            {
                "cycle": i + 1,
                "round": rnd.get("name"),
                "skipped": rnd.get("skipped"),
                "exit_code": (rnd.get("extra") or {}).get("exit_code"),
                "fates": fates,
            }
        )
    return entries


def load(path: str | Path) -> dict[str, Any]:
    """{"source", "experiment", "cycles": [entries], "loops"} from any file a run leaves."""
    p = Path(path)
    if p.is_dir():
        if (p / "cycles.json").is_file():
            return load(p / "cycles.json")
        recs = [_read(f) for f in sorted(p.glob("*.json"))]
        recs = [r for r in recs if isinstance(r, Mapping) and "round_name" in r]
        if not recs:
            raise ConfigError(f"--record {p}: no cycles.json and no round record in it")
        recs.sort(key=lambda r: r.get("started_s") or 0)
        entries = [_entry_of_record(r, i) for i, r in enumerate(recs, 1)]
        return {"source": str(p), "experiment": recs[0].get("experiment"), "cycles": entries}
    data = _read(p)
    if not isinstance(data, Mapping):
        raise ConfigError(f"--record {p}: a JSON {type(data).__name__}, not a record object")
    if isinstance(data.get("cycles"), list):
        return {"source": str(p), **data}
    if "round_name" in data:
        entry = _entry_of_record(data, 1)
        return {"source": str(p), "experiment": data.get("experiment"), "cycles": [entry]}
    ledger = data.get("ledger")
    led: Mapping[str, Any] = ledger if isinstance(ledger, Mapping) else data
    if isinstance(led.get("rows"), list):
        loops = detect(cycles_from_ledger(led)).to_dict()
        entries = _entries_of_ledger(led)
        return {"source": str(p), "experiment": "replay", "cycles": entries, "loops": loops}
    raise ConfigError(
        f"--record {p}: neither cycles.json, a round record nor a replay ledger; give one of them"
    )


def _unnamed(c: Mapping[str, Any]) -> dict[str, Any]:
    """A pod no log line of cycle `c` names: not picked, unless the cycle's descheduler
    exited non-zero (its log may stop before any strategy reached the pod)."""
    if c.get("exit_code") in (0, None):
        return {"fate": Fate.NOT_PICKED.value, "layer": Layer.POLICY.value, "reason": NOT_PICKED}
    return {
        "fate": "unknown",
        "layer": "-",
        "reason": f"the cycle's descheduler exited with code {c['exit_code']}: no log line "
        "names the pod, but the cycle may have ended before any strategy reached it",
    }


def fate_reason(fate: Mapping[str, Any]) -> str:
    """Why a pod got its fate, in the descheduler's own terms (its log, as a record or a
    ledger parsed it): the API's status code, the log's reason, the evictor's failed checks.
    A ledger's detail that only repeats the code or the checks is not said twice."""
    code, checks = fate.get("status_code"), list(fate.get("checks") or [])
    why = str(fate.get("reason") or "")
    if code and why.startswith(f"{code} "):
        why = why[len(f"{code} ") :]
    if checks and why == ", ".join(checks):
        why = ""
    if checks:
        why = (why + " " if why else "") + "checks: " + ", ".join(checks)
    if code:
        why = f"HTTP {code} " + why
    return why.strip() or str(fate.get("message") or "")


def _match(pod: str, key: str) -> bool:
    return key == pod or key.rsplit("/", 1)[-1] == pod


def explain(pod: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's row in every cycle; a one-line ConfigError when no cycle knows the pod."""
    cycles = run.get("cycles") or []
    known: list[str] = []
    key = None
    for c in cycles:
        for group in ("fates", "pods_before", "pods_after", "arrived"):
            for x in c.get(group) or []:
                k = x.get("pod") or x.get("key")
                if k and k not in known:
                    known.append(k)
                if k and key is None and _match(pod, k):
                    key = k
    if key is None:
        few = ", ".join(known[:6]) + (" ..." if len(known) > 6 else "")
        skips = [f"cycle {c.get('cycle')}: {c['skipped']}" for c in cycles if c.get("skipped")]
        why = f"; skipped, no pod weighed: {'; '.join(skips)}" if skips else ""
        raise ConfigError(
            f"pod {pod!r}: not in {run.get('source')}; pods there: {few or 'none'}{why}"
        )
    rows, owner, gone_in = [], None, None
    for c in cycles:
        n = c.get("cycle")
        fate = next((f for f in c.get("fates") or [] if f.get("pod") == key), None)
        before = next((p for p in c.get("pods_before") or [] if p.get("key") == key), None)
        owner = owner or (before or {}).get("owner_ref") or (fate or {}).get("owner_ref")
        row: dict[str, Any] = {"cycle": n, "round": c.get("round")}
        if c.get("skipped"):  # the whole cycle: no strategy ran, no pod was weighed
            row |= {"node": (before or {}).get("node"), "fate": "skipped", "layer": "-"}
            row["reason"] = f"the descheduler skipped this cycle: {c['skipped']}"
        elif fate is not None:
            row |= {
                "node": fate.get("node") or (before or {}).get("node"),
                "fate": fate.get("fate"),
                "layer": fate.get("layer"),
                "strategy": fate.get("strategy"),
                "reason": fate_reason(fate),
            }
            if fate.get("fate") == Fate.EVICTED:
                gone_in = n
                new = [
                    f"{a['key']} on {a.get('node')}"
                    for a in c.get("arrived") or []
                    if owner and a.get("owner_ref") == owner
                ]
                if new:
                    row["reason"] += (
                        ("; " if row["reason"] else "") + "replaced by " + ", ".join(new)
                    )
        elif before is not None:
            row |= {"node": before.get("node"), **_unnamed(c)}
        elif gone_in is not None:
            row |= {"fate": "gone", "reason": f"evicted in cycle {gone_in}"}
        elif "pods_before" not in c:
            row |= _unnamed(c)
        else:
            arrived = next((a for a in c.get("arrived") or [] if a.get("key") == key), None)
            row |= {"fate": "absent", "reason": "not in the lab before this cycle"}
            if arrived:
                row["reason"] = f"created during this cycle on {arrived.get('node')}"
        rows.append(row)
    return {
        "pod": key,
        "owner": owner,
        "experiment": run.get("experiment"),
        "source": run.get("source"),
        "cycles": rows,
        "loops": run.get("loops") or {},
    }


def to_text(x: Mapping[str, Any]) -> str:
    """One screen: a header, one line a cycle, the loop verdict."""
    cols = {"cycle": "CYCLE", "node": "NODE", "fate": "FATE", "layer": "DECIDING LAYER"}
    cols |= {"strategy": "STRATEGY", "reason": "REASON"}
    head = f"pod {x['pod']}" + (f" (owner {x['owner']})" if x.get("owner") else "")
    head += f" in {x.get('experiment') or '?'}, {len(x['cycles'])} cycle(s), from {x['source']}"
    lines = [head, table(x["cycles"], cols, "text")]
    loops = x.get("loops") or {}
    if loops:
        lines.append(f"loop detector: {loops.get('summary')}")
    return "\n".join(lines)
