"""Owner records: which process owns each embedded cluster and each `desched up` folder.

A record (`<root>/owners/<cluster>.json`, `up/run-*/owner.json`) holds the owner's pid and
its kernel start time, so a later run tells a killed run's cluster (reap it) from a live one
(leave it) and from a recycled pid. Readers run while records are written: every `start()`
reaps first, and a canary starts two clusters at once in one process. So a record is
replaced whole (written beside it, then renamed), and a record a reader cannot parse counts
as an owner's only once it is UNREADABLE_GRACE_S old: a young one is being written in place
(by an older version of this code, which did that). Reading an empty record as "owner dead"
once deleted the other canary track's cluster under its `kwokctl create`
(`open .../pki/ca.key: no such file or directory`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

# Far longer than any write of a ~100-byte record, even on a loaded machine.
UNREADABLE_GRACE_S = 60.0


def proc_start(pid: int) -> str | None:
    """Kernel start time of a pid: tells a live owner from a recycled pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def this_process() -> dict[str, Any]:
    """The record of the calling process as an owner."""
    return {"pid": os.getpid(), "start": proc_start(os.getpid())}


def owner_running(record: dict) -> bool:
    """Alive and not a zombie: a killed owner its parent has not reaped yet has ended."""
    if not owner_alive(record):
        return False
    try:
        stat = Path(f"/proc/{int(record['pid'])}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def owner_alive(record: dict) -> bool:
    pid = int(record.get("pid", 0) or 0)
    start = proc_start(pid) if pid > 0 else None
    return start is not None and start == record.get("start")


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Replace `path` with `record` whole: a concurrent reader sees the old or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(record))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_record(path: Path, now: float | None = None) -> dict[str, Any] | None:
    """The record; None when it says nothing to act on.

    None: the file is gone (its owner deleted it with its cluster), or it cannot be parsed
    and is younger than UNREADABLE_GRACE_S (being written). An unparseable record older than
    that reads as {} (no live owner: a run killed while writing it).
    """
    try:
        text = path.read_text()
        record = json.loads(text)
        if isinstance(record, dict):
            return record
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        pass
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except OSError:
        return None
    return {} if age > UNREADABLE_GRACE_S else None


def kept_clusters(root: Path) -> list[str]:
    """Names of embedded clusters kept on purpose (`--desched-keep`, `desched up`)."""
    out = []
    for rec in sorted((root / "owners").glob("*.json")):
        if (read_record(rec) or {}).get("keep"):
            out.append(rec.stem)
    return out


def write_up_owner(run_dir: Path) -> None:
    """Mark `desched up`'s folder as this process's while it runs (see stale_up_dirs)."""
    write_record(run_dir / "owner.json", this_process())


KEPT_UP = "kept.json"  # in a finished `desched up`'s folder whose cluster is not embedded


def write_up_kept(run_dir: Path, provider: str, cluster: str, created: bool) -> None:
    """Mark a finished `desched up` on a cluster the embedded keep records do not know (kind,
    existing): its folder holds the kubeconfig, and `desched down` deletes what it made."""
    write_record(run_dir / KEPT_UP, {"provider": provider, "cluster": cluster, "created": created})


def _kept_mark(run_dir: Path) -> dict[str, Any] | None:
    """The folder's kept mark; None without one, or for one that is not a mark (hand-edited)."""
    if not (run_dir / KEPT_UP).exists():
        return None
    mark = read_record(run_dir / KEPT_UP)
    return mark if isinstance(mark, dict) and isinstance(mark.get("cluster"), str) else None


def kept_up_clusters(up_dir: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Cluster name -> (its `desched up` folder, its mark) for each kept non-embedded one."""
    out = {}
    for d in sorted(up_dir.glob("run-*")):
        if (mark := _kept_mark(d)) is not None:
            out[mark["cluster"]] = (d, mark)
    return out


def stale_up_dirs(up_dir: Path, root: Path, legacy_age_s: float = 600) -> list[Path]:
    """`desched up` folders no one needs: their `up` ended and their cluster is not kept
    (an embedded keep record, or the folder's own mark for kind: `write_up_kept`).

    An interrupted `up` deletes its own; these are what a killed one (SIGKILL) left. A
    folder without an owner record (written by older versions) counts once it is
    `legacy_age_s` old, so a running older `up` keeps its own.
    """
    kept = set(kept_clusters(root))
    out = []
    for d in sorted(up_dir.glob("run-*")):
        if _kept_mark(d) is not None:
            continue  # a kept kind (or existing) cluster's: its kubeconfig is in there
        marker = d / "cluster-name"
        with contextlib.suppress(OSError):
            if marker.is_file() and marker.read_text().strip() in kept:
                continue
        record_path = d / "owner.json"
        if not record_path.exists():
            with contextlib.suppress(OSError):
                if time.time() - d.stat().st_mtime > legacy_age_s:
                    out.append(d)
            continue
        owner = read_record(record_path)
        if owner is not None and not owner_alive(owner):
            out.append(d)
    return out
