"""The cluster's watchdog: when its owner dies, even by SIGKILL, the cluster goes with it.

kwokctl starts the components in sessions of their own, so a signal to the owner's process
group reaches none of them, and a parent-death signal would not either (their parent is
kwokctl, or nobody once it exited). So each embedded cluster gets a small process of its own,
started by its owner before `kwokctl create`: it holds the read end of a pipe whose only
write end the owner holds. The kernel closes that end when the owner dies, however it
dies, so the watchdog learns of it at once (no polling, no pid that could be recycled).
Then, unless the owner said `release` first (it deleted or kept the cluster itself) or
marked the cluster kept, it kills every process of the cluster (processes.remove_cluster:
components, a `kwokctl create` still under way, the stand-in kubelet and its round pods),
removes the cluster's folder, `desched up`'s folder naming it, and last its owner record.

Its command line names no cluster (the name comes on the pipe), so a sweep for the
cluster's processes never takes it for one. It runs in a session of its own: a terminal's
Ctrl-C is for the owner, which cleans up and releases it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import pytest_desched
from pytest_desched.providers.embedded.owners import owner_running, read_record
from pytest_desched.providers.embedded.processes import remove_cluster

RELEASE = b"release\n"
LOG = "watchdog.log"  # under the clusters root: one line per cluster torn down
POLL_S = 0.2
RELEASE_WAIT_S = (
    10.0  # a released watchdog exits at once; a loaded machine (load 13+) took over 2 s
)


class Watchdog:
    """The owner's side: start the watchdog of cluster `name`, and `release` it when done."""

    def __init__(self, root: Path, name: str) -> None:
        # This very code, wherever it was imported from (a pytest rootdir is not on
        # PYTHONPATH); an installed copy's site-packages is on sys.path already.
        src = str(Path(pytest_desched.__file__).resolve().parent.parent)
        boot = (
            f"import sys; src = {src!r}; sys.path[:0] = [src] * (src not in sys.path); "
            f"from {__name__} import main; sys.exit(main())"
        )
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            [sys.executable, "-c", boot],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._pipe: IO[bytes] | None = self.proc.stdin
        self._send(json.dumps({"root": str(root), "name": name}).encode() + b"\n")

    def _send(self, data: bytes) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            assert self._pipe is not None
            self._pipe.write(data)
            self._pipe.flush()

    def release(self) -> None:
        """The owner is done with the cluster (deleted it, or kept it): the watchdog ends."""
        if self._pipe is None:
            return
        self._send(RELEASE)
        with contextlib.suppress(OSError):
            self._pipe.close()
        self._pipe = None
        # Reaped here: it ends as soon as it reads the release. Left to a later Popen's
        # cleanup, it outlived an owner that exited right after (a `desched` command), and
        # a subreaper above that owner (a pytest that ran the command) inherited a zombie.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=RELEASE_WAIT_S)


def watch(stream: IO[bytes]) -> tuple[dict[str, str] | None, bool]:
    """Read the cluster's header, then wait for the owner: (header, released).

    Returns when the pipe closes: released when the owner said so before it closed, else
    the owner is gone.
    """
    try:
        header = json.loads(stream.readline() or b"null")
    except ValueError:
        header = None
    rest = stream.read()  # blocks until every write end is closed: release, or the owner's death
    ok = isinstance(header, dict) and {"root", "name"} <= header.keys()
    return (header if ok else None), rest.endswith(RELEASE)


def tear_down(root: Path, name: str) -> str:
    """What the owner's death leaves to the watchdog: the cluster, unless kept or gone."""
    record_path = root / "owners" / f"{name}.json"
    record = read_record(record_path)
    if record is None:
        return f"{name}: no owner record (deleted by its owner or a reaper): nothing to do"
    if record.get("keep"):
        return f"{name}: kept (desched up, --desched-keep): left running"
    while owner_running(record):  # the pipe closed, yet the owner lives (it dropped its
        time.sleep(POLL_S)  # provider unreleased): the cluster stays its until it ends
    record = read_record(record_path)
    if record is None or record.get("keep"):
        return f"{name}: deleted or kept by its owner before it ended: nothing to do"
    notes: list[str] = []
    t0 = time.monotonic()
    left = remove_cluster(root, name, notes.append)
    for marker in (root.parent / "up").glob("run-*/cluster-name"):
        with contextlib.suppress(OSError):
            if marker.read_text().strip() == name:  # `desched up`'s folder for this cluster
                shutil.rmtree(marker.parent, ignore_errors=True)
    took = time.monotonic() - t0
    if left["processes_left"] or left["dir_left"]:
        return f"{name}: owner gone; NOT fully removed in {took:.2f}s ({left}; {notes})"
    return f"{name}: owner gone; deleted (0 processes, folder removed) in {took:.2f}s"


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the owner's to handle
    header, released = watch(sys.stdin.buffer)
    if header is None or released:
        os._exit(0)  # nothing to flush: no interpreter teardown for the owner to wait on
    root = Path(header["root"])
    said = tear_down(root, header["name"])
    with contextlib.suppress(OSError), open(root / LOG, "a") as log:
        log.write(f"{datetime.now(UTC).isoformat(timespec='seconds')} {said}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
