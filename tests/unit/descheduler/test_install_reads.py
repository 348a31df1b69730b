"""The first install's reads (issue 31 item 3): asked at the same time, the same answers;
a pinned chart's `helm show values` read once per machine (kept under the .tgz's digest)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_desched.descheduler.chart import Release
from pytest_desched.descheduler.chart_source import ChartRef
from pytest_desched.descheduler.preflight import run_preflight
from pytest_desched.tools.versions import load_versions

DOCS = [{"kind": "ServiceAccount", "metadata": {"name": "descheduler"}}]
DIFF = "+++ /tmp/LIVE/v1.ServiceAccount.kube-system.descheduler\t2026\n+ a\n"
VERSION = '{"clientVersion": {"gitVersion": "v1.36.3"}, "serverVersion": {"gitVersion": "v1.36.3"}}'


class ReadOnlyCluster:
    """kubectl and the PDB list answer after a barrier: all of them must be asked at once."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=20)
        self.policy = SimpleNamespace(list_namespaced_pod_disruption_budget=self._pdbs)
        self.threads: set[str] = set()

    def _wait(self) -> None:
        self.threads.add(threading.current_thread().name)
        self.barrier.wait()  # BrokenBarrierError after 20 s if asked one after another

    def kubectl(self, *args: str, check: bool = True) -> Any:
        self._wait()
        out = VERSION if args[0] == "version" else "no"
        return subprocess.CompletedProcess(args, 0 if args[0] == "version" else 1, out, "")

    def _pdbs(self, namespace: str) -> Any:
        self._wait()
        return SimpleNamespace(items=[])


def test_the_pre_flight_questions_are_asked_at_the_same_time() -> None:
    cluster = ReadOnlyCluster(parties=4)  # diff, kubectl version, can-i, the PDB list

    def diff() -> str:
        cluster._wait()
        return DIFF

    out = run_preflight(cluster, DOCS, diff, "kube-system", "descheduler-lab")  # type: ignore[arg-type]
    assert len(cluster.threads) == 4, cluster.threads
    assert out["versions"] == {"client": "v1.36.3", "server": "v1.36.3"}
    assert out["diff_objects"] == ["v1.ServiceAccount.kube-system.descheduler"]
    assert out["can_i_evict"]["answer"] == "no" and out["can_i_evict"]["allowed"] is False
    assert out["pdbs"] == []


def test_a_pinned_charts_values_are_read_from_helm_once(tmp_path: Path) -> None:
    tgz = tmp_path / "descheduler-0.36.0.tgz"
    tgz.write_bytes(b"chart")
    chart = ChartRef(tgz, "module", "0.36.0", "0.36.0", "ab12")
    calls: list[tuple[str, ...]] = []

    def helm(*args: str, **kw: Any) -> Any:
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, "deschedulerPolicy:\n  profiles: []\n", "")

    cluster = SimpleNamespace(helm=helm)
    for run in ("first", "second"):
        rel = Release(cluster, chart, load_versions(), tmp_path / run, report=lambda _m: None)  # type: ignore[arg-type]
        rel.workdir.mkdir(parents=True)
        rel.show_values()
        assert rel.values == {"deschedulerPolicy": {"profiles": []}}
        assert (rel.workdir / "descheduler-values.yaml").is_file()
    assert calls == [("show", "values", str(tgz))]  # the second run read the kept copy
    other = ChartRef(tgz, "module", "0.36.0", "0.36.0", "cd34")  # the .tgz changed
    rel = Release(cluster, other, load_versions(), tmp_path / "third", report=lambda _m: None)  # type: ignore[arg-type]
    rel.workdir.mkdir(parents=True)
    rel.show_values()
    assert len(calls) == 2
