#!/usr/bin/env python3
"""How long a replay of a big cluster takes, and where the time and memory go (issue 12).

A generated cluster (`pytest_desched.replay.gen.generator`, seeded: default 1,000 nodes / 10,000
pods) with an incident on top: the batch pool label removed from a tenth of the batch nodes,
so their pods violate their required node affinity. Then one `replay()` as a user runs it:
a fresh embedded cluster, the release installed the runbook's way, the snapshot restored
(etcd path), one real round under a realistic policy (RemovePodsViolatingNodeAffinity and
RemovePodsViolatingNodeTaints, nodeFit, caps 5 per node / 50 in total), the fate ledger.

    python bench/replay_scale.py [--nodes 1000] [--pods 10000] [--seed 1] [--out FILE]

Figures (all `time.monotonic()`, from the engine's own phase timings): issue 29's targets,
"restore + one round" (restore, policy apply and round, ledger included) in at most
`ROUND_TARGET_S` at 1,000 nodes / 10,000 pods and the restore alone in at most
`RESTORE_TARGET_S` at 5,000 nodes / 10,000 pods (bench/replay_series.py takes the median of 3);
bring-up and install are reported beside it. Peak memory: this process (getrusage) and each
cluster process's VmHWM (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
the stand-in kubelet, the descheduler round), sampled from /proc while the replay runs.
JSON on stdout (and in --out); progress on stderr. Exit 0 when the replay completed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 5
maxNoOfPodsToEvictTotal: 50
evictionFailureEventNotification: true
profiles:
- name: incident
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
  - name: RemovePodsViolatingNodeAffinity
    args:
      nodeAffinityType: [requiredDuringSchedulingIgnoredDuringExecution]
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeAffinity, RemovePodsViolatingNodeTaints]
"""

ROUND_TARGET_S = 45.0  # issue 29: restore + one round, 1,000 nodes / 10,000 pods, quiet
RESTORE_TARGET_S = 40.0  # issue 29: the restore alone, 5,000 nodes / 10,000 pods, quiet


def run_fresh(nodes: int, pods: int, out: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """This script in a fresh process (a fresh cluster, nothing shared with the caller's):
    its JSON report; SystemExit naming the shape when it failed."""
    cmd = [sys.executable, __file__, "--nodes", str(nodes), "--pods", str(pods), "--out", str(out)]
    proc = subprocess.run([*cmd, *extra], stdout=subprocess.DEVNULL, check=False)
    if proc.returncode != 0 or not out.is_file():
        raise SystemExit(f"replay_scale.py --nodes {nodes} --pods {pods} exited {proc.returncode}")
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _cluster_processes(root: Path) -> Iterator[tuple[str, psutil.Process]]:
    """Every process whose command line names the cluster's directory, by component name."""
    needle = str(root)
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info["cmdline"] or []
        if not any(needle in a for a in argv):
            continue
        kubelet = any("embedded.kubelet" in a for a in argv)
        yield ("stand-in-kubelet" if kubelet else Path(argv[0]).name), proc


class PeakMemory:
    """VmHWM (peak RSS) of every process whose command line names the cluster's directory."""

    def __init__(self, root: Path, interval: float = 0.25) -> None:
        self.root, self.interval = root, interval
        self.peak_kib: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def narrow(self, root: Path) -> None:
        """From now on, only this cluster's processes (peaks of others' are dropped)."""
        if root != self.root:
            self.root, self.peak_kib = root, {}

    def _sample(self) -> None:
        for name, proc in _cluster_processes(self.root):
            try:  # psutil has no peak RSS; the kernel keeps it in status (VmHWM)
                status = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                continue
            hwm = next(
                (int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM:")), 0
            )
            self.peak_kib[name] = max(self.peak_kib.get(name, 0), hwm)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _cpu_seconds(root: Path) -> dict[str, float]:
    """utime + stime of every process whose command line names the cluster's directory."""
    out: dict[str, float] = {}
    for name, proc in _cluster_processes(root):
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        out[name] = out.get(name, 0.0) + t.user + t.system
    me = os.times()
    out["this process"] = me.user + me.system
    return out


def _requests(api: Any) -> dict[str, float]:
    """The API server's request counters: writes per verb/resource/subresource/code, reads
    per verb (from its own /metrics)."""
    m, url, hdrs, _, _ = api.param_serialize(
        method="GET",
        resource_path="/metrics",
        header_params={"Accept": "text/plain"},
        auth_settings=["BearerToken"],
    )
    text = api.call_api(m, url, header_params=hdrs, _request_timeout=30).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_s, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
        lab = dict(kv.split("=", 1) for kv in labels_s.split('",') if "=" in kv)
        lab = {k: v.strip('"') for k, v in lab.items()}
        verb = lab.get("verb", "")
        if verb in ("GET", "LIST", "WATCH"):
            k = f"reads {verb}"
        else:
            res = "/".join(x for x in (lab.get("resource"), lab.get("subresource")) if x)
            k = f"{verb} {res} {lab.get('code')}"
        out[k] = out.get(k, 0.0) + float(value)
    return out


def _cluster_dir(root: Path, etcd_url: str) -> Path:
    """The directory of the cluster whose etcd listens on `etcd_url` (other sessions'
    clusters live under the same root and must not be counted)."""
    port = f":{etcd_url.rsplit(':', 1)[1]}"
    for name, proc in _cluster_processes(root):
        argv = proc.info["cmdline"]
        if name == "etcd" and any(
            a.startswith("--listen-client-urls") and a.endswith(port) for a in argv
        ):
            return root / Path(argv[0]).relative_to(root).parts[0]
    return root


class RestoreProbe:
    """CPU seconds of the cluster's processes and the API server's request counts, for the
    restore's write phases (start of the restore to the settle wait) and for settle alone.
    Wraps the engine's functions for the bench only (the engine has no hook for this)."""

    def __init__(self, root: Path, mem: PeakMemory) -> None:
        self.root, self.mem = root, mem
        self.marks: dict[str, tuple[dict[str, float], dict[str, float]]] = {}

    def mark(self, name: str, api: Any) -> None:
        self.marks[name] = (_cpu_seconds(self.root), _requests(api))

    @staticmethod
    def _delta(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        keys = sorted(set(a) | set(b), key=lambda k: -(b.get(k, 0) - a.get(k, 0)))
        return {k: round(b.get(k, 0) - a.get(k, 0), 2) for k in keys if b.get(k, 0) != a.get(k, 0)}

    def install(self) -> None:
        from pytest_desched.replay.rebuild import etcd_restore, restore

        probe, inner_restore, inner_wait = self, restore.restore_via_etcd, etcd_restore.Barrier.wait

        def restore_via_etcd(api: Any, etcd: Any, *a: Any, **kw: Any) -> Any:
            probe.root = _cluster_dir(probe.root, etcd.url)  # this cluster's processes only
            probe.mem.narrow(probe.root)
            probe.mark("start", api)
            return inner_restore(api, etcd, *a, **kw)

        def wait(barrier: Any, api: Any, *a: Any, **kw: Any) -> Any:
            probe.mark("settle_start", api)
            try:
                return inner_wait(barrier, api, *a, **kw)
            finally:
                probe.mark("settle_end", api)

        restore.restore_via_etcd = restore_via_etcd  # type: ignore[assignment]
        etcd_restore.Barrier.wait = wait  # type: ignore[method-assign]

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, a, b in (
            ("writes", "start", "settle_start"),
            ("settle", "settle_start", "settle_end"),
        ):
            if a in self.marks and b in self.marks:
                out[name] = {
                    "cpu_s": self._delta(self.marks[a][0], self.marks[b][0]),
                    "requests": self._delta(self.marks[a][1], self.marks[b][1]),
                }
        return out


def _cycle_seconds(log_text: str) -> float | None:
    """The descheduler's own run time: its first log line to its totals line (ts, ms)."""
    first = last = None
    for line in log_text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        ts = rec.get("ts")
        if ts is None:
            continue
        first = ts if first is None else first
        if rec.get("msg") == "Number of evictions/requests":
            last = ts
    return round((last - first) / 1000, 3) if first and last else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--timeout", type=float, default=600, help="restore and round, each")
    ap.add_argument("--client-qps", default=None, help="the descheduler's API client QPS")
    ap.add_argument("--client-burst", default=None, help="the descheduler's API client burst")
    ap.add_argument("--keep", action="store_true", help="keep the snapshot and run dir")
    args = ap.parse_args(argv)

    from pytest_desched import build_config
    from pytest_desched.descheduler.logparse import parse_log
    from pytest_desched.replay.gen.genbase import NODE_POOL_LABEL
    from pytest_desched.replay.gen.generator import Shape, generate
    from pytest_desched.replay.run import replay
    from pytest_desched.session import interrupts_unwind
    from pytest_desched.tools.locate import default_cache_dir

    work = Path(tempfile.mkdtemp(prefix="desched-bench-replay-"))
    try:
        t0 = time.monotonic()
        snap = generate(Shape(seed=args.seed, nodes=args.nodes, pods=args.pods))
        batch = [n for n in snap.nodes if n["metadata"]["labels"].get(NODE_POOL_LABEL) == "batch"]
        for n in batch[: max(1, len(batch) // 10)]:  # the incident: the label moved away
            n["metadata"]["labels"].pop(NODE_POOL_LABEL)
        snap.policy = POLICY
        t_gen = time.monotonic() - t0
        path = snap.write(work / "snapshot.json")
        t_write = time.monotonic() - t0 - t_gen
        log(
            f"generated {len(snap.nodes)} nodes / {len(snap.pods)} pods in {t_gen:.1f}s ({path.stat().st_size >> 20} MiB)"
        )

        config = build_config({"--desched-provider": "embedded"}, run_dir=work / "run")
        clusters = (config.cache_dir or default_cache_dir()) / "clusters" / "clusters"
        w0 = time.monotonic()
        mem = PeakMemory(clusters)
        probe = RestoreProbe(clusters, mem)
        probe.install()
        with interrupts_unwind(), mem:
            result = replay(
                path,
                config=config,
                report=log,
                round_timeout=args.timeout,
                restore_timeout=args.timeout,
                client={"qps": args.client_qps, "burst": args.client_burst},
            )
        wall = time.monotonic() - w0
        t = result.timings
        rnd = result.ledger.rounds[0]
        round_log = next((config.run_dir / "round-logs").glob("*.log"), None)
        log_text = round_log.read_text() if round_log else ""
        p0 = time.monotonic()
        parsed = parse_log(log_text)
        t_parse = time.monotonic() - p0
        target = (
            t.get("replay.apply_policy", 0)
            + t.get("replay.restore", 0)
            + t.get("replay.round1", 0)
            + t.get("replay.round1.aftermath", 0)
        )
        out: dict[str, Any] = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "python bench/replay_scale.py " + " ".join(argv or sys.argv[1:]),
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "load_avg_start": os.getloadavg(),
            },
            "cluster": {"nodes": len(snap.nodes), "pods": len(snap.pods), "seed": args.seed},
            "target_s": round(target, 2),
            "target_met": target <= ROUND_TARGET_S,
            "restore_target_met": (t.get("replay.restore") or 1e9) <= RESTORE_TARGET_S,
            "seconds": {
                "generate": round(t_gen, 2),
                "write_snapshot": round(t_write, 2),
                "inputs (load + plan + policy check)": t.get("inputs"),
                "bring_up": t.get("bring_up"),
                "install": t.get("install"),
                "apply_policy": t.get("replay.apply_policy"),
                "restore": t.get("replay.restore"),
                "restore_parts": result.restore.get("timings"),
                "round (Job created -> finished)": t.get("replay.round1"),
                "descheduler cycle (its own log)": _cycle_seconds(log_text),
                "descheduler client-side throttling waits": log_text.count(
                    "client-side throttling"
                ),
                "log parse (again, alone)": round(t_parse, 3),
                "aftermath (replacements)": t.get("replay.round1.aftermath"),
                "replay() wall, teardown included": round(wall, 2),
            },
            "descheduler_client": result.client or "its own limits",
            "round": {
                "by_fate": rnd.by_fate,
                "total_evicted": rnd.total_evicted,
                "audit": rnd.audit_by_code,
                "log_lines": parsed.lines,
            },
            "restore_probe": probe.report(),
            "restore": {
                k: result.restore.get(k)
                for k in ("method", "ages", "counts", "verified", "deviations")
            },
            "peak_memory_mib": {
                "this process (ru_maxrss)": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
                ),
                **{k: round(v / 1024, 1) for k, v in sorted(mem.peak_kib.items())},
            },
        }
        text = json.dumps(out, indent=1, default=str)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        met = "met" if target <= ROUND_TARGET_S else "missed"
        log(f"restore + one round: {target:.1f}s (target {ROUND_TARGET_S:.0f}s: {met})")
        return 0
    finally:
        if not args.keep:  # the 140 MiB snapshot and the run dir: nothing left behind
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")


if __name__ == "__main__":
    raise SystemExit(main())
