"""A snapshot's header against its body: what disagrees is named at load (issue 54).

`desched snapshot` writes a header that agrees with its body; a file edited by hand or
written by another tool may not. The body is what is replayed, so a disagreement is a note
the ledger carries, except where the replay would mislead: a body with fewer pods or nodes
than its header counted has lost objects, and the nodes it replays look emptier than they
were (LowNodeUtilization's and nodeFit's answers change), so it is refused.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from pytest_desched.errors import ConfigError

if TYPE_CHECKING:
    from pytest_desched.replay.capture.format import Snapshot

# A clock a little ahead (NTP, another zone's machine) is not a wrong file.
FUTURE_SLACK = dt.timedelta(minutes=5)


def header_notes(snap: Snapshot, source: str, now: dt.datetime | None = None) -> list[str]:
    """Each disagreement between `snap`'s header and body, one line each; ConfigError for
    one the replay would be misled by (objects the header counted are missing)."""
    from pytest_desched.replay.capture.format import (
        DESCHEDULER_LABEL,  # cycle: format imports this module
    )

    notes: list[str] = []
    counted = (snap.header.get("source") or {}) if isinstance(snap.header, dict) else {}
    for what in ("nodes", "pods"):
        said, has = counted.get(what), len(snap.items(what))
        if isinstance(said, bool) or not isinstance(said, int) or said == has:
            continue
        if has < said:
            raise ConfigError(
                f"snapshot {source}: its header counts {said} {what}, its body holds {has}: "
                f"{said - has} {what} are missing, and the replay would show emptier nodes "
                "than the cluster had. Take the snapshot again (`desched snapshot`), or set "
                f"header.source.{what} to {has} if the body is what you mean to replay"
            )
        notes.append(f"the header counts {said} {what}, the body holds {has}: the body is replayed")
    now = now or dt.datetime.now(dt.UTC)
    try:
        ahead = snap.taken_at - now
    except (ConfigError, ValueError):
        ahead = dt.timedelta(0)  # validation names it
    if ahead > FUTURE_SLACK:
        notes.append(
            f"header.takenAt is {ahead.total_seconds():.0f} s ahead of this machine's clock: "
            "pod ages are counted from it (ages=shift keeps them as the snapshot says; "
            "ages=preserve would make pods younger than zero)"
        )
    listed = {_name(n) for n in snap.items("namespaces")}
    used: dict[str, int] = {}
    for _, obj in snap.all_objects():
        ns = (obj.get("metadata") or {}).get("namespace")
        if ns and ns not in listed:
            used[ns] = used.get(ns, 0) + 1
    if used and listed:  # a snapshot with no namespaces section at all says nothing of them
        named = ", ".join(f"{ns} ({n})" for ns, n in sorted(used.items()))
        notes.append(
            f"namespaces referenced but not in the snapshot, restored without labels (a "
            f"namespaceSelector may match differently): {named}"
        )
    k, v = DESCHEDULER_LABEL
    own = sum(((p.get("metadata") or {}).get("labels") or {}).get(k) == v for p in snap.pods)
    if own:
        notes.append(
            f"{own} pod(s) of the descheduler itself are in the snapshot: never restored "
            "(the replay runs its own release) and in no ledger row"
        )
    return notes


def _name(obj: Any) -> str:
    return str((obj.get("metadata") or {}).get("name")) if isinstance(obj, dict) else ""
