"""The floor of the suite's work, and the ratios against it (pure arithmetic, unit-tested).

The floor is what the suite cannot do without on this machine, measured by the plain
script's own steps in the same invocation (bench/plain_runbook.sh prints one `[timing]` line
per step): a bare `kwokctl create cluster --wait` and its 3 nodes Ready, one `helm install`,
the three rounds (the Job created until its pod is scheduled, and the descheduler's run
to its exit), and one namespace
deletion where the work needs one (a cluster that stays; a discarded embedded cluster's
namespaces go with it). Everything else either side does (checks, labels, the Deployment,
the policy upgrade, teardown) is above the floor.

A second floor, `floor_with_arrange`, adds the lab's minimal arrange per experiment as the
same script does it in its fastest form, measured in the same run (ARRANGE: the namespace
and the Deployment to Ready pods, the label move, the PDB to its disruptionsAllowed, and
each experiment's own change: nodefit's label removal, pdb's PDB at zero), none of its
checks. The first floor's definition is unchanged.

The third, `floor_with_arrange_and_verdict`, is the one issue 31's note argued for: the second
plus each round's verdict as the script gets it (VERDICT: the round pod's terminated status
written, as a kubelet would, until the Job's Complete condition, which kube-controller-
manager batches by its constant one-second `SyncJobBatchPeriod`). A suite cannot report a
round's outcome before the Job controller has given it, so neither can its floor.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

EXPERIMENTS = ("positive", "nodefit", "pdb")
# floor part -> the script's steps that make it (summed; a round is the Job's creation until
# its pod is scheduled, `.round.schedule`, and the descheduler's run to its exit,
# `.round.descheduler`; reading the policy, the token and the status writes are the script's)
PARTS: dict[str, tuple[str, ...]] = {
    "bring_up": ("bring-up.kwokctl-create", "bring-up.nodes"),
    "install": ("install.helm-install",),
    **{f"round.{e}": (f"{e}.round.schedule", f"{e}.round.descheduler") for e in EXPERIMENTS},
}
NAMESPACE_STEPS = tuple(f"{e}.teardown.namespace" for e in EXPERIMENTS)
# The lab's minimal arrange per experiment: the script's commands that make the lab state
# (kubectl create / label / patch and kubectl's own waits), not its checks.
_ARRANGE_COMMON = ("arrange.deploy", "arrange.move", "arrange.pdb")
ARRANGE: dict[str, tuple[str, ...]] = {
    e: tuple(f"{e}.{s}" for s in _ARRANGE_COMMON) for e in EXPERIMENTS
}
ARRANGE["nodefit"] += ("nodefit.arrange.unlabel",)
ARRANGE["pdb"] += ("pdb.arrange.pdb-zero",)
VERDICT: dict[str, str] = {e: f"{e}.round.finish" for e in EXPERIMENTS}


def step_times(steps: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The script's `[timing]` steps as {step: seconds} (a repeated step is summed)."""
    out: dict[str, float] = {}
    for s in steps:
        out[s["step"]] = out.get(s["step"], 0.0) + float(s["s"])
    return out


def floor_of(steps: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """One script run's floor parts; KeyError names a step the run did not time."""
    t = step_times(steps)
    missing = [s for part in PARTS.values() for s in part if s not in t]
    missing += [s for s in NAMESPACE_STEPS if s not in t]
    missing += [s for part in ARRANGE.values() for s in part if s not in t]
    missing += [s for s in VERDICT.values() if s not in t]
    if missing:
        raise KeyError(f"the plain script timed no step {missing[0]!r}")
    out = {part: round(sum(t[s] for s in names), 3) for part, names in PARTS.items()}
    out["rounds"] = round(sum(out[f"round.{e}"] for e in EXPERIMENTS), 3)
    out["namespace_deletion"] = round(min(t[s] for s in NAMESPACE_STEPS), 3)
    out["floor"] = round(out["bring_up"] + out["install"] + out["rounds"], 3)
    out["floor_with_namespace"] = round(out["floor"] + out["namespace_deletion"], 3)
    for e, names in ARRANGE.items():
        out[f"arrange.{e}"] = round(sum(t[s] for s in names), 3)
    out["arrange"] = round(sum(out[f"arrange.{e}"] for e in EXPERIMENTS), 3)
    out["floor_with_arrange"] = round(out["floor"] + out["arrange"], 3)
    out["floor_with_arrange_and_namespace"] = round(out["floor_with_namespace"] + out["arrange"], 3)
    for e, step in VERDICT.items():
        out[f"verdict.{e}"] = round(t[step], 3)
    out["verdicts"] = round(sum(out[f"verdict.{e}"] for e in EXPERIMENTS), 3)
    out["floor_with_arrange_and_verdict"] = round(out["floor_with_arrange"] + out["verdicts"], 3)
    out["floor_with_arrange_and_verdict_and_namespace"] = round(
        out["floor_with_arrange_and_namespace"] + out["verdicts"], 3
    )
    return out


def median_floor(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The median of every floor part over the script's runs."""
    if not runs:
        return {}
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}


def ratio(numerator: Sequence[float], denominator: Sequence[float] | float) -> float | None:
    """median(numerator) / median(denominator), rounded; None without data."""
    if not numerator:
        return None
    den = denominator if isinstance(denominator, float | int) else None
    if den is None:
        if not denominator:
            return None
        den = statistics.median(denominator)  # type: ignore[arg-type]
    return round(statistics.median(numerator) / den, 3) if den else None
