"""`replay --repeat N`: the same replay N times, each on a fresh cluster, and whether the
eviction set came out the same every time.

Each evicted pod is counted by its identity in the comparison core (`outcome/identity.py`):
owner, generation of replacement, node, strategy, layer, fate; never its name, since a
replacement's name is its controller's random one (a second-generation replacement named
after the first one's random name made identical runs differ). Why this matters: the
descheduler walks pods in informer order and the caps cut that walk, so which pods of a set go
can differ between runs of the same input; SimKube says so of its reruns. This names the
identities that differ and how many pods each had per run, instead of claiming or denying
determinism. A run whose every round was skipped measured nothing: it is listed as not
compared and the answer is "not comparable", never "same".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pytest_desched.descheduler.decisions import cycle_gap
from pytest_desched.outcome.identity import (
    NOT_COMPARABLE,
    Identity,
    NotCompared,
    answer_label,
    compare_runs,
    counted,
)
from pytest_desched.outcome.verdict import Verdict
from pytest_desched.replay.ledger import evictions, unmeasured


def run_comparison(ledgers: list[Any]) -> dict[str, Any]:
    """Same in all runs (over the runs that measured something), or which identities differ."""
    runs: list[dict[str, Identity]] = []
    numbers: list[int] = []  # which runs were compared (1-based)
    left_out: list[NotCompared] = []
    for i, ledger in enumerate(ledgers, 1):
        why = unmeasured(ledger)
        if why:
            left_out.append(NotCompared(f"run {i}", why))
        else:
            runs.append(evictions(ledger))
            numbers.append(i)
    c = compare_runs(runs, left_out)
    bags = [counted(r) for r in runs]
    common = set.intersection(*(set(b) for b in bags)) if bags else set()
    always = [i for i in common if len({b[i] for b in bags}) == 1]
    return {
        "runs": len(ledgers),
        "compared_runs": numbers,
        "same": c.same,
        "coverage": c.coverage.to_dict() if c.coverage else None,
        "distinct_sets": len({frozenset(b.items()) for b in bags}),
        "evicted_in_every_run": sorted(f"{i.label} x{bags[0][i]}" for i in always),
        "differ": [d.to_dict() for d in c.differences],
        "not_compared": [n.to_dict() for n in c.not_compared],
        "per_run": [sum(Counter(r.values()).values()) for r in runs],
    }


def markdown(cmp: dict[str, Any]) -> str:
    lines = ["## Repeats", ""]
    cov = cmp.get("coverage") or {}
    lines.append(f"- the same eviction set: {answer_label(cmp['same'])} ({cov.get('line')})")
    if cmp["same"] is True:
        lines.append(f"- evicted in every run: {len(cmp['evicted_in_every_run'])} pod identities")
    if cmp["differ"]:
        lines.append(
            f"- the eviction set differed: {cmp['distinct_sets']} distinct sets over the "
            f"compared runs; {len(cmp['evicted_in_every_run'])} identities the same in every run"
        )
        lines += [
            f"- `{d['label']}`: {_per_run(cmp['compared_runs'], d['pods'])}"
            for d in cmp["differ"][:200]
        ]
    lines += [f"- not compared: {n['pod']}: {n['why']}" for n in cmp["not_compared"]]
    lines.append(f"- evictions per compared run: {cmp['per_run']}")
    return "\n".join(lines) + "\n"


def _per_run(numbers: list[int], pods: list[list[str]]) -> str:
    return "; ".join(
        f"run {i}: {len(p)} ({', '.join(p) or 'none'})" for i, p in zip(numbers, pods, strict=True)
    )


def repeat(run: Callable[[int], Any], n: int, report: Callable[[str], None]) -> dict[str, Any]:
    """`run(i)` -> a ReplayResult, n times; the comparison (results kept under `results`)."""
    results = []
    for i in range(1, n + 1):
        report(f"repeat {i}/{n}")
        res = run(i)
        results.append(res)
        report(f"repeat {i}/{n}: {len(evictions(res.ledger))} pods evicted")
    return {**run_comparison([r.ledger for r in results]), "results": results}


# -- the verdict (the replay library call's and the command's exit code) -------------------
def not_comparable(results: list[Any], repeats: dict[str, Any] | None) -> bool:
    """A verdict asked for (--log, --repeat) that compared nothing: exit 3, as the canary's
    NO VERDICT; the report says "not comparable" and why."""
    verdicts = [repeats.get("same")] if repeats is not None else []
    for res in results:
        c = res.ledger.comparison or {}  # none: no --log given, no verdict asked for
        verdicts += [
            c.get(k) for k in ("same_evictions", "same_refusals", "same_fates_up_to_order")
        ]
    return NOT_COMPARABLE in verdicts


def failed_rounds(results: list[Any]) -> list[str]:
    """Each replayed round whose Job is not proven to have completed with exit 0: failed, or
    its exit code not measured (None is "not measured", never success)."""
    return [
        f"{r.name}: {gap}"
        for res in results
        for r in res.ledger.rounds
        if (
            gap := cycle_gap(
                None, (r.extra or {}).get("succeeded"), (r.extra or {}).get("exit_code")
            )
        )
    ]


def replay_verdict(results: list[Any], repeats: dict[str, Any] | None = None) -> Verdict:
    """One replay's verdict (or --repeat N's, with `repeats` their comparison): fail (exit 1)
    when a round is not proven to have completed, a timeline change failed to apply or a round
    ran on a stale state; else no verdict (exit 3) when a comparison asked for (--log,
    --repeat) compared nothing; else pass."""
    failed = failed_rounds(results)
    # a timeline change that failed to apply, a round run on a stale state (timeline_run)
    failed += [f for res in results for f in (res.timeline or {}).get("failures") or []]
    unjudged = (
        ["a comparison asked for compared nothing"] if not_comparable(results, repeats) else []
    )
    return Verdict.of(failed, unjudged)
