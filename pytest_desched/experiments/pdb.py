"""Runbook negative 2: a feasible target, but the PDB allows no disruption: HTTP 429.

The refusal is proven by the API server (a 429 per candidate in its audit log) and the
unchanged UIDs; EvictionFailed events are a separate figure, because a one-shot descheduler
can exit before it wrote them (descheduler#1687, in the known-bug registry).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import yaml

from pytest_desched.descheduler.decisions import Fate, Layer
from pytest_desched.descheduler.event_probe import delivered_when_outliving, round_events
from pytest_desched.descheduler.known_bugs import tolerated
from pytest_desched.descheduler.policy.model import notifies_eviction_failures
from pytest_desched.experiments.declared import Experiment
from pytest_desched.experiments.framework import decisions_table
from pytest_desched.experiments.results import Check


class NegativePDB(Experiment):
    """Patch the PDB to minAvailable=replicas: every eviction must be refused with 429."""

    name = "pdb"
    title = "negative-pdb"

    def arrange(self) -> None:
        self.s1 = self.r.arrange_violation()
        self.lab.patch_pdb(self.ctx.replicas)
        pdb = self.lab.wait_pdb(0)
        self.r.check(
            "pdb-zero-before",
            "PDB disruptionsAllowed is 0",
            pdb["disruptionsAllowed"] == 0,
            f"{pdb}",
        )

    def act(self) -> None:
        self.v = self.r.run_round("descheduler-negative-pdb")

    def assess(self) -> None:
        r, v, s1, lab = self.r, self.v, self.s1, self.lab
        r.assess_nothing_evicted(v, s1)
        final = lab.snapshot()
        r.check(
            "no-pending",
            "no Pending pod",
            not final.pending(),
            f"{[p.name for p in final.pending()]}",
        )
        r.check(
            "pdb-still-zero",
            "disruptionsAllowed still 0",
            (lab.pdb_status() or {}).get("disruptionsAllowed") == 0,
            f"{lab.pdb_status()}",
        )
        refused = [d for d in v.decisions if d.fate == Fate.REFUSED]
        candidates = {p.key for p in s1.live}
        if v.audit.get("available"):
            api_429 = {p for p, codes in v.refused_by_api.items() if codes and set(codes) == {429}}
            proof = f"audit 429s for {sorted(api_429)} of candidates {sorted(candidates)}"
        else:  # without an audit log, the log's own refusals are the evidence (noted)
            api_429 = {d.key for d in refused if d.status_code == 429}
            proof = f"log 429s (no audit log) for {sorted(api_429)}"
        r.check(
            "refused-429-per-candidate",
            "the API server refused every candidate's eviction with 429 (disruption budget)",
            bool(candidates)
            and api_429 == candidates
            and all(d.status_code == 429 and d.layer == Layer.API_SERVER for d in refused),
            f"{proof}; decisions {decisions_table(v.decisions)}",
        )
        self._events(api_429)
        r.pdb_kept_healthy(v.rec)

    def _events(self, refused: set[str]) -> None:
        """EvictionFailed events: owed one per refusal when the mounted policy asks for them."""
        r, v = self.r, self.v
        # Runbook: check the *mounted* policy, not the intended one, before expecting events.
        mounted = yaml.safe_load(self.ctx.release.live_policy_yaml()) or {}
        setting = notifies_eviction_failures(mounted)  # as the release spells it
        notify = setting is True
        r.check(
            "notification-mounted",
            "evictionFailureEventNotification is in the mounted policy",
            notify,
            f"mounted={setting!r}",
        )
        owed = len(refused)
        uids = {p.uid for p in self.s1.pods if p.key in refused}  # "ns/name" keys
        # Events still queued at exit are lost (the log says which writes never left), but a
        # POST cut at exit may still land: those are awaited, bounded (event_probe.py).
        log = r.facts.log if r.facts is not None else ""
        if notify and owed:
            delivered, how = round_events(lambda: len(self._uids_with_event(uids)), owed, log)
        else:
            delivered, how = len(self._uids_with_event(uids)), "none owed: read once"
        v.extra["events_delivered"] = {"delivered": delivered, "owed": owed, "how": how}
        r.result.notes.append(
            f"EvictionFailed events delivered: {delivered} of {owed} refusals ({how})"
        )
        if not (notify and owed):
            return
        outliving = self._outliving(uids, owed, mounted) if delivered < owed else None
        ok = delivered >= owed
        detail = f"{delivered} of {owed} refusals have an EvictionFailed event"
        bug = None
        if not ok and r.facts is not None:
            facts = replace(
                r.facts,
                mounted_policy=mounted,
                refused_by_api=owed,
                events_delivered=delivered,
                events_outliving=outliving,
            )
            bug = tolerated("eviction-failed-events", facts)
        if bug is not None:
            r.result.known_bugs[bug[0].id] = bug[1]
            detail += f"; the rest are accounted for by {bug[0].describe()}: {bug[1]}"
        r.result.checks.append(
            Check(
                "eviction-failed-events",
                "an EvictionFailed event per refused pod, or a proven one-shot exit loss",
                ok or bug is not None,
                detail,
                known_bug=bug[0].id if bug else None,
            )
        )

    def _outliving(self, uids: set[str], owed: int, mounted: dict) -> int | None:
        """The events a process that outlives its refusals delivers (event_probe.py); None
        where the provider runs round pods from images (no local binary to keep running)."""
        rel, cluster = self.ctx.release, self.ctx.cluster
        if not cluster.capabilities.runs_local_binary or rel.binary is None:
            self.r.result.notes.append(
                "EvictionFailed delivery not proven by a long-running process: "
                + cluster.capabilities.local_binary_gap
            )
            return None

        before = {e["event"] for e in self.lab.events() if e["reason"] == "EvictionFailed"}

        def count() -> int:  # this process's own events: the round's prove nothing here
            return len(self._uids_with_event(uids, besides=before))

        n, how = delivered_when_outliving(
            rel.binary,
            cluster.kubeconfig,
            yaml.safe_dump(mounted),
            count,
            owed,
            pods=[p.key for p in self.s1.pods if p.uid in uids],
        )
        self.v.extra["events_delivered"].update(outliving=n, outliving_how=how)
        self.r.result.notes.append(f"EvictionFailed events, process kept running: {how}")
        return n

    def _uids_with_event(self, uids: set[str], besides: Collection[str] = ()) -> set[str]:
        """Which of `uids` have an EvictionFailed event (other than the events `besides`)."""
        return {
            e["uid"]
            for e in self.lab.events()
            if e["reason"] == "EvictionFailed" and e["uid"] in uids and e["event"] not in besides
        }
