"""One classified difference (scrubbed when built) and the tree walk every comparison uses."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_desched.descheduler.policy.rule_table import RULES, canary_severity
from pytest_desched.redaction import scrub_data, scrub_secrets

AREAS = (
    "values",
    "object",
    "rbac",
    "args",
    "image",
    "cronjob",
    "policy-lint",
    "defaults",
    "metrics",
    "policy-translation",  # a track's policy read in its own release's fields
)
CHANGES = ("added", "removed", "changed", "widened", "narrowed", "kept", "renamed")
SEVERITIES = ("rollback", "review", "info")  # most serious first
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}

# The lab's clusters (Kubernetes 1.36) serve these; an offline `helm template` knows only
# group/versions, so a chart gating on a kind (the master chart's PDB) would render the
# removed policy/v1beta1 form that no install on those clusters ever gets.
CLUSTER_API_VERSIONS = ("policy/v1/PodDisruptionBudget",)

Path_ = tuple[str, ...]  # internal path: keys, and "[name]" for an element of a named list


@dataclass(frozen=True)
class Difference:
    """One classified difference between baseline and candidate (values already scrubbed)."""

    area: str  # one of AREAS
    path: str  # where, e.g. "ClusterRole/descheduler rules[pods]" or "values.cmdOptions.v"
    change: str  # one of CHANGES
    baseline: Any
    candidate: Any
    severity: str  # one of SEVERITIES: the rule's (rule_table, shared with desched lint --from)
    message: str  # what changed and why it matters per the runbook
    rule: str = ""  # the migration rule code (DU001, DR001, ...): rule_table.RULES


def make_difference(
    rule: str,
    area: str,
    path: str,
    change: str,
    baseline: Any,
    candidate: Any,
    message: str,
    key: str = "",
) -> Difference:
    """A Difference under `rule` (its severity is the rule's), its values scrubbed; `key` gives
    a bare value its key's context."""
    assert rule in RULES and area in AREAS and change in CHANGES
    return Difference(
        area,
        scrub_secrets(path),
        change,
        _scrub(key, baseline),
        _scrub(key, candidate),
        canary_severity(rule),
        scrub_secrets(message),
        rule,
    )


def _scrub(key: str, value: Any) -> Any:
    # scrub_data judges a string by its key ("authToken: ..." is a secret whatever it looks like).
    return scrub_data({key or "value": value})[key or "value"]


# ---------------------------------------------------------------------------- tree walk ---

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def format_path(path: Path_) -> str:
    """A walk path as people read it: `a.b[name]`, odd keys JSON-quoted."""
    out = ""
    for p in path:
        if p.startswith("["):
            out += p
        elif _PLAIN_KEY.fullmatch(p):
            out += f".{p}" if out else p
        else:
            out += f"[{json.dumps(p)}]"
    return out


def as_list(v: Any) -> list[Any]:
    """A list or tuple as a list; anything else (None, a scalar) as no items."""
    return list(v) if isinstance(v, list | tuple) else []


def last_key(path: Path_) -> str:
    """The last mapping key of a walk path (a scrubbed value's context), or ""."""
    return next((p for p in reversed(path) if not p.startswith("[")), "")


def by_name(v: Any) -> dict[str, Any] | None:
    """A list of dicts with unique names (containers, profiles, pluginConfig) keyed by name."""
    if not isinstance(v, list) or not v:
        return None
    if not all(isinstance(x, Mapping) and isinstance(x.get("name"), str) for x in v):
        return None
    names = [x["name"] for x in v]
    return dict(zip(names, v, strict=True)) if len(set(names)) == len(names) else None


def walk(a: Any, b: Any, path: Path_ = ()) -> Iterator[tuple[Path_, str, Any, Any]]:
    """(path, added|removed|changed, baseline, candidate); a subtree on one side only is one row."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        items: Iterable[tuple[str, Any, Any, bool, bool]] = (
            (str(k), a.get(k), b.get(k), k in a, k in b) for k in dict.fromkeys([*a, *b])
        )
    else:
        na, nb = by_name(a), by_name(b)
        if na is None or nb is None:
            if a != b:
                yield path, "changed", a, b
            return
        items = (
            (f"[{k}]", na.get(k), nb.get(k), k in na, k in nb) for k in dict.fromkeys([*na, *nb])
        )
    for k, va, vb, in_a, in_b in items:
        p = (*path, k)
        if not in_b:
            yield p, "removed", va, None
        elif not in_a:
            yield p, "added", None, vb
        else:
            yield from walk(va, vb, p)


def _leaves(v: Any, path: Path_ = ()) -> dict[Path_, Any]:
    if isinstance(v, Mapping) and v:
        return {k: x for key, sub in v.items() for k, x in _leaves(sub, (*path, str(key))).items()}
    named = by_name(v)
    if named is not None:
        return {
            k: x for n, sub in named.items() for k, x in _leaves(sub, (*path, f"[{n}]")).items()
        }
    return {path: v}


def leaf_pairs(path: Path_, a: Any, b: Any) -> Iterator[tuple[Path_, Any, Any]]:
    """Every leaf under one walk row, both sides: where the protection rules look."""
    la, lb = _leaves(a, path), _leaves(b, path)
    for k in dict.fromkeys([*la, *lb]):
        if la.get(k) != lb.get(k):
            yield k, la.get(k), lb.get(k)
