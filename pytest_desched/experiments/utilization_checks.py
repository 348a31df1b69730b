"""The checks the utilization experiments share, whichever metrics source they read.

One place for each piece of logic several experiments check: the positive round (the hot
node read as overutilized, the others as underutilized, one pod moved), a failed source's
round (no node read, no eviction request), and one node absent from the source (it is dropped
while the others are served, the round's log names it, it is not classified). A helper that
serves experiments whose records must keep their own check ids takes the id as an argument
(checks_made.py follows it to the caller).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pytest_desched.descheduler.utilization_log import FETCH_ERROR, NO_NODE_METRICS
from pytest_desched.kube import wait_for

Served = dict[str, dict[str, int] | None]  # node -> metrics.k8s.io's usage (None: not served)


def assess_moved_one(
    exp: Any,
    v: Any,
    seen: dict[str, Any],
    resource: str,
    source: str,
    limits: tuple[float, float],
    detail: str = "",
) -> None:
    """The positive round: `exp.node` read (`seen`: the usage its log shows,
    `exp.usage_seen`) as overutilized by `resource` over the target percent of `limits` (low,
    target), the others as underutilized under the low one, one `hot` pod evicted (usage alone
    would move two: the per-node cap holds it to one) and replaced off the node, nothing
    Pending."""
    low, target = limits
    node = exp.node
    hot = seen.get(node, {})
    exp.r.check(
        "usage-logged-overutilized",
        f"the descheduler read {node} as overutilized by {source} (>{target}% {resource})",
        hot.get("category") == "overutilized"
        and hot.get("usage_percent", {}).get(resource, 0) > target,
        f"logged {seen}{detail}",
    )
    others = {n: u for n, u in seen.items() if n != node}
    exp.r.check(
        "usage-logged-underutilized",
        f"the other nodes read as underutilized (<{low}% {resource})",
        len(others) == len(exp.workers) - 1
        and all(u.get("category") == "underutilized" for u in others.values()),
        f"logged {others}",
    )
    final = exp.settle(exp.hot)
    e = exp.expect(v)
    e.eviction_count(1, exp.strategy)
    e.evicted(workload="hot", count=1, strategy=exp.strategy)
    e.replaced(final, workload="hot", count=1, avoid=[node])
    e.nothing_pending(final)


def assess_nothing_read(exp: Any, v: Any, seen: dict[str, Any], why: str) -> None:
    """A source that failed for every node: the round classified no node (`seen`: the usage
    its log shows, `exp.usage_seen`; `why` says from what none may be read) and asked the API
    server for no eviction."""
    exp.r.check("no-node-read-as-idle", why, not seen, f"logged {seen}")
    exp.r.assess_no_eviction_request(v, exp.s1)


@contextlib.contextmanager
def node_absent_from_metrics(exp: Any, node: str) -> Iterator[Served]:
    """`node`'s kubelet metrics endpoint answers 404 for the block, entered once
    metrics-server has dropped it and still serves every other worker; yields what it served
    then. The fault is written into the result's notes."""
    # optional: the embedded provider's kubelet endpoints, only where these experiments run
    from pytest_desched.providers.embedded.metrics_endpoints import node_absent

    with node_absent(exp.ctx.cluster, node) as path:
        exp.r.result.notes.append(f"fault: {node}'s metrics endpoint {path}: 404")
        yield wait_for(  # metrics-server drops the node at its next scrape
            f"metrics-server to drop {node} and keep serving the others",
            lambda: {n: exp.lab.node_usage(n) for n in exp.workers},
            lambda s: s[node] is None and all(u is not None for n, u in s.items() if n != node),
            timeout=60,
            max_interval=1.0,
            describe=str,
        )


def check_source_absent(
    r: Any, check_id: str, absent: str, workers: list[str], during: Served, after: Served
) -> None:
    """metrics.k8s.io served every worker but `absent` at the fault and after the round."""
    served = {n: u for n, u in after.items() if u is not None}
    r.check(
        check_id,
        f"metrics.k8s.io served every node but {absent} during the outage",
        during.get(absent) is None and absent not in served and len(served) == len(workers) - 1,
        f"served at the fault {during}, after the round {after}",
    )


def check_absent_node(
    r: Any, absent: str, errors: list[str], seen: dict[str, Any], says_id: str, idle_id: str
) -> None:
    """The round's own log names `absent` in a failed fetch and in the balance extension
    point stopped for want of its metrics (`says_id`), and did not classify it (`idle_id`)."""
    named = [e for e in errors if absent in e]
    r.check(
        says_id,
        f"the round's own log says {absent}'s metrics fetch failed and the balance extension "
        "point stopped for want of its metrics",
        any(f'"{FETCH_ERROR}"' in e for e in named) and any(NO_NODE_METRICS in e for e in named),
        "\n".join(errors[:4]) or "no such line in the round's log",
    )
    r.check(
        idle_id,
        f"the round did not classify {absent} (no node read as idle without a sample)",
        absent not in seen,
        f"logged {seen}",
    )
