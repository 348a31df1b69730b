#!/usr/bin/env python3
"""How fast a host replay writes through the API, and how its restore grows (issue 41).

For each size, a generated cluster (`pytest_desched.replay.gen.generator`, seeded) is planned for
the host (`replay.host_plan`: namespaces prefixed, fake nodes, confinement), kwok is started
there (`HostProvider.start`), the snapshot restored through the API exactly as
`desched replay --host` does (`restore(method="api", runner=False)`), and everything torn
down by the run label (`HostProvider.stop`). No descheduler round: this measures the write
path only (the round is the descheduler's own cost, measured in bench/replay_scale.py).

    python bench/host_replay_scale.py --sizes 100x1000,1000x10000 [--out FILE] [--workers N]
        [--kubernetes vX.Y.Z] (the kind host's node image, `make kind-image KIND_KUBERNETES=`)
        [--kubeconfig PATH --context NAME [--kwok-image IMAGE]]
        (a host; default: a kind cluster made here, the kwok image built and loaded)

Figures per size (time.monotonic(), the restore's own phases): nodes (written, then Ready by
kwok), api_objects (namespaces, ServiceAccounts, classes, PVs, PVCs, PDBs), api_pods (pods as
orphans, owners, kwok's Running, startTime patches, the controllers' settle), verify; the
objects written; the write rate over the write phases; the teardown. JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dev.kind_node.kwok_image import build_kwok_image
from pytest_desched.kube import wait_for
from pytest_desched.log import say
from pytest_desched.providers.base import Cluster
from pytest_desched.replay import kubeapi
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.host.plan import new_run_id, plan_host
from pytest_desched.replay.host.replay import HostProvider, fingerprint, read_host
from pytest_desched.replay.rebuild.paced import DEFAULT_WORKERS, Pacer, widen_pool
from pytest_desched.replay.rebuild.restore import restore
from pytest_desched.tools.kind_runtime import pinned_kwok_stages
from pytest_desched.tools.toolchain import Toolchain


def one(
    cluster: Cluster,
    image: str,
    stages: str,
    nodes: int,
    pods: int,
    seed: int,
    workers: int,
    owners_first: bool = False,
) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    snap = generate(seed=seed, nodes=nodes, pods=pods)
    api = cluster.api_client
    before = fingerprint(api)
    state, _, _, _ = read_host(api)
    plan = plan_host(snap, state, new_run_id(), "bench-")
    provider = HostProvider(cluster, plan, image, stages, say, timeout=1800)
    t0 = time.monotonic()
    provider.start()
    kwok_s = time.monotonic() - t0
    try:
        res = restore(
            cluster,
            plan.snapshot,
            method="api",
            runner=False,
            timeout=3600,
            report=say,
            workers=workers,
            owners_first=owners_first,
        )
    finally:
        t1 = time.monotonic()
        provider.stop()
        teardown_s = time.monotonic() - t1
    changes = host_changes(before, fingerprint(cluster.api_client))
    written = sum(v for k, v in res.counts.items() if k not in ("skipped_pods",))
    writing = sum(res.timings.get(k, 0.0) for k in ("nodes", "api_objects", "api_pods"))
    return {
        "nodes": nodes,
        "pods": pods,
        "owners_first": owners_first,
        "restored_pods": res.counts.get("pods"),
        "counts": res.counts,
        "timings_s": res.timings,
        "restore_s": round(sum(res.timings.values()), 1),
        "objects_written": written,
        "write_rate_per_s": round(written / writing, 1) if writing else None,
        "restore_rate_per_s": round(written / sum(res.timings.values()), 1),
        "pace": res.pace,  # the writer's own count, throttles and where the pod phase went
        "kwok_start_s": round(kwok_s, 1),
        "teardown_s": round(teardown_s, 1),
        "verified": res.verified.get("ok"),
        "host_changes": changes,
        "host_untouched": not changes,
        "load_1min_before_after": (round(load_before, 1), round(os.getloadavg()[0], 1)),
    }


def host_changes(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[str]:
    """Each host namespace or node gone, replaced (another UID) or added between two
    `fingerprint`s: empty is the claim "the host is unchanged", and any entry names what moved."""
    out = []
    for what in sorted(before.keys() | after.keys()):
        was, now = before.get(what, {}), after.get(what, {})
        for name in sorted(was.keys() | now.keys()):
            if name not in was:
                out.append(f"{what} {name}: added")
            elif name not in now:
                out.append(f"{what} {name}: gone")
            elif was[name] != now[name]:
                out.append(f"{what} {name}: replaced (new UID)")
    return out


def namespace_state(ns: dict[str, Any] | None) -> str:
    """What a namespace being deleted still waits on: its phase and the conditions that hold
    it (NamespaceContentRemaining, NamespaceFinalizersRemaining, ...), or "gone"."""
    if ns is None:
        return "gone"
    held = [
        f"{c.get('type')}: {c.get('message', '')}".rstrip(": ")
        for c in (ns.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    ]
    phase = (ns.get("status") or {}).get("phase", "?")
    return f"{ns['metadata']['name']} {phase}" + (f" ({'; '.join(held)})" if held else "")


def delete_namespace(api: Any, ns: str, timeout: float = 300) -> None:
    """Delete `ns` and wait until the API no longer has it: a namespace is deleted
    asynchronously (Terminating first), and the replay's fingerprint of the host, taken next,
    must not see it. On timeout, fails with the namespace's last state."""
    kubeapi.request(api, "DELETE", f"/api/v1/namespaces/{ns}")
    wait_for(
        f"namespace {ns} deleted",
        lambda: kubeapi.get_or_none(api, f"/api/v1/namespaces/{ns}"),
        lambda o: o is None,
        timeout,
        describe=namespace_state,
    )


def ceiling(cluster: Cluster, per_step: int = 300) -> list[dict[str, Any]]:
    """The host's own ceiling for small writes: `per_step` ConfigMap creates in a namespace of
    their own at 1, 4, 16 and 32 at once, with the writer's client CPU (what is left of a
    write's cost is the server's). The restore cannot write faster than this. Returns once
    that namespace is gone, so the host is as it was."""
    api = cluster.api_client
    ns = f"desched-bench-ceiling-{os.getpid()}"
    kubeapi.request(
        api,
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
    )
    out = []
    try:
        for workers in (1, 4, 16, 32):
            widen_pool(api, workers)
            pacer = Pacer(workers)
            t0, c0 = time.monotonic(), time.process_time()

            def create(i: int, w: int = workers) -> Any:
                return kubeapi.request(
                    api,
                    "POST",
                    f"/api/v1/namespaces/{ns}/configmaps",
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": f"w{w}-{i}"},
                        "data": {"k": "v" * 200},
                    },
                )

            pacer.map(
                create,
                range(per_step),
                str,
            )
            wall, cpu = time.monotonic() - t0, time.process_time() - c0
            out.append(
                {
                    "workers": workers,
                    "creates_per_s": round(per_step / wall, 1),
                    "client_cpu_ms_per_write": round(cpu / per_step * 1000, 2),
                    "throttled": pacer.stats.throttled,
                    "load": round(os.getloadavg()[0], 1),
                }
            )
            say(f"host bench ceiling: {out[-1]}")
    finally:
        t0 = time.monotonic()
        delete_namespace(api, ns)
        say(f"host bench ceiling: namespace {ns} gone in {time.monotonic() - t0:.1f}s")
    return out


def kind_host(tc: Toolchain, workdir: Path, image: str) -> tuple[Any, Cluster]:
    # heavy: the kind provider, only when no host is given
    from pytest_desched.providers.kind import KindProvider

    prov = KindProvider(tc, workdir, f"desched-hostbench-{os.getpid()}", workers=2)
    cluster = prov.start()
    subprocess.run(
        [str(tc.path("kind")), "load", "docker-image", image, "--name", prov.cluster_name],
        check=True,
        capture_output=True,
    )
    # the host as the replay sees it: no workdir of its own (HostProvider.stop removes one)
    return prov, Cluster(
        name=cluster.name,
        provider="existing",
        kubeconfig=cluster.kubeconfig,
        toolchain=tc,
        context=cluster.context,
        created=False,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="100x1000,1000x10000")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kubeconfig", type=Path, default=None)
    ap.add_argument("--context", default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help="the restore's bound on writes"
    )
    ap.add_argument(
        "--owners-first",
        action="store_true",
        help="owners, then pods naming them, under the admission hold (no adoption)",
    )
    ap.add_argument(
        "--ceiling", action="store_true", help="first the host's ceiling for small writes"
    )
    ap.add_argument(
        "--kubernetes", default=None, help="the kind host's Kubernetes (its node image built)"
    )
    ap.add_argument(
        "--kwok-image", default=None, help="on the host already (default: built here, loaded)"
    )
    args = ap.parse_args()
    tc = Toolchain(report=say, kubernetes_version=args.kubernetes)
    stages = pinned_kwok_stages(tc)
    image = args.kwok_image or build_kwok_image(tc, say)
    prov = None
    if args.context:
        cluster = Cluster(
            name=args.context,
            provider="existing",
            kubeconfig=args.kubeconfig,
            toolchain=tc,
            context=args.context,
            created=False,
        )
    else:
        workdir = Path(tempfile.mkdtemp(prefix="desched-hostbench-"))
        try:
            prov, cluster = kind_host(tc, workdir, image)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
    out: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    out["host_nodes"] = len(fingerprint(cluster.api_client)["nodes"])
    out["runs"] = []
    try:
        if args.ceiling:
            out["ceiling"] = ceiling(cluster)
        for size in args.sizes.split(","):
            n, p = (int(x) for x in size.split("x"))
            say(f"host bench: {n} nodes / {p} pods (load {os.getloadavg()})")
            out["runs"].append(
                one(cluster, image, stages, n, p, args.seed, args.workers, args.owners_first)
            )
            say(json.dumps(out["runs"][-1]))
    finally:
        if prov is not None:
            prov.stop()
            shutil.rmtree(workdir, ignore_errors=True)  # its kind config, kubeconfig, audit log
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
