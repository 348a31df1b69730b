"""Which metric families a descheduler binary serves: run it once as a server and ask it.

A round's one-shot process stops serving the moment its cycle ends, so the round scrapes
rarely land (metrics.round_metrics says so). An upgrade canary still has to know whether the
candidate serves every family the baseline did, so this runs the binary the way a
Deployment would (`--descheduling-interval`, dry run, loopback port) on a lab cluster until
its first cycles are done, and stops it. The proof is the served family set itself, not one
family's name: the set is taken once it stayed the same for SETTLE_S seconds, and only after
CYCLES finished loops, counted by the scrape's `*_loop_duration_seconds_count` where one is
served, else by the process's own log (its `Number of evictions/requests` line ends every
loop), so a candidate that renames or drops the loop metric still gets its set proven, and
then compared. Only families with at least one sample appear (Prometheus omits untouched
vectors): before a loop has finished, the loop and strategy histograms are not served at all.
Issue 54: on a 1,000-node snapshot at load ~50 a candidate's first loop outlasted the settle
window, its set `{descheduler_build_info}` was taken as settled (no loop family served, so no
loop was awaited) and both histograms were called lost.
"""

from __future__ import annotations

import http.client
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_desched.descheduler.metrics import served_families, served_names
from pytest_desched.descheduler.serving import serving
from pytest_desched.kube import wait_for

LOOP_FAMILY = "_loop_duration_seconds"
CYCLES = 3  # finished loops before the scrape counts: past the first cycle's dry-run race
SETTLE_S = 3.0  # the family set unchanged this long (three 1 s cycles) is the served set
LOOP_END_MSG = '"msg":"Number of evict'  # V(1), the last line of every loop (all releases)
PROBE_TIMEOUT_S = 180.0  # three loops over a 1,000-node snapshot at load ~50: 52 s seen


def loops_logged(log: str) -> int:
    """Finished loops the process's log shows (its per-loop eviction totals line)."""
    return sum(LOOP_END_MSG in line for line in log.splitlines())


@dataclass
class FamilySettle:
    """Watches successive scrapes; done once the `descheduler_*` family set has settled."""

    settle_s: float = SETTLE_S
    families: tuple[str, ...] = ()
    since: float | None = None  # when the current set was first seen
    loops: float = 0.0
    logged: int = 0  # finished loops the process's log showed by then
    unreadable: str = ""  # why the last scrape could not be parsed, if it could not

    def see(self, text: str, now: float, logged_loops: int = 0) -> bool:
        """Whether the set is proven: settled, and past CYCLES finished loops (the scrape's
        count where a loop family is served, else the log's)."""
        self.logged = logged_loops
        try:
            fams = tuple(served_names(text)) if text else ()
            self.loops = _loops(text) if text else 0.0
        except ValueError as exc:  # not the exposition format: this scrape proves nothing
            self.unreadable = f"the last scrape is not Prometheus text ({exc or 'unparsable'})"
            return False
        self.unreadable = ""
        if fams != self.families or self.since is None:
            self.families, self.since = fams, now
        if any(f.endswith(LOOP_FAMILY) for f in fams):
            looped = self.loops >= CYCLES
        else:  # renamed, dropped, or no loop finished yet: only the log can tell them apart
            looped = logged_loops >= CYCLES
        return bool(fams) and looped and now - self.since >= self.settle_s

    def describe(self) -> str:
        if self.unreadable:
            return self.unreadable
        if not self.families:
            return "no descheduler_* family served yet"
        return (
            f"{len(self.families)} famil(ies) served ({', '.join(self.families)}), "
            f"{_loops_said(self.loops)} by the scrape, {self.logged} by the log; "
            f"fewer than {CYCLES} loops, or unchanged for less than {self.settle_s:g}s"
        )


def _loops_said(n: float) -> str:
    return f"{n:g} finished loop(s) counted"


def _scrape(port: int) -> str | None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the process's self-signed loopback certificate
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read().decode(errors="replace")
        return body if resp.status == 200 else None
    except OSError:
        return None
    finally:
        conn.close()


def _loops(text: str) -> float:
    """Finished loops the scrape counts (any loop-duration family, whatever its prefix)."""
    return max(
        (
            sample.value
            for name, fam in served_families(text)
            if name.endswith(LOOP_FAMILY)
            for sample in fam.samples
            if sample.name == f"{name}_count"
        ),
        default=0.0,
    )


def served_metric_names(
    binary: Path, kubeconfig: Path, policy_yaml: str, timeout: float = PROBE_TIMEOUT_S
) -> list[str]:
    """The `descheduler_*` families the binary serves after a few dry-run cycles.

    Raises WaitTimeout naming what was seen when no scrape counted a finished loop.
    """
    args = [
        "--dry-run=true",  # never evicts: the probe only wants the server's metric list
        # Stays up between cycles, unlike a round. Several cycles: v0.36.0's dry-run
        # mirror can be empty in the first (#1917), which then runs no strategy at all.
        "--descheduling-interval=1s",
    ]
    with serving(binary, kubeconfig, policy_yaml, args, "desched-metrics-") as run:
        watch = FamilySettle()

        def probe() -> bool:
            run.check_alive(tail=600)
            logged = loops_logged(run.text())  # before the scrape
            return watch.see(_scrape(run.port) or "", time.monotonic(), logged)

        wait_for(
            f"{binary.name} to serve a settled set of descheduler_* metric families",
            probe,
            bool,
            timeout=timeout,
            describe=lambda _ok: watch.describe(),
            max_interval=0.25,
        )
        return list(watch.families)
