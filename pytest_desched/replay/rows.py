"""Who the replay's ledger has a row for: every pod a round saw, with where it came from.

A row's origin is `snapshot` (restored from it), a replacement (`ledger.replacement_origin`:
made by a controller after an eviction), or a pod born during the replay: in a timeline
replay, created by the window's changes ("created in window at t=T s"), else created by a
controller after the restore. Why: in an incident the pods created during the window are
often the ones evicted; a ledger of the snapshot's pods alone hid them (issue 39 case 13).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pytest_desched.outcome.fates import Fate
from pytest_desched.replay.capture.format import Snapshot, controller_of, key, utc
from pytest_desched.replay.ledger import NOT_RESTORED, PodFate, PodRow
from pytest_desched.replay.rebuild.plan import RUNNER_NODE
from pytest_desched.replay.rebuild.usage import NODE_USAGE_NAMESPACE, NODE_USAGE_PREFIX

# A born pod's fate in the rounds before it: not `new`, which marks a replacement (the loop
# detector reads `new` rows as arrivals after an eviction; a scale-up's pod is none).
ABSENT = Fate.ABSENT
Moment = Callable[[float], float | None]  # epoch seconds -> window seconds (None: before it)
BORN = "created during the replay"
BORN_IN_WINDOW = "created in window"
BORN_NOTE = (
    "a pod created during the window: its moment is its creationTimestamp on the window clock; "
    "the API server stamps whole seconds, so it is exact to one wall second times the speed"
)


def snapshot_rows(snap: Snapshot, restored: Any) -> dict[str, PodRow]:
    """One row per snapshot pod; a pod the restore skipped says why in its first fate."""
    rows: dict[str, PodRow] = {}
    skipped = {s["pod"]: s["why"] for s in restored.skipped}
    for p in snap.pods:
        k = key(p)
        row = PodRow(pod=k, node=(p.get("spec") or {}).get("nodeName"), owner=_owner(p))
        if k in skipped:
            row.fates.append(PodFate(NOT_RESTORED, None, skipped[k]))
        rows[k] = row
    return rows


def _owner(p: dict[str, Any]) -> str | None:
    ref = controller_of(p)
    return f"{ref['kind']}/{ref['name']}" if ref else None


def born_origin(created_epoch: float | None, moment: Moment | None) -> str:
    """`created in window at t=T s` when the window clock places it, else where it came from."""
    t = moment(created_epoch) if moment and created_epoch is not None else None
    if t is not None:
        return f"{BORN_IN_WINDOW} at t={t:.1f}s"
    if moment is not None and created_epoch is not None:
        return f"{BORN} (before the window started)"
    return BORN


def decided_nodes(result: Any, fates: Iterable[str]) -> dict[str, str | None]:
    """Each pod the round's log decided -> the node its decisions name (None: none did)."""
    nodes: dict[str, str] = {}
    for d in result.decisions:
        if d.node:
            nodes.setdefault(d.key, str(d.node))
    return {p: nodes.get(p) for p in fates}


def in_scope(
    pods: list[dict[str, Any]], decided: Mapping[str, str | None], scope: frozenset[str] | None
) -> tuple[list[dict[str, Any]], dict[str, str | None]]:
    """Only the pods of `scope`'s namespaces (a host replay's own: the host's pods and kwok's
    are not the incident's); everything when `scope` is None (a cluster of the replay's own)."""
    if scope is None:
        return pods, dict(decided)
    return (
        [p for p in pods if (p.get("metadata") or {}).get("namespace") in scope],
        {p: n for p, n in decided.items() if p.split("/", 1)[0] in scope},
    )


def is_usage_pod(pod: str) -> bool:
    """A node's own usage pod the replay made (rebuild/usage.py): machinery, never a row."""
    return pod.startswith(f"{NODE_USAGE_NAMESPACE}/{NODE_USAGE_PREFIX}")


def born_rows(
    seen: Iterable[dict[str, Any]],
    decided: Mapping[str, str | None],
    known: Mapping[str, PodRow],
    round_i: int,
    moment: Moment | None = None,
    own: str | None = None,
) -> list[PodRow]:
    """Rows for the pods round `round_i` saw that no row holds yet: pods on a node before the
    round (`seen`, the API's list) and pods its log decided (`decided`: pod -> node). The
    replay's own machinery is no incident pod and gets none: pods on the runner node (the
    round Jobs', a DaemonSet's pod there) and the round's own pod (`own`: its
    `namespace/job-` prefix, made after the list). Rounds before it say ABSENT."""
    live = [p for p in seen if not (p.get("metadata") or {}).get("deletionTimestamp")]
    runner = {key(p) for p in live if (p.get("spec") or {}).get("nodeName") == RUNNER_NODE}
    runner |= {p for p, node in decided.items() if node == RUNNER_NODE}
    runner |= {p for p in (*map(key, live), *decided) if is_usage_pod(p)}
    by_key = {key(p): p for p in live if (p.get("spec") or {}).get("nodeName")}
    out = []
    for pod in sorted((set(by_key) | set(decided)) - set(known) - runner):
        if own and pod.startswith(own):
            continue
        p = by_key.get(pod) or {}
        created = utc((p.get("metadata") or {}).get("creationTimestamp"))
        row = PodRow(
            pod=pod,
            node=(p.get("spec") or {}).get("nodeName") or decided.get(pod),
            owner=_owner(p) if p else None,
            origin=born_origin(created.timestamp() if created else None, moment),
        )
        row.fates = [PodFate(ABSENT, None, f"not there at round {k}") for k in range(1, round_i)]
        out.append(row)
    return out


LEFT_OUT_SHOWN = 10  # pods named in the line; the count is always whole


def left_out(
    round_i: int,
    decided: Mapping[str, str | None],
    rows: Iterable[str],
    own: str,
    scope: frozenset[str] | None = None,
    on_runner: Iterable[str] = (),
) -> str | None:
    """The ledger's line on the pods round `round_i`'s log decided about that no row holds,
    each with why (issue 54: 8 rows for the 9 pods a round filtered, the ninth unnamed).
    `decided`: pod -> node, every pod the log decided about; `own`: the round's own pod's
    `namespace/job-` prefix; `on_runner`: pods the API listed on the runner node."""
    held, runner = set(rows), set(on_runner)
    why: dict[str, str] = {}
    for pod, node in sorted(decided.items()):
        if pod in held:
            continue
        if own and pod.startswith(own):
            why[pod] = "the round's own Job pod"
        elif node == RUNNER_NODE or pod in runner:
            why[pod] = "replay machinery on the runner node"
        elif is_usage_pod(pod):
            continue  # replay machinery: a node's own usage beyond its pods (rebuild/usage.py)
        elif scope is not None and pod.split("/", 1)[0] not in scope:
            why[pod] = "outside the replay's namespaces"
        else:
            why[pod] = "listed by no read of the round"
    if not why:
        return None
    named = "; ".join(f"{p} ({w})" for p, w in list(why.items())[:LEFT_OUT_SHOWN])
    more = f"; and {len(why) - LEFT_OUT_SHOWN} more" if len(why) > LEFT_OUT_SHOWN else ""
    return f"round {round_i}: the log decided about {len(why)} pod(s) no row holds: {named}{more}"
