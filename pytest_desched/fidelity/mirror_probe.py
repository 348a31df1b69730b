"""What a dry run predicts when its mirror is complete: the proof behind descheduler#1917.

In dry run, v0.36.0 copies the cluster into an in-memory mirror that is filled while its own
informers already run, so a one-shot cycle can start on a mirror missing some pods or nodes
(upstream #1917, fix proposed in #1922): the Job's round then names fewer pods than the real
run. An absent log line proves nothing, so this runs the *same binary* with the *same mounted
policy*, one-shot in dry run exactly as the Job did, against the *same lab* (a dry run changes
nothing in it): when a run names the pods the Job's cycle missed, on a state whose pod UIDs
did not change, the shortfall is proven to be the mirror's. One-shot runs, not an interval: a
long-running process's later cycles differ from any first cycle in more than the mirror
(v0.36.0's PDB lister, #1882, is filled by then). Two forms, by the provider's capability
(`Capabilities.mirror_probe`): where round pods run as local binaries (embedded), the binary
itself beside the cluster (`binary_runs`); where a kubelet runs them from images (kind, existing),
each run is a Job created from the suspended CronJob exactly as a round is, dry run forced,
its pod's log read and the Job deleted with its pods (`mirror_jobs.job_runs`). Where neither
can run, the caller says so in the verdict (`NOT_PROBED`).

When it concludes: first the lab must have settled, read from the API (every pod the round
saw present, on the node it was on, Ready where it was Ready; `SETTLE_TIMEOUT`), since a run
on a lab still being restored proves nothing either way. Then one-shot runs follow until one
names as many pods as the real run decided, or the most any run named has been named by
`STABLE` runs (a complete mirror gives the same answer every time, an incomplete one varies;
and a complete dry run may name fewer pods than the real run decided: at a PDB with 0
disruptions each real eviction is refused and counts against no cap, where dry run's first
would-be eviction fills the node's cap and the walk of that node stops), or `BUDGET` seconds
have passed: how often the race is lost depends on the machine's load (a fresh-clone CI run
lost it 4 times in a row), so a fixed count of runs is no bound. Either timeout ends with no
settled cycle and a `how` naming what was seen (the lab's pods, each run's count), which the
verdict then carries.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.decisions import RoundResult
from pytest_desched.descheduler.logparse import parse_lines
from pytest_desched.errors import WaitTimeout
from pytest_desched.kube import pod_ready, wait_for

SETTLE_TIMEOUT = 60.0  # s: the lab's pods present, bound and Ready as the round saw them
BUDGET = 120.0  # s: one-shot runs until one names what the real run decided
RUN_TIMEOUT = 30.0  # s: one one-shot run (a cycle on a small lab ends in a few seconds)
STABLE = 3  # runs naming the most pods any run named: the mirror's answer stopped changing
NOT_PROBED = "the dry-run mirror probe did not run"  # the head of every "could not" note
LOCAL = "of the same binary"  # what ran, as `how` says it (the embedded form)

# One one-shot dry run, given the seconds it may take: its parsed log, or None when it was cut
# short (a run that did not finish names nothing; the probe's deadline bounds the loop).
OneShot = Callable[[float], RoundResult | None]


@dataclass(frozen=True)
class Expect:
    """One pod the round saw: the node it must be bound to (None: any) and if it was Ready."""

    node: str | None
    ready: bool


@dataclass(frozen=True)
class MirrorProbe:
    """Each one-shot run's decisions, in order; `chosen` the run that named what was wanted
    (None: none did, or the lab never settled; `how` says what was seen)."""

    runs: tuple[RoundResult, ...]
    chosen: int | None
    how: str

    @property
    def settled(self) -> RoundResult | None:
        return self.runs[self.chosen] if self.chosen is not None else None


def named(result: RoundResult, keys: set[str]) -> int:
    """How many of the lab pods `keys` a run's log decides something about."""
    return len({d.key for d in result.decisions} & keys)


def lab_state(core: Any, expected: Mapping[str, Expect]) -> tuple[bool, str]:
    """Read from the API: is every pod of `expected` (namespace/name) there as expected?"""
    found: dict[str, Any] = {}
    for ns in sorted({k.split("/", 1)[0] for k in expected}):
        for p in core.list_namespaced_pod(ns).items:
            found[f"{ns}/{p.metadata.name}"] = p
    missing, moved, unready = [], [], []
    for k, want in sorted(expected.items()):
        p = found.get(k)
        if p is None or p.metadata.deletion_timestamp is not None:
            missing.append(k)
        elif want.node is not None and p.spec.node_name != want.node:
            moved.append(f"{k} on {p.spec.node_name or 'no node'} (want {want.node})")
        elif want.ready and not pod_ready(p):
            unready.append(k)
    n = len(expected)
    seen = (
        f"{n - len(missing)} of {n} pods present, {n - len(missing) - len(moved)} on their "
        f"node, {n - len(missing) - len(moved) - len(unready)} as Ready as expected"
    )
    for what, ks in (("missing", missing), ("elsewhere", moved), ("not Ready", unready)):
        if ks:
            seen += f"; {what}: {', '.join(ks[:5])}{' ...' if len(ks) > 5 else ''}"
    return not (missing or moved or unready), seen


@contextlib.contextmanager
def binary_runs(
    binary: Path, kubeconfig: Path, policy_yaml: str, version: str
) -> Iterator[OneShot]:
    """One-shot dry runs of the local `binary` beside the cluster, its policy in a temp dir
    that goes with the context (the embedded form; `mirror_jobs.job_runs` is the Job form)."""
    with tempfile.TemporaryDirectory(prefix="desched-mirror-") as tmp:
        work = Path(tmp)
        policy = work / "policy.yaml"
        policy.write_text(policy_yaml)
        argv = [
            str(binary),
            f"--policy-config-file={policy}",
            f"--client-connection-kubeconfig={kubeconfig}",
            "--dry-run=true",
            "--secure-port=0",
            "--logging-format=json",
            "--v=4",
        ]

        def run_once(timeout: float) -> RoundResult | None:
            try:
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    cwd=work,
                    env={"HOME": str(work)},
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return None
            return parse_lines((done.stdout + done.stderr).splitlines(), version)

        yield run_once


def probe(
    run_once: OneShot,
    what: str,
    core: Any,
    expected: Mapping[str, Expect],
    want: int | None,
    *,
    settle_timeout: float = SETTLE_TIMEOUT,
    budget: float = BUDGET,
    max_runs: int | None = None,
    run_timeout: float = RUN_TIMEOUT,
) -> MirrorProbe:
    """One-shot dry runs (`run_once`, `what` ran: "of the same binary", ...) on the settled lab
    until one names `want` of the pods `expected` (so it saw at least what the real run
    decided), within `budget` seconds; each run gets at most `run_timeout` of them.

    `want=None`: the real run has not happened yet (a fidelity twin's lab, probed before the
    real round changes it); `max_runs` runs at most, and the one that named the most is
    taken, for the comparison to hold against the real round or not."""
    try:
        _, seen = wait_for(
            "the lab to settle before the dry-run mirror probe",
            lambda: lab_state(core, expected),
            lambda s: s[0],
            timeout=settle_timeout,
            describe=lambda s: s[1] if s else "nothing read",
        )
    except WaitTimeout as e:
        return MirrorProbe((), None, f"{NOT_PROBED}: {e}")
    keys = set(expected)
    runs: list[RoundResult] = []
    deadline = time.monotonic() + budget
    while (left := deadline - time.monotonic()) > 0:
        run = run_once(min(run_timeout, left))
        if run is None:
            continue  # a run cut short names nothing; the deadline bounds the loop
        runs.append(run)
        if _done(runs, keys, want) or (max_runs is not None and len(runs) >= max_runs):
            break
    counts = [named(r, keys) for r in runs]
    shown = _counts(counts)
    if want is None:
        if not runs or max(counts) == 0:
            return MirrorProbe(
                tuple(runs),
                None,
                f"on the settled lab ({seen}), {len(runs)} one-shot dry "
                f"run(s) {what} named {shown or 'nothing'} of its {len(keys)} pods",
            )
        chosen = counts.index(max(counts))
        how = (
            f"on the settled lab ({seen}), before the real round, {len(runs)} one-shot dry "
            f"run(s) {what} named {shown} of its {len(keys)} pods; run "
            f"{chosen + 1} taken (the most any named)"
        )
        return MirrorProbe(tuple(runs), chosen, how)
    if runs and _done(runs, keys, want):
        if counts[-1] >= want:
            chosen, why = len(runs) - 1, f"run {len(runs)} named the {want} the real run decided"
        else:  # the first of the runs that named the most, every one of them as far
            chosen = counts.index(max(counts))
            why = (
                f"{STABLE} runs named {max(counts)}, the most any named (a complete mirror "
                f"answers the same every time): run {chosen + 1} taken"
            )
        how = (
            f"on the settled lab ({seen}), {len(runs)} one-shot dry run(s) {what} "
            f"named {shown} of its {len(keys)} pods; {why}"
        )
        return MirrorProbe(tuple(runs), chosen, how)
    how = (
        f"no complete dry-run cycle in {budget:.0f}s: on the settled lab ({seen}), "
        f"{len(runs)} one-shot dry run(s) {what} named {shown or 'nothing'} of its "
        f"{len(keys)} pods: none the {want} the real run decided, and no count named by "
        f"{STABLE} runs"
    )
    return MirrorProbe(tuple(runs), None, how)


def _done(runs: list[RoundResult], keys: set[str], want: int | None) -> bool:
    """A run named `want` pods, or `STABLE` runs named the most any run named (not none)."""
    counts = [named(r, keys) for r in runs]
    return (want is not None and counts[-1] >= want) or (
        max(counts) > 0 and counts.count(max(counts)) >= STABLE
    )


def _counts(counts: list[int]) -> str:
    """[5, 10, 0, 7] as is; a long list by its first runs and its range."""
    if len(counts) <= 12:
        return str(counts)
    return f"{counts[:8]}... (min {min(counts)}, max {max(counts)})"
