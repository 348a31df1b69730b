"""Runbook positive experiment: one round moves exactly one violating pod to the target."""

from __future__ import annotations

from pytest_desched.descheduler.decisions import Fate
from pytest_desched.experiments.declared import Experiment
from pytest_desched.experiments.framework import decisions_table

STRATEGY = "RemovePodsViolatingNodeAffinity"


class PositiveAffinityMigration(Experiment):
    """Move the pool label to the target; one round evicts one pod, its replacement is Ready
    on the target with a new UID, and the PDB stays healthy throughout."""

    name = "positive"
    title = "positive-affinity-migration"

    def arrange(self) -> None:
        self.s1 = self.r.arrange_violation()

    def act(self) -> None:
        self.v = self.r.run_round("descheduler-positive")

    def assess(self) -> None:
        r, v, s1, ctx, lab = self.r, self.v, self.s1, self.ctx, self.lab
        evicted = [d for d in v.decisions if d.fate == Fate.EVICTED]
        cap = ctx.policy.limits.get("namespace")
        r.check(
            "within-namespace-cap",
            "at most one eviction in the namespace (the policy's per-namespace cap)",
            cap is None or len(evicted) <= cap,
            f"{len(evicted)} evicted, cap {cap}",
        )
        created = {p: codes.count(201) for p, codes in v.refused_by_api.items() if 201 in codes}
        api_ok = (
            sum(created.values()) == 1 and set(created) == {d.key for d in evicted}
            if v.audit.get("available")
            else True  # no audit log: the log's own decision is all there is (noted)
        )
        r.check(
            "one-evicted",
            "exactly one pod evicted, with a 201 from the API server",
            len(evicted) == 1 and api_ok,
            f"audit 201s {created}; decisions {decisions_table(v.decisions)}",
        )
        r.check(
            "evicted-by-strategy",
            f"eviction attributed to {STRATEGY}",
            bool(evicted) and all(d.strategy == STRATEGY for d in evicted),
            f"strategies {[d.strategy for d in evicted]}",
        )
        latency = None
        final = lab.snapshot()
        if evicted:
            gone = {p.uid for p in s1.pods if p.name in {d.name for d in evicted}}
            try:
                final = lab.wait_ready(ctx.replicas, timeout=ctx.recovery_timeout)
                ready_ok, ready_why = True, ""
            except AssertionError as exc:
                final, ready_ok, ready_why = lab.snapshot(), False, str(exc)
            r.check("replicas-ready", "replicas back to Ready", ready_ok, ready_why)
            new = [p for p in final.live if p.uid not in s1.uids]
            pending = {p.uid for p in final.pending()}
            v.replacement = (
                "missing"
                if not new
                else "pending"
                if any(p.uid in pending for p in new)
                else "ready"
            )
            r.check(
                "evicted-uid-gone",
                "the evicted pod's UID is gone",
                bool(gone) and not (gone & final.uids),
                f"evicted pods' UIDs {sorted(gone)}, now {sorted(final.uids)}",
            )
            r.check(
                "replacement-on-target",
                "replacement has a new UID, runs on the target and is Ready",
                len(new) == 1 and new[0].node == ctx.target and new[0].ready,
                f"new pods {[(p.name, p.node, p.ready) for p in new]}",
            )
            if new:
                latency = self._latency(gone, new[0].uid)
        r.result.ready_latency_s = latency
        r.pdb_kept_healthy(v.rec)
        r.check(
            "no-pending",
            "no Pending pod at the end",
            not final.pending(),
            f"pending {[p.name for p in final.pending()]}",
        )
        v.extra["replacement_ready_latency_s"] = latency

    def _latency(self, gone: set[str], new_uid: str) -> float | None:
        """Evicted pod seen deleting -> replacement seen Ready, both by the watch, or None."""
        rec = self.v.rec
        t_ready = rec.first_ready(new_uid)
        t_gone = min((t for u in gone if (t := rec.first_deleting(u)) is not None), default=None)
        if t_ready is not None and t_gone is not None:
            return round(t_ready - t_gone, 3)
        missing = [
            what
            for what, t in (
                ("the evicted pod's deletion", t_gone),
                ("a Ready replacement", t_ready),
            )
            if t is None
        ]
        self.r.result.notes.append(
            f"replacement Ready latency unknown: the watch saw no {' and no '.join(missing)}"
        )
        return None
