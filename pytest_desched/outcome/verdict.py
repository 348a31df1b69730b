"""The one verdict every use ends with: pass, fail or no verdict, why, and the exit code.

The canary, a replay, the dry-run fidelity check and the canary matrix each judge by their own
evidence, but they answer the same question ("is this a verdict against you?") in the same
three words, and the library call returns the same answer the command prints: the command
only shows the reasons and exits with `exit_code` (errors.EXIT_CODES documents them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from pytest_desched.errors import EXIT_FAILED, EXIT_INFRA, EXIT_OK


class Outcome(StrEnum):
    PASS = "pass"  # exit 0
    FAIL = "fail"  # a verdict against you: exit 1
    NO_VERDICT = "no-verdict"  # nothing could be judged (a track, a round, a comparison): exit 3


EXIT_CODE = {Outcome.PASS: EXIT_OK, Outcome.FAIL: EXIT_FAILED, Outcome.NO_VERDICT: EXIT_INFRA}


@dataclass(frozen=True)
class Verdict:
    """What a use decided, the reasons for it, and the exit code its command ends with."""

    outcome: Outcome
    reasons: tuple[str, ...] = ()
    # What the verdict names without counting it either way: e.g. a canary's changes the
    # control plane explains when the tracks' Kubernetes differ (canary/control_plane.py).
    notes: tuple[str, ...] = ()
    exit_code: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", Outcome(self.outcome))
        object.__setattr__(self, "exit_code", EXIT_CODE[self.outcome])

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.PASS

    @classmethod
    def of(cls, failures: Iterable[str] = (), unjudged: Iterable[str] = ()) -> Verdict:
        """Fail on any failure, else no verdict on anything left unjudged, else pass: a verdict
        against you outranks no verdict (a failure is news even when something else could not
        be compared)."""
        failed, left = tuple(failures), tuple(unjudged)
        if failed:
            return cls(Outcome.FAIL, failed)
        if left:
            return cls(Outcome.NO_VERDICT, left)
        return cls(Outcome.PASS)

    def to_dict(self) -> dict[str, object]:
        return {
            "outcome": self.outcome.value,
            "reasons": list(self.reasons),
            **({"notes": list(self.notes)} if self.notes else {}),
            "exit": self.exit_code,
        }


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Several runs' verdicts as one (fidelity over experiments, replay --repeat): any failure
    fails, else any run not judged leaves no verdict, else pass; the reasons of that outcome."""
    got = list(verdicts)

    def reasons(outcome: Outcome) -> list[str]:
        mine = [v for v in got if v.outcome == outcome]
        return [r for v in mine for r in v.reasons] or ([outcome.value] if mine else [])

    return Verdict.of(reasons(Outcome.FAIL), reasons(Outcome.NO_VERDICT))


__all__ = ["EXIT_CODE", "Outcome", "Verdict", "combine"]
