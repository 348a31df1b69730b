"""Whether a descheduler binary delivers its EvictionFailed events, read against its own log.

A one-shot round exits right after its cycle and can lose queued events (descheduler#1687),
so a round's own event count proves nothing either way: a candidate that sends no event at
all looks like a lost race. `delivered_when_outliving` runs the same binary the way a
Deployment would (`--descheduling-interval`, not dry run) against the lab the negative PDB
experiment left (every eviction refused with 429) and stops it. Only on a provider that runs
round pods as local binaries.

Both reads are timed from what the process's log proves, not from its start: at load ~45 a
probe's whole 20 s went on start-up (its log: one line, or informer caches still filling)
before it had refused a single pod, and it was read as a binary that loses events (issue 54).
So the probe first waits, bounded, for its log to show a refusal of every pod, then for the
events. A round's one read (`round_events`) likewise waits, bounded, for events whose write
the log does not prove lost: an event POST cut at exit may still be completed by the API
server (seen: 3 of 3 delivered with a `Post ...: context canceled` in the log).

Events are counted per refused pod (their UIDs), never by event count: the recorder keys an
event by the object it regards (client-go `tools/events` getKey, the legacy correlator's
aggregate key likewise), so two pods' refusals are never merged; repeats for one pod become a
series (`count`) on one event, which counts once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.serving import serving
from pytest_desched.errors import WaitTimeout
from pytest_desched.kube import wait_for

INTERVAL = "2s"  # a second cycle retries the refusals if the first one's events were slow
# A Go binary's start-up (self-signed serving certificate, informer sync) before its first
# refusal: 1.6 s quiet-ish, more than 20 s at load ~45 (issue 54); generous, it ends early.
STARTUP_TIMEOUT_S = 120.0
# From the refusals to their events: client-go retries a failed event write after
# 10 s +-25% (tools/events defaultSleepDuration), so 20 s holds one retry.
EVENTS_TIMEOUT_S = 20.0
# A round's read: how long an event whose POST may be in flight at exit is awaited.
LATE_EVENT_S = 5.0
REFUSAL_MSG = "Error evicting pod"
# The event writer's own lines: a write that never left the process (the client's rate
# limiter was waiting when the process's context ended) is lost for sure; a cut POST is not.
UNSENT_WRITE = "client rate limiter Wait returned an error"
WRITE_FAILED_MSGS = ("Unable to write event", "Server rejected event")


def _lines(log: str) -> list[dict[str, Any]]:
    out = []
    for line in log.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _pod_key(value: Any) -> str | None:
    """ "ns/name" from a KObj dict or a "ns/name" string."""
    if isinstance(value, dict) and value.get("name"):
        return f"{value.get('namespace', '')}/{value['name']}"
    if isinstance(value, str) and value:
        return value
    return None


def refusals_logged(log: str) -> list[str]:
    """Each `Error evicting pod` line's pod ("ns/name"), in order: one per refusal."""
    return [
        key
        for rec in _lines(log)
        if rec.get("msg") == REFUSAL_MSG and (key := _pod_key(rec.get("pod"))) is not None
    ]


def event_write_failures(log: str) -> list[str]:
    """The event writer's failures, each its `err`: what the process said about its events."""
    return [
        str(rec.get("err", ""))
        for rec in _lines(log)
        if any(str(rec.get("msg", "")).startswith(m) for m in WRITE_FAILED_MSGS)
    ]


def unsent_event_writes(log: str) -> int:
    """Event writes the log proves never left the process (lost at exit, #1687's race)."""
    return sum(UNSENT_WRITE in err for err in event_write_failures(log))


def round_events(
    delivered: Callable[[], int], owed: int, log: str, timeout: float = LATE_EVENT_S
) -> tuple[int, str]:
    """(refused pods with an EvictionFailed event, how it was read) for a round that exited.

    Read at once; when fewer arrived than the refusals minus the writes its log proves never
    sent, wait (bounded) for the rest: their POSTs may still be completed by the API server.
    """
    unsent = unsent_event_writes(log)
    awaited = max(0, owed - unsent)
    n = delivered()
    if n >= awaited:
        return n, f"{n} of {owed} read at once; {unsent} write(s) the log proves never sent"
    try:
        n = wait_for(
            f"{awaited} EvictionFailed event(s) whose write the log does not prove lost",
            delivered,
            lambda k: k >= awaited,
            timeout=timeout,
            describe=lambda k: f"{k} of {owed} delivered",
            max_interval=0.5,
        )
        return n, f"{n} of {owed} after a wait; {unsent} write(s) the log proves never sent"
    except WaitTimeout as exc:
        n = delivered()
        failures = event_write_failures(log)
        return n, (
            f"{n} of {owed}: {exc}; {unsent} write(s) the log proves never sent; the event "
            f"writer said: {' | '.join(failures)[-600:] or 'nothing'}"
        )


def delivered_when_outliving(
    binary: Path,
    kubeconfig: Path,
    policy_yaml: str,
    delivered: Callable[[], int],
    owed: int,
    timeout: float = EVENTS_TIMEOUT_S,
    pods: Collection[str] = (),
    startup_timeout: float = STARTUP_TIMEOUT_S,
) -> tuple[int, str]:
    """(refused pods with an EvictionFailed event this process wrote, how it ended).

    The process is kept running until its log shows a refusal of every one of `pods` ("ns/
    name"; without them, `owed` refusals) within `startup_timeout`, then until `delivered()`
    reaches `owed` within `timeout` of those refusals; then stopped. `delivered` must count
    only events written after the process started (the round's own do not prove this one).
    """
    args = [f"--descheduling-interval={INTERVAL}"]
    with serving(binary, kubeconfig, policy_yaml, args, "desched-events-") as run:
        text, alive = run.text, run.check_alive

        def refused() -> set[str]:
            alive()
            return set(refusals_logged(text()))

        def all_refused(seen: set[str]) -> bool:
            return set(pods) <= seen if pods else len(seen) >= owed

        def said() -> str:
            lines = text().splitlines()
            picked = [ln for ln in lines if '"err"' in ln or "rror" in ln][-3:] or lines[-3:]
            return f"{len(lines)} log line(s); the last: {' | '.join(picked)[-900:]}"

        def counted() -> int:
            alive()
            return delivered()

        try:
            wait_for(
                f"the process's log to show a refusal of each of {len(pods) or owed} pod(s)",
                refused,
                all_refused,
                timeout=startup_timeout,
                describe=lambda s: f"{len(s)} refused: {sorted(s)}",
                max_interval=0.5,
            )
        except WaitTimeout as exc:
            return delivered(), f"not measured: {exc}; the process said: {said()}"
        try:
            n = wait_for(
                f"an EvictionFailed event for each of {owed} refused pod(s)",
                counted,
                lambda k: k >= owed,
                timeout=timeout,
                describe=lambda k: f"{k} of {owed} delivered",
                max_interval=0.5,
            )
            return n, f"{n} of {owed} delivered by a process that kept running"
        except WaitTimeout as exc:
            failures = event_write_failures(text())
            return delivered(), (
                f"{exc} (after every pod's refusal was logged); the event writer said: "
                f"{' | '.join(failures)[-600:] or 'nothing'}; the process said: {said()}"
            )
