"""The descheduler's own Prometheus metrics for a round, or an honest "not available".

Only `descheduler_*` series are kept: evictions by result/strategy/namespace/node, and the
loop and strategy duration histograms (as sum/count).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pytest_desched.providers.jobs import IN_CLUSTER

if TYPE_CHECKING:
    from pytest_desched.descheduler.rounds import Round

_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
KEEP = (
    "descheduler_pods_evicted_total",
    "descheduler_loop_duration_seconds",
    "descheduler_strategy_duration_seconds",
    "descheduler_build_info",
)


def parse_prometheus(text: str) -> dict[str, list[dict[str, Any]]]:
    """name -> [{labels..., "value": float}] for the descheduler series we report."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        name = m["name"]
        base = re.sub(r"_(sum|count|bucket)$", "", name)
        if base not in KEEP or name.endswith("_bucket"):
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m["labels"] or ""))
        out.setdefault(name, []).append({**labels, "value": value})
    return out


def served_names(text: str) -> list[str]:
    """Every `descheduler_*` metric family the process served (what an upgrade must keep)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 3 and parts[2].startswith("descheduler_"):
                names.add(parts[2])
        elif line and not line.startswith("#"):
            m = _LINE.match(line)
            if m and m["name"].startswith("descheduler_"):
                names.add(re.sub(r"_(sum|count|bucket)$", "", m["name"]))
    return sorted(names)


def evicted_total(series: dict[str, list[dict[str, Any]]], result: str = "success") -> float:
    return sum(
        s["value"]
        for s in series.get("descheduler_pods_evicted_total", [])
        if s.get("result") == result
    )


def round_metrics(rnd: Round) -> dict[str, Any]:
    """The record's `metrics` field: scraped values with a completeness check, or why not."""
    if rnd.executor == IN_CLUSTER:
        return {
            "available": False,
            "why": "the round pod's metrics port is not reachable from the test host "
            "(one-shot Job, no port-forward); counts come from the log",
        }
    scrapes = [r.metrics for r in rnd.pod_runs if r.metrics is not None]
    ok = [m for m in scrapes if m.successes]
    if not ok:
        attempts = sum(m.attempts for m in scrapes)
        last = scrapes[-1].last_status if scrapes else "none"
        return {
            "available": False,
            "why": f"no successful scrape of /metrics after the cycle ({attempts} attempt(s), "
            f"last: {last}): the one-shot process stopped serving right after its cycle",
        }
    m = ok[-1]
    series = parse_prometheus(m.last_text)
    scraped = evicted_total(series)
    logged = rnd.result.total_evicted
    # The last scrape can precede the end of the cycle: only a scrape that already counts a
    # finished loop holds the round's figures (and then they must match the log's own).
    loops = sum(s["value"] for s in series.get("descheduler_loop_duration_seconds_count", []))
    complete = loops >= 1 and logged is not None and scraped == logged
    out: dict[str, Any] = {
        "available": complete,
        "source": "https://127.0.0.1:<port>/metrics of the round process, polled while it ran",
        "scrapes": m.successes,
        "loops_counted": loops,
        "pods_evicted_total_success": scraped,
        "log_total_evicted": logged,
        "series": series,
        "names": served_names(m.last_text),
    }
    if not complete:
        if loops >= 1:  # a finished loop was scraped: a mismatch is a disagreement, not timing
            out["why"] = (
                f"the scrape counted a finished loop but disagrees with the log: "
                f"{scraped:g} successful evictions scraped, {logged} in the log's totals"
            )
            out["disagrees_with_log"] = True
        else:
            out["why"] = (
                f"the last of {m.successes} scrapes preceded the end of the cycle (no finished "
                f"loop counted; evictions scraped {scraped:g}, the log says {logged}); the "
                "one-shot process stops serving right after its cycle"
            )
    return out
