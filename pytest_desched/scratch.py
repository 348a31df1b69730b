"""Temporary folders a run makes ($TMPDIR/desched-XXXXXXXX): made here, removed on every exit.

A run's scratch folder holds the round logs, the kubeconfig copy and a canary's
`baseline/` and `candidate/`; the evidence a user keeps goes to the artifacts folder instead.
Every folder made by `make` is recorded; the `desched` command removes those its subcommand
made (`remove_all(but=made_before)`) once the work is over, on pass, failure, refusal,
exception and signal alike, and an interpreter exit removes whatever is left (a library
caller, the test suite). A folder holding a kept cluster's kubeconfig is `keep`-ed and stays.

A SIGKILLed run (a CI timeout, the OOM killer) runs no exit code, so the first `make` also
starts a keeper: this very file run as a script (`python -I -S`, stdlib only), in a session
of its own, told over a pipe each folder made, removed or kept. The kernel closes the pipe
when the owner dies, however it dies; the keeper then removes the folders it was told of
and nothing else (another run's folders in the same $TMPDIR are not its own). A normal exit
says `release` first, so the keeper ends without touching anything.

Ground floor: imports nothing from the package.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

PREFIX = "desched-"
RELEASE = "release"
_made: list[Path] = []  # in the order made
_kept: set[Path] = set()
_lock = threading.Lock()  # the canary's two tracks make folders at once
_keeper: subprocess.Popen[bytes] | None = None
_keeper_pid = 0  # the process that started it: a forked child never speaks for its parent
_Popen = subprocess.Popen  # as imported: a test's stand-in for Popen is not for the keeper


def _tell(**message: str) -> None:
    """One line to the keeper, started on first use; without one (it could not start, or
    the pipe broke) the folders are still removed on every exit but SIGKILL."""
    global _keeper, _keeper_pid
    with _lock:
        if _keeper is None and RELEASE not in message:
            with contextlib.suppress(OSError, ValueError):
                _keeper = _Popen(
                    [sys.executable, "-I", "-S", str(Path(__file__).resolve())],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # a terminal's Ctrl-C is for the owner
                )
                _keeper_pid = os.getpid()
        if _keeper is None or _keeper.stdin is None or _keeper_pid != os.getpid():
            return
        with contextlib.suppress(OSError, ValueError):
            _keeper.stdin.write(json.dumps(message).encode() + b"\n")
            _keeper.stdin.flush()


def make(prefix: str = PREFIX, parent: Path | None = None) -> Path:
    """A new empty folder under $TMPDIR (or `parent`), removed when the run ends."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    _made.append(path)
    _tell(made=str(path))
    return path


def keep(path: Path) -> None:
    """Leave the scratch folder holding `path` in place (a kept cluster's kubeconfig)."""
    _kept.add(Path(path))
    _tell(keep=str(path))


def _is_kept(folder: Path, kept: set[Path] | None = None) -> bool:
    return any(k == folder or k.is_relative_to(folder) for k in (_kept if kept is None else kept))


def remove(path: Path) -> None:
    """Remove one folder this run made now (ignored when kept or not ours)."""
    if path in _made and not _is_kept(path):
        shutil.rmtree(path, ignore_errors=True)
        _made.remove(path)
        _tell(gone=str(path))


def remove_all(but: frozenset[Path] = frozenset()) -> list[Path]:
    """Remove every folder made (newest first) except `but` and kept ones; returns those that
    could not be removed."""
    left = []
    for path in reversed([p for p in _made if p not in but]):
        if _is_kept(path):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            left.append(path)
        else:
            _made.remove(path)
            _tell(gone=str(path))
    return left


def made() -> frozenset[Path]:
    """The folders made so far and not yet removed (give it to `remove_all(but=...)`)."""
    return frozenset(_made)


def _at_exit() -> None:
    """Remove what is left, then let the keeper go: nothing is left for it to do."""
    global _keeper
    remove_all()
    if _keeper is not None and _keeper_pid == os.getpid():
        _tell(release=RELEASE)
        with contextlib.suppress(OSError, ValueError):
            assert _keeper.stdin is not None
            _keeper.stdin.close()
        _keeper = None


def keeper(stream: IO[bytes]) -> list[Path]:
    """The keeper's side: read until the owner's pipe closes; unless it said `release`,
    remove the folders made, not removed and not kept. Returns those it removed."""
    made: dict[Path, None] = {}  # insertion-ordered set
    kept: set[Path] = set()
    for raw in stream:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if RELEASE in message:
            return []
        for key, into in (("made", True), ("gone", False)):
            if isinstance(message.get(key), str):
                if into:
                    made[Path(message[key])] = None
                else:
                    made.pop(Path(message[key]), None)
        if isinstance(message.get("keep"), str):
            kept.add(Path(message["keep"]))
    removed = []
    for path in reversed(list(made)):
        if not _is_kept(path, kept):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


if __name__ == "__main__":  # the keeper (see the module docstring)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the owner's to handle
    keeper(sys.stdin.buffer)
else:
    atexit.register(_at_exit)
