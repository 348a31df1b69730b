"""The `metrics` deciding layer: proven from the descheduler's own metrics-source error line.

A utilization round whose source answered nothing picks no pod: without the layer its record
read `no-candidates`, as if the policy had simply found nothing to move.
"""

from __future__ import annotations

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer, PodDecision, decide
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.descheduler.metrics_layer import metrics_stopped
from pytest_desched.evidence.record import RoundRecord
from tests.unit import DATA_ROOT

DOWN = (DATA_ROOT / "descheduler-v0.36.0" / "utilization-metrics-server-down.log").read_text()
BALANCE = 'running balance extension point failed with error: plugin "LowNodeUtilization" '


def test_a_round_whose_metrics_server_was_down_is_decided_by_metrics() -> None:
    result = parse_log(DOWN)
    verdict = decide(result.in_namespaces({"descheduler-lab"}), result.skipped, None, result.errors)
    assert verdict.verdict == "stopped-by:metrics" and verdict.layer == Layer.METRICS
    assert verdict.label == "metrics"
    record = RoundRecord.from_round("utilization-kubernetes-metrics-missing", "r", "k", result)
    assert (record.verdict, record.deciding_layer) == ("stopped-by:metrics", "metrics")


@pytest.mark.parametrize(
    "err",
    [
        BALANCE + 'finished with error: unable to find node "w-1" in the collected metrics',
        BALANCE + "finished with error: unable to capture prometheus metrics: connection refused",
        BALANCE + "finished with error: prometheus client not initialized",
        BALANCE + "finished with error: unable to find metric entry for w-1",
    ],
)
def test_the_balance_failing_for_want_of_node_usage_is_the_proof(err: str) -> None:
    assert metrics_stopped([err]) == err
    assert decide([], None, None, [err]).label == "metrics"


@pytest.mark.parametrize(
    "errors",
    [
        [],  # a round that found nothing to move
        # a fetch failed for one node but the balance point did not fail: not proven
        ["Error fetching metrics: the server is currently unable to handle the request"],
        # the balance point failed for another reason
        [BALANCE + "finished with error: some other error"],
    ],
)
def test_no_proof_no_metrics_layer(errors: list[str]) -> None:
    assert metrics_stopped(errors) is None
    assert decide([], None, None, errors).verdict == "no-candidates"


def test_a_pod_that_reached_a_layer_decides_over_the_metrics_line() -> None:
    """The metrics source stops only the utilization plugin: a pod another plugin picked
    and a layer stopped (or evicted) is what decided the round."""
    err = BALANCE + 'finished with error: unable to find node "w-1" in the collected metrics'
    filtered = PodDecision("lab", "p", Fate.FILTERED, Layer.EVICTOR_FILTER, checks=["x"])
    assert decide([filtered], None, None, [err]).layer == Layer.EVICTOR_FILTER
    evicted = PodDecision("lab", "p", Fate.EVICTED, Layer.API_SERVER)
    assert decide([evicted], None, None, [err]).verdict == "evicted"
