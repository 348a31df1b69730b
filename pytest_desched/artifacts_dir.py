"""Where a run's evidence lives by default: `./desched-artifacts/<UTC timestamp>-<run id>/`.

The evidence is the point of a run, so it must outlive the run: pytest's basetemp keeps only
the last three runs, and a random /tmp folder is found by no one. Every run (plugin or CLI)
gets its own folder under one stable root, and `latest` points at the newest. Ground floor:
imports nothing from the package.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT_NAME = "desched-artifacts"
LATEST = "latest"


def default_run_dir(root: Path | None = None, now: datetime | None = None) -> Path:
    """A fresh, absolute run folder name (not created): timestamp, run id, xdist worker.

    Under pytest-xdist every worker is its own process with its own session cluster, so each
    gets its own folder: the run id is the run's shared `testrunuid` and the worker is
    appended, so workers never collide and one run's folders sort together.
    """
    base = (root or Path.cwd() / ROOT_NAME).absolute()
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    run_id = (os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex)[:8]
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return base / (f"{stamp}-{run_id}-{worker}" if worker else f"{stamp}-{run_id}")


CLAIMED: list[Path] = []  # this process's claimed run folders (release_if_empty at its end)


def claim(run_dir: Path) -> Path:
    """Create the run folder and point `<root>/latest` at it (atomically; relative link)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    CLAIMED.append(run_dir)
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:  # a file system without symlinks: the folder itself is what matters
        tmp.unlink(missing_ok=True)
    return run_dir


def release_if_empty(run_dir: Path) -> bool:
    """Remove a claimed run folder that nothing was written to, and `latest` if it points there.

    A run that failed before its first record (no Go, a refused provider) left an empty
    timestamped folder per attempt; True when the folder was removed.
    """
    try:
        run_dir.rmdir()  # only an empty folder: anything written keeps it
    except OSError:
        return False
    link = run_dir.parent / LATEST
    with contextlib.suppress(OSError):
        if link.is_symlink() and os.readlink(link) == run_dir.name:
            link.unlink()
    with contextlib.suppress(OSError):
        run_dir.parent.rmdir()  # ./desched-artifacts itself, when this was its only run
    return True
