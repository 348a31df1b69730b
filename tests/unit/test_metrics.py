from __future__ import annotations

from types import SimpleNamespace

from pytest_desched.descheduler.decisions import RoundResult
from pytest_desched.descheduler.metrics import parse_prometheus, round_metrics
from pytest_desched.providers.jobs import MetricsScrape

TEXT = """# HELP descheduler_pods_evicted_total Number of total evicted pods
# TYPE descheduler_pods_evicted_total counter
descheduler_pods_evicted_total{namespace="lab",node="n1",profile="p",result="success",strategy="RemovePodsViolatingNodeAffinity"} 1
descheduler_pods_evicted_total{namespace="lab",node="n1",profile="p",result="error",strategy="RemovePodsViolatingNodeAffinity"} 2
descheduler_loop_duration_seconds_bucket{le="0.1",type="NonDryRun"} 1
descheduler_loop_duration_seconds_sum{type="NonDryRun"} 0.012
descheduler_loop_duration_seconds_count{type="NonDryRun"} 1
go_goroutines 12
"""


def _round(text: str, total: int | None, executor: str = "embedded") -> SimpleNamespace:
    scrape = MetricsScrape(
        attempts=5, successes=3 if text else 0, last_status="200", last_text=text
    )
    return SimpleNamespace(
        executor=executor,
        pod_runs=[SimpleNamespace(metrics=scrape)],
        result=RoundResult(total_evicted=total),
    )


def test_parse_keeps_descheduler_series_only():
    s = parse_prometheus(TEXT)
    assert set(s) == {
        "descheduler_pods_evicted_total",
        "descheduler_loop_duration_seconds_sum",
        "descheduler_loop_duration_seconds_count",
    }
    assert s["descheduler_pods_evicted_total"][0]["strategy"] == "RemovePodsViolatingNodeAffinity"


def test_complete_only_after_a_finished_loop_matching_the_log():
    assert round_metrics(_round(TEXT, 1))["available"] is True
    mismatch = round_metrics(_round(TEXT, 2))
    assert mismatch["available"] is False and mismatch["disagrees_with_log"] is True
    assert "disagrees with the log: 1 successful evictions scraped, 2 in" in mismatch["why"]
    assert "preceded" not in mismatch["why"]
    early = TEXT.replace('_count{type="NonDryRun"} 1', '_count{type="NonDryRun"} 0')
    early_m = round_metrics(_round(early, 1))
    assert early_m["available"] is False and "preceded the end of the cycle" in early_m["why"]
    assert "disagrees_with_log" not in early_m


def test_no_scrape_or_in_cluster_says_why():
    none = round_metrics(_round("", 0))
    assert none["available"] is False and "5 attempt(s)" in none["why"]
    kind = round_metrics(_round(TEXT, 1, executor="in-cluster"))
    assert kind["available"] is False and "not reachable" in kind["why"]
