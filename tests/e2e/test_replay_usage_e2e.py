"""A utilization incident replayed with the usage it saw (issue 50): the generated 102-node
incident's recorded usage is served back through metrics-server on the replay cluster (real
metrics-server v0.8.0 scraping kwok's emulated kubelets), and the real descheduler's round
evicts exactly the incident's pods, reading each node at its recorded figure. Before the
round, `desched snapshot`'s reader takes the same cluster's usage from metrics.k8s.io. A
metrics policy given a snapshot without usage is refused before any cluster exists.

Concurrency-safe: the replay brings up its own uniquely named embedded cluster (ports chosen
under the provider's lock) in the test's own temp directory, and deletes it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from pytest_desched.descheduler.utilization_log import node_usage
from pytest_desched.errors import ConfigError
from pytest_desched.outcome.fates import Fate
from pytest_desched.replay.capture.snapshot import take_snapshot
from pytest_desched.replay.capture.usage import cpu_m
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.gen.utilization_incident import evicted, utilization_hotspot
from pytest_desched.replay.run import replay
from tests.commands import DESCHED, child_env, finish, start

pytestmark = pytest.mark.desched_selftest
# The replay option `--client-qps/--client-burst` (recorded in the ledger): v0.36.0's metrics
# collector GETs each node's NodeMetrics one by one, so at client-go's 5 requests/s the round
# spent ~20 s of its 44 s on 103 GETs; the evictions decided do not depend on the rate.
CLIENT = {"qps": 50, "burst": 100}


def _fresh(desched_settings: Any, tmp_path: Path, name: str) -> Any:
    run_dir = tmp_path / name
    run_dir.mkdir()
    return desched_settings.with_(
        run_dir=run_dir, artifacts=run_dir / "artifacts", provider="embedded"
    )


def test_utilization_incident_replays_its_evictions_with_recorded_usage(
    desched_settings: Any, tmp_path: Path
) -> None:
    inc = utilization_hotspot()
    snap = inc.snapshot
    assert snap.usage is not None and len(snap.nodes) >= 100
    path = snap.write(tmp_path / f"{inc.name}.json", fmt="json")
    retaken: dict[str, Any] = {}
    logs: list[str] = []

    def before_round(i: int, cluster: Any) -> dict[str, Any]:
        # the replay cluster serves the incident's usage: `desched snapshot`'s reader sees it
        context = yaml.safe_load(Path(cluster.kubeconfig).read_text())["current-context"]
        again = take_snapshot(cluster.kubeconfig, context, ["shop"], exporter="client")
        retaken["usage"], retaken["header"] = again.usage, again.header["usage"]
        return {}

    def after_round(i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        logs.append(rnd.logs)
        return {}

    t0 = time.monotonic()
    out = replay(
        path,
        config=_fresh(desched_settings, tmp_path, inc.name),
        before_round=before_round,
        after_round=after_round,
        client=CLIENT,
    )
    wall = time.monotonic() - t0
    print(f"replay of {len(snap.nodes)} nodes / {len(snap.pods)} pods with usage: {wall:.1f}s")
    print(json.dumps({k: v for k, v in out.timings.items()}, indent=None))

    # served as planned: every node at its recorded figure, every pod its own
    served = out.restore["usage"]
    assert served["origin"] == "recorded" and served["pods"] == len(snap.pods), served
    assert served["nodes"] == len(snap.nodes) and not served["below_sum"]
    print(
        f"usage served in {served['served_in_s']}s, max CPU deviation {served['max_node_cpu_deviation_m']}m"
    )

    # the evictions: exactly the incident's pods, by identity, each replaced
    fates = out.ledger.fates(0)
    got = {p for p, f in fates.items() if f.fate == Fate.EVICTED.value}
    assert got == evicted(inc), {"replayed": sorted(got), "incident": sorted(evicted(inc))}
    assert all(fates[p].replacement == "ready" for p in got), {p: fates[p] for p in got}
    assert out.ledger.rounds[0].total_evicted == len(evicted(inc))
    assert out.ledger.rounds[0].audit_by_code == {"201": len(evicted(inc))}

    # the descheduler read each node at its recorded figure (its own log), not its pods' sum
    seen = node_usage(logs[0])
    recorded = {n: cpu_m(f["cpu"]) for n, f in snap.usage["nodes"].items()}
    node_of = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"]["nodeName"]
        for p in snap.pods
    }
    hot = {node_of[k] for k in evicted(inc)}
    assert {n for n, u in seen.items() if u.category == "overutilized"} == hot, seen
    # one sample each, jittered by the load (usage_live.py): per node within 10%, and on
    # average over every node the recorded figure, 100-150m above the pods' sum
    logged = {n: cpu_m(seen[n].usage["cpu"]) for n in recorded}
    for n, want in recorded.items():
        assert abs(logged[n] - want) <= max(10, want * 0.10), (n, logged[n], want)
    pods_sum = {n: 0 for n in recorded}
    for k, f in snap.usage["pods"].items():
        pods_sum[node_of[k]] += cpu_m(f["cpu"])
    off = sum(logged[n] - recorded[n] for n in recorded) / len(recorded)
    above_sum = sum(recorded[n] - pods_sum[n] for n in recorded) / len(recorded)
    print(f"logged - recorded: {off:+.1f}m on average; recorded - pods' sum: {above_sum:.1f}m")
    # served at its pods' sum a node would read ~100m low: half of that separates the two
    assert abs(off) < above_sum / 2 and above_sum >= 100, (off, above_sum)
    assert any("recorded figures served through metrics.k8s.io" in n for n in out.ledger.notes)

    # `desched snapshot` recorded the served usage from the replay cluster's metrics.k8s.io
    assert retaken["header"]["recorded"] is True, retaken["header"]
    again = retaken["usage"]
    for k in evicted(inc):
        assert abs(cpu_m(again["pods"][k]["cpu"]) - 2000) <= 200, again["pods"][k]
    for n in hot:
        assert abs(cpu_m(again["nodes"][n]["cpu"]) - recorded[n]) <= max(10, recorded[n] * 0.10)


def test_metrics_policy_without_usage_is_refused_before_any_cluster(
    desched_settings: Any, tmp_path: Path
) -> None:
    """One line, exit 2, nothing started; stating the assumption is what lets it run."""
    old = label_move().snapshot  # recorded no usage
    path = old.write(tmp_path / "old.yaml")
    policy = tmp_path / "policy.yaml"
    policy.write_text(utilization_hotspot().policy)
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="--assume-usage requests"):
        replay(path, policy=str(policy), config=_fresh(desched_settings, tmp_path, "refused"))
    assert not list((tmp_path / "refused").glob("**/kubeconfig*"))
    argv = [DESCHED, "replay", str(path), "--policy", str(policy)]
    child = start(argv, child_env(tmp_path))
    _, err = finish(child, timeout=300)
    proc = SimpleNamespace(returncode=child.returncode, stderr=err)
    took = time.monotonic() - t0
    lines = [ln for ln in proc.stderr.splitlines() if "actual utilization" in ln]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and "no usage" in lines[0], proc.stderr[-2000:]
    print(f"refused in {took:.1f}s: {lines[0]}")


def test_assumed_usage_is_served_and_named_when_none_was_recorded(
    desched_settings: Any, tmp_path: Path
) -> None:
    """`--assume-usage requests` on the incident with its usage removed: every pod is served
    at its requests, so no node is over the target and nothing is evicted (the recorded usage
    is what made the incident), and the ledger says the usage was assumed."""
    inc = utilization_hotspot(nodes=16)  # 3 hot, 12 cold, 1 in between: small and quick
    snap = inc.snapshot
    snap.usage = None
    snap.header["usage"] = {"recorded": False, "why": "removed by the test"}
    path = snap.write(tmp_path / "no-usage.yaml")
    logs: list[str] = []

    def after_round(i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        logs.append(rnd.logs)
        return {}

    t0 = time.monotonic()
    out = replay(
        path,
        config=_fresh(desched_settings, tmp_path, "assumed"),
        after_round=after_round,
        client=CLIENT,
        assume_usage="requests",
    )
    print(f"assumed-usage replay of {len(snap.nodes)} nodes: {time.monotonic() - t0:.1f}s")
    assert out.restore["usage"]["origin"] == "assumed: requests", out.restore["usage"]
    assert any("usage ASSUMED (--assume-usage requests)" in n for n in out.ledger.notes)
    fates = out.ledger.fates(0)
    assert not [p for p, f in fates.items() if f.fate == Fate.EVICTED.value]
    assert out.ledger.rounds[0].total_evicted == 0
    seen = node_usage(logs[0])
    # a hot node by requests: 100m agent + 250m checkout + 250m cache + the 1m floor
    assert seen["node-001"].category == "underutilized", seen["node-001"]
    assert abs(cpu_m(seen["node-001"].usage["cpu"]) - 601) <= 60, seen["node-001"]
    assert not [n for n, u in seen.items() if u.category == "overutilized"], seen
