"""An experiment's result: its checks, outcome, blocking layer, records and artifacts.

The one value every front end reads (pytest's report, the CLI, the canary, the HTML page);
`raise_for_outcome` is how the pytest front end turns it into a pass, xfail or failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pytest_desched.descheduler.known_bugs import RoundFacts, observed, signatures
from pytest_desched.errors import ExperimentFailed, KnownUpstreamBug

if TYPE_CHECKING:
    from pytest_desched.descheduler.rounds import Round


@dataclass
class Check:
    """One named expectation. `id` is stable (known bugs and automation key on it)."""

    id: str
    name: str
    ok: bool
    detail: str = ""
    known_bug: str | None = None  # a tolerating known bug that accounts for a shortfall


Outcome = Literal["pass", "xfail", "fail", "error"]


@dataclass
class ExperimentResult:
    """Everything one experiment found; evidence, terminal lines and JUnit all read this.

    `outcome`: `pass`; `xfail` (only checks a registered known bug explains failed, its
    signature proven, see known_bugs); `fail` (a check failed); `error` (a step raised:
    `error` holds the traceback). `message` says why for anything but a pass.
    """

    name: str
    variant: str
    outcome: Outcome = "pass"
    message: str = ""
    error: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # step -> seconds (benchmark)
    checks: list[Check] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    evictions: int = 0
    blocking_layer: str | None = None  # descheduler.decisions.decide(...).label of the last round
    verdict: str = ""
    ready_latency_s: float | None = None
    policy_digest: str = ""
    overrides: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    classification: dict[str, Any] = field(default_factory=dict)
    known_bugs: dict[str, str] = field(default_factory=dict)
    # Every registered bug's signature the rounds showed, whatever releases the registry says
    # have it: how a release matrix proves (or disproves) a bug's `affected` set.
    signatures_seen: dict[str, str] = field(default_factory=dict)
    # Multi-cycle runs (experiments/cycles.py): each cycle's fates and the loop detector's
    # verdict (evidence/loops.py LoopVerdict.to_dict()); one entry for a one-cycle run.
    cycles: list[dict[str, Any]] = field(default_factory=list)
    loops: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def label(self) -> str:
        return f"{self.name}[{self.variant}]"

    def note_signatures(self, facts: RoundFacts) -> None:
        """A round's known-bug signatures: for bugs the registry gives this release
        (`known_bugs`, what may excuse a failure) and for any bug (`signatures_seen`)."""
        self.known_bugs.update(signatures(facts))
        self.signatures_seen.update(observed(facts))

    def raise_for_outcome(self) -> ExperimentResult:
        """For test code: pass returns the result; xfail raises KnownUpstreamBug; else fails."""
        if self.outcome == "pass":
            return self
        if self.outcome == "xfail":
            raise KnownUpstreamBug(self.message, self)
        raise ExperimentFailed(self.message, self)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "variant": self.variant,
            "outcome": self.outcome,
            "message": self.message,
            "evictions": self.evictions,
            "blocking_layer": self.blocking_layer,
            "verdict": self.verdict,
            "ready_latency_s": self.ready_latency_s,
            "checks": [c.__dict__ for c in self.checks],
            "duration_s": round(self.duration_s, 2),
            "policy_digest": self.policy_digest,
            "overrides": self.overrides,
            "notes": self.notes,
            "classification": self.classification,
            "known_bugs": self.known_bugs,
            "signatures_seen": self.signatures_seen,
            "cycles": len(self.cycles),
            "loops": self.loops,
        }
