"""Writes at the API server's pace: bounded concurrency that gives way when the server says so.

Why: one write at a time leaves a host's API server idle between round trips (about 50
objects/s on kind), while an unbounded burst meets API Priority and Fairness (APF), which
answers HTTP 429 with a `Retry-After` header once a flow's queues are full. So a restore
writes with a few concurrent requests, and every 429 (or a 5xx carrying `Retry-After`):

* holds *every* writer until the time the server named (a shared gate, not one thread's
  sleep: the server throttles the flow, not a request);
* halves the concurrency, which grows back by one after each run of successes as long as
  the concurrency (additive increase, multiplicative decrease), never above the bound;
* retries the same write, at most `max_attempts` times, then fails naming the object.

Pure logic over a callable: the clock and the sleep are injected, so unit tests drive it with
doubles; `kubeapi` does the requests.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes.client.rest import ApiException

from pytest_desched.errors import ProviderError

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_WORKERS = 16
# A Retry-After longer than this is taken as this (APF says 1 s; a proxy may say more).
MAX_RETRY_AFTER_S = 30.0
# Without a Retry-After, a 429 waits this long (doubling with each retry of the same write).
DEFAULT_RETRY_S = 0.5
MAX_ATTEMPTS = 10


class ThrottledError(ProviderError):
    """The API server kept refusing a write as too many requests (429) past every retry."""


def throttle_delay(exc: BaseException) -> float | None:
    """Seconds the server asked a writer to wait, or None when `exc` is not a throttle.

    429 (APF's rejection, max-in-flight, a gateway) always is; a 5xx only with a
    `Retry-After` header or a Status `details.retryAfterSeconds` (a ServerTimeout). The header
    wins; a 429 naming no time gets 0 (the caller's own backoff applies).
    """
    if not isinstance(exc, ApiException):
        return None
    status = exc.status or 0
    header = None
    for name, value in dict(exc.headers or {}).items():
        if str(name).lower() == "retry-after":
            header = value
    seconds: float | None = None
    if header is not None:
        try:
            seconds = max(0.0, float(header))
        except (TypeError, ValueError):
            seconds = None  # an HTTP date: rare from an API server; the backoff applies
    if seconds is None:
        try:
            details = (json.loads(exc.body or "{}") or {}).get("details") or {}
            if details.get("retryAfterSeconds") is not None:
                seconds = max(0.0, float(details["retryAfterSeconds"]))
        except (TypeError, ValueError, AttributeError):
            pass
    if status == 429:
        return min(seconds or 0.0, MAX_RETRY_AFTER_S)
    if status >= 500 and seconds is not None:
        return min(seconds, MAX_RETRY_AFTER_S)
    return None


@dataclass
class PaceStats:
    """What the pacer did: for the restore's notes and the bench."""

    writes: int = 0
    throttled: int = 0  # 429 / Retry-After answers, each retried
    waited_s: float = 0.0  # time the gate held writers for the server (summed over the gates)
    lowest_limit: int = 0
    retry_after_seen: list[float] = field(default_factory=list)

    def note(self, bound: int) -> str:
        if not self.throttled:
            return f"{self.writes} writes, up to {bound} at once; the API server throttled none"
        return (
            f"{self.writes} writes, up to {bound} at once; the API server throttled "
            f"{self.throttled} (429 / Retry-After), so every writer waited {self.waited_s:.1f}s "
            f"in all and the concurrency went down to {self.lowest_limit} before growing back"
        )


class Pacer:
    """Bounded, server-paced concurrency for one restore's writes."""

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers={workers}: at least 1")
        self.bound = workers
        self.limit = workers
        self.max_attempts = max_attempts
        self.clock, self.sleep = clock, sleep
        self.stats = PaceStats(lowest_limit=workers)
        self._cond = threading.Condition()
        self._active = 0
        self._successes = 0
        self._not_before = 0.0

    # -- the gate ------------------------------------------------------------------------
    def _enter(self) -> None:
        while True:
            with self._cond:
                wait = self._not_before - self.clock()
                if wait <= 0:
                    if self._active < self.limit:
                        self._active += 1
                        return
                    self._cond.wait(timeout=0.5)
                    continue
            self.sleep(wait)

    def _leave(self, throttled_for: float | None) -> None:
        with self._cond:
            self._active -= 1
            if throttled_for is None:
                self._successes += 1
                if self._successes >= self.limit and self.limit < self.bound:
                    self.limit += 1
                    self._successes = 0
            else:
                self.stats.throttled += 1
                self.stats.retry_after_seen.append(throttled_for)
                until = self.clock() + throttled_for
                if until > self._not_before:
                    self.stats.waited_s += until - max(self._not_before, self.clock())
                    self._not_before = until
                self.limit = max(1, self.limit // 2)
                self.stats.lowest_limit = min(self.stats.lowest_limit, self.limit)
                self._successes = 0
            self._cond.notify_all()

    # -- writes --------------------------------------------------------------------------
    def call(self, write: Callable[[], R], what: str) -> R:
        """`write()` once the gate lets it, retried on the server's throttle answers."""
        backoff = DEFAULT_RETRY_S
        for attempt in range(1, self.max_attempts + 1):
            self._enter()
            try:
                result = write()
            except BaseException as exc:
                delay = throttle_delay(exc)
                if delay is None:
                    self._leave(None)
                    raise
                if delay == 0:
                    delay, backoff = backoff, min(backoff * 2, MAX_RETRY_AFTER_S)
                self._leave(delay)
                if attempt == self.max_attempts:
                    raise ThrottledError(
                        f"{what}: the API server still answered HTTP {getattr(exc, 'status', '?')} "
                        f"(too many requests) after {attempt} tries; its priority and fairness "
                        "settings leave this client too little: retry later or give the "
                        "replay's user a FlowSchema of its own"
                    ) from None
                continue
            with self._cond:
                self.stats.writes += 1
            self._leave(None)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def map(self, write: Callable[[T], R], items: Iterable[T], what: Callable[[T], str]) -> list[R]:
        """`write(item)` for every item, at most `bound` at once; results in the items' order.

        The first failure (not a throttle) is raised once every started write has ended.
        """
        todo = list(items)
        if not todo:
            return []
        with ThreadPoolExecutor(max_workers=min(self.bound, len(todo))) as pool:
            futures = [pool.submit(self.call, lambda i=i: write(i), what(i)) for i in todo]
            return [f.result() for f in futures]

    def tiers(
        self,
        tiers: Iterable[tuple[str, list[T]]],
        write: Callable[[T], R],
        what: Callable[[T], str],
        report: Callable[[str], None] | None = None,
    ) -> dict[str, list[R]]:
        """Each tier written concurrently, tiers one after another (a tier's objects need the
        earlier tiers' to exist: a pod its namespace and ServiceAccount, a claim its class)."""
        out: dict[str, list[R]] = {}
        for name, items in tiers:
            started = self.clock()
            out[name] = self.map(write, items, what)
            if report is not None and items:
                took = self.clock() - started
                rate = f", {len(items) / took:.0f}/s" if took > 0 else ""
                report(f"restore: {len(items)} {name} written in {took:.1f}s{rate}")
        return out


def widen_pool(api: Any, size: int) -> None:
    """Let the client keep `size` connections to the server (the official client keeps
    5 x CPUs: on 2 cores, 10; a writer beyond that would open and drop a TLS connection each
    request)."""
    pool = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if pool is None:
        return
    if int(pool.connection_pool_kw.get("maxsize") or 1) < size:
        pool.connection_pool_kw["maxsize"] = size
        pool.clear()
