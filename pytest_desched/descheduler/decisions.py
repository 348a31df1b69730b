"""What one descheduler round decided about each pod: the data every other module exchanges.

A fate always names the *layer* that allowed or stopped the eviction, because the
runbook's question is never just "was it evicted" but "which link decided".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_desched.descheduler.metrics_layer import metrics_stopped
from pytest_desched.outcome.fates import CHAIN, EVICTED_LABEL, FATE_LAYER, Fate, Layer

# Fate, Layer, CHAIN and FATE_LAYER live in outcome/fates.py; imported from here for one release.
__all__ = [
    "CHAIN",
    "FATE_LAYER",
    "Fate",
    "Layer",
    "PodDecision",
    "RoundResult",
    "RoundVerdict",
    "blocking_layers",
    "cycle_gap",
    "decide",
]


@dataclass
class PodDecision:
    """One pod's fate in one round, with the log fields that prove it."""

    namespace: str
    name: str
    fate: Fate
    layer: Layer
    node: str | None = None
    strategy: str | None = None
    profile: str | None = None
    status_code: int | None = None  # HTTP status of a refused eviction (429, 403, ...)
    reason: str | None = None  # API StatusReason (TooManyRequests, Forbidden) or evictor reason
    checks: list[str] = field(default_factory=list)  # failing DefaultEvictor checks
    message: str | None = None  # the log's msg key, never matched by automation

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class RoundResult:
    """Everything parsed out of one descheduler run's JSON log."""

    decisions: list[PodDecision] = field(default_factory=list)
    dry_run: bool = False
    skipped: str | None = None  # e.g. fewer than 2 ready nodes
    total_evicted: int | None = None  # from "Number of evictions/requests"
    eviction_requests: int | None = None
    errors: list[str] = field(default_factory=list)  # error lines tied to no pod
    lines: int = 0
    unparsed: int = 0  # non-JSON lines (flags banner, panics)

    def for_pod(self, namespace: str, name: str) -> list[PodDecision]:
        return [d for d in self.decisions if d.namespace == namespace and d.name == name]

    def in_namespace(self, namespace: str) -> list[PodDecision]:
        return [d for d in self.decisions if d.namespace == namespace]

    def in_namespaces(self, namespaces: Iterable[str]) -> list[PodDecision]:
        """The decisions about pods of any of `namespaces` (every namespace a lab owns)."""
        wanted = set(namespaces)
        return [d for d in self.decisions if d.namespace in wanted]

    def by_fate(self, fate: Fate, namespace: str | None = None) -> list[PodDecision]:
        return [
            d
            for d in self.decisions
            if d.fate == fate and (namespace is None or d.namespace == namespace)
        ]

    def counts(self, namespace: str | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.decisions:
            if namespace is None or d.namespace == namespace:
                out[d.fate.value] = out.get(d.fate.value, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for item in d["decisions"]:
            item["fate"] = item["fate"].value
            item["layer"] = item["layer"].value
        return d


def blocking_layers(decisions: list[PodDecision]) -> list[Layer]:
    """Every layer that stopped some pod, in order of first appearance."""
    out: list[Layer] = []
    for d in decisions:
        if d.fate not in (Fate.EVICTED, Fate.DRY_RUN) and d.layer not in out:
            out.append(d.layer)
    return out


@dataclass(frozen=True)
class RoundVerdict:
    """What decided a round, by the one rule every record, summary and JUnit property uses.

    `verdict` is `evicted`, `stopped-by:<layer>`, `skipped:<why>`, `dry-run` or
    `no-candidates`; `label` is the short form shown on terminal lines and in JUnit.
    """

    verdict: str
    layer: Layer | None = None

    @property
    def label(self) -> str:
        if self.verdict == Fate.EVICTED:
            return EVICTED_LABEL
        if self.layer is not None:
            return self.layer.value
        return self.verdict.split(":", 1)[0]


def decide(
    decisions: list[PodDecision],
    skipped: str | None = None,
    replacement: str | None = None,
    errors: Iterable[str] = (),
) -> RoundVerdict:
    """The deciding layer of a round's decisions (pass only the lab's own pods).

    `replacement` is what followed an eviction, when the caller watched it: `ready`,
    `missing` (the controller made none) or `pending` (the scheduler placed none).
    `errors` are the round's error lines (`RoundResult.errors`): a round no pod's fate
    decided is `stopped-by:metrics` when one proves the metrics source stopped it.
    """
    if skipped:
        return RoundVerdict(f"skipped:{skipped}")
    if any(d.fate == Fate.EVICTED for d in decisions):
        if replacement == "missing":
            return RoundVerdict(f"stopped-by:{Layer.CONTROLLER.value}", Layer.CONTROLLER)
        if replacement == "pending":
            return RoundVerdict(f"stopped-by:{Layer.SCHEDULER.value}", Layer.SCHEDULER)
        return RoundVerdict(Fate.EVICTED.value, Layer.API_SERVER)
    blocking = blocking_layers(decisions)
    if blocking:
        rank = {layer: i for i, layer in enumerate(CHAIN)}
        layer = max(blocking, key=lambda la: rank.get(la, -1))
        return RoundVerdict(f"stopped-by:{layer.value}", layer)
    if any(d.fate == Fate.DRY_RUN for d in decisions):
        return RoundVerdict(Fate.DRY_RUN.value, Layer.DRY_RUN)
    if metrics_stopped(errors) is not None:
        return RoundVerdict(f"stopped-by:{Layer.METRICS.value}", Layer.METRICS)
    return RoundVerdict("no-candidates")


def cycle_gap(skipped: str | None, succeeded: bool | None, exit_code: int | None) -> str | None:
    """Why a round completed no descheduling cycle, or None when it is proven to have done so.

    The proof is a cycle that was not skipped in a Job that completed with exit 0. An exit
    code that was not measured (None) proves nothing: "not measured", never success.
    """
    if skipped:
        return f"skipped: {skipped}"
    if exit_code is None:
        return "its exit code was not measured" + (
            "" if succeeded else "; its Job did not complete"
        )
    if exit_code != 0:
        return f"its Job's pod exited {exit_code}"
    if succeeded is not True:
        return "its Job did not complete (exit 0, no Complete condition)"
    return None
