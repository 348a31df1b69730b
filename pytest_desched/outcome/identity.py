"""The one comparison core: what "the same pod" and "the same fate" are across two or more
runs, what differs between them, and what was NOT compared and why.

Pure (no cluster, no I/O), so every report that compares runs (replay `--log` and
`--repeat`, and in time the canary, fidelity and the loop detector) reads its answer from the
same rules and words "not comparable" the same way.

Why an identity never holds a random name: a replacement's name is its controller's random
suffix, different in every run, so two identical runs would differ by it alone. A pod is
counted by what a run reproduces: namespace, owner (Kind/name), generation (0 the original,
1 the replacement of an original, 2 the replacement of that, ...), node, and its fate with the
strategy, deciding layer, API status code and evictor checks. Only a bare pod (no owner, never
replaced) keeps its own name, which its user gave it. Siblings of one owner on one node are
then interchangeable: a cap that cut a sibling instead agrees "up to order", as it should.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


class _NotComparable(str):
    """The one wording, and falsy: code that asks `if comparison["same_evictions"]:` must
    not read a comparison of nothing as a pass (a plain non-empty string would be true)."""

    def __bool__(self) -> bool:
        return False


NOT_COMPARABLE: str = _NotComparable("not comparable")  # in every report, and in the JSON


@dataclass(frozen=True)
class Identity:
    """A pod as a comparison counts it across runs (see the module docstring)."""

    namespace: str
    owner: str | None  # Kind/name; None: a bare pod (then `name` is kept) or unknown
    generation: int = 0
    node: str | None = None
    strategy: str | None = None
    layer: str | None = None
    fate: str | None = None
    status_code: int | None = None
    checks: tuple[str, ...] = ()
    name: str | None = None  # a bare pod's own name; never a controller's random one

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["checks"] = list(self.checks)
        return d

    @property
    def lineage(self) -> str:
        """`namespace/owner`, or `namespace/name` for a bare pod: what a pod shares with its
        replacements and its counterparts in other runs, fate aside."""
        return f"{self.namespace}/{self.owner or self.name or ''}"

    @property
    def label(self) -> str:
        """`ns owner@node: fate code [checks] by strategy (layer)`, for people."""
        return identity_label(self.to_dict())

    def sort_key(self) -> str:
        return repr(self.to_dict())


def identity_label(d: Mapping[str, Any]) -> str:
    """An identity's dict (`Identity.to_dict`, or an older report's) as one line for people."""
    who = d.get("owner") or (f"pod {d['name']}" if d.get("name") else "(owner unknown)")
    gen = int(d.get("generation") or 0)
    if gen:
        who += f" (replacement gen {gen})"
    code = f" {d['status_code']}" if d.get("status_code") else ""
    checks = f" [{', '.join(d['checks'])}]" if d.get("checks") else ""
    by = f" by {d['strategy']}" if d.get("strategy") else ""
    return (
        f"{d.get('namespace')} {who}@{d.get('node') or '?'}: "
        f"{d.get('fate')}{code}{checks}{by} ({d.get('layer')})"
    )


def identity_of(
    pod: str,
    owner: str | None = None,
    generation: int = 0,
    node: str | None = None,
    fate: str | None = None,
    layer: str | None = None,
    strategy: str | None = None,
    status_code: int | None = None,
    checks: Iterable[str] = (),
    bare: bool = False,
) -> Identity:
    """The identity of `pod` (namespace/name): its name is dropped unless the pod is known to
    be bare (`bare`: no owner, so nothing renames it); an unknown owner keeps no name."""
    namespace, _, name = pod.partition("/")
    keep = name if bare and not owner and not generation else None
    return Identity(
        namespace,
        owner or None,
        generation,
        node,
        strategy,
        layer,
        fate,
        status_code,
        tuple(sorted(checks)),
        keep,
    )


# Kubernetes' random suffixes (k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3).
_POD_SUFFIX = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}$")
_TEMPLATE_HASH = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{6,10}$")


def owner_from_name(pod_name: str) -> str:
    """The owning workload's name as every run spells it, when a record names no owner: the
    controller's random pod suffix and ReplicaSet hash removed (a StatefulSet's `web-0` and a
    bare pod's name are kept: no run renames them)."""
    base = _POD_SUFFIX.sub("", pod_name)
    if base != pod_name:
        base = _TEMPLATE_HASH.sub("", base)
    return base


def generation(pod: str, parent_of: Mapping[str, str | None]) -> int:
    """0 for an original; 1 + its parent's generation for a replacement (`parent_of`: each
    replacement's evicted predecessor). A loop in the map ends the walk."""
    n, seen = 0, {pod}
    while (parent := parent_of.get(pod)) and parent not in seen:
        n, pod = n + 1, parent
        seen.add(pod)
    return n


# -- what differs ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Difference:
    """An identity whose count differs between runs, with the pods behind it in each run."""

    identity: Identity
    pods: tuple[tuple[str, ...], ...]  # per run

    @property
    def counts(self) -> list[int]:
        return [len(p) for p in self.pods]

    def to_dict(self, sides: Sequence[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"identity": self.identity.to_dict(), "label": self.identity.label}
        if sides is not None:
            out.update({s: list(p) for s, p in zip(sides, self.pods, strict=True)})
        else:
            out["pods"] = [list(p) for p in self.pods]
            out["counts"] = self.counts
        return out


def differences(runs: Sequence[Mapping[str, Identity]]) -> list[Difference]:
    """Each identity whose count is not the same in every run (pod -> identity per run)."""
    bags: list[dict[Identity, list[str]]] = []
    for run in runs:
        bag: dict[Identity, list[str]] = {}
        for pod, ident in sorted(run.items()):
            bag.setdefault(ident, []).append(pod)
        bags.append(bag)
    seen = {i for bag in bags for i in bag}
    out = []
    for ident in sorted(seen, key=Identity.sort_key):
        pods = tuple(tuple(bag.get(ident, ())) for bag in bags)
        if len({len(p) for p in pods}) > 1:
            out.append(Difference(ident, pods))
    return out


def counted(run: Mapping[str, Identity]) -> Counter[Identity]:
    """A run as a multiset of identities (what "the same up to order" compares)."""
    return Counter(run.values())


# -- what was not compared -------------------------------------------------------------------
@dataclass(frozen=True)
class NotCompared:
    """Something left out of a comparison, and why (printed in every report, never dropped)."""

    what: str  # a pod (namespace/name), a run, a round
    why: str
    detail: str = ""  # its fate on the side that had it, when known

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.what, "fate": self.detail, "why": self.why}


@dataclass(frozen=True)
class Coverage:
    """How much of what a verdict is about was compared: `compared` of `total` `subject`.

    Comparable when anything was compared at all and at least `minimum` (capped at `total`)
    of the subject was: "compared 0 of 14 evicted pods" answers nothing, so its verdict is
    NOT_COMPARABLE rather than a "same" over the empty set.
    """

    subject: str  # "evicted pods", "runs"
    compared: int
    total: int
    anything: bool = True  # the comparison had anything at all on both sides
    minimum: int = 1

    @property
    def comparable(self) -> bool:
        return self.anything and self.compared >= min(self.minimum, self.total)

    def line(self) -> str:
        tail = "" if self.comparable else f": {NOT_COMPARABLE}"
        return f"compared {self.compared} of {self.total} {self.subject}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "comparable": self.comparable, "line": self.line()}


def answer(same: bool, coverage: Coverage) -> bool | str:
    """A "same?" verdict: True or False over what was compared, else NOT_COMPARABLE."""
    return same if coverage.comparable else NOT_COMPARABLE


def answer_label(value: bool | str | None) -> str:
    """A verdict as reports print it: yes, no, or the one "not comparable" wording."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return NOT_COMPARABLE


@dataclass
class Comparison:
    """Runs compared: the differences, their coverage, and what was left out."""

    differences: list[Difference] = field(default_factory=list)
    coverage: Coverage | None = None
    not_compared: list[NotCompared] = field(default_factory=list)

    @property
    def same(self) -> bool | str:
        """True/False over what was compared; NOT_COMPARABLE when that was nothing."""
        cov = self.coverage or Coverage("pods", 0, 0, anything=False)
        return answer(not self.differences, cov)


def compare_runs(
    runs: Sequence[Mapping[str, Identity]], not_compared: Iterable[NotCompared] = ()
) -> Comparison:
    """N runs' identities (only the runs that measured something; the rest in
    `not_compared`): comparable when at least two runs were, and every run given was."""
    left_out = list(not_compared)
    total = len(runs) + len({n.what for n in left_out})
    cov = Coverage("runs", len(runs), total, anything=len(runs) >= 2, minimum=total)
    return Comparison(differences(runs), cov, left_out)
