from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_desched.descheduler.decisions import RoundResult
from pytest_desched.descheduler.metric_probe import FamilySettle, _loops
from pytest_desched.descheduler.metrics import (
    evicted_total,
    parse_prometheus,
    round_metrics,
    served_names,
)
from pytest_desched.providers.jobs import MetricsScrape
from tests.unit import DATA_ROOT

# A real v0.36.0 scrape after 2 evictions; its profile is named `taints}{le="1"} 99`.
REAL = (DATA_ROOT / "descheduler-v0.36.0" / "metrics-profile-brace.prom").read_text()
PROFILE = 'taints}{le="1"} 99'
LOOPS = "descheduler_loop_duration_seconds_count 65\n"


def _round(text: str, total: int | None, executor: str = "embedded") -> SimpleNamespace:
    scrape = MetricsScrape(
        attempts=5, successes=3 if text else 0, last_status="200", last_text=text
    )
    return SimpleNamespace(
        executor=executor,
        pod_runs=[SimpleNamespace(metrics=scrape)],
        result=RoundResult(total_evicted=total),
    )


def test_a_brace_inside_a_label_value_is_data_not_the_end_of_the_labels() -> None:
    """The hand-written regex (`\\{[^}]*\\}`) dropped every per-profile line here: 0 evictions."""
    s = parse_prometheus(REAL)
    (evicted,) = s["descheduler_pods_evicted_total"]
    assert evicted == {
        "namespace": "lab",
        "node": "m036-worker-2",
        "profile": PROFILE,
        "result": "success",
        "strategy": "RemovePodsViolatingNodeTaints",
        "value": 2.0,
    }
    assert evicted_total(s) == 2  # the log's two "Evicted pod" lines
    assert s["descheduler_strategy_duration_seconds_count"][0]["profile"] == PROFILE


def test_parse_keeps_descheduler_series_only_as_sum_and_count() -> None:
    assert set(parse_prometheus(REAL)) == {
        "descheduler_build_info",
        "descheduler_pods_evicted_total",
        "descheduler_loop_duration_seconds_sum",
        "descheduler_loop_duration_seconds_count",
        "descheduler_strategy_duration_seconds_sum",
        "descheduler_strategy_duration_seconds_count",
    }


def test_served_names_keep_a_counter_as_declared() -> None:
    """v0.36.0 serves the deprecated `descheduler_pods_evicted` beside `..._total`; the parser
    gives both the same OpenMetrics name, so a candidate dropping one must still show."""
    assert served_names(REAL) == [
        "descheduler_build_info",
        "descheduler_descheduler_loop_duration_seconds",
        "descheduler_descheduler_strategy_duration_seconds",
        "descheduler_loop_duration_seconds",
        "descheduler_pods_evicted",
        "descheduler_pods_evicted_total",
        "descheduler_strategy_duration_seconds",
    ]
    assert _loops(REAL) == 65


def test_complete_only_after_a_finished_loop_matching_the_log() -> None:
    assert LOOPS in REAL
    assert round_metrics(_round(REAL, 2))["available"] is True
    mismatch = round_metrics(_round(REAL, 3))
    assert mismatch["available"] is False and mismatch["disagrees_with_log"] is True
    assert "disagrees with the log: 2 successful evictions scraped, 3 in" in mismatch["why"]
    assert "preceded" not in mismatch["why"]
    early = REAL.replace(LOOPS, LOOPS.replace("65", "0"))
    early_m = round_metrics(_round(early, 2))
    assert early_m["available"] is False and "preceded the end of the cycle" in early_m["why"]
    assert "disagrees_with_log" not in early_m


def test_no_scrape_or_in_cluster_says_why() -> None:
    none = round_metrics(_round("", 0))
    assert none["available"] is False and "5 attempt(s)" in none["why"]
    kind = round_metrics(_round(REAL, 2, executor="in-cluster"))
    assert kind["available"] is False and "not reachable" in kind["why"]


@pytest.mark.parametrize(
    "broken", ['descheduler_pods_evicted_total{result="success} 1\n', "{} 1\n"]
)
def test_text_that_is_not_a_scrape_is_said_not_guessed(broken: str) -> None:
    said = round_metrics(_round(broken, 1))
    assert said["available"] is False and "is not Prometheus text" in said["why"]
    watch = FamilySettle()
    assert not watch.see(broken, 0.0) and "is not Prometheus text" in watch.describe()
