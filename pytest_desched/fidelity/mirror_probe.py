"""What a dry run predicts when its mirror is complete: the proof behind descheduler#1917.

In dry run, v0.36.0 copies the cluster into an in-memory mirror that is filled while its own
informers already run, so a one-shot cycle can start on a mirror missing some pods or nodes
(upstream #1917, fix proposed in #1922): the Job's round then names fewer pods than the real
run. An absent log line proves nothing, so this runs the *same binary* with the *same mounted
policy*, one-shot in dry run exactly as the Job did, against the *same lab* (a dry run changes
nothing in it), a few times: when a run names the pods the Job's cycle missed, on a state
whose pod UIDs did not change, the shortfall is proven to be the mirror's. One-shot runs, not
an interval: a long-running process's later cycles differ from any first cycle in more than
the mirror (v0.36.0's PDB lister, #1882, is filled by then). Only where round pods run as
local binaries (the embedded provider).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pytest_desched.descheduler.decisions import RoundResult
from pytest_desched.descheduler.logparse import parse_lines

RUNS = 4  # one-shot dry runs at most; the first that names as many pods as wanted ends it


@dataclass(frozen=True)
class MirrorProbe:
    """Each one-shot run's decisions, in order; `chosen` the one taken as the settled cycle."""

    runs: tuple[RoundResult, ...]
    chosen: int | None
    how: str

    @property
    def settled(self) -> RoundResult | None:
        return self.runs[self.chosen] if self.chosen is not None else None


def named(result: RoundResult, keys: set[str]) -> int:
    """How many of the lab pods `keys` a run's log decides something about."""
    return len({d.key for d in result.decisions} & keys)


def probe(
    binary: Path,
    kubeconfig: Path,
    policy_yaml: str,
    version: str,
    keys: set[str],
    want: int,
    timeout: float = 30,
) -> MirrorProbe:
    """Up to RUNS one-shot dry runs of `binary`; the first naming `want` of `keys` is chosen
    (else the one naming most), so the settled cycle saw at least what the real run decided."""
    runs: list[RoundResult] = []
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
        for _ in range(RUNS):
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
                break
            runs.append(parse_lines((done.stdout + done.stderr).splitlines(), version))
            if named(runs[-1], keys) >= want:
                break
    if not runs:
        return MirrorProbe((), None, f"no one-shot dry run of {binary.name} ended in {timeout}s")
    counts = [named(r, keys) for r in runs]
    best = max(range(len(runs)), key=lambda i: counts[i])
    how = (
        f"{len(runs)} one-shot dry run(s) of the same binary named {counts} of the "
        f"{len(keys)} lab pods; run {best + 1} taken"
    )
    return MirrorProbe(tuple(runs), best, how)
