"""The policy's top-level `nodeSelector` as the descheduler reads it: which nodes it counts.

v0.36.0 (descheduler.go `nodeSelectorFromPolicy`, node.go `AddNodeSelectorIndexer`,
`ReadyNodesFromInterfaces`) parses the string with apimachinery's `labels.Parse` and counts
the Ready nodes whose labels match; that count is the `found` of its "Skipping descheduling
cycle: requires >=2 nodes" line. So a comparison with `found` must count the same nodes, not
every Ready node (known_bugs.py, the #1917 signature).

The grammar is the label-selector string's: comma-separated `key`, `!key`, `key=v`,
`key==v`, `key!=v`, `key in (a,b)`, `key notin (a,b)`, `key>n`, `key<n`. `!=` and `notin`
match a node without the key, as apimachinery's do. Ground floor: no project imports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_desched.kube import node_labels, node_ready

Labels = Mapping[str, str]
_KEY = r"[^\s=!<>(),]+"
_SET = re.compile(rf"({_KEY})\s+(in|notin)\s*\(([^()]*)\)")
_CMP = re.compile(rf"({_KEY})\s*(==|=|!=|<|>)\s*([^\s=!<>(),]*)")
_NOT = re.compile(rf"!\s*({_KEY})")


def _terms(selector: str) -> list[str]:
    """The requirements: the commas outside parentheses split them."""
    out, depth, cur = [], 0, ""
    for ch in selector:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _requirement(term: str) -> Callable[[Labels], bool]:
    t = term.strip()
    if m := _NOT.fullmatch(t):
        absent = m[1]
        return lambda ls: absent not in ls
    if m := _SET.fullmatch(t):
        key, op, vals = m[1], m[2], {v.strip() for v in m[3].split(",")}
        if op == "in":
            return lambda ls: key in ls and ls[key] in vals
        return lambda ls: ls.get(key) not in vals
    if m := _CMP.fullmatch(t):
        key, op, val = m[1], m[2], m[3]
        if op in ("=", "=="):
            return lambda ls: key in ls and ls[key] == val
        if op == "!=":
            return lambda ls: ls.get(key) != val
        n = _int(val)
        if n is None:
            raise ValueError(f"{term!r}: {op} needs an integer")
        gt = op == ">"
        return lambda ls: (x := _int(ls.get(key))) is not None and (x > n if gt else x < n)
    if re.fullmatch(_KEY, t):
        return lambda ls: t in ls
    raise ValueError(f"{term!r}: not a label-selector requirement")


def matcher(selector: str | None) -> Callable[[Labels], bool]:
    """A node-labels predicate for `selector` (None or "": every node); ValueError when the
    string does not parse (the descheduler refuses to start on it)."""
    if not (selector or "").strip():
        return lambda ls: True
    reqs = [_requirement(t) for t in _terms(str(selector))]
    return lambda ls: all(r(ls) for r in reqs)


def count_selected(selector: str | None, node_labels: list[Labels] | tuple[Labels, ...]) -> int:
    """How many of the (Ready) nodes with these labels the selector picks."""
    match = matcher(selector)
    return sum(1 for ls in node_labels if match(ls))


def node_facts(nodes: list[Any], policy: Mapping[str, Any] | None) -> dict[str, Any]:
    """RoundFacts' node fields from the API's nodes and the policy the round ran with: the
    Ready count, each Ready node's labels, and the policy's nodeSelector."""
    ready = tuple(node_labels(n) for n in nodes if node_ready(n))
    selector = (policy or {}).get("nodeSelector")
    return {
        "ready_nodes": len(ready),
        "ready_node_labels": ready,
        "node_selector": str(selector) if selector else None,
    }
