"""Small helpers over the official client: waiting on the API, never sleeping blindly."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential

from pytest_desched.errors import WaitTimeout

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster

T = TypeVar("T")


def wait_for(
    what: str,
    probe: Callable[[], T],
    done: Callable[[T], bool],
    timeout: float = 60,
    describe: Callable[[T], str] = repr,
    max_interval: float = 1.0,
) -> T:
    """Poll `probe` until `done(result)`; on timeout fail with what was seen last."""
    last: list[Any] = [None]

    def attempt() -> bool:
        last[0] = probe()
        return bool(done(last[0]))

    try:
        for a in Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_exponential(multiplier=0.05, max=max_interval),
            retry=retry_if_result(lambda ok: not ok),
        ):
            with a:
                ok = attempt()
            if not a.retry_state.outcome.failed:
                a.retry_state.set_result(ok)
    except RetryError:
        raise WaitTimeout(
            f"timed out after {timeout:.0f}s waiting for {what}; last seen: {describe(last[0])}"
        ) from None
    return last[0]


# -- nodes as dicts (kubectl -o json, sanitized API objects) or kubernetes.client.V1Node --
def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def node_name(node: Any) -> str:
    return _field(_field(node, "metadata"), "name") or ""


def node_labels(node: Any) -> dict[str, str]:
    return dict(_field(_field(node, "metadata"), "labels") or {})


def node_annotations(node: Any) -> dict[str, str]:
    return dict(_field(_field(node, "metadata"), "annotations") or {})


def node_ready(node: Any) -> bool:
    for cond in _field(_field(node, "status"), "conditions") or []:
        if _field(cond, "type") == "Ready":
            return _field(cond, "status") == "True"
    return False


def wait_nodes_ready(cluster: Cluster, names: list[str], timeout: float = 60) -> None:
    def probe() -> dict[str, bool]:
        nodes = {n.metadata.name: n for n in cluster.core.list_node().items}
        return {name: name in nodes and node_ready(nodes[name]) for name in names}

    wait_for(f"nodes {names} Ready", probe, lambda s: all(s.values()), timeout)


def pod_ready(pod: Any) -> bool:
    for c in (pod.status.conditions or []) if pod.status else []:
        if c.type == "Ready":
            return c.status == "True"
    return False
