"""What each provider can do, asked by capability: the one table and one message per rule.

Ground floor: the front ends (config, session, canary, replay) ask it before a cluster
exists, so it knows providers by name only here; each provider class carries its row
(`Provider.capabilities`), and a cluster its provider's (`Cluster.capabilities`). A fourth
provider adds one row, not a comparison in every front end.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CAPABILITIES",
    "KUBERNETES_METRICS",
    "METRICS_SOURCES",
    "MIRROR_BINARY",
    "MIRROR_JOBS",
    "PROMETHEUS",
    "Capabilities",
    "capabilities_of",
    "metrics_sources_refusal",
]

# The descheduler's metrics sources (its `metricsProviders[].source` values, v0.36.0
# pkg/api/types.go): what a policy on actual utilization reads.
KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS = "Prometheus"
METRICS_SOURCES = (KUBERNETES_METRICS, PROMETHEUS)

# The forms of the dry-run mirror probe (Capabilities.mirror_probe).
MIRROR_BINARY = "binary"
MIRROR_JOBS = "jobs"


@dataclass(frozen=True)
class Capabilities:
    """One provider's abilities; each rule that depends on one asks here."""

    provider: str
    # Round pods run a locally built descheduler binary (the embedded stand-in kubelet), so a
    # version with no published image, or a long-running probe process, can run.
    runs_local_binary: bool
    # A kubelet runs round pods from images (an image candidate can run; a local build cannot).
    loads_images: bool
    # The API server's audit log is readable from the test process.
    audit_log: bool
    # Faults can be injected: the engine owns the cluster's processes.
    faults: bool
    # The cluster is the run's own: started, and deleted or left to the next run's reaper.
    discardable: bool
    # Someone else's cluster: policies held to the lab, one experiment at a time, never deleted.
    shared: bool = False
    # A replay snapshot can be restored into its etcd (a fresh cluster the engine runs).
    restores_etcd: bool = False
    # A cluster whose cleanup was abandoned is deleted by the next run's reaper.
    reaps_leftovers: bool = False
    # The user may name a cluster of its own to run on (--desched-kind-cluster).
    adopts_named_cluster: bool = False
    # The engine builds the cluster's Kubernetes, so --desched-kubernetes can choose it.
    chooses_kubernetes: bool = False
    # Lab pods run on kwok's simulated nodes: a pod's status is what the API holds, so a lab
    # can write a container's restarts into it. A real kubelet owns its pods' status and
    # overwrites such a write (a failure must then be a real one: Lab.fail_pod).
    simulated_pods: bool = False
    # It can stop a pod's container on its node (kind: crictl in the node's container), so
    # the node's own kubelet restarts it: a lab's restart counts are then real ones
    # (Lab.set_restarts, Cluster.restart_container).
    restarts_containers: bool = False

    def kubernetes_refusal(self, version: str) -> str | None:
        """Why `--desched-kubernetes version` cannot apply here; None if the cluster is built at it."""
        if self.chooses_kubernetes:
            return None
        return (
            f"--desched-kubernetes {version}: the {self.provider} provider's cluster is not built "
            "by this run, so its Kubernetes is what it is; drop the option (the evidence records "
            "the server's version) or use --desched-provider embedded or kind"
        )

    # The metrics sources it can start with the cluster (METRICS_SOURCES), for policies on
    # actual utilization: the embedded cluster runs metrics-server on kwok's emulated kubelet.
    metrics_sources: tuple[str, ...] = ()

    def metrics_refusal(self, source: str) -> str | None:
        """Why `source` cannot be started with this provider's cluster; None if it can."""
        if source in self.metrics_sources:
            return None
        serves = ", ".join(self.metrics_sources) or "none"
        return (
            f"metrics source {source}: the {self.provider} provider cannot start it with its "
            f"cluster (it serves: {serves}); use --desched-provider embedded"
        )

    def image_refusal(self, what: str) -> str | None:
        """Why an image (`what`: the candidate or image named) cannot run here; None if it can."""
        if self.loads_images:
            return None
        return (
            f"{what}: the {self.provider} provider runs no images (its stand-in kubelet runs "
            "locally built binaries); use --desched-provider kind or existing, or give the "
            "candidate as version:, source: or binary:"
        )

    def local_build_refusal(self, what: str) -> str | None:
        """Why a build with no published image (`what`) cannot run here; None if it can."""
        if self.runs_local_binary:
            return None
        return (
            f"{what}: a local build has no published image and the {self.provider} provider "
            "runs round pods from images; use --desched-provider embedded (it runs the built "
            "binary), or push an image and pass --desched-candidate image:REPOSITORY:TAG"
        )

    def candidate_refusal(self, what: str, is_image: bool, has_published_image: bool) -> str | None:
        """The one rule for where a candidate runs: an image needs a kubelet that runs images,
        a local build a provider that runs the binary. None: it runs here."""
        if is_image:
            return self.image_refusal(what)
        return None if has_published_image else self.local_build_refusal(what)

    @property
    def mirror_probe(self) -> str | None:
        """How descheduler#1917's proof (fidelity/mirror_probe.py) runs its one-shot dry runs:
        MIRROR_BINARY (the local binary beside the cluster, as the stand-in kubelet runs it),
        MIRROR_JOBS (Jobs from the suspended CronJob, run by the kubelet from the image), None:
        not here."""
        if self.runs_local_binary:
            return MIRROR_BINARY
        return MIRROR_JOBS if self.loads_images else None

    def restarts_refusal(self, what: str) -> str | None:
        """Why `what` (container restarts a lab makes) cannot be made here; None if they can:
        written into a simulated pod's status, or made for real by the node's kubelet."""
        if self.simulated_pods or self.restarts_containers:
            return None
        return (
            f"{what}: the {self.provider} provider's kubelets own their pods' status (a written "
            "restart count is overwritten) and the run cannot reach its nodes to stop a "
            "container; use --desched-provider embedded (kwok's simulated nodes) or kind"
        )

    @property
    def local_binary_gap(self) -> str:
        """What a record says where a check needs a local binary this provider does not run."""
        return f"the {self.provider} provider runs round pods from images"


CAPABILITIES: dict[str, Capabilities] = {
    "embedded": Capabilities(
        "embedded",
        runs_local_binary=True,
        loads_images=False,
        audit_log=True,
        faults=True,
        discardable=True,
        restores_etcd=True,
        reaps_leftovers=True,
        chooses_kubernetes=True,
        simulated_pods=True,
        metrics_sources=(KUBERNETES_METRICS, PROMETHEUS),
    ),
    "kind": Capabilities(
        "kind",
        runs_local_binary=False,
        loads_images=True,
        audit_log=False,
        faults=False,
        discardable=True,
        adopts_named_cluster=True,
        chooses_kubernetes=True,
        restarts_containers=True,
    ),
    "existing": Capabilities(
        "existing",
        runs_local_binary=False,
        loads_images=True,
        audit_log=False,
        faults=False,
        discardable=False,
        shared=True,
    ),
}


def capabilities_of(provider: str) -> Capabilities | None:
    """The row of a provider named by the user; None for `auto` (known once it is chosen)."""
    return CAPABILITIES.get(provider)


def metrics_sources_refusal(sources: tuple[str, ...], caps: Capabilities | None) -> str | None:
    """Why a configuration's metrics sources cannot run (an unknown name, or one the provider
    cannot start); None when they can, or the provider is not chosen yet (`auto`)."""
    for source in sources:
        if source not in METRICS_SOURCES:
            return f"metrics source {source!r}: unknown; use one of {', '.join(METRICS_SOURCES)}"
        why = caps.metrics_refusal(source) if caps else None
        if why:
            return why
    return None
