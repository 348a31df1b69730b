"""`replay --timeline`: restore a window's start, apply its changes in window time at a speed
while the descheduler runs rounds at the incident's cadence, and place each eviction in the
window.

The moment: the clock (`clock.WindowClock`) starts when the restore is done; changes are
applied when window time reaches their `t` (`apply`; APPLY_LANES at once, one object's in
order, see `runs_alone`), rounds start when it
reaches each round's time (every `--every` window seconds, by default the incident's CronJob
schedule, else the chart's two minutes). An eviction's moment is the API server's own
timestamp of its eviction request (the audit log; the descheduler's log line when there is
none), read on the same clock. A round that starts later than its time (rounds take wall
seconds; at a high speed the window outruns them) says by how much (`late_s`): the moments
are still true, the cadence was not kept. Everything is checked before the cluster exists.

A round starts only once every change due by its moment has an outcome (the barrier, up to
BARRIER_S wall seconds without progress): at a speed the machine cannot apply changes at,
the round waits instead of deciding on a state the incident never had at that moment. What
the barrier could not get is in the round's record (`stale`: which change, due when, still
missing how many window seconds later) and fails the replay (`failures`, exit 1), as does a
change that failed to apply. A speed the machine did not keep up with (changes applied late
or rounds started late, so a round saw changes due after its moment) is reported by how much
(`speed_check`), never silently degraded.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.decisions import Fate
from pytest_desched.errors import ConfigError
from pytest_desched.log import Reporter, say
from pytest_desched.replay.capture.timeline import Timeline, check_speed, parse_duration
from pytest_desched.replay.run import Replay, ReplayOptions, ReplayResult
from pytest_desched.replay.timeline.clock import Stopped, WindowClock

Resume = Callable[[float], None]  # blocks while paused at window t; returns to resume
DEFAULT_EVERY_S = 120.0  # the chart's CronJob schedule, */2 * * * *
BARRIER_S = 60.0  # wall seconds a round waits for due changes with no change applied meanwhile
KEEP_UP_S = 1.0  # window seconds a change may land after its moment and still count on time
MAX_TIMELINE_ROUNDS = 1000
# Changes applied at once: one apply is an API round trip or two, and one at a time took 54 ms
# a change (p50) at 1,000 nodes / 10,000 pods, 18 a wall second where a 30-minute window of
# 5,000 changes needs 28 at 10x (issue 42); changes to different objects are independent, as
# the people and tools that made them were. Eight, not four: with a round's lists and the
# descheduler on the same cores one apply took 75-500 ms, and four lanes then queued changes a
# wall second and more behind their moments (10x needs each landed within 0.1 wall s).
APPLY_LANES = 8
# Kinds other objects name (a namespace, a priority class, a storage class): any change of
# one, and a node or volume created or deleted, runs alone, after and before all others.
_FENCE_KINDS = ("Namespace", "PriorityClass", "StorageClass")
_EVERY_N_MIN = re.compile(r"\*/(\d+) \* \* \* \*")


def every_of(tl: Timeline) -> tuple[float, str]:
    """The incident's round cadence in window seconds, and where it came from."""
    d = tl.snapshot.descheduler
    for cj in tl.snapshot.items("cronJobs"):
        m = cj.get("metadata") or {}
        if (m.get("namespace"), m.get("name")) != (d.get("namespace"), d.get("name")):
            continue
        sched = str((cj.get("spec") or {}).get("schedule") or "").strip()
        hit = _EVERY_N_MIN.fullmatch(sched)
        if hit and int(hit.group(1)) > 0:
            return int(hit.group(1)) * 60.0, f"the incident's CronJob schedule {sched!r}"
        if sched == "* * * * *":
            return 60.0, f"the incident's CronJob schedule {sched!r}"
    return DEFAULT_EVERY_S, "the chart's default schedule (*/2 * * * *)"


def round_times(window_s: float, every_s: float) -> list[float]:
    """Rounds at every, 2 x every, ... within the window; at least one, at its end."""
    n = int(window_s // every_s)
    return [round(every_s * k, 3) for k in range(1, n + 1)] or [round(window_s, 3)]


def check_timeline(
    path: str | Path,
    speed: Any,
    pause_at: Any = None,
    every: Any = None,
    repeat: Any = 1,
) -> tuple[Timeline, dict[str, Any]]:
    """The timeline and its replay plan, or ConfigError with the numbers (before any change)."""
    v = check_speed(speed)
    tl = Timeline.load(path)
    w = tl.window_s
    if every is None:
        every_s, every_src = every_of(tl)
    else:
        every_s, every_src = parse_duration(str(every), "--every"), "--every"
    times = round_times(w, every_s)
    if len(times) > MAX_TIMELINE_ROUNDS:
        raise ConfigError(
            f"--every {every_s:g} s over a {w:g} s window makes {len(times)} rounds; at most "
            f"{MAX_TIMELINE_ROUNDS}: give a longer --every"
        )
    pause = None
    if pause_at is not None:
        pause = parse_duration(str(pause_at), "--pause-at")
        if pause > w:
            raise ConfigError(
                f"--pause-at {pause:g} s is after the window's end ({w:g} s); give a moment "
                "inside the window"
            )
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 100:
        raise ConfigError(f"--repeat {repeat!r}: an integer from 1 to 100")
    plan = {
        "timeline": str(path),
        "speed": v,
        "window_s": w,
        "window_start": tl.header.get("windowStart"),
        "every_s": every_s,
        "every_from": every_src,
        "rounds_at": times,
        "pause_at": pause,
        "wall_s_estimate": round(w / v, 1),
        "changes": len(tl.changes),
    }
    return tl, plan


# -- eviction moments ------------------------------------------------------------------------
def eviction_walls(rnd: Any) -> dict[str, float]:
    """pod -> epoch seconds of its successful eviction: the audit log, else the round's log."""
    out: dict[str, float] = {}
    for r in rnd.audit_requests or []:
        if r.is_eviction and r.code == 201 and r.stage_ts is not None:
            out.setdefault(r.key, r.stage_ts.timestamp())
    for line in (rnd.logs or "").splitlines():
        if '"Evicted pod"' not in line or not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        pod, ts = rec.get("pod"), rec.get("ts")
        if rec.get("msg") == "Evicted pod" and isinstance(pod, dict) and isinstance(ts, float):
            out.setdefault(f"{pod.get('namespace', '')}/{pod.get('name')}", ts / 1000.0)
    return out


# -- what a replay could not keep -----------------------------------------------------------
def stale_line(r: dict[str, Any]) -> str:
    """A round that ran on a stale state, in one line: which changes, how late."""
    miss = r["stale"]
    first = ", ".join(f"{m['verb']} {m['object']} (t={m['t']:g} s)" for m in miss[:3])
    more = f" and {len(miss) - 3} more" if len(miss) > 3 else ""
    return (
        f"ran on a stale state: {len(miss)} of {r['changes_due']} change(s) due by its moment "
        f"t={r['scheduled_t']:g} s had not been applied when it started at "
        f"t={r['window_t']:g} s ({first}{more}; up to {max(m['late_by_s'] for m in miss):g} "
        f"window s late) after {r['waited_s']:g} wall s of waiting"
    )


def kept_up(
    speed: float, outcomes: list[dict[str, Any]], rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    """Whether the machine kept `--speed`: every change applied and every round started within
    KEEP_UP_S window seconds of its moment; else by how much, and a speed that would."""
    lag = max((o["applied_t"] - o["t"] for o in outcomes), default=0.0)
    late = max((r.get("late_s") or 0.0 for r in rounds), default=0.0)
    ahead = [r for r in rounds if r.get("ahead")]
    ok = lag <= KEEP_UP_S and late <= KEEP_UP_S
    why = ""
    if not ok:
        saw = (
            f" ({len(ahead)} of them saw {sum(r['ahead'] for r in ahead)} change(s) due after "
            "their moments)"
            if ahead
            else ""
        )
        slower = speed * KEEP_UP_S / max(lag, late)  # a lag in window s scales with the speed
        why = (
            f"--speed {speed:g} is more than this machine kept up with: changes were applied up "
            f"to {lag:.1f} window s after their moments, rounds started up to {late:.1f} window "
            f"s late{saw}; replay at --speed {slower:.2g} or less to keep the incident's timing"
        )
    return {"kept_up": ok, "max_change_lag_s": round(lag, 2), "max_round_late_s": late, "why": why}


def _pct(xs: list[float], q: float) -> float:
    """The nearest-rank q-quantile of sorted `xs` (0 when empty)."""
    return xs[max(0, math.ceil(q * len(xs)) - 1)] if xs else 0.0


def lateness(
    outcomes: list[dict[str, Any]], rounds_at: list[float], speed: float
) -> dict[str, Any]:
    """Every change's lateness (`applied_t - t`, window s), over all outcomes (the record keeps
    only the first 500): how many landed more than KEEP_UP_S late, the median, 99th percentile
    and largest; how many landed more than KEEP_UP_S after the moment of the first round due
    to see them (each held that round at the barrier: it could not start on time) and by how
    much; and the wall time of one apply (where changes that cannot keep up spend it)."""
    lags = sorted(o["applied_t"] - o["t"] for o in outcomes)
    walls = sorted((o["applied_t"] - o["started_t"]) / speed * 1000 for o in outcomes)
    held: list[float] = []
    for o in outcomes:
        i = bisect.bisect_left(rounds_at, o["t"])
        if i < len(rounds_at) and o["applied_t"] > rounds_at[i] + KEEP_UP_S:
            held.append(o["applied_t"] - rounds_at[i])
    return {
        "changes": len(lags),
        "late": sum(1 for x in lags if x > KEEP_UP_S),
        "late_over_s": KEEP_UP_S,
        "p50_s": round(_pct(lags, 0.5), 2),
        "p99_s": round(_pct(lags, 0.99), 2),
        "max_s": round(lags[-1], 2) if lags else 0.0,
        "after_round_moment": len(held),
        "after_round_moment_max_s": round(max(held, default=0.0), 2),
        "apply_wall_ms": {
            "p50": round(_pct(walls, 0.5), 1),
            "p99": round(_pct(walls, 0.99), 1),
            "max": round(walls[-1], 1) if walls else 0.0,
        },
    }


def runs_alone(c: Any) -> bool:
    """Whether change `c` waits for every change before it and holds every one after it;
    any other waits only for the last change of its own object."""
    whole = c.verb in ("create", "delete") and c.kind in ("Node", "PersistentVolume")
    return c.kind in _FENCE_KINDS or whole


# -- the driver ------------------------------------------------------------------------------
class TimelineDriver:
    """The engine's hooks for one timeline replay: clock, change thread, rounds, moments."""

    def __init__(
        self,
        tl: Timeline,
        plan: dict[str, Any],
        report: Reporter = say,
        resume: Resume | None = None,
        now: Callable[[], float] = time.time,
        barrier_s: float = BARRIER_S,
        lanes: int | None = None,
    ) -> None:
        self.tl, self.plan, self.report = tl, plan, report
        self.barrier_s = barrier_s
        pause_at = plan.get("pause_at")
        self.clock = WindowClock(plan["speed"], now=now, pause_at=pause_at)
        self.resume = resume or (lambda t: None)
        self.outcomes: list[dict[str, Any]] = []  # in the timeline's order, a prefix of it
        self._landed: dict[int, dict[str, Any]] = {}  # applied ahead of an earlier change
        self.lanes = lanes or APPLY_LANES  # read at run time (a bench compares lane counts)
        self.rounds: list[dict[str, Any]] = []
        self.evictions: list[dict[str, Any]] = []
        self.pauses: list[dict[str, Any]] = []
        self._threads: list[threading.Thread] = []
        self._cluster: Any = None
        self._lock = threading.Lock()
        self._progress = threading.Condition(self._lock)

    # engine hooks
    def before_round(self, i: int, cluster: Any) -> dict[str, Any]:
        if not self.clock.started:
            self._cluster = cluster
            self.clock.start()
            self._spawn(self._apply_all, "changes")
            if self.plan.get("pause_at") is not None:
                self._spawn(self._pause, "pause")
            self.report(
                f"timeline: window {self.plan['window_s']:g} s at {self.plan['speed']:g}x "
                f"(~{self.plan['wall_s_estimate']:g} s), {len(self.tl.changes)} changes, "
                f"rounds at t={self.plan['rounds_at'][:8]}{' ...' if len(self.plan['rounds_at']) > 8 else ''}"
            )
        at = self.plan["rounds_at"][i - 1]
        with contextlib.suppress(Stopped):  # a stopped replay: the barrier ends at once too
            self.clock.wait_until(at)
        due = sum(1 for c in self.tl.changes if c.t <= at)
        waited = self._barrier(due)
        started = self.clock.window_t()
        with self._lock:
            done = len(self.outcomes)
        entry: dict[str, Any] = {"round": i, "scheduled_t": at, "window_t": round(started, 3)}
        entry["late_s"] = round(max(0.0, started - at), 2)
        entry["wall_start"] = time.time()
        entry |= {"changes_due": due, "waited_s": round(waited, 2), "ahead": max(0, done - due)}
        # due by the round's moment, no outcome when it started: the round ran on a stale state
        entry["stale"] = [
            {"t": c.t, "verb": c.verb, "object": c.key, "late_by_s": round(started - c.t, 2)}
            for c in self.tl.changes[done:due]
        ]
        self.rounds.append(entry)
        if entry["stale"]:
            self.report(f"timeline round {i}: {stale_line(entry)}")
        keys = ("window_t", "scheduled_t", "late_s", "changes_due", "waited_s", "ahead", "stale")
        return {k: entry[k] for k in keys}

    def _barrier(self, due: int) -> float:
        """Wait until the first `due` changes have an outcome, or BARRIER_S wall seconds pass
        with none applied (a pause restarts the count); the wall seconds waited."""
        t0 = time.monotonic()
        with self._progress:
            seen, quiet_since = len(self.outcomes), t0
            while len(self.outcomes) < due and not self.clock.stopped:
                now = time.monotonic()
                if len(self.outcomes) > seen or self.clock.paused:
                    seen, quiet_since = len(self.outcomes), now
                if now - quiet_since >= self.barrier_s:
                    break
                self._progress.wait(min(0.2, self.barrier_s))
        return time.monotonic() - t0

    def after_round(self, i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        walls = eviction_walls(rnd)
        end_t = self.clock.window_t()
        moments: dict[str, float] = {}
        for pod, f in fates.items():
            if f.fate != Fate.EVICTED.value:
                continue
            wall = walls.get(pod)
            f.at_s = round(self.clock.window_t(wall), 2) if wall else None
            moments[pod] = f.at_s if f.at_s is not None else end_t
            self.evictions.append(
                {"pod": pod, "round": i, "at_s": f.at_s, "source": "audit/log" if wall else None}
            )
        self.rounds[-1]["window_t_end"] = round(end_t, 2)
        return {"window_t_end": round(end_t, 2), "evictions_at": moments}

    def finish(self, drain_s: float = 30) -> dict[str, Any]:
        """Stop the clock once every change already due is applied (bounded), then report."""
        due = sum(1 for c in self.tl.changes if c.t <= self.clock.window_t())
        deadline = time.monotonic() + drain_s
        with self._progress:
            while len(self.outcomes) < due and time.monotonic() < deadline:
                self._progress.wait(0.2)
        self.clock.stop()
        for t in self._threads:
            t.join(timeout=60)
        counts = Counter(o["outcome"].split(":", 1)[0] for o in self.outcomes)
        failed = [o for o in self.outcomes if o["outcome"].startswith("failed")]
        failures = [
            f"change at t={o['t']:g} s ({o['verb']} {o['object']}) failed to apply: "
            f"{o['outcome'].split(':', 1)[1].strip()}"
            for o in failed
        ]
        failures += [f"round {r['round']}: {stale_line(r)}" for r in self.rounds if r.get("stale")]
        speed = kept_up(self.plan["speed"], self.outcomes, self.rounds)
        if not speed["kept_up"]:
            self.report(f"timeline: {speed['why']}")
        for f in failures:
            self.report(f"timeline: {f}")
        return {
            **self.plan,
            "applied_changes": dict(counts),
            "not_reached": len(self.tl.changes) - len(self.outcomes),
            "outcomes": self.outcomes[:500],
            "rounds": self.rounds,
            "evictions": self.evictions,
            "pauses": self.pauses,
            "paused_s": round(self.clock.paused_s(), 2),
            "speed_check": speed,
            "lateness": lateness(self.outcomes, self.plan["rounds_at"], self.plan["speed"]),
            "failures": failures,  # each fails the replay (exit 1)
        }

    def moment(self, wall: float) -> float | None:
        """Window seconds at epoch `wall`; None before the window started (the restore)."""
        start = self.clock.wall_of(0.0)
        return None if start is None or wall < start - 1 else round(self.clock.window_t(wall), 2)

    # threads
    def _spawn(self, fn: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=fn, name=f"desched-timeline-{name}", daemon=True)
        t.start()
        self._threads.append(t)

    def _apply_all(self) -> None:
        """Each change handed to one of `lanes` workers when window time reaches it (see
        `runs_alone`); outcomes join `outcomes` in the timeline's order, so a change counts as
        in only once every change before it is (the barrier and `stale` read that prefix).

        A change whose object has one in flight joins that object's chain: the worker that
        applies one runs the next as soon as it has landed, and the changes after it (other
        objects') are handed out meanwhile. (Waiting here for the earlier one held every later
        change of every object behind it.)"""
        # heavy: the kubernetes client, kept out of this module's import
        from pytest_desched.replay.timeline.apply import apply_change

        api = self._cluster.api_client
        chains: dict[str, deque[tuple[int, Any]]] = {}  # object -> its changes still to apply
        running: set[Future[None]] = set()

        def chain(i: int, c: Any) -> None:
            while True:
                self._apply_one(apply_change, api, i, c)
                with self._lock:
                    if not chains[c.key] or self.clock.stopped:  # stopped: nothing more lands
                        del chains[c.key]
                        return
                    i, c = chains[c.key].popleft()

        with ThreadPoolExecutor(self.lanes, thread_name_prefix="desched-timeline-apply") as pool:
            for i, c in enumerate(self.tl.changes):
                try:
                    self.clock.wait_until(c.t)
                except Stopped:
                    pool.shutdown(cancel_futures=True)  # nothing queued lands after the stop
                    return
                running = {f for f in running if not f.done()}
                alone = runs_alone(c)
                if alone:
                    futures_wait(running)  # every chain drained: nothing before it in flight
                with self._lock:
                    if c.key in chains:  # its object's earlier change is in flight
                        chains[c.key].append((i, c))
                        continue
                    chains[c.key] = deque()
                fut = pool.submit(chain, i, c)
                running.add(fut)
                if alone:
                    futures_wait([fut])

    def _apply_one(self, apply_change: Callable[[Any, Any], str], api: Any, i: int, c: Any) -> None:
        t_start = self.clock.window_t()
        try:
            outcome = apply_change(api, c)
        except Exception as exc:  # a change that fails never stops the replay (it fails it)
            outcome = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        t_at = self.clock.window_t()  # when the API server had answered: in the cluster
        with self._progress:
            self._landed[i] = {
                "t": c.t,
                # to the millisecond, as a recorded window's `t`: 2 decimals put a change
                # started at 0.3814 s before its moment 0.381 s (0.38), which it never is
                "started_t": max(c.t, round(t_start, 3)),
                "applied_t": max(c.t, round(t_at, 3)),
                "verb": c.verb,
                "object": c.key,
                "outcome": outcome,
            }
            while len(self.outcomes) in self._landed:  # the in-order prefix grows
                self.outcomes.append(self._landed.pop(len(self.outcomes)))
            self._progress.notify_all()
        if not outcome.startswith("observed"):
            self.report(f"timeline t={t_at:.1f}s: {c.verb} {c.key}: {outcome}")

    def _pause(self) -> None:
        at = float(self.plan["pause_at"])
        try:
            self.clock.wait_until(at)
        except Stopped:
            return
        t = self.clock.pause()
        wall0 = time.time()
        kc = getattr(self._cluster, "kubeconfig", None)
        self.report(f"timeline paused at t={t:.1f}s of the window; export KUBECONFIG={kc}")
        try:
            self.resume(t)
        finally:
            self.clock.resume()
            self.pauses.append({"at_s": round(t, 2), "wall_s": round(time.time() - wall0, 2)})
            self.report(f"timeline resumed at t={t:.1f}s")


class TimelineReplay(Replay):
    """A replay whose hooks are a timeline's: the driver's clock, changes and moments."""

    windowed = True

    def __init__(self, driver: TimelineDriver, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.driver = driver

    def before_round(self, i: int, cluster: Any) -> dict[str, Any]:
        return self.driver.before_round(i, cluster)

    def after_round(self, i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        return self.driver.after_round(i, rnd, fates)

    def finish(self) -> dict[str, Any]:
        return self.driver.finish()

    def moment(self, wall: float) -> float | None:
        return self.driver.moment(wall)


def replay_timeline(
    path: str | Path,
    speed: float = 1.0,
    pause_at: Any = None,
    every: Any = None,
    descheduler: str | None = None,
    policy: Any = None,
    config: Any = None,
    report: Reporter = say,
    resume: Resume | None = None,
    round_timeout: float = 300,
    checked: tuple[Timeline, dict[str, Any]] | None = None,
    client: dict[str, Any] | None = None,
) -> ReplayResult:
    """Replay a timeline file (see the module docstring); returns the engine's ReplayResult
    with `timeline` filled and each eviction's `at_s` in the ledger."""

    tl, plan = checked or check_timeline(path, speed, pause_at, every)
    driver = TimelineDriver(tl, plan, report, resume)
    options = ReplayOptions(
        descheduler=descheduler,
        policy=policy,
        rounds=len(plan["rounds_at"]),
        round_timeout=round_timeout,
        max_rounds=MAX_TIMELINE_ROUNDS,
        source=str(path),
        client=client,
    )
    try:
        return TimelineReplay(driver, tl.snapshot, options, config, report).run()
    finally:
        driver.clock.stop()  # a failed round: the change thread ends with the replay
