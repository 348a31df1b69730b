"""`desched replay SNAPSHOT --host CONTEXT`: an incident replayed on a host Kubernetes cluster.

Order (docs/replay-at-scale.md, "the replay on an existing cluster's control plane"):

1. before any write: the context must be opted in (`providers.existing.opted_in_context`, the
   existing provider's one rule); the inputs are checked as for the embedded replay (without
   this machine's capacity refusal: the host holds it); the host is read (namespaces, nodes,
   cluster-scoped objects, its own descheduler and that one's policy ConfigMap) and the replay
   is refused if the host's descheduler could evict in the replay's namespaces
   (`host/policy.py`), or if the snapshot clashes with the host (`host/plan.py`);
2. `HostProvider.start`: the release's namespace and kwok (managing this run's nodes only);
3. the embedded replay's own round loop (`HostReplay`, a `Replay` played on the host's session): the chart installed as there (its
   own namespace and release name, suspended CronJob, rounds as Jobs), the policy narrowed to
   the fake nodes and the replay's namespaces, the rewritten snapshot restored through the
   API (`restore(method="api", runner=False)`), the same fate ledger;
4. teardown in reverse order: the release (the session), then `HostProvider.stop`: the
   replay's namespaces, fake nodes, cluster-scoped objects, kwok, each by this run's label
   (`host/teardown.py`); then the host's own namespaces and nodes are compared with what they
   were before, by UID.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException

from pytest_desched import scratch
from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.config import build_config
from pytest_desched.errors import ConfigError, ProviderError
from pytest_desched.kube import WaitTimeout, wait_for
from pytest_desched.log import Reporter, say
from pytest_desched.providers.base import Cluster, Provider
from pytest_desched.providers.existing import close_clients, opted_in_context
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.snapshot import Reads, find_descheduler, read_policy
from pytest_desched.replay.host.kwok import kwok_image as default_kwok_image
from pytest_desched.replay.host.kwok import kwok_namespace, kwok_objects
from pytest_desched.replay.host.plan import (
    ROLE_LABEL,
    RUN_LABEL,
    HostPlan,
    HostState,
    new_run_id,
    plan_host,
)
from pytest_desched.replay.host.policy import host_descheduler_problems, narrow_policy
from pytest_desched.replay.host.teardown import Teardown, teardown
from pytest_desched.replay.objects import collection_path, object_path, path_of
from pytest_desched.replay.run import Replay, ReplayOptions, ReplayResult, announced_inputs
from pytest_desched.tools.kind_runtime import pinned_kwok_stages

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.tools.toolchain import Toolchain

HOST_OPTION = "--host"
WHAT = "a host replay creates namespaces, nodes and a descheduler release on that cluster"


def release_namespace(run_id: str) -> str:
    return f"desched-host-replay-{run_id}"


# -- reading the host (no write) -------------------------------------------------------------
def fingerprint(api: Any) -> dict[str, dict[str, str]]:
    """The host's own namespaces and nodes, name -> UID: this replay's excluded, and those
    already being deleted (a Terminating namespace goes on its own, whatever the replay does;
    on a shared host, another user's teardown)."""
    out: dict[str, dict[str, str]] = {}
    for what, path in (
        ("namespaces", collection_path("Namespace")),
        ("nodes", collection_path("Node")),
    ):
        out[what] = {
            o["metadata"]["name"]: o["metadata"]["uid"]
            for o in kubeapi.list_all(api, path)
            if RUN_LABEL not in (o["metadata"].get("labels") or {})
            and not o["metadata"].get("deletionTimestamp")
        }
    return out


def untouched(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> list[str]:
    """Each host namespace or node gone or replaced (another UID) since `before`."""
    return [
        f"{what} {name}: {'gone' if name not in after[what] else 'replaced (new UID)'}"
        for what, names in before.items()
        for name, uid in sorted(names.items())
        if after[what].get(name) != uid
    ]


def read_host(
    api: Any,
) -> tuple[HostState, list[dict[str, Any]], dict[tuple[str, str], str | None], dict[Any, Any]]:
    """(what the host holds, its descheduler workloads, their policy texts, the workloads by
    (namespace, name)); only GETs and LISTs."""
    names = {
        "namespaces": collection_path("Namespace"),
        "nodes": collection_path("Node"),
        "pcs": collection_path("PriorityClass"),
        "scs": collection_path("StorageClass"),
        "pvs": collection_path("PersistentVolume"),
    }
    got = {k: kubeapi.list_all(api, p) for k, p in names.items()}
    state = HostState(
        namespaces={o["metadata"]["name"] for o in got["namespaces"]},
        nodes={o["metadata"]["name"] for o in got["nodes"]},
        priority_classes={o["metadata"]["name"]: o for o in got["pcs"]},
        storage_classes={o["metadata"]["name"]: o for o in got["scs"]},
        persistent_volumes={o["metadata"]["name"] for o in got["pvs"]},
    )
    workloads = [
        {**o, "kind": kind}
        for kind, path in (
            ("Deployment", collection_path("Deployment")),
            ("CronJob", collection_path("CronJob")),
        )
        for o in kubeapi.list_all(api, path)
    ]
    entries = find_descheduler(workloads)
    reads = Reads()
    policies = {(e["namespace"], e["name"]): read_policy(api, e, reads)[0] for e in entries}
    by_id = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in workloads}
    return state, entries, policies, by_id


# -- the provider: the host as a Cluster, kwok in, everything of this run out ----------------
class HostProvider(Provider):
    """The host cluster for one replay: `start` adds kwok, `stop` removes this run's objects."""

    name = "existing"
    capabilities = CAPABILITIES["existing"]

    def __init__(
        self,
        cluster: Cluster,
        plan: HostPlan,
        kwok_image: str,
        kwok_stages: str,
        report: Reporter = say,
        timeout: float = 300,
    ) -> None:
        self.cluster = cluster
        self.plan = plan
        self.kwok_image = kwok_image
        self.kwok_stages = kwok_stages
        self.report = report
        self.timeout = timeout
        self.torn_down: Teardown | None = None

    def start(self) -> Cluster:
        if self.cluster.workers:  # restore() deletes a provider's workers: never a host's
            raise ProviderError("a host replay's cluster must list no workers of its own")
        api = self.cluster.api_client
        run_id = self.plan.run_id
        ns_body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": release_namespace(run_id),
                "labels": {RUN_LABEL: run_id, ROLE_LABEL: "release"},
            },
        }
        kubeapi.request(api, "POST", collection_path("Namespace"), ns_body)
        objs = kwok_objects(run_id, self.kwok_image, self.kwok_stages)
        for body in objs:
            kubeapi.request(api, "POST", path_of(body), body)
        ns = next(b for b in objs if b["kind"] == "Namespace")
        self._wait_kwok(api, ns["metadata"]["name"])
        return self.cluster

    def _wait_kwok(self, api: Any, ns: str) -> None:
        path = object_path("Deployment", ns, "kwok-controller")

        def ready() -> int:
            return int(
                ((kubeapi.get(api, path) or {}).get("status") or {}).get("readyReplicas") or 0
            )

        try:
            wait_for("the host's kwok controller ready", ready, lambda n: n >= 1, self.timeout)
        except WaitTimeout as exc:
            raise ProviderError(
                f"kwok controller {ns}/kwok-controller not ready ({exc}); is the image "
                f"{self.kwok_image} on the host's nodes?"
            ) from None

    def stop(self) -> None:
        """This run's objects, by label, in reverse order; then the API clients."""
        if self.keep:
            self.report(f"host replay run {self.plan.run_id} kept: {self.resume_hint()}")
        else:
            self.torn_down = teardown(
                self.cluster.api_client, self.plan.run_id, self.report, self.timeout
            )
        close_clients(self.cluster)
        if self.cluster.workdir is not None:
            scratch.remove(self.cluster.workdir)

    def resume_hint(self) -> str:
        return (
            f"everything of this run carries {RUN_LABEL}={self.plan.run_id}: "
            f"kubectl --context {self.cluster.context} get ns,nodes -l "
            f"{RUN_LABEL}={self.plan.run_id}"
        )


# -- the replay ----------------------------------------------------------------------------
class HostReplay(Replay):
    """The embedded replay's rounds and ledger, restored through the host's API server with
    no runner node of its own (the host's nodes run the round pods)."""

    def restore(self, cluster: Any, snap: Any, **kw: Any) -> Any:
        return super().restore(cluster, snap, runner=False, **kw)


def replay_on_host(
    snapshot_path: str | Path,
    context: str | None,
    *,
    allow: bool,
    kubeconfig: Path | None = None,
    namespace_prefix: str | None = None,
    kwok_image: str | None = None,
    descheduler: str | None = None,
    policy: Any = None,
    rounds: int = 1,
    log: str | Path | None = None,
    config: DeschedConfig | None = None,
    report: Reporter = say,
    ages: str = "shift",
    round_timeout: float = 300,
    restore_timeout: float = 600,
    client: dict[str, Any] | None = None,
    toolchain: Toolchain | None = None,
    run_id: str | None = None,
) -> ReplayResult:
    """Replay a snapshot on the host behind `context` (see the module docstring)."""
    t0 = time.monotonic()
    path, ctx = opted_in_context(kubeconfig, context, allow, WHAT, HOST_OPTION)
    config = config or build_config({"--desched-provider": "existing"})
    given = "--policy" if policy is not None else ""
    inputs = announced_inputs(config, report) if config.values or config.policy else None
    if policy is None and inputs is not None and inputs.policy is not None:
        policy = inputs.policy
        given = "--policy" if config.policy else "--values"
    options = ReplayOptions(
        descheduler=descheduler,
        policy=policy,
        rounds=rounds,
        log=log,
        ages=ages,
        method="api",
        round_timeout=round_timeout,
        restore_timeout=restore_timeout,
        client=client,
    )
    host_replay = HostReplay(snapshot_path, options, report=report)
    inp = host_replay.check(capacity=False)  # the host holds it, not this machine
    policy_from = f"{given or 'the snapshot'} ({inp.policy.source})"
    report(f"host replay: the policy from {policy_from}")
    run_id = run_id or new_run_id()
    changes: dict[str, Any] = {
        "provider": "existing",
        "release": f"desched-replay-{run_id}",
        "namespace": release_namespace(run_id),
    }
    if inp.candidate:
        changes["candidate"] = inp.candidate
    elif inp.version:
        changes["descheduler_version"] = inp.version
    config = config.with_(**changes)
    if toolchain is None:
        # heavy: the toolchain, kept out of the input checks above
        from pytest_desched.tools.toolchain import Toolchain

        toolchain = Toolchain(cache_dir=config.cache_dir, report=report, helm=config.helm)
    cluster = Cluster(
        name=ctx,
        provider="existing",
        kubeconfig=path,
        toolchain=toolchain,
        context=ctx,
        created=False,
    )
    api = cluster.api_client
    try:
        try:
            state, entries, policies, workloads = read_host(api)
        except ApiException as exc:
            raise ProviderError(
                f"cannot read the host behind context {ctx!r}: {kubeapi.status_reason(exc)}"
            ) from None
        reserved = [release_namespace(run_id), kwok_namespace(run_id)]
        plan = plan_host(inp.snap, state, run_id, namespace_prefix, reserved)
        problems, host_notes = host_descheduler_problems(
            entries, policies, plan.host_namespaces, workloads
        )
        if problems:
            raise ConfigError(
                f"the host runs a descheduler that could act on the replay's pods (never two "
                f"executors on the same pods): {'; '.join(problems[:3])}"
            )
        inp.policy = narrow_policy(inp.policy, plan.namespaces, plan.node_selector)
    except BaseException:  # refused before any write: nothing to undo but the client
        close_clients(cluster)
        raise
    inp.snap = plan.snapshot
    inp.scope = frozenset(plan.namespaces.values())
    cluster.lab_node_selector = plan.node_selector  # apply_policy holds the policy to it
    image = kwok_image or default_kwok_image(toolchain.versions.kwok.version)
    provider = HostProvider(cluster, plan, image, pinned_kwok_stages(toolchain), report)
    # heavy: session and its imports, kept out of the input checks
    from pytest_desched.session import DeschedSession

    session = DeschedSession(
        config,
        report=report,
        provider=provider,
        release_namespace=release_namespace(run_id),
        inputs=inputs,
    )
    cluster.workdir = scratch.make("desched-host-")
    before = fingerprint(api)
    timings = {"inputs_and_host_read": round(time.monotonic() - t0, 3)}
    with session:
        result = host_replay.play(session, inp)
        result.timings = {**timings, **session.timings, **result.timings}
        result.restore.setdefault("deviations", []).extend(plan.deviations)
        result.notes += [f"host: {n}" for n in host_notes]
        result.notes.append(f"policy from {policy_from}")
        result.notes.append(
            f"host replay run {run_id} on context {ctx}: namespaces "
            + ", ".join(f"{k}->{v}" for k, v in sorted(plan.namespaces.items()))
        )
        host_replay.write(session, result)
    after = fingerprint(cluster.api_client)  # a fresh client: the provider closed its own
    changed = untouched(before, after)
    result.host = {
        **plan.to_dict(),
        "context": ctx,
        "teardown": provider.torn_down.to_dict() if provider.torn_down else None,
        "host_untouched": not changed,
        "host_changed": changed,
        "host_counts": {k: len(v) for k, v in before.items()},
    }
    close_clients(cluster)
    result.timings["total"] = round(time.monotonic() - t0, 3)
    if changed:
        raise ProviderError(f"the host's own objects changed during the replay: {changed[:5]}")
    return result
