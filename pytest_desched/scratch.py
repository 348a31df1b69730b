"""Temporary folders a run makes ($TMPDIR/desched-XXXXXXXX): made here, removed on every exit.

A run's scratch folder holds the round logs, the kubeconfig copy and a canary's
`baseline/` and `candidate/`; the evidence a user keeps goes to the artifacts folder instead.
Every folder made by `make` is recorded; the `desched` command removes those its subcommand
made (`remove_all(but=made_before)`) once the work is over, on pass, failure, refusal,
exception and signal alike, and an interpreter exit removes whatever is left (a library
caller, the test suite). A folder holding a kept cluster's kubeconfig is `keep`-ed and stays.

Ground floor: imports nothing from the package.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

PREFIX = "desched-"
_made: list[Path] = []  # in the order made
_kept: set[Path] = set()


def make(prefix: str = PREFIX, parent: Path | None = None) -> Path:
    """A new empty folder under $TMPDIR (or `parent`), removed when the run ends."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    _made.append(path)
    return path


def keep(path: Path) -> None:
    """Leave the scratch folder holding `path` in place (a kept cluster's kubeconfig)."""
    _kept.add(Path(path))


def _is_kept(folder: Path) -> bool:
    return any(k == folder or k.is_relative_to(folder) for k in _kept)


def remove(path: Path) -> None:
    """Remove one folder this run made now (ignored when kept or not ours)."""
    if path in _made and not _is_kept(path):
        shutil.rmtree(path, ignore_errors=True)
        _made.remove(path)


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
    return left


def made() -> frozenset[Path]:
    """The folders made so far and not yet removed (give it to `remove_all(but=...)`)."""
    return frozenset(_made)


atexit.register(remove_all)
