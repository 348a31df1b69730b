"""Someone else's cluster: used only through an explicit context, only on opted-in nodes.

Experiments label, cordon and drain nodes, so nothing is implied: the context must be
named, the nodes must carry `NODE_OPT_IN_LABEL=true`, and `stop` never deletes anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched import scratch
from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.inputs_safe import load_yaml_file
from pytest_desched.kube import check_server_url, node_annotations, node_labels, node_name
from pytest_desched.providers.base import NODE_OPT_IN_LABEL, Cluster, Provider, ProviderError

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.tools.toolchain import Toolchain

ALLOW_OPTION = "--desched-allow-existing"
CONTEXT_OPTION = "--desched-existing-context"
KUBECONFIG_OPTION = "--desched-existing-kubeconfig"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
MIN_OPTED_IN = 2
_MAX_LISTED = 20


def close_clients(cluster: Cluster) -> None:
    """Drop the cached API clients (and their connection pools) without touching the cluster."""
    api = cluster.__dict__.pop("api_client", None)
    for attr in ("core", "apps", "batch", "policy", "rbac"):
        cluster.__dict__.pop(attr, None)
    if api is not None:
        api.close()


# -- guards (pure: unit-tested without a cluster) --------------------------------------
def resolve_kubeconfig(kubeconfig: Path | None, environ: Mapping[str, str]) -> Path:
    """The explicit kubeconfig, else the single file in $KUBECONFIG; never ~/.kube/config."""
    if kubeconfig is not None:
        path = Path(kubeconfig).expanduser()
    else:
        parts = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p.strip()]
        if not parts:
            raise ProviderError(
                f"no kubeconfig for the existing cluster: pass {KUBECONFIG_OPTION}=PATH or set "
                "KUBECONFIG (~/.kube/config is never used implicitly)"
            )
        if len(parts) > 1:
            raise ProviderError(
                f"KUBECONFIG lists {len(parts)} files; pass the one to use with "
                f"{KUBECONFIG_OPTION}=PATH"
            )
        path = Path(parts[0]).expanduser()
    if not path.is_file():
        raise ProviderError(
            f"kubeconfig {path} does not exist; pass an existing file with {KUBECONFIG_OPTION}=PATH"
        )
    return path


def check_context(
    kubeconfig: Mapping[str, Any], context: str | None, option: str = CONTEXT_OPTION
) -> dict[str, Any]:
    """Return the named context's entry; refuse a missing name even if a current-context exists."""
    entries = [c for c in kubeconfig.get("contexts") or [] if isinstance(c, Mapping)]
    names = [str(c.get("name")) for c in entries]
    known = ", ".join(names) or "none"
    if not context:
        current = kubeconfig.get("current-context")
        hint = f"; current-context {current!r} is never used implicitly" if current else ""
        raise ProviderError(
            f"an existing cluster needs an explicit context: pass {option}=NAME "
            f"(contexts in the kubeconfig: {known}{hint})"
        )
    for entry in entries:
        if entry.get("name") == context:
            return dict(entry)
    raise ProviderError(
        f"context {context!r} is not in the kubeconfig (contexts: {known}); "
        f"pass one of them with {option}=NAME"
    )


def opted_in_nodes(nodes: Iterable[Any]) -> list[str]:
    """Names of the nodes whose owner allowed experiments on them (label value exactly "true")."""
    return sorted(node_name(n) for n in nodes if node_labels(n).get(NODE_OPT_IN_LABEL) == "true")


def require_opted_in(nodes: list[Any], context: str, minimum: int = MIN_OPTED_IN) -> list[str]:
    """The opted-in node names, or a ProviderError listing every node and the label commands."""
    chosen = opted_in_nodes(nodes)
    if len(chosen) >= minimum:
        return chosen
    lines = [
        f"only {len(chosen)} node(s) on context {context!r} carry {NODE_OPT_IN_LABEL}=true; "
        f"experiments label, cordon and drain nodes, so at least {minimum} must opt in.",
        "nodes:",
    ]
    for n in nodes[:_MAX_LISTED]:
        labels = node_labels(n)
        role = " (control-plane)" if CONTROL_PLANE_LABEL in labels else ""
        lines.append(
            f"  {node_name(n)}{role}: {NODE_OPT_IN_LABEL}={labels.get(NODE_OPT_IN_LABEL, '<unset>')}"
        )
    if len(nodes) > _MAX_LISTED:
        lines.append(f"  ... and {len(nodes) - _MAX_LISTED} more")
    if not nodes:
        lines.append("  (none)")
    candidates = [n for n in nodes if node_name(n) not in chosen]
    workers = [n for n in candidates if CONTROL_PLANE_LABEL not in node_labels(n)]
    suggest = (workers or candidates)[:_MAX_LISTED]
    if suggest:
        lines.append(f"fix: opt in at least {minimum - len(chosen)} more node(s), e.g.")
        lines += [
            f"  kubectl label node {node_name(n)} {NODE_OPT_IN_LABEL}=true --context {context}"
            for n in suggest
        ]
    raise ProviderError("\n".join(lines))


def opted_in_context(
    kubeconfig: Path | None,
    context: str | None,
    allow: bool,
    what: str,
    context_option: str = CONTEXT_OPTION,
) -> tuple[Path, str]:
    """The kubeconfig and context of a cluster that is not ours, only when explicitly opted in.

    The one opt-in rule for every write to someone else's cluster (the existing provider, the
    host replay): `ALLOW_OPTION` given, a context named (never the current one), the
    kubeconfig explicit or the single $KUBECONFIG file (never ~/.kube/config). `what` says
    what the writes do, for the refusal.
    """
    if not allow:
        raise ProviderError(
            f"{what}; pass {ALLOW_OPTION} together with {context_option}=NAME to allow it"
        )
    path = resolve_kubeconfig(kubeconfig, os.environ)
    name = str(check_context(_load_kubeconfig(path), context, context_option)["name"])
    return path, name


def _load_kubeconfig(path: Path) -> dict[str, Any]:
    data = load_yaml_file(path, what="kubeconfig")  # bounded; InputError is exit 2
    if not isinstance(data, dict):
        raise ProviderError(f"{path} is not a kubeconfig (expected a YAML mapping)")
    return data


class ExistingProvider(Provider):
    """Hands out a `Cluster` for a named context of a kubeconfig; creates and deletes nothing."""

    name = "existing"
    capabilities = CAPABILITIES["existing"]

    def __init__(
        self, kubeconfig: Path | None, context: str | None, toolchain: Toolchain, allow: bool
    ) -> None:
        self.kubeconfig = kubeconfig
        self.context = context
        self.toolchain = toolchain
        self.allow = allow
        self.cluster: Cluster | None = None

    def start(self) -> Cluster:
        path, context = opted_in_context(
            self.kubeconfig,
            self.context,
            self.allow,
            "experiments on an existing cluster label and drain its nodes",
        )
        cluster = Cluster(
            name=context,
            provider="existing",
            kubeconfig=path,
            toolchain=self.toolchain,
            context=context,
            created=False,
        )
        self.cluster = cluster
        server = _server_of(_load_kubeconfig(path), context)
        if server is not None:  # a bad server URL is input (exit 2), not a cluster's fault (3)
            check_server_url(server, f"context {context!r} of {path}")
        try:
            nodes = list(cluster.core.list_node().items)
        except Exception as exc:
            raise ProviderError(
                f"cannot list nodes with context {context!r} of {path}: {exc}"
            ) from exc
        cluster.workers = require_opted_in(nodes, context)
        # Not our cluster: every policy applied outside dry-run is held to the lab namespace
        # and the opted-in nodes (descheduler.policy.scope: scope_policy / check_policy_scope).
        cluster.lab_node_selector = f"{NODE_OPT_IN_LABEL}=true"
        cluster.info.update(nodes_total=len(nodes), opted_in=list(cluster.workers))
        if cluster.workers and all(
            _is_kwok_node(n) for n in nodes if node_name(n) in cluster.workers
        ):
            # A kwok cluster (e.g. another run's embedded one): its own supervised stand-in
            # kubelet runs round pods, as a kubelet would; rounds read them back through the API.
            cluster.info["job_pods_run_by"] = "the embedded cluster's stand-in kubelet"
        cluster.workdir = scratch.make("desched-existing-")
        return cluster

    def stop(self) -> None:
        """Close API clients only: the cluster and its nodes belong to someone else."""
        if self.cluster is not None:
            close_clients(self.cluster)
            if self.cluster.workdir is not None:
                scratch.remove(self.cluster.workdir)

    def resume_hint(self) -> str:
        where = self.cluster.kubeconfig if self.cluster else (self.kubeconfig or "$KUBECONFIG")
        return (
            f"existing cluster, context {self.context!r} of {where}; nothing was created or "
            f"deleted. Opted-in nodes: KUBECONFIG={where} kubectl --context {self.context} "
            f"get nodes -l {NODE_OPT_IN_LABEL}=true"
        )


def _server_of(doc: Mapping[str, Any], context: str) -> str | None:
    """The server URL of `context`'s cluster in a kubeconfig, when it names one."""

    def named(section: str, name: object) -> Mapping[str, Any]:
        for item in doc.get(section) or []:
            if isinstance(item, dict) and item.get("name") == name:
                body = item.get(section[:-1])
                return body if isinstance(body, dict) else {}
        return {}

    server = named("clusters", named("contexts", context).get("cluster")).get("server")
    return None if server is None else str(server)


def _is_kwok_node(node: Any) -> bool:
    return node_annotations(node).get("kwok.x-k8s.io/node") == "fake"


def delete_kept(name: str, folder: Path, created: bool, toolchain: Toolchain) -> str:
    """A `desched up` on an existing cluster kept nothing of its own: the cluster is the
    user's and stays, with the release `up` installed."""
    return (
        f"existing cluster {name}: yours, so left as it is (its release stays: helm uninstall "
        "descheduler -n kube-system)"
    )


def from_config(config: DeschedConfig, toolchain: Toolchain) -> ExistingProvider:
    """The registry's constructor (see providers.REGISTRY)."""
    return ExistingProvider(
        config.existing_kubeconfig, config.existing_context, toolchain, config.allow_existing
    )
