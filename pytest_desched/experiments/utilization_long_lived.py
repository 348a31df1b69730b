"""The *missing* metrics source under a long-lived descheduler (issue 50).

`utilization-missing` runs the runbook's Job: a fresh process whose metrics collector has no
value for a node it cannot fetch, so LowNodeUtilization refuses the round (fails closed).
A descheduler that lives across cycles (`--descheduling-interval`, the chart's Deployment
mode) keeps its collector: metricscollector.go:131-133 (v0.35.1 and v0.36.0 alike) skips a
node whose fetch failed, "duplicate the previous value", so its last pre-outage value stays.

`utilization-long-lived-missing`, on the `utilization` lab and policy (hot 4 x 800m on one
node, thresholds 20% / 50%, the runbook's caps), in one experiment:

1. a long-lived process (descheduler/long_lived.py: the round Job from the suspended CronJob
   with the interval added, bounded, dry-run as the CronJob has it) runs its first cycle on
   live metrics: the hot node overutilized, the others under, one eviction (the cap);
2. metrics-server is stopped; once `metrics.k8s.io` answers nothing and the collector has
   logged a failed fetch for every node, the process's next cycle runs. The rule: a missing
   source must make the policy fail closed or skip the round. Checks: that cycle classified
   no node and evicted nothing (log, UIDs, audit). A release that classifies on the kept
   values fails them; the known cause `desched:long-lived-keeps-pre-outage-usage` excuses only
   those three, proven from the process's own log;
3. the process is stopped (its Job deleted, the stand-in kubelet ends it, its log kept), and a
   plain Job round runs under the same outage: the intended behaviour, never excused (the
   source's error lines, nothing classified, nothing evicted).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from pytest_desched.descheduler.long_lived import LongLivedMode, LongLivedResult, check_stopped
from pytest_desched.descheduler.long_lived import running as long_lived
from pytest_desched.descheduler.utilization_log import (
    FETCH_ERROR,
    NO_NODE_METRICS,
    Cycle,
    classified_on_failed_fetch,
    fetch_errors_since,
)
from pytest_desched.experiments.utilization import TARGET, UtilizationBase
from pytest_desched.kube import wait_for

INTERVAL_S = 30  # room, under load, to stop metrics-server between cycle 1 and cycle 2
MAX_CYCLES = 4  # cycle 1 live, then up to 3 for the first one wholly inside the outage
# The outage cycle's checks. Only the first may be excused, by its proven cause (known_bugs:
# desched:long-lived-keeps-pre-outage-usage); an eviction in that cycle is never excused.
STALE_CYCLE_CHECKS = (
    "ll-outage-cycle-classifies-nothing",
    "ll-outage-cycle-evicts-nothing",
    "ll-outage-cycle-no-eviction-request",
)


def _cycle_line(c: Cycle) -> str:
    got = {n: (u.category, u.percent.get("cpu")) for n, u in sorted(c.classified.items())}
    return f"cycle {c.number}: classified {got}, evicted {list(c.evicted)}"


class UtilizationLongLivedMissing(UtilizationBase):
    """A long-lived descheduler whose metrics source goes away after a good first cycle:
    the next cycle must classify nothing and evict nothing; a plain Job round under the same
    outage fails closed."""

    name = "utilization-long-lived-missing"
    title = "utilization-kubernetes-metrics-long-lived-missing"
    mode = LongLivedMode(INTERVAL_S, MAX_CYCLES)

    def act(self) -> None:
        # optional: the embedded provider's fault injector, only where this experiment runs
        from pytest_desched.providers.embedded.faults import Faults

        ctx = self.ctx
        name = f"descheduler-{self.name}" + (f"-{ctx.lane}" if ctx.lane else "")
        self.s_before = self.lab.snapshot()
        faults = Faults(ctx.cluster)
        with long_lived(ctx.cluster, ctx.release, name[:52], self.mode, ctx.log_dir) as run:
            first = run.wait_cycles(
                "its first cycle to end",
                lambda cs: bool(cs) and cs[0].end_ms is not None,
                timeout=self.mode.deadline_s,
            )[0]
            self.settle(self.hot)  # cycle 1's replacement Ready: the lab is still before the outage
            with faults.metrics_server_down():
                stopped_ms = time.time() * 1000  # the log's `ts` is wall-clock ms
                self.gone = self.lab.node_usage(self.node)
                # the collector's next fetch of every node fails (it runs every 5 s)
                failed_at = self._fetch_errors_for_all(run, stopped_ms)
                self.s_outage = self.lab.snapshot()
                cs = run.wait_cycles(
                    "a cycle that began after every node's fetch failed, to end",
                    lambda cs: any(c.start_ms > failed_at and c.end_ms for c in cs),
                    timeout=self.mode.deadline_s,
                )
                self.outage_cycle = next(c for c in cs if c.start_ms > failed_at and c.end_ms)
                self.gone_after = {n: self.lab.node_usage(n) for n in self.workers}
                self.ll: LongLivedResult = run.stop()
                self.ll_log = (
                    ctx.evidence.write_log(self.r.label, self.ll.name, self.ll.logs)
                    if ctx.evidence is not None
                    else self.ll.log_path
                )
                self.s_after = self.lab.snapshot()
                self.job = self.round("job")  # the runbook's Job, same outage: fails closed
        self.first = first
        self.r.result.notes.append(
            "fault: " + "; ".join(f"{e.fault} {e.action} {e.detail}" for e in faults.events)
        )
        self.r.result.notes.append(
            f"long-lived {self.ll.name} (--descheduling-interval={INTERVAL_S}s, job uid "
            f"{self.ll.job_uid}, {self.ll.duration_s}s, log {self.ll_log}): "
            + "; ".join(_cycle_line(c) for c in self.ll.cycles)
        )
        if self.r.facts is not None:
            # Classification reads the long-lived process's log: the only checks a known
            # cause may excuse are its outage cycle's; the Job round's are never excused.
            self.r.facts = replace(self.r.facts, log=self.ll.logs)

    def _fetch_errors_for_all(self, run: Any, since_ms: float) -> float:
        """The log `ts` by which the collector had logged a failed fetch for every node."""
        since = wait_for(
            "the long-lived descheduler's collector to log a failed fetch of every node",
            lambda: fetch_errors_since(run.log_so_far(), since_ms),
            lambda errs: set(self.workers) <= set(errs),
            timeout=30,
            max_interval=0.5,
            describe=str,
        )
        return max(since[n] for n in self.workers)

    def assess(self) -> None:
        first, out, ll = self.first, self.outage_cycle, self.ll
        hot = first.classified.get(self.node)
        self.r.check(
            "ll-first-cycle-reads-usage",
            f"cycle 1 of the long-lived process read {self.node} as overutilized (>{TARGET}% "
            "CPU) and the other nodes as underutilized, from live metrics",
            hot is not None
            and hot.category == "overutilized"
            and hot.percent.get("cpu", 0) > TARGET
            and all(
                first.classified.get(n) is not None
                and first.classified[n].category == "underutilized"
                for n in self.workers
                if n != self.node
            ),
            _cycle_line(first),
        )
        self.r.check(
            "ll-first-cycle-evicts-one",
            "cycle 1 evicted one hot pod (the per-node cap), and the API server answered 201",
            len(first.evicted) == 1
            and first.evicted[0].split("/", 1)[1].startswith("hot-")
            and self._codes(first) in (None, [201]),
            f"{_cycle_line(first)}; audit codes {self._codes(first)}",
        )
        self.r.check(
            "ll-source-missing",
            "metrics.k8s.io served no node usage during the outage, before and after its cycle",
            self.gone is None and all(v is None for v in self.gone_after.values()),
            f"served at the stop {self.gone}, after the cycle {self.gone_after}",
        )
        failed = classified_on_failed_fetch(out)
        self.r.check(
            "ll-collector-fetch-failed",
            f"before cycle {out.number} the collector's last fetch of every node failed "
            f'("{FETCH_ERROR}" within one collect period)',
            all(out.fetch_failed_last(n) for n in self.workers),
            f"cycle start {out.start_ms}, newest fetch error per node {out.last_fetch_error_ms}",
        )
        self.r.check(
            STALE_CYCLE_CHECKS[0],
            f"cycle {out.number}, inside the outage, classified no node (a missing source "
            "fails closed or skips the cycle)",
            not out.classified,
            _cycle_line(out) + (f"; classified on a failed fetch: {failed}" if failed else ""),
        )
        gone = sorted(self.s_outage.uids - self.s_after.uids)
        self.r.check(
            STALE_CYCLE_CHECKS[1],
            f"cycle {out.number} evicted nothing: no 'Evicted pod' line, lab UIDs unchanged",
            not out.evicted and not gone,
            f"{_cycle_line(out)}; UIDs gone {gone}",
        )
        codes = self._codes(out)
        self.r.check(
            STALE_CYCLE_CHECKS[2],
            f"no eviction request by the descheduler reached the API server in cycle {out.number}",
            not codes,
            f"audit codes {codes}"
            + ("" if codes is not None else " (no audit log: this check reads none)"),
        )
        why = check_stopped(ll)
        self.r.check(
            "ll-process-stopped-log-kept",
            "the long-lived process was ended when its Job was deleted, and its log kept",
            why is None and ll.log_path.is_file(),
            why or str(ll.log_path),
        )
        self._assess_job_round()
        # filed with the Job round's record (the long-lived process has no round of its own)
        self.job.extra["utilization"]["long_lived"] = {
            "job": ll.name,
            "job_uid": ll.job_uid,
            "interval_s": INTERVAL_S,
            "log": str(self.ll_log),
            "duration_s": ll.duration_s,
            "cycles": [c.to_dict() for c in ll.cycles],
            "outage_cycle": out.number,
        }

    def _codes(self, cyc: Cycle) -> list[int] | None:
        reqs = self.ll.requests_in(cyc)
        if reqs is None:
            return None
        return [r.code for r in reqs if r.is_eviction and r.code is not None]

    def _assess_job_round(self) -> None:
        """The intended behaviour under the same outage: the runbook's Job fails closed."""
        v = self.job
        seen = self.usage_seen(v)
        errors = v.extra["utilization"]["metrics_source_errors"]
        self.r.check(
            "job-says-source-failed",
            "the Job round's own log says the fetch failed and the balance extension point "
            "stopped for want of node metrics",
            any(f'"{FETCH_ERROR}"' in e for e in errors)
            and any(NO_NODE_METRICS in e for e in errors),
            "\n".join(errors[:4]) or "no such line in the round's log",
        )
        self.r.check(
            "job-no-node-read-as-idle",
            "the Job round classified no node",
            not seen,
            f"logged {seen}",
        )
        self.r.assess_nothing_evicted(v, self.s_after)
        self.r.check(
            "no-eviction-request",
            "no eviction request of the Job round reached the API server",
            not v.refused_by_api,
            f"audit requests {v.refused_by_api}",
        )
