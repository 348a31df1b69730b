"""tools.locate.file_lock (filelock): a real OS lock that another process sees and waits on."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from pytest_desched.tools.locate import file_lock

HOLDER = """
import sys
from pathlib import Path
from pytest_desched.tools.locate import file_lock
with file_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""


def _try_flock(path: Path) -> bool:
    """True when a non-blocking exclusive flock on the path's current file succeeds."""
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


def test_another_process_holding_the_lock_excludes_this_one(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "group.lock"  # the folder is made on first use
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        assert not _try_flock(path), "the holder's lock is not visible to another process"
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        assert holder.wait(timeout=30) == 0
        with file_lock(path):  # free again: taken at once
            assert not _try_flock(path)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_second_holder_in_this_process_is_excluded(tmp_path: Path) -> None:
    """Parallel bring-ups can share a process: the lock is per holder, not per process."""
    path = tmp_path / "create.lock"
    with file_lock(path):
        assert not _try_flock(path)
    assert _try_flock(path)
