#!/usr/bin/env python3
"""The runbook's experiments on a quiet cluster, then on the same cluster under load.

Issue 19's load case: the three runbook experiments (positive, nodefit, pdb, with the
pdb-lister-workaround policy) run first on the quiet embedded cluster, then again while the
same cluster carries `--nodes` (500) other kwok nodes and `--pods` (5,000) other pods with
background churn: Deployments scaled up and down, bare pods created and deleted. The lab's
verdicts and the fates of the pods each round started with must be identical in both phases
(exit 1 otherwise). Decisions about the replacement the round itself caused are printed but
not compared: under load the one cycle runs long enough for the descheduler's informer to
see the replacement on the target, and nodeFit then rejects it (no other node fits), a
bystander line that a quiet, faster cycle never reaches. The figure
is the round's duration (Job created -> run -> log read, `ExperimentResult.timings["round"]`)
and the descheduler process's own run (start to exit, as the stand-in kubelet records it),
quiet beside loaded, medians over `--runs`.

    python bench/load_bench.py [--nodes 500] [--pods 5000] [--runs 3] [--out FILE.json]

The load never reaches the lab: its pods have a nodeSelector for the load nodes only, and
they lack the runbook's opt-in label, so the descheduler's evictor filters every one of
them (they still cost it a list, a filter and a log line each: that is the load). Progress
goes to stderr, the result table to stdout. Ctrl-C tears everything down (exit 130).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the checkout's package, also when it is not installed

VARIANT = "pdb-lister-workaround"
EXPERIMENTS = ("positive", "nodefit", "pdb")
LOAD_LABEL = "desched.pytest.io/load"
LOAD_NAMESPACES = 10
CHURN_NS = "load-churn"


def log(msg: str) -> None:
    print(f"[load {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def machine() -> dict[str, Any]:
    from run_bench import _proc_field as field  # the same /proc reader as the main benchmark

    mem = field("/proc/meminfo", "MemTotal")
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": field("/proc/cpuinfo", "model name"),
        "mem_gib": round(int(mem.split()[0]) / 2**20, 1) if mem else None,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# -- what must be identical between the phases ------------------------------------------------
def fates(result: Any) -> dict[str, Any]:
    """The lab's verdict and the fate of each pod the round started with (a multiset: names
    differ between runs). Decisions about pods created during the round (the replacement,
    which a long cycle may list and nodeFit-reject) are kept apart in `during_round`."""
    rec = result.records[-1] if result.records else {}
    created = {
        e["pod"]
        for e in rec.get("timeline") or []
        if str(e.get("what", "")).startswith("replacement-")
    }

    def fate(d: dict[str, Any]) -> tuple[Any, ...]:
        return (d["fate"], d["layer"], d.get("status_code"), tuple(d.get("checks") or []))

    decisions = rec.get("decisions", [])
    return {
        "outcome": result.outcome,
        "deciding_layer": result.blocking_layer,
        "verdict": rec.get("verdict"),
        "evictions": result.evictions,
        "pod_fates": sorted(fate(d) for d in decisions if d["name"] not in created),
        "distribution_after": rec.get("distribution_after"),
        "failed_checks": sorted(c.id for c in result.failed),
        "during_round": sorted(fate(d) for d in decisions if d["name"] in created),
    }


def compared(f: dict[str, Any]) -> dict[str, Any]:
    """What must be identical between the phases: everything but `during_round`."""
    return {k: v for k, v in f.items() if k != "during_round"}


def process_seconds(result: Any) -> float | None:
    """The round's descheduler process, start to exit (the stand-in kubelet's record)."""
    runs = [r for rnd in result.rounds for r in rnd.pod_runs]
    if not runs:
        return None
    return round(sum((r.finished - r.started).total_seconds() for r in runs), 3)


def run_phase(session: Any, phase: str, runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in EXPERIMENTS:
        for i in range(runs):
            t0 = time.monotonic()
            result = session.run(name, variant=VARIANT)
            entry = out.setdefault(
                name, {"fates": [], "round_s": [], "process_s": [], "wall_s": []}
            )
            entry["fates"].append(fates(result))
            entry["round_s"].append(result.timings.get("round"))
            entry["process_s"].append(process_seconds(result))
            entry["wall_s"].append(round(time.monotonic() - t0, 3))
            log(
                f"{phase} {name}[{VARIANT}] #{i + 1}: {result.outcome}, layer "
                f"{result.blocking_layer}, round {result.timings.get('round')}s"
            )
    return out


# -- the load ----------------------------------------------------------------------------------
class Load:
    """`nodes` kwok nodes and `pods` pods (Deployments) kept off the lab, plus churn."""

    def __init__(self, cluster: Any, nodes: int, pods: int, per_deploy: int = 100) -> None:
        self.cluster, self.nodes, self.pods, self.per_deploy = cluster, nodes, pods, per_deploy
        self.deployments = [
            (f"load-{i % LOAD_NAMESPACES}", f"load-{i}") for i in range(pods // per_deploy)
        ]
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.ops = {"scaled": 0, "created": 0, "deleted": 0, "errors": 0}

    def node_names(self) -> list[str]:
        return [f"load-node-{i:04d}" for i in range(self.nodes)]

    def create(self) -> None:
        from pytest_desched.kube import wait_for
        from pytest_desched.providers.embedded.cluster import NodeSpec, node_manifest

        core, apps = self.cluster.core, self.cluster.apps
        t0 = time.monotonic()
        for i, name in enumerate(self.node_names()):
            body = node_manifest(name, f"zone-{'abc'[i % 3]}", NodeSpec())
            body["metadata"]["labels"][LOAD_LABEL] = "true"
            core.create_node(body)
        wait_for(
            f"{self.nodes} load nodes Ready",
            lambda: sum(
                any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
                for n in core.list_node(label_selector=LOAD_LABEL, _request_timeout=(5, 120)).items
            ),
            lambda ready: ready == self.nodes,
            timeout=300,
            max_interval=2,
        )
        log(f"{self.nodes} load nodes Ready in {time.monotonic() - t0:.1f}s")
        t1 = time.monotonic()
        for ns in sorted({ns for ns, _ in self.deployments} | {CHURN_NS}):
            core.create_namespace({"metadata": {"name": ns, "labels": {LOAD_LABEL: "true"}}})
        for ns, name in self.deployments:
            apps.create_namespaced_deployment(ns, self._deployment(name, self.per_deploy))
        wait_for(
            f"{self.pods} load pods Running",
            self.running,
            lambda n: n >= self.pods,
            timeout=900,
            max_interval=5,
        )
        log(f"{self.pods} load pods Running in {time.monotonic() - t1:.1f}s")

    def running(self) -> int:
        pods = self.cluster.core.list_pod_for_all_namespaces(
            label_selector=f"{LOAD_LABEL}=true",
            field_selector="status.phase=Running",
            _request_timeout=(5, 120),  # thousands of pods: more than the engine's 10 s bound
        )
        return len(pods.items)

    def _deployment(self, name: str, replicas: int) -> dict[str, Any]:
        labels = {"app": name, LOAD_LABEL: "true"}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": labels}, "spec": self._pod_spec()},
            },
        }

    @staticmethod
    def _pod_spec() -> dict[str, Any]:
        return {
            "nodeSelector": {LOAD_LABEL: "true"},  # never on the lab's workers
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
            "terminationGracePeriodSeconds": 0,
        }

    def churn_forever(self, period: float = 0.5) -> None:
        """Scale one Deployment by +-10 and replace 5 bare pods, every `period` seconds."""
        core, apps = self.cluster.core, self.cluster.apps
        k = 0
        while not self.stop.wait(period):  # pacing the background load, not a wait on state
            k += 1
            ns, name = self.deployments[k % len(self.deployments)]
            try:
                replicas = self.per_deploy + (10 if k % 2 else -10)
                apps.patch_namespaced_deployment_scale(name, ns, {"spec": {"replicas": replicas}})
                self.ops["scaled"] += 1
                for j in range(5):
                    core.create_namespaced_pod(
                        CHURN_NS,
                        {
                            "metadata": {
                                "name": f"churn-{k}-{j}",
                                "labels": {LOAD_LABEL: "true", "churn": "true"},
                            },
                            "spec": self._pod_spec(),
                        },
                    )
                    self.ops["created"] += 1
                if k > 2:
                    for j in range(5):
                        core.delete_namespaced_pod(f"churn-{k - 2}-{j}", CHURN_NS)
                        self.ops["deleted"] += 1
            except Exception as exc:  # counted, never fatal: the lab's verdicts are the test
                self.ops["errors"] += 1
                log(f"churn: {type(exc).__name__}: {str(exc)[:200]}")

    def start_churn(self) -> None:
        self.thread = threading.Thread(target=self.churn_forever, daemon=True)
        self.thread.start()

    def stop_churn(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=30)


def median(xs: list[Any]) -> float | None:
    vals = [x for x in xs if isinstance(x, int | float)]
    return round(statistics.median(vals), 3) if vals else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3, help="runs of each experiment per phase")
    ap.add_argument("--out", type=Path, default=None, help="write every figure as JSON")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)

    from pytest_desched import DeschedSession, build_config

    facts = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    report: dict[str, Any] = {**facts, "nodes": args.nodes, "pods": args.pods}
    try:
        with DeschedSession(build_config({"--desched-provider": "embedded"}), report=log) as s:
            log("quiet phase")
            report["quiet"] = run_phase(s, "quiet", args.runs)
            load = Load(s.cluster, args.nodes, args.pods)
            load.create()
            load.start_churn()
            try:
                log("loaded phase (churn on)")
                report["loaded"] = run_phase(s, "loaded", args.runs)
            finally:
                load.stop_churn()
            report["churn_ops"] = dict(load.ops)
            report["load_pods_running_at_end"] = load.running()
    except KeyboardInterrupt:
        log("interrupted: everything was torn down")
        return 130

    same = True
    rows = []
    extra: dict[str, list[int]] = {}
    for name in EXPERIMENTS:
        q, lo = report["quiet"][name], report["loaded"][name]
        ref = compared(q["fates"][0])
        equal = all(compared(f) == ref for f in q["fates"] + lo["fates"])
        same &= equal
        extra[name] = [len(f["during_round"]) for f in q["fates"] + lo["fates"]]
        rows.append(
            f"| {name}[{VARIANT}] | {q['fates'][0]['outcome']} / {q['fates'][0]['deciding_layer']} "
            f"| {lo['fates'][0]['outcome']} / {lo['fates'][0]['deciding_layer']} "
            f"| {'yes' if equal else '**NO**'} | {median(q['round_s'])} | {median(lo['round_s'])} "
            f"| {median(q['process_s'])} | {median(lo['process_s'])} |"
        )
    report["identical"] = same
    print(f"command: {facts['command']}")
    m = facts["machine"]
    print(
        f"machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['mem_gib']} GiB, Linux {m['kernel']}, "
        f"Python {m['python']}, load {m['load_avg_at_start']} at start; {report['date']}"
    )
    print(
        f"load: {args.nodes} kwok nodes, {args.pods} pods in Deployments + churn "
        f"{report['churn_ops']}; {report['load_pods_running_at_end']} load pods Running at end"
    )
    print(
        "| experiment | quiet outcome / layer | loaded outcome / layer | verdicts and fates "
        "identical | round quiet (s) | round loaded (s) | descheduler process quiet (s) | "
        "process loaded (s) |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(
        "decisions about pods created during the round (the replacement), per run, quiet then "
        f"loaded (not compared: a longer cycle can list the replacement it caused): {extra}"
    )
    if not same:
        for name in EXPERIMENTS:
            print(name, json.dumps(report["quiet"][name]["fates"]), file=sys.stderr)
            print(name, json.dumps(report["loaded"][name]["fates"]), file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
