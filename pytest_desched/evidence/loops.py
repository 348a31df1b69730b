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
- *return*: in a later cycle a replacement landed on a node the owner's pods left in an
  earlier cycle, whatever the path in between: an *alternation* (A->B, then B->A), a
  *rotation* over more nodes (A->B, B->C, C->A), or a plain *return* when the departure's
  own replacement was not seen.
An owner evicted in several cycles that always moves the same way (source to target, the
runbook's positive experiment over K cycles) is no loop.

"No loop" is a verdict only where a loop could have been seen (`LoopVerdict.proven`): at
least MIN_LOOP_CYCLES cycles that ran to their end (a cycle the descheduler skipped, or whose
descheduler exited non-zero, may have evicted nothing it would have), and every cycle
settled (a replacement that arrived after the settle timeout is not in `arrived`, so a
return through it cannot be seen). Otherwise the answer is "not proven", with why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import dropwhile
from typing import Any

from pytest_desched.bounds import MIN_LOOP_CYCLES
from pytest_desched.outcome.fates import Fate
from pytest_desched.outcome.identity import identity_of


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
    settled: bool | None = None  # False: the wait for replacements timed out (None: not waited)
    # why the cycle did not run to its end: "skipped: <its log line>", "exited with code N"
    incomplete: str | None = None
    note: str = ""  # what the settle wait saw when it timed out


@dataclass
class Loop:
    """One owner's loop: the cycles, nodes and pods that make it, and each step."""

    owner: str
    kind: str  # "bounce" | "alternation" | "rotation" | "return", or several joined by "+"
    cycles: list[int]
    nodes: list[str]
    pods: list[str]
    steps: list[dict[str, Any]] = field(default_factory=list)  # cycle, left, from, landed, on

    def line(self) -> str:
        moves = "; ".join(
            f"c{s['cycle']}: {s['left']} left {s['from']}"
            + (f", {s['landed']} landed on {s['on']}" if s["landed"] else ", no replacement seen")
            for s in self.steps
        )
        return (
            f"eviction loop ({self.kind}) of {self.owner} in cycles "
            f"{','.join(map(str, self.cycles))} between {' and '.join(self.nodes)}: {moves}"
        )


@dataclass
class LoopVerdict:
    """The detector's answer over K cycles: `loops` empty means silent; silent is "no loop"
    only when `proven` (see the module docstring), else the `unproven` reasons say why not."""

    cycles: int
    loops: list[Loop] = field(default_factory=list)
    owners_evicted: dict[str, list[int]] = field(default_factory=dict)  # owner -> cycles
    unproven: list[str] = field(default_factory=list)  # why a silent run proves nothing

    @property
    def silent(self) -> bool:
        return not self.loops

    @property
    def proven(self) -> bool:
        """No loop, and a loop could have been seen: what `--no-loop` needs to pass."""
        return self.silent and not self.unproven

    def summary(self) -> str:
        if not self.silent:
            return "; ".join(lp.line() for lp in self.loops)
        if self.unproven:
            return f"no eviction loop seen in {self.cycles} cycle(s), but not proven: " + "; ".join(
                self.unproven
            )
        repeat = {o: c for o, c in self.owners_evicted.items() if len(c) > 1}
        more = f"; evicted in several cycles without returning: {repeat}" if repeat else ""
        return f"no eviction loop in {self.cycles} cycle(s){more}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "silent": self.silent,
            "proven": self.proven,
            "unproven": self.unproven,
            "summary": self.summary(),
            "loops": [asdict(lp) for lp in self.loops],
            "owners_evicted": self.owners_evicted,
        }


def unproven(history: Sequence[CycleObs]) -> list[str]:
    """Why a silent `history` cannot say "no loop": too few cycles ran, or one never settled."""
    ran = [o.cycle for o in history if not o.incomplete]
    out = []
    if len(ran) < MIN_LOOP_CYCLES:
        short = [f"cycle {o.cycle} {o.incomplete}" for o in history if o.incomplete]
        out.append(
            f"{len(ran)} cycle(s) ran to their end{': ' + '; '.join(short) if short else ''}; "
            "a loop is "
            f"a pod coming back in a later cycle, so at least {MIN_LOOP_CYCLES} must run"
        )
    out += [
        f"cycle {o.cycle} did not settle{': ' + o.note if o.note else ''}; a replacement that "
        "arrived after the settle timeout is not seen, nor a loop through it"
        for o in history
        if o.settled is False
    ]
    return out


Move = tuple[PodAt, PodAt]  # (a pod that left, a pod that landed) in one cycle


def _moves(obs: CycleObs, owner: str) -> list[Move]:
    """Each (evicted, arrived) pair of one owner in one cycle: every pod left x every landing.

    Replacements carry no link to the pod they replace, so every pairing is a candidate; the
    rules below only ever ask "did some pod leave X and some pod land on Y in this cycle".
    """
    left = [p for p in obs.evicted if p.owner == owner]
    landed = [p for p in obs.arrived if p.owner == owner]
    return [(a, b) for a in left for b in landed if a.node and b.node]


def _step(cycle: int, a: PodAt, b: PodAt | None) -> dict[str, Any]:
    """One move; `b` None: a departure whose replacement was not seen (no landing)."""
    return {
        "cycle": cycle,
        "left": a.key,
        "from": a.node,
        "landed": b.key if b else None,
        "on": b.node if b else None,
    }


def _owner_loop(
    owner: str, cycles: list[int], moves: dict[int, list[Move]], left: dict[int, list[PodAt]]
) -> Loop | None:
    """One owner's loop over its eviction cycles (bounce, return), or None. `left` is each
    cycle's evicted pods: a departure counts whether or not its replacement was seen."""
    steps: dict[tuple[int, str, str], dict[str, Any]] = {}
    kinds: set[str] = set()

    def add(c: int, a: PodAt, b: PodAt | None) -> None:
        steps.setdefault((c, a.key, b.key if b else ""), _step(c, a, b))

    for c in cycles:
        for a, b in moves[c]:
            if a.node == b.node:
                kinds.add("bounce")
                add(c, a, b)
    for j in cycles:
        for x, y in moves[j]:
            # a return: y landed on a node the owner's pods left in an earlier cycle i
            earlier = [i for i in cycles if i < j and any(a.node == y.node for a in left[i])]
            if x.node == y.node or not earlier:
                continue
            i = max(earlier)  # the latest departure from that node: the shortest way back
            away = [(a, b) for a, b in moves[i] if a.node == y.node]  # from y's node, seen
            if any(b.node == x.node for _, b in away):
                kinds.add("alternation")  # A->B, then B->A
            else:  # over more nodes, or the departure's landing not seen: "return"
                kinds.add("rotation" if away else "return")
            add(j, x, y)
            for a in (a for a in left[i] if a.node == y.node):  # the departure from y's node
                landed: list[PodAt | None] = [b for p, b in away if p == a]
                for to in landed or [None]:
                    add(i, a, to)
            for c in (c for c in cycles if i < c < j):  # the path: every move in between
                for a, b in moves[c]:
                    add(c, a, b)
    looped = sorted({c for c, _, _ in steps})
    if len(looped) < 2:
        return None
    ordered = [steps[k] for k in sorted(steps)]
    nodes = sorted({str(s[k]) for s in ordered for k in ("from", "on") if s[k]})
    pods = sorted({str(s[k]) for s in ordered for k in ("left", "landed") if s[k]})
    return Loop(owner, "+".join(sorted(kinds)), looped, nodes, pods, ordered)


def detect(history: Sequence[CycleObs]) -> LoopVerdict:
    """Every owner that loops over `history` (see the module docstring for the rule), and
    whether a silent answer is proven."""
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
        left = {
            o.cycle: [p for p in o.evicted if p.owner == owner and p.node]
            for o in history
            if o.cycle in cycles
        }
        lp = _owner_loop(owner, cycles, moves, left)
        if lp is not None:
            loops.append(lp)
    return LoopVerdict(len(history), loops, evicted_in, unproven(history))


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


def incomplete(skipped: Any, exit_code: Any) -> str | None:
    """Why a cycle did not run to its end, from its record; None: it did."""
    if skipped:
        return f"skipped: {skipped}"
    return None if exit_code in (0, None) else f"exited with code {exit_code}"


def cycle_obs(cycle: Mapping[str, Any]) -> CycleObs:
    """One entry of a record's `cycles` list (descheduler/cycles.py) as detector input."""
    return CycleObs(
        int(cycle["cycle"]),
        tuple(_pods(cycle.get("evicted") or [])),
        tuple(_pods(cycle.get("arrived") or [])),
        settled=cycle.get("settled"),
        incomplete=incomplete(cycle.get("skipped"), cycle.get("exit_code")),
        note=str(cycle.get("note") or ""),
    )


def cycles_from_records(cycles: Iterable[Mapping[str, Any]]) -> list[CycleObs]:
    return [cycle_obs(c) for c in cycles]


def cycles_from_ledger(ledger: Mapping[str, Any]) -> list[CycleObs]:
    """A replay ledger (`Ledger.to_dict()`, `desched replay ... -o json`) as a cycle history.

        Round i's evicted pods are the rows whose fate in round i is `evicted` (on the row's
        node); its arrivals are the rows created after round i (fate `new` up to round i, the
        engine's replacements). The owner is the comparison core's `Identity.lineage`: the row's
    Kind/name in the pod's namespace, a bare pod's own name (never a random one). A
        round with an eviction whose replacement was `missing` or `pending` when the engine's
        wait ended did not settle; a round the descheduler skipped, or whose Job's descheduler
        exited non-zero, did not run to its end.
    """
    rows = [r for r in ledger.get("rows") or [] if isinstance(r, Mapping)]
    rounds = ledger.get("rounds") or []
    n = len(rounds) or max((len(r.get("fates") or []) for r in rows), default=0)

    def at(r: Mapping[str, Any]) -> PodAt:
        pod = str(r.get("pod") or "")
        ident = identity_of(pod, owner=r.get("owner"), bare=True)  # the core's rule
        return PodAt(pod, "", ident.lineage, r.get("node"))

    out = []
    for i in range(1, n + 1):
        evicted, arrived, unplaced = [], [], []
        for r in rows:
            fates = [str((f or {}).get("fate")) for f in r.get("fates") or []]
            if len(fates) >= i and fates[i - 1] == Fate.EVICTED:
                evicted.append(at(r))
                if (r["fates"][i - 1] or {}).get("replacement") in ("missing", "pending"):
                    unplaced.append(str(r.get("pod")))  # the engine's wait ended first
            news = len(fates) - len(list(dropwhile(lambda f: f == Fate.NEW, fates)))
            if news == i:  # "new" in rounds 1..i: created after round i
                arrived.append(at(r))
        rnd = rounds[i - 1] if i <= len(rounds) and isinstance(rounds[i - 1], Mapping) else {}
        note = f"no placed replacement of {', '.join(unplaced[:3])} by the end of the wait"
        out.append(
            CycleObs(
                i,
                tuple(evicted),
                tuple(arrived),
                settled=False if unplaced else None,
                incomplete=incomplete(
                    rnd.get("skipped"), (rnd.get("extra") or {}).get("exit_code")
                ),
                note=note if unplaced else "",
            )
        )
    return out
