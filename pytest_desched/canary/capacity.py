"""The rebuild window compared between tracks: capacity, Ready latency, Pending, final skew.

The runbook's dual-track list compares "replacement Ready latency, Pending count, final
skew" beside the fates; its opening incident is why: every eviction succeeded and capacity
dropped while the replacements started. A candidate that keeps every pod's fate and still
leaves its owners with fewer available replicas, longer below desired, slower replacements,
pods left Pending or a worse skew has changed what the workloads live through.

Each figure of a round (outcome/ledger.RoundFigures, its runbook form; per owner from
outcome/availability.py) is compared, and a change becomes a `Change` the verdict judges
like any other: unexplained, it fails the canary. Worse capacity (an owner's minimum
available lower, or not back to desired) and pods left Pending are rollback triggers
(expectations.TRIGGERS); a slower window or a worse skew must be explained. Better figures
are said, never a failure alone (verdict.INFORMATIVE). Times are measured on loaded machines,
so a time differs only past `SLACK_S` and `SLACK_RATIO` of the baseline together.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pytest_desched.outcome.availability import OwnerWindow
from pytest_desched.outcome.ledger import RoundFigures

SLACK_S = 5.0  # seconds either way a time may move without being a change (loaded machines)
SLACK_RATIO = 0.5  # ... and this share of the baseline's time
ROUND = "round"  # the subject of a round-wide figure (Pending, skew)

# Change kinds (expectations.KINDS); the worse ones first.
CAPACITY_DROPPED = "capacity-dropped"
PENDING_LEFT = "pending-left"
WINDOW_LONGER = "window-longer"
READY_SLOWER = "ready-slower"
SKEW_WORSE = "skew-worse"
CAPACITY_BETTER = "capacity-better"
# The tracks evicted different numbers of pods: the capacity that follows is that change's
# consequence, judged as the pod classes' change (more-evictions, continue-evicting, ...).
CAPACITY_FOLLOWS = "capacity-follows-evictions"
CAPACITY_KINDS = (
    CAPACITY_DROPPED,
    PENDING_LEFT,
    WINDOW_LONGER,
    READY_SLOWER,
    SKEW_WORSE,
    CAPACITY_BETTER,
    CAPACITY_FOLLOWS,
)
CAPACITY_INFORMATIVE = (CAPACITY_BETTER, CAPACITY_FOLLOWS)
CAPACITY_TRIGGERS = (CAPACITY_DROPPED, PENDING_LEFT)


@dataclass(frozen=True)
class FigureDiff:
    """One figure that differs between the tracks in one round."""

    kind: str  # one of CAPACITY_KINDS
    subject: str  # the owner, or ROUND
    figure: str  # min_available, below_desired_s, ready_latency_s, pending, final_skew, ...
    baseline: Any
    candidate: Any

    @property
    def detail(self) -> str:
        return f"{self.figure}: baseline {_say(self.baseline)}, candidate {_say(self.candidate)}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "detail": self.detail}


def _say(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def time_moved(b: float | None, c: float | None) -> int:
    """+1 when `c` is later than `b` past the slack, -1 when earlier, 0 otherwise (or unknown)."""
    if b is None or c is None:
        return 0
    slack = max(SLACK_S, SLACK_RATIO * b)
    return 1 if c - b > slack else -1 if b - c > slack else 0


def owner_diffs(owner: str, b: OwnerWindow, c: OwnerWindow) -> list[FigureDiff]:
    """One owner's window on both tracks: its capacity against desired, then its times."""
    out: list[FigureDiff] = []
    short_b, short_c = b.desired - b.min_available, c.desired - c.min_available
    if short_c > short_b or (b.recovered and not c.recovered):
        out.append(
            FigureDiff(
                CAPACITY_DROPPED,
                owner,
                "min available / desired (back to desired)",
                f"{b.min_available}/{b.desired} ({'yes' if b.recovered else 'no'})",
                f"{c.min_available}/{c.desired} ({'yes' if c.recovered else 'no'})",
            )
        )
    elif short_c < short_b or (c.recovered and not b.recovered):
        out.append(
            FigureDiff(
                CAPACITY_BETTER,
                owner,
                "min available / desired",
                f"{b.min_available}/{b.desired}",
                f"{c.min_available}/{c.desired}",
            )
        )
    for figure, kind in (("below_desired_s", WINDOW_LONGER), ("ready_latency_s", READY_SLOWER)):
        bv, cv = getattr(b, figure), getattr(c, figure)
        moved = time_moved(bv, cv)
        if moved:
            out.append(FigureDiff(kind if moved > 0 else CAPACITY_BETTER, owner, figure, bv, cv))
    return out


def capacity_diffs(b: RoundFigures, c: RoundFigures) -> list[FigureDiff]:
    """Every rebuild-window figure that differs between one round of each track.

    Owners are compared by name (the lab's workloads have the same names on both tracks); an
    owner with figures on one track only is not compared here (its pods' fates are). The
    round's Pending and final skew are compared as the runbook's list names them, and its
    replacement Ready latency where no owner's window was recorded. When the tracks evicted
    different numbers of pods, every figure but a pod left Pending is CAPACITY_FOLLOWS.
    """
    out: list[FigureDiff] = []
    for owner in sorted(set(b.availability) & set(c.availability)):
        bw = OwnerWindow.from_dict(b.availability[owner])
        cw = OwnerWindow.from_dict(c.availability[owner])
        out += owner_diffs(owner, bw, cw)
    if c.pending > b.pending:
        out.append(FigureDiff(PENDING_LEFT, ROUND, "pending", b.pending, c.pending))
    elif c.pending < b.pending:
        out.append(FigureDiff(CAPACITY_BETTER, ROUND, "pending", b.pending, c.pending))
    if not (b.availability and c.availability):  # no owner figures: the record's own latency
        moved = time_moved(b.ready_latency_s, c.ready_latency_s)
        if moved:
            kind = READY_SLOWER if moved > 0 else CAPACITY_BETTER
            out.append(
                FigureDiff(kind, ROUND, "ready_latency_s", b.ready_latency_s, c.ready_latency_s)
            )
    if b.final_skew is not None and c.final_skew is not None and b.final_skew != c.final_skew:
        kind = SKEW_WORSE if c.final_skew > b.final_skew else CAPACITY_BETTER
        out.append(FigureDiff(kind, ROUND, "final_skew", b.final_skew, c.final_skew))
    if b.evictions != c.evictions:  # every figure but a pod left Pending follows from that
        said = f" (the tracks evicted {b.evictions} and {c.evictions} pods)"
        out = [
            d
            if d.kind == PENDING_LEFT
            else FigureDiff(CAPACITY_FOLLOWS, d.subject, d.figure + said, d.baseline, d.candidate)
            for d in out
        ]
    return out


__all__ = [
    "CAPACITY_INFORMATIVE",
    "CAPACITY_KINDS",
    "CAPACITY_TRIGGERS",
    "FigureDiff",
    "capacity_diffs",
    "owner_diffs",
    "time_moved",
]
