#!/usr/bin/env python3
"""Run one command as a child subreaper and report its wall and CPU time, descendants included.

Both sides of the plugin-vs-script comparison start daemons (etcd, kube-apiserver, ...) that
outlive the process that spawned them. As a subreaper this wrapper inherits every orphan and
reaps it, so the kernel adds each one's CPU to RUSAGE_CHILDREN: the same accounting for the
plugin and the plain script.

    python bench/cpu_wrap.py OUT.json -- CMD [ARG...]

Writes {"wall_s", "cpu_s", "user_s", "sys_s", "exit_code", "stray_pids"} to OUT.json and exits
with the command's status. A descendant still alive 60 s after the command ended is killed
and named in `stray_pids` (the comparison counts that run as failed).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def descendants() -> list[int]:
    """PIDs whose parent is this process (orphans re-parented here included)."""
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me:
            out.append(int(d.name))
    return out


def reap_all(grace: int = 60) -> list[int]:
    """Reap every child (and inherited orphan) until none is left; kill what outlives `grace`."""
    stray: list[int] = []

    def on_alarm(signum: int, frame: object) -> None:
        for p in descendants():
            stray.append(p)
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(grace)
    try:
        while True:
            try:
                os.waitpid(-1, 0)  # blocks until a descendant exits; no polling
            except ChildProcessError:
                return stray
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    out, cmd = Path(argv[0]), argv[2:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd)
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # the child got the same SIGINT: let it tear down
        code = proc.wait()
    wall = time.monotonic() - t0
    stray = reap_all()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, sys_ = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    out.write_text(
        json.dumps(
            {
                "wall_s": round(wall, 3),
                "cpu_s": round(user + sys_, 3),
                "user_s": round(user, 3),
                "sys_s": round(sys_, 3),
                "exit_code": code,
                "stray_pids": stray,
            }
        )
        + "\n"
    )
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
