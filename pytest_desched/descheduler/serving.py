"""A local descheduler binary kept running beside a cluster, the way a Deployment runs it.

The event and metric probes both need the process a round is not: one that outlives its
cycle (`--descheduling-interval`), serving on a loopback port, logging JSON to a file they
read while it runs, and stopped whatever happens. This is that process, once.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_desched.proc import free_port


@dataclass(frozen=True)
class Serving:
    """The running process, its loopback port and the log it writes."""

    binary: Path
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def check_alive(self, tail: int = 400) -> None:
        """RuntimeError naming the binary, its exit code and its log's tail once it exited."""
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.binary.name} exited {self.proc.returncode}: {self.text()[-tail:]}"
            )


@contextlib.contextmanager
def serving(
    binary: Path, kubeconfig: Path, policy_yaml: str, args: list[str], prefix: str
) -> Iterator[Serving]:
    """`binary` with the policy and kubeconfig, `args` (its interval, dry run), a loopback
    port and JSON logs at -v=2, in a temp dir of its own; terminated (then killed) on exit."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        policy = work / "policy.yaml"
        policy.write_text(policy_yaml)
        log = work / "descheduler.log"
        argv = [
            str(binary),
            f"--policy-config-file={policy}",
            f"--client-connection-kubeconfig={kubeconfig}",
            *args,
            # a real loopback port: v0.33.0 dereferences a nil serving config on
            # --secure-port=0 (options.go:147) and exits 2 before its first cycle
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={work}",
            "--logging-format=json",
            "--v=2",
        ]
        with open(log, "w") as logf:
            proc = subprocess.Popen(
                argv, stdout=logf, stderr=subprocess.STDOUT, cwd=work, env={"HOME": str(work)}
            )
        try:
            yield Serving(binary, proc, port, log)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
