"""Start a child command the way a user's shell or a CI job does, and end it whatever happens.

One way for every test that runs `desched` (or a Python child) as a process of its own: its
own session (a terminal's foreground job: Ctrl-C goes to its group), its own $TMPDIR, no
DESCHED_*, KUBECONFIG or xdist worker id leaking in from this session, SIGINT at its default
(a background shell starts children with it ignored), and on a timeout or a failed assertion
a SIGTERM to its group (its own cleanup runs) before a SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

DESCHED = Path(sys.executable).with_name("desched")  # the venv's console script
REPO = Path(__file__).resolve().parents[1]


def child_env(tmpdir: Path, cache: Path | None = None, **extra: str) -> dict[str, str]:
    """This session's environment for a child: TMPDIR (and the tool cache) pointed at ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESCHED_")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("KUBECONFIG", None)
    env["TMPDIR"] = str(tmpdir)
    if cache is not None:
        env["DESCHED_CACHE_DIR"] = str(cache)
    env.update(extra)
    return env


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(
    argv: Sequence[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.Popen[str]:
    """The child, in a session of its own, its output piped as text."""
    return subprocess.Popen(
        [str(a) for a in argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )


def stop(proc: subprocess.Popen[str], grace: float = 0, read: bool = True) -> None:
    """End a child still running: SIGTERM to its group first when `grace`, then SIGKILL.

    `read`: drain its pipes while waiting (False when threads of the caller read them).
    """
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        if proc.poll() is not None or (sig == signal.SIGTERM and not grace):
            continue
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.communicate(timeout=wait) if read else proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def finish(proc: subprocess.Popen[str], timeout: float, grace: float = 120) -> tuple[str, str]:
    """(stdout, stderr) once the child ended; past `timeout` it is stopped (`stop`)."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        stop(proc, grace)
