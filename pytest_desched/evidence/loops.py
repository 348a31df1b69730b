"""The eviction-loop detector: which owners a K-cycle run evicted back and forth, and where.

A loop is what upstream #1707 (preferred node affinity) and #1695 report: the descheduler
evicts a pod, the scheduler puts its replacement back where it was (or on the node the
previous eviction came from), and the next cycle evicts it again. Judged per owner (the
ReplicaSet, StatefulSet, ... a replacement shares with the pod it replaces), from each
cycle's evicted pods (the node each left) and the owner's pods that appeared after it (the
node each landed on). Pure data in, pure data out: the cycle history comes from the
records (`cycles_from_records`) or is constructed by a test.

An owner loops when at least two cycles take part in one of these, and only then:
- *bounce*: in one cycle a pod of the owner left node X and a replacement landed on X;
- *alternation*: in cycle i a pod left A and a replacement landed on B, and in a later
  cycle j a pod left B and a replacement landed on A.
An owner evicted in several cycles that always moves the same way (source to target, the
runbook's positive experiment over K cycles) is no loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import dropwhile
from typing import Any


@dataclass(frozen=True)
class PodAt:
    """A pod of an owner on a node: one that was evicted, or one that appeared."""

    key: str  # namespace/name
    uid: str
    owner: str  # namespace/Kind/name: what a replacement shares with the pod it replaces
    node: str | None


@dataclass(frozen=True)
class CycleObs:
    """One cycle as the detector sees it: who was evicted from where, who landed where."""

    cycle: int  # 1-based
    evicted: tuple[PodAt, ...] = ()
    arrived: tuple[PodAt, ...] = ()  # the owners' pods present after the cycle, not before


@dataclass
class Loop:
    """One owner's loop: the cycles, nodes and pods that make it, and each step."""

    owner: str
    kind: str  # "bounce" | "alternation" (both: "bounce+alternation")
    cycles: list[int]
    nodes: list[str]
    pods: list[str]
    steps: list[dict[str, Any]] = field(default_factory=list)  # cycle, left, from, landed, on

    def line(self) -> str:
        moves = "; ".join(
            f"c{s['cycle']}: {s['left']} left {s['from']}, {s['landed']} landed on {s['on']}"
            for s in self.steps
        )
        return (
            f"eviction loop ({self.kind}) of {self.owner} in cycles "
            f"{','.join(map(str, self.cycles))} between {' and '.join(self.nodes)}: {moves}"
        )


@dataclass
class LoopVerdict:
    """The detector's answer over K cycles: `loops` empty means silent."""

    cycles: int
    loops: list[Loop] = field(default_factory=list)
    owners_evicted: dict[str, list[int]] = field(default_factory=dict)  # owner -> cycles

    @property
    def silent(self) -> bool:
        return not self.loops

    def summary(self) -> str:
        if self.silent:
            repeat = {o: c for o, c in self.owners_evicted.items() if len(c) > 1}
            more = f"; evicted in several cycles without returning: {repeat}" if repeat else ""
            return f"no eviction loop in {self.cycles} cycle(s){more}"
        return "; ".join(lp.line() for lp in self.loops)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "silent": self.silent,
            "summary": self.summary(),
            "loops": [asdict(lp) for lp in self.loops],
            "owners_evicted": self.owners_evicted,
        }


def _moves(obs: CycleObs, owner: str) -> list[tuple[PodAt, PodAt]]:
    """Each (evicted, arrived) pair of one owner in one cycle: every pod left x every landing.

    Replacements carry no link to the pod they replace, so every pairing is a candidate; the
    rules below only ever ask "did some pod leave X and some pod land on Y in this cycle".
    """
    left = [p for p in obs.evicted if p.owner == owner]
    landed = [p for p in obs.arrived if p.owner == owner]
    return [(a, b) for a in left for b in landed if a.node and b.node]


def _step(cycle: int, a: PodAt, b: PodAt) -> dict[str, Any]:
    return {"cycle": cycle, "left": a.key, "from": a.node, "landed": b.key, "on": b.node}


def detect(history: Sequence[CycleObs]) -> LoopVerdict:
    """Every owner that loops over `history` (see the module docstring for the rule)."""
    history = sorted(history, key=lambda o: o.cycle)
    evicted_in: dict[str, list[int]] = {}
    for obs in history:
        for p in obs.evicted:
            cycles = evicted_in.setdefault(p.owner, [])
            if obs.cycle not in cycles:
                cycles.append(obs.cycle)
    loops: list[Loop] = []
    for owner, cycles in evicted_in.items():
        if len(cycles) < 2:
            continue
        moves = {o.cycle: _moves(o, owner) for o in history if o.cycle in cycles}
        steps: dict[tuple[int, str, str], dict[str, Any]] = {}
        kinds: set[str] = set()
        for c, pairs in moves.items():
            for a, b in pairs:
                if a.node == b.node:
                    kinds.add("bounce")
                    steps.setdefault((c, a.key, b.key), _step(c, a, b))
        for i in cycles:
            for j in (c for c in cycles if c > i):
                for a, b in moves[i]:
                    for x, y in moves[j]:
                        if a.node != b.node and x.node == b.node and y.node == a.node:
                            kinds.add("alternation")
                            steps.setdefault((i, a.key, b.key), _step(i, a, b))
                            steps.setdefault((j, x.key, y.key), _step(j, x, y))
        looped = sorted({c for c, _, _ in steps})
        if len(looped) < 2:
            continue
        ordered = [steps[k] for k in sorted(steps)]
        nodes = sorted({str(s["from"]) for s in ordered} | {str(s["on"]) for s in ordered})
        pods = sorted({s["left"] for s in ordered} | {s["landed"] for s in ordered})
        loops.append(
            Loop(owner, "+".join(sorted(kinds, reverse=True)), looped, nodes, pods, ordered)
        )
    return LoopVerdict(len(history), loops, evicted_in)


# --- from the records a multi-cycle run writes ---------------------------------------------
def _pods(items: Iterable[Mapping[str, Any]]) -> list[PodAt]:
    return [
        PodAt(
            key=str(p.get("key") or f"{p.get('namespace', '')}/{p.get('name', '')}"),
            uid=str(p.get("uid", "")),
            owner=str(p.get("owner_ref") or p.get("owner") or "?"),
            node=p.get("node"),
        )
        for p in items
    ]


def cycle_obs(cycle: Mapping[str, Any]) -> CycleObs:
    """One entry of a record's `cycles` list (descheduler/cycles.py) as detector input."""
    return CycleObs(
        int(cycle["cycle"]),
        tuple(_pods(cycle.get("evicted") or [])),
        tuple(_pods(cycle.get("arrived") or [])),
    )


def cycles_from_records(cycles: Iterable[Mapping[str, Any]]) -> list[CycleObs]:
    return [cycle_obs(c) for c in cycles]


def cycles_from_ledger(ledger: Mapping[str, Any]) -> list[CycleObs]:
    """A replay ledger (`Ledger.to_dict()`, `desched replay ... -o json`) as a cycle history.

    Round i's evicted pods are the rows whose fate in round i is `evicted` (on the row's
    node); its arrivals are the rows created after round i (fate `new` up to round i, the
    engine's replacements). The owner is the row's (Kind/name) in the pod's namespace.
    """
    rows = [r for r in ledger.get("rows") or [] if isinstance(r, Mapping)]
    n = len(ledger.get("rounds") or []) or max((len(r.get("fates") or []) for r in rows), default=0)

    def at(r: Mapping[str, Any]) -> PodAt:
        pod = str(r.get("pod") or "")
        ns = pod.split("/", 1)[0] if "/" in pod else ""
        return PodAt(pod, "", f"{ns}/{r.get('owner') or pod}", r.get("node"))

    out = []
    for i in range(1, n + 1):
        evicted, arrived = [], []
        for r in rows:
            fates = [str((f or {}).get("fate")) for f in r.get("fates") or []]
            if len(fates) >= i and fates[i - 1] == "evicted":
                evicted.append(at(r))
            news = len(fates) - len(list(dropwhile(lambda f: f == "new", fates)))
            if news == i:  # "new" in rounds 1..i: created after round i
                arrived.append(at(r))
        out.append(CycleObs(i, tuple(evicted), tuple(arrived)))
    return out
