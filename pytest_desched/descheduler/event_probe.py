"""Whether a descheduler binary delivers its EvictionFailed events when it outlives them.

A one-shot round exits right after its cycle and can lose queued events (descheduler#1687),
so a round's own event count proves nothing either way: a candidate that sends no event at
all looks like a lost race. This runs the same binary the way a Deployment would
(`--descheduling-interval`, not dry run) against the lab the negative PDB experiment left
(every eviction refused with 429), waits until each refused pod has its EvictionFailed event
or the time is up, and stops it. Only on a provider that runs round pods as local binaries.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from pytest_desched.errors import WaitTimeout
from pytest_desched.kube import wait_for
from pytest_desched.proc import free_port

INTERVAL = "2s"  # a second cycle retries the refusals if the first one's events were slow


def delivered_when_outliving(
    binary: Path,
    kubeconfig: Path,
    policy_yaml: str,
    delivered: Callable[[], int],
    owed: int,
    timeout: float = 20,
) -> tuple[int, str]:
    """(refused pods with an EvictionFailed event, how it ended), the process kept running
    until every one of `owed` has its event or `timeout` passed, then stopped."""
    with tempfile.TemporaryDirectory(prefix="desched-events-") as tmp:
        work = Path(tmp)
        policy = work / "policy.yaml"
        policy.write_text(policy_yaml)
        log = work / "descheduler.log"
        argv = [
            str(binary),
            f"--policy-config-file={policy}",
            f"--client-connection-kubeconfig={kubeconfig}",
            f"--descheduling-interval={INTERVAL}",
            # a real loopback port: v0.33.0 dereferences a nil serving config on
            # --secure-port=0 (options.go:147) and exits 2 before its first cycle
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            f"--cert-dir={work}",
            "--logging-format=json",
            "--v=2",
        ]
        with open(log, "w") as logf:
            proc = subprocess.Popen(
                argv, stdout=logf, stderr=subprocess.STDOUT, cwd=work, env={"HOME": str(work)}
            )

        def probe() -> int:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-400:]
                raise RuntimeError(f"{binary.name} exited {proc.returncode}: {tail}")
            return delivered()

        try:
            n = wait_for(
                f"an EvictionFailed event for each of {owed} refused pod(s)",
                probe,
                lambda k: k >= owed,
                timeout=timeout,
                describe=lambda k: f"{k} of {owed} delivered",
                max_interval=0.5,
            )
            return n, f"{n} of {owed} delivered by a process that kept running"
        except WaitTimeout as exc:
            lines = log.read_text(errors="replace").splitlines()
            said = [ln for ln in lines if '"err"' in ln or "rror" in ln][-3:] or lines[-3:]
            return delivered(), f"{exc}; the process said: {' | '.join(said)[-900:]}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
