#!/usr/bin/env python3
"""The plain-script baseline: bench/plain_runbook.sh, fed from the plugin's own sources.

`run_plain_script(workdir)` writes the script's inputs from the same Python the plugin
runs (the provider's `node_manifest`, `Lab.deployment_manifest`, the PDB `Lab.create_pdb`
sends, and the helm values `Release` renders for the first install and for the
`pdb-lister-workaround` policy), runs `bash bench/plain_runbook.sh` with the toolchain's
binaries, and returns its wall and CPU time, the checks it passed and its per-step timings.

    python bench/plain_baseline.py [--runs 3] [--workdir DIR] [--json FILE]

CPU time is the children's user+sys (`RUSAGE_CHILDREN`) across the run. kwokctl's control
plane runs as daemons that outlive kwokctl, so this process becomes a child subreaper
(as the embedded provider does): the components are reparented here, reaped here once the
script's `kwokctl delete cluster` stopped them, and so counted too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the checkout's package, also when it is not installed

SCRIPT = REPO / "bench" / "plain_runbook.sh"
WORKAROUND = "pdb-lister-workaround"
TIMING_RE = re.compile(r"^\[timing\] (\S+) ([0-9.]+)s \(at ([0-9.]+)s\)$")
CHECK_RE = re.compile(r"^\[check\] ok (\S+)$")
FAILED_RE = re.compile(r"^\[check\] FAILED (\S+): ")
TOOLS = (
    "kwokctl",
    "kubectl",
    "helm",
    "descheduler",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "etcd",
)


class _Recorder:
    """Stands in for the API clients and captures the body a Lab method sends."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        def capture(*args: Any, **kwargs: Any) -> None:
            self.bodies.append(args[-1])

        return capture


class _HelmOnly:
    """The one thing `Release.show_values` needs from a cluster: `helm show values`."""

    def __init__(self, helm: Path, home: Path) -> None:
        self.helm_path, self.home = helm, home

    def helm(self, *args: str, check: bool = True, timeout: float = 300):
        from pytest_desched.proc import helm_env, run

        return run(
            [str(self.helm_path), *args], env=helm_env(self.home), check=check, timeout=timeout
        )


def prepare_inputs(
    workdir: Path, toolchain: Any, cluster_name: str, workers: int = 3, replicas: int = 3
) -> dict[str, str]:
    """Write the script's inputs into workdir/inputs; returns the script's environment."""
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.descheduler.chart_source import obtain_chart
    from pytest_desched.experiments.framework import lab_policy
    from pytest_desched.lab import POOL_LABEL, Lab
    from pytest_desched.lab.inputs import POOL_VALUE
    from pytest_desched.providers.embedded.cluster import NodeSpec, node_manifest
    from pytest_desched.tools.resources import manifest_path

    versions = toolchain.versions
    inputs = workdir / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)

    # The nodes, named and zoned as EmbeddedProvider.start names them.
    names = [f"{cluster_name[-4:]}-worker-{i}" for i in range(1, workers + 1)]
    nodes = [node_manifest(n, f"zone-{'abc'[i % 3]}", NodeSpec()) for i, n in enumerate(names)]
    (inputs / "nodes.yaml").write_text(yaml.safe_dump_all(nodes, sort_keys=False))

    # The lab's namespace, the runbook's Deployment and PDB, as the experiments' Lab creates them.
    api = _Recorder()
    cluster = type("C", (), {"policy": api, "apps": api, "core": api})()
    lab = Lab(cluster, "descheduler-lab", replicas=replicas, image=versions.workload_image)  # type: ignore[arg-type]
    lab.create_namespace()  # the namespace as the lab makes it (its labels)
    namespace = {"apiVersion": "v1", "kind": "Namespace", **api.bodies[-1]}
    (inputs / "namespace.yaml").write_text(yaml.safe_dump(namespace, sort_keys=False))
    (inputs / "deployment.yaml").write_text(
        yaml.safe_dump(lab.deployment_manifest(), sort_keys=False)
    )
    lab.create_pdb(min_available=2)  # arrange_violation's; the pdb experiment patches it
    (inputs / "pdb.yaml").write_text(yaml.safe_dump(api.bodies[-1], sort_keys=False))

    # The helm values Release passes: the lab's cmdOptions (its `--set` flags, as a file),
    # then for the workaround policy its two files, `deschedulerPolicy: null` (helm drops the
    # chart's own policy map) and the policy (the --set suspend / dry-run flags are the
    # script's own).
    from pytest_desched.descheduler.chart import LAB_CMD_OPTIONS

    chart = obtain_chart(toolchain, versions, report=lambda _msg: None)
    rel = Release(
        _HelmOnly(toolchain.path("helm"), workdir / "helm"),  # type: ignore[arg-type]
        chart,
        versions,
        workdir / "release",
        report=lambda _msg: None,
    )
    rel.workdir.mkdir(parents=True, exist_ok=True)
    rel.show_values()
    (inputs / "values-first-install.yaml").write_text(
        yaml.safe_dump({"cmdOptions": dict(LAB_CMD_OPTIONS)}, sort_keys=False)
    )
    with rel._values_file(lab_policy(WORKAROUND)) as files:
        null_policy, policy = files[-2:]
        shutil.copyfile(null_policy, inputs / "values-null-policy.yaml")
        shutil.copyfile(policy, inputs / "values-workaround.yaml")

    paths = toolchain.ensure(list(TOOLS))
    env = {t.upper().replace("-", "_"): str(p) for t, p in paths.items()}
    env.update(
        CHART=str(chart.path),
        STAGES=str(manifest_path("kwok-stages.yaml")),
        AUDIT_POLICY=str(manifest_path("audit-policy.yaml")),
        CLUSTER_NAME=cluster_name,
        WORKERS=" ".join(names),
        LAB_NAMESPACE=lab.namespace,
        APP=lab.app,
        REPLICAS=str(replicas),
        RELEASE=rel.name,
        POOL_LABEL=POOL_LABEL,
        POOL_VALUE=POOL_VALUE,
        # the embedded provider's lock around `kwokctl create cluster` (port picking)
        CREATE_LOCK=str(toolchain.cache_dir / "clusters" / "create.lock"),
    )
    return env


def _adopted_zombies() -> list[int]:
    """Exited processes whose parent is this one (kwokctl's components, adopted)."""
    me, found = os.getpid(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] == "Z" and int(fields[1]) == me:
                    found.append(int(d.name))
    return found


def _processes_naming(path: Path) -> list[int]:
    needle, found = str(path).encode(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
    return found


def parse_stderr(text: str) -> tuple[list[str], list[dict[str, Any]], str | None]:
    checks, steps, failed = [], [], None
    for line in text.splitlines():
        if m := CHECK_RE.match(line):
            checks.append(m.group(1))
        elif m := TIMING_RE.match(line):
            steps.append({"step": m.group(1), "s": float(m.group(2)), "at_s": float(m.group(3))})
        elif m := FAILED_RE.match(line):
            failed = line
    return checks, steps, failed


def run_plain_script(
    workdir: Path,
    toolchain: Any = None,
    timeout: float = 900,
    teardown: str = "pods-first",
) -> dict[str, Any]:
    """Prepare the inputs, run bench/plain_runbook.sh once, and time it.

    `teardown`: "pods-first" (default: the Deployment is deleted with its pods first, as the
    plugin's Lab.teardown does; the namespace then goes in one pass: the script's fastest
    correct form, the baseline run_bench.py compares with) or "namespace" (the lab goes with
    `kubectl delete namespace --wait` alone; the namespace controller needs two passes).

    Returns {"wall_s", "cpu_s", "ok", "checks", "steps", "stderr_tail", ...}. The script
    deletes its cluster on any exit; on Ctrl-C or SIGTERM here its process group gets
    SIGTERM and it is waited for, so the cluster is gone before KeyboardInterrupt propagates.
    """
    from pytest_desched.providers.embedded.cluster import become_subreaper
    from pytest_desched.tools.toolchain import Toolchain

    toolchain = toolchain or Toolchain()
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    cluster_name = f"plain-{os.getpid()}-{uuid.uuid4().hex[:4]}"
    if teardown not in ("namespace", "pods-first"):
        raise ValueError(f"teardown must be 'namespace' or 'pods-first', not {teardown!r}")
    env = dict(os.environ, **prepare_inputs(workdir, toolchain, cluster_name), TEARDOWN=teardown)
    become_subreaper()  # kwokctl's daemons are counted (and reaped) here
    stderr_path = workdir / "plain_runbook.stderr"
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen(
            ["bash", str(SCRIPT), str(workdir)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            start_new_session=True,  # a terminal's Ctrl-C reaches us; we forward it below
        )
        try:
            rc = proc.wait(timeout=timeout)
        except BaseException:  # Ctrl-C, SIGTERM, or the timeout: the script's trap cleans up
            # SIGTERM, not SIGINT: a shell started in the background ignores SIGINT (and
            # cannot trap it); TERM ends the running kubectl or descheduler and the script
            # exits through its trap, which deletes the cluster.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
        finally:
            for pid in _adopted_zombies():
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    text = stderr_path.read_text(errors="replace")
    checks, steps, failed = parse_stderr(text)
    leftovers = _processes_naming(workdir / "kwok")
    return {
        "teardown": teardown,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "ok": rc == 0 and not leftovers,
        "exit_code": rc,
        "checks": checks,
        "failed_check": failed,
        "steps": steps,
        "leftover_pids": leftovers,
        "stderr_tail": "\n".join(text.splitlines()[-40:]),
        "stderr_path": str(stderr_path),
    }


def _stats(values: list[float]) -> str:
    if not values:
        return "n=0"
    return (
        f"min {min(values):.2f}  median {statistics.median(values):.2f}  max {max(values):.2f}"
        f"  (n={len(values)})"
    )


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None, help="keep each run's files here")
    ap.add_argument("--json", type=Path, default=None, help="write every run's result here")
    ap.add_argument(
        "--teardown",
        choices=("pods-first", "namespace"),
        default="pods-first",
        help="lab teardown: `kubectl delete namespace --wait` only, or the Deployment first",
    )
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)  # unwinds like Ctrl-C: the script cleans up

    from pytest_desched.tools.toolchain import Toolchain

    toolchain = Toolchain()
    toolchain.ensure(list(TOOLS))
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="desched-plain-")
        base = Path(tmp.name)
    else:
        base = args.workdir.resolve()
    results = []
    try:
        for i in range(1, args.runs + 1):
            res = run_plain_script(base / f"run{i}", toolchain, teardown=args.teardown)
            results.append(res)
            mark = "ok" if res["ok"] else f"FAILED (exit {res['exit_code']}): {res['failed_check']}"
            print(
                f"run {i}: wall {res['wall_s']:.2f}s cpu {res['cpu_s']:.2f}s, "
                f"{len(res['checks'])} checks passed, {mark}",
                file=sys.stderr,
                flush=True,
            )
            if not res["ok"]:
                print(res["stderr_tail"], file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted; the script deleted its cluster", file=sys.stderr)
        return 130
    finally:
        if tmp is not None:
            tmp.cleanup()
    good = [r for r in results if r["ok"]]
    print(f"plain script wall (s): {_stats([r['wall_s'] for r in good])}")
    print(f"plain script cpu  (s): {_stats([r['cpu_s'] for r in good])}")
    names: list[str] = []
    for r in good:
        names += [s["step"] for s in r["steps"] if s["step"] not in names]
    for name in names:
        vals = [sum(s["s"] for s in r["steps"] if s["step"] == name) for r in good]
        print(f"  {name:34s} {_stats(vals)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0 if results and len(good) == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
