"""Multi-cycle runs: K descheduling cycles as K Jobs from the suspended CronJob, and each fate.

Why K Jobs and not one long-running descheduler with `--descheduling-interval`: the runbook
allows evictions only through Jobs created from the suspended CronJob, and the chart renders
no interval (one cycle per Job, CONTEXT.md); a Job per cycle gives each cycle its own log,
Job UID, audit window and record, so every fate is tied to its cycle by construction, not by
splitting one log on timestamps. It is also the faster path here: between two Jobs the lab
waits only until it has settled (the replacements Ready, the PDB's status caught up, what a
CronJob's next tick would find), where an interval is a fixed sleep the descheduler takes.

The experiment's own `act`/`assess` run (and judge) cycle 1; cycles 2..K follow with the
experiment's `between_cycles(n)` hook before each, then the loop detector
(evidence/loops.py) reads every cycle. `ExperimentContext.no_loop` makes "no eviction loop
in K cycles" a check.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pytest_desched.bounds import cycles_to_run
from pytest_desched.descheduler.decisions import Fate, decide
from pytest_desched.errors import WaitTimeout
from pytest_desched.evidence.loops import cycles_from_records, detect
from pytest_desched.kube import wait_for

if TYPE_CHECKING:
    from pytest_desched.experiments.declared import Experiment
    from pytest_desched.experiments.framework import RoundView, Runner
    from pytest_desched.lab import Snapshot
    from pytest_desched.lab.snapshot import PodInfo


NO_LOOP = "no-eviction-loop"  # the check `no_loop` adds: passes only on a proven verdict
NO_LOOP_NAME = "no eviction loop in {k} cycle(s), proven (evidence/loops.py)"
NO_CYCLE = "not proven: the experiment ran no descheduling cycle"


def owner_ref(p: PodInfo) -> str:
    """What a replacement shares with the pod it replaces: namespace/Kind/name of its owner."""
    return f"{p.namespace}/{p.owner_kind or '-'}/{p.owner or p.name}"


def pod_row(p: PodInfo) -> dict[str, Any]:
    return {
        "key": p.key,
        "uid": p.uid,
        "node": p.node,
        "owner_ref": owner_ref(p),
        "ready": p.ready,
        "phase": p.phase,
    }


def observe(
    cycle: int, view: RoundView, after: Snapshot, settled: bool | None, note: str = ""
) -> dict[str, Any]:
    """One cycle's entry: every lab pod's fate (deciding layer, strategy, reason), who left
    which node, who appeared where, and the pods before and after."""
    before = {p.key: p for p in view.before.live}
    before_uids = {p.uid for p in view.before.pods}
    fates = [
        {
            "pod": d.key,
            "uid": before[d.key].uid if d.key in before else None,
            "node": d.node or (before[d.key].node if d.key in before else None),
            "fate": d.fate.value,
            "layer": d.layer.value,
            "strategy": d.strategy,
            "reason": d.reason,
            "status_code": d.status_code,
            "checks": list(d.checks),
            "message": d.message,
        }
        for d in view.decisions
    ]
    evicted = [
        pod_row(before[d.key])
        for d in view.decisions
        if d.fate == Fate.EVICTED and d.key in before  # else: only in `fates`
    ]
    arrived = [pod_row(p) for p in after.live if p.uid not in before_uids]
    verdict = decide(view.decisions, view.rnd.result.skipped, errors=view.rnd.result.errors)
    return {
        "cycle": cycle,
        "round": view.rnd.name,
        "job_uid": view.rnd.job_uid,
        "verdict": verdict.verdict,
        "deciding_layer": verdict.label,
        "skipped": view.rnd.result.skipped,
        "exit_code": view.rnd.exit_code,  # not 0: the log may stop before the cycle's end
        "fates": fates,
        "evicted": evicted,
        "arrived": arrived,
        "pods_before": [pod_row(p) for p in view.before.live],
        "pods_after": [pod_row(p) for p in after.live],
        "settled": settled,
        "note": note,
    }


def settle(runner: Runner, before: Snapshot, timeout: float) -> tuple[Snapshot, bool, str]:
    """Wait until the lab is what the next CronJob tick would find: as many live pods as
    before the round, none terminating, no more Pending than before, and the PDB's status
    caught up with the Ready pods it covers. Not settling is recorded, never hidden."""
    lab = runner.lab
    want, pending = len(before.live), len(before.pending())

    def done(s: Snapshot) -> bool:
        if any(p.deleting for p in s.pods) or len(s.live) < want or len(s.pending()) > pending:
            return False
        pdb = s.pdb
        if pdb is None:
            return True
        covered = [p for p in s.ready() if p.workload == lab.app]
        return pdb["observedGeneration"] == pdb["generation"] and pdb["currentHealthy"] == len(
            covered
        )

    def seen(s: Snapshot) -> str:
        return (
            f"pods {[(p.name, p.node, p.phase, p.ready, p.deleting) for p in s.pods]}, pdb {s.pdb}"
        )

    try:
        return (
            wait_for("the lab to settle between cycles", lab.snapshot, done, timeout, seen),
            True,
            "",
        )
    except WaitTimeout as exc:
        return lab.snapshot(), False, str(exc)


def run_cycles(runner: Runner, exp: Experiment) -> None:
    """Cycles 2..K after the experiment's own, each fate kept; then the loop verdict."""
    ctx, result = runner.ctx, runner.result
    k = cycles_to_run(ctx.cycles, exp.default_cycles)
    own = list(runner.views)  # the experiment's own rounds are cycles 1..m
    if not own:
        if ctx.no_loop:  # asked for, and no cycle ran: no loop could have been seen
            runner.check(NO_LOOP, NO_LOOP_NAME.format(k=k), False, NO_CYCLE)
        return
    entries: list[dict[str, Any]] = []
    if k > 1:  # the CronJob keeps 3 finished Jobs (successfulJobsHistoryLimit): read each now
        for view in own:
            view.rnd.settle(ctx.cluster)
    for i, view in enumerate(own, 1):
        if i < len(own):
            after, ok, note = own[i].before, None, ""
        elif k > 1:  # a multi-cycle run's last own cycle settles too: its arrivals count
            after, ok, note = settle(runner, view.before, ctx.recovery_timeout)
        else:
            after, ok, note = runner.lab.snapshot(), None, ""
        entries.append(observe(i, view, after, ok, note))
    base = own[0].rnd.name
    for n in range(len(own) + 1, k + 1):
        exp.between_cycles(n)
        runner.stop_recording()  # the previous cycle's watches: each cycle has its own
        t0 = time.monotonic()
        # The Job controller's verdict on a cycle's Job comes up to its 1 s batch after the
        # pod exited. Read it for cycle n-2 before cycle n, not at once (by then it is there
        # and nothing waits): the CronJob keeps the 3 newest finished Jobs, so cycle n-2's
        # Job is still there (cycle n+1's would push it out).
        for view in runner.views[: max(0, n - 2)]:
            view.rnd.settle(ctx.cluster)
        view = runner.run_round(f"{base}-c{n}")
        after, ok, note = settle(runner, view.before, ctx.recovery_timeout)
        entries.append(observe(n, view, after, ok, note))
        result.timings[f"cycle_{n}"] = round(time.monotonic() - t0, 3)
    for view in runner.views if k > len(own) else ():  # the last cycles' verdicts
        view.rnd.settle(ctx.cluster)
    verdict = detect(cycles_from_records(entries))
    result.cycles = entries
    result.loops = verdict.to_dict()
    if k > 1:  # a one-cycle run keeps its records and count as they were
        result.evictions = sum(len(e["evicted"]) for e in entries)
        for view, entry in zip(runner.views, entries, strict=False):
            view.extra["cycle"] = {**entry, "of": k}
        result.notes.append(f"{k} cycles: {verdict.summary()}")
    if k > 1 and ctx.evidence is not None:  # `desched explain POD --record .../cycles.json`
        ctx.evidence.write_json(
            runner.label,
            "cycles",
            {"experiment": runner.label, "cycles": entries, "loops": result.loops},
            max_bytes=4 << 20,
        )
    if ctx.no_loop:  # passes only where a loop could have been seen (LoopVerdict.proven)
        runner.check(NO_LOOP, NO_LOOP_NAME.format(k=k), verdict.proven, verdict.summary())
    exp.after_cycles()
