"""`replay --repeat N`: the same replay N times, each on a fresh cluster, and whether the
eviction set (per pod identity) came out the same every time.

A pod's identity is its name in the snapshot (restored pods keep their names); a replacement
made during the replay is named by the pod it replaced (`replacement of ns/pod`), since its
own name is the controller's random one. Why this matters: the descheduler walks pods in
informer order and the caps cut that walk, so which pods of a set go can differ between runs
of the same input; SimKube says so of its reruns. This names the pods that differ and in how
many runs each was evicted, instead of claiming or denying determinism.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pytest_desched.descheduler.decisions import Fate


def eviction_set(ledger: Any) -> set[str]:
    """Identities of the pods evicted in any round of one replay."""
    out = set()
    for row in ledger.rows:
        if any(f.fate == Fate.EVICTED.value for f in row.fates):
            out.add(row.origin if row.origin.startswith("replacement of") else row.pod)
    return out


def compare_runs(sets: list[set[str]]) -> dict[str, Any]:
    """Same in all runs, or which pods differ and in how many runs each was evicted."""
    n = len(sets)
    counts: Counter[str] = Counter(p for s in sets for p in s)
    always = sorted(p for p, k in counts.items() if k == n)
    differ = [{"pod": p, "evicted_in_runs": k, "of": n} for p, k in sorted(counts.items()) if k < n]
    distinct = len({frozenset(s) for s in sets})
    return {
        "runs": n,
        "same": not differ,
        "distinct_sets": distinct,
        "evicted_in_every_run": always,
        "differ": differ,
        "per_run": [len(s) for s in sets],
    }


def markdown(cmp: dict[str, Any]) -> str:
    lines = ["## Repeats", ""]
    if cmp["same"]:
        lines.append(
            f"- the same eviction set in all {cmp['runs']} runs: "
            f"{len(cmp['evicted_in_every_run'])} pods"
        )
    else:
        lines.append(
            f"- the eviction set differed: {cmp['distinct_sets']} distinct sets in "
            f"{cmp['runs']} runs; {len(cmp['evicted_in_every_run'])} pods evicted in every run"
        )
        lines += [
            f"- `{d['pod']}`: evicted in {d['evicted_in_runs']} of {d['of']} runs"
            for d in cmp["differ"][:200]
        ]
    lines.append(f"- evictions per run: {cmp['per_run']}")
    return "\n".join(lines) + "\n"


def repeat(run: Callable[[int], Any], n: int, report: Callable[[str], None]) -> dict[str, Any]:
    """`run(i)` -> a ReplayResult, n times; the comparison (results kept under `results`)."""
    results, sets = [], []
    for i in range(1, n + 1):
        report(f"repeat {i}/{n}")
        res = run(i)
        results.append(res)
        sets.append(eviction_set(res.ledger))
        report(f"repeat {i}/{n}: {len(sets[-1])} pods evicted")
    return {**compare_runs(sets), "results": results}
