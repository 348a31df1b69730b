"""The descheduler's own Prometheus metrics for a round, or an honest "not available".

Only `descheduler_*` series are kept: evictions by result/strategy/namespace/node, and the
loop and strategy duration histograms (as sum/count).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from pytest_desched.providers.jobs import IN_CLUSTER

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from pytest_desched.descheduler.rounds import Round

KEEP = (
    "descheduler_pods_evicted_total",
    "descheduler_loop_duration_seconds",
    "descheduler_strategy_duration_seconds",
    "descheduler_build_info",
)


def served_families(text: str) -> Iterator[tuple[str, Metric]]:
    """(name as served, family) for each metric family of a /metrics scrape.

    prometheus_client parses the text (quoting and escapes included: a `}` inside a label
    value is data). It gives counters their OpenMetrics form, though: the family loses its
    `_total`, and a counter declared without it gets `_total` added to its samples, so
    v0.36.0's deprecated `descheduler_pods_evicted` and its `descheduler_pods_evicted_total`
    come out alike. A counter's served name is therefore the one its `# TYPE` line declared
    (the parser yields exactly one family per such line, in order), and its samples get it
    back. Raises ValueError on text that is not the Prometheus exposition format.
    """
    declared = iter(
        parts[2].strip('"')
        for parts in (line.split(None, 3) for line in text.splitlines())
        if parts[:2] == ["#", "TYPE"] and parts[3:] == ["counter"]
    )
    for fam in text_string_to_metric_families(text):
        if fam.type == "counter":
            served = next(declared, fam.name)
            fam.samples = [s._replace(name=served) for s in fam.samples]
            yield served, fam
        else:
            yield fam.name, fam


def parse_prometheus(text: str) -> dict[str, list[dict[str, Any]]]:
    """name -> [{labels..., "value": float}] for the descheduler series we report.

    Histograms as sum/count (no buckets). Raises ValueError on text that is not a scrape.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for served, fam in served_families(text):
        if served not in KEEP:
            continue
        for sample in fam.samples:
            if not sample.name.endswith("_bucket"):
                out.setdefault(sample.name, []).append({**sample.labels, "value": sample.value})
    return out


def served_names(text: str) -> list[str]:
    """Every `descheduler_*` metric family the process served (what an upgrade must keep)."""
    return sorted({name for name, _ in served_families(text) if name.startswith("descheduler_")})


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
    try:
        series = parse_prometheus(m.last_text)
    except ValueError as exc:
        return {
            "available": False,
            "why": f"the last of {m.successes} scrapes is not Prometheus text ({exc or 'unparsable'})",
        }
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
