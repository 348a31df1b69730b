"""The replay's window clock: incident-window seconds from wall time, at a speed, with pauses.

Why a clock of its own: the changes, the rounds and the ledger's eviction moments must all
read the same window time, and a pause (`--pause-at T`) must stop it for all three at once.
Window time w = speed x (wall seconds since start, less the time paused); a wall timestamp
taken during a pause maps to the pause's moment. Pure apart from `time.time` (injectable).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Stopped(Exception):
    """The replay was stopped while something waited on the clock."""


class WindowClock:
    """Window seconds at `speed`; `start()` fixes window t=0 to now."""

    def __init__(
        self, speed: float, now: Callable[[], float] = time.time, pause_at: float | None = None
    ) -> None:
        self.speed = float(speed)
        # --pause-at: the clock itself stops at that moment, whenever a thread next looks, so
        # nothing due after it can happen in the gap before the pausing thread wakes (at 200x
        # a 50 ms scheduling delay is 10 window seconds).
        self._pause_due = pause_at
        self._now = now
        self._cond = threading.Condition()
        # running segments: (wall start, window time at that wall start); paused when _paused
        self._segments: list[tuple[float, float]] = []
        self._paused_at: tuple[float, float] | None = None  # (wall, window t) of the pause
        self._pauses: list[tuple[float, float, float]] = []  # (wall from, wall to, window t)
        self._stopped = False

    # -- reading ---------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return bool(self._segments)

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    @property
    def stopped(self) -> bool:
        return self._stopped

    def window_t(self, wall: float | None = None) -> float:
        """Window seconds at wall time `wall` (default now); 0 before the start."""
        with self._cond:
            return self._at(self._now() if wall is None else wall)

    def _at(self, wall: float) -> float:
        if not self._segments or wall < self._segments[0][0]:
            return 0.0
        if self._pause_due is not None and self._paused_at is None:
            seg_wall, seg_t = self._segments[-1]
            reached = seg_wall + max(0.0, self._pause_due - seg_t) / self.speed
            if self._now() >= reached:  # the scheduled pause is due: it began at `reached`
                self._paused_at = (reached, max(seg_t, self._pause_due))
                self._pause_due = None
        return self._plain_at(wall)

    def _plain_at(self, wall: float) -> float:
        if not self._segments or wall < self._segments[0][0]:
            return 0.0
        for frm, to, t in self._pauses:
            if frm <= wall < to:
                return t
        if self._paused_at is not None and wall >= self._paused_at[0]:
            return self._paused_at[1]
        seg = max((s for s in self._segments if s[0] <= wall), key=lambda s: s[0])
        return seg[1] + (wall - seg[0]) * self.speed

    def wall_of(self, t: float) -> float | None:
        """The wall time at which window time `t` is (or will be) reached; None while paused
        before it."""
        with self._cond:
            if not self._segments:
                return None
            if self._paused_at is not None and t > self._paused_at[1]:
                return None
            for wall, w0 in reversed(self._segments):
                if t >= w0:
                    return wall + (t - w0) / self.speed
            return self._segments[0][0]

    # -- driving ---------------------------------------------------------------------------
    def start(self) -> float:
        with self._cond:
            if not self._segments:
                self._segments.append((self._now(), 0.0))
                self._cond.notify_all()
            return self._segments[0][0]

    def pause(self) -> float:
        """Stop window time where it is (or where a scheduled pause stopped it); that moment."""
        with self._cond:
            self._at(self._now())  # a scheduled pause that is due takes effect first
            if self._paused_at is None:
                now = self._now()
                self._paused_at = (now, self._plain_at(now))
            return self._paused_at[1]

    def resume(self) -> None:
        with self._cond:
            if self._paused_at is not None:
                now = self._now()
                wall, t = self._paused_at
                self._pauses.append((wall, now, t))
                self._segments.append((now, t))
                self._paused_at = None
                self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def wait_until(self, t: float, max_step: float = 0.5) -> float:
        """Block until window time reaches `t` (raises Stopped if stopped first); returns
        the window time when it did."""
        with self._cond:
            while True:
                if self._stopped:
                    raise Stopped(f"stopped before window t={t:.1f} s")
                now = self._now()
                w = self._at(now) if self._segments else -1.0
                if w >= t:
                    return w
                if self._paused_at is not None or not self._segments:
                    self._cond.wait(max_step)
                    continue
                self._cond.wait(min(max_step, max(0.001, (t - w) / self.speed)))

    def paused_s(self) -> float:
        """Wall seconds spent paused so far."""
        with self._cond:
            done = sum(to - frm for frm, to, _ in self._pauses)
            if self._paused_at is not None:
                done += self._now() - self._paused_at[0]
            return done
