"""canary/static/metric_code.py: metric families read from each release's own
metrics/metrics.go, and what an alert on the baseline's names meets in the candidate."""

from __future__ import annotations

from pathlib import Path

from pytest_desched.canary.static.metric_code import compare_declared_metrics, declared_metrics

OLD = """package metrics
const (
	DeschedulerSubsystem = "descheduler"
)
var (
	PodsEvicted = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem:      DeschedulerSubsystem,
			Name:           "pods_evicted",
			Help:           "Number of evicted pods",
			StabilityLevel: metrics.ALPHA,
		}, []string{"result"})
	LoopDuration = metrics.NewHistogramVec(
		&metrics.HistogramOpts{
			Subsystem: DeschedulerSubsystem,
			Name:      "descheduler_loop_duration_seconds",
			Help:      "Time taken to complete a full descheduling cycle",
			Buckets:   []float64{0.001, 0.01},
		}, []string{"type"})
)
"""
NEW = """package metrics
const (
	DeschedulerSubsystem = "descheduler"
)
var (
	PodsEvicted = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem:         DeschedulerSubsystem,
			Name:              "pods_evicted",
			Help:              "Number of evicted pods",
			DeprecatedVersion: "0.34.0",
		}, []string{"result"})
	PodsEvictedTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem: DeschedulerSubsystem,
			Name:      "pods_evicted_total",
			Help:      "Number of evicted pods",
		}, []string{"result"})
)
"""


def tree(root: Path, text: str) -> Path:
    (root / "metrics").mkdir(parents=True)
    (root / "metrics" / "metrics.go").write_text(text)
    return root


def test_declared_metrics_resolve_the_subsystem_and_read_deprecation(tmp_path: Path) -> None:
    got = declared_metrics(tree(tmp_path / "new", NEW))
    assert got is not None
    assert sorted(got) == ["descheduler_pods_evicted", "descheduler_pods_evicted_total"]
    assert got["descheduler_pods_evicted"].deprecated_since == "0.34.0"
    assert got["descheduler_pods_evicted_total"].deprecated_since is None
    assert declared_metrics(tmp_path / "nothing") is None
    assert declared_metrics(None) is None


def test_an_old_name_deprecated_or_removed_is_flagged_with_its_successor(tmp_path: Path) -> None:
    old = declared_metrics(tree(tmp_path / "old", OLD))
    new = declared_metrics(tree(tmp_path / "new", NEW))
    assert old is not None and new is not None
    rows = {d.path: d for d in compare_declared_metrics(old, new)}
    dep = rows["descheduler_pods_evicted"]
    assert (dep.change, dep.severity) == ("changed", "review")
    assert dep.message.startswith("DM001 metric-deprecated: descheduler_pods_evicted is ")
    assert "successor (same help text): descheduler_pods_evicted_total" in dep.message
    gone = rows["descheduler_descheduler_loop_duration_seconds"]
    assert (gone.change, gone.severity) == ("removed", "rollback")
    assert gone.message.startswith("DM002 metric-removed")
    assert rows["descheduler_pods_evicted_total"].message.startswith("DM003 metric-added")
    # the same release on both sides: only the family it already deprecates, kept (DM004, info)
    [kept] = compare_declared_metrics(new, new)
    assert (kept.rule, kept.path, kept.change, kept.severity) == (
        "DM004",
        "descheduler_pods_evicted",
        "kept",
        "info",
    )
    assert "descheduler_pods_evicted_total" in kept.message
