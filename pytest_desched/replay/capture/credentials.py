"""Credentials a loaded snapshot carries, removed before anything reads it: never restored
into the throwaway cluster, never written to the evidence.

A snapshot from `desched snapshot` has none (trim.py drops container env, envFrom and
projected service-account token volumes; `scrub_data` the rest), but a snapshot is a file:
edited by hand, written by another tool or an older version, it passed every input check
with a token in a container's env, an annotation or a token volume (issue 54). Removing
them changes no replay: no scheduling or descheduling decision reads env, and the replay
cluster's admission adds its own token volume. What would change a replay is refused
instead: a Secret or a ServiceAccount in the file (format.FORBIDDEN_KINDS).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from pytest_desched.redaction import scrub_data
from pytest_desched.replay.capture.trim import is_token_volume

# Where each section keeps its PodSpec (a controller's template, a CronJob's Job template).
SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "pods": ("spec",),
    "deployments": ("spec", "template", "spec"),
    "replicaSets": ("spec", "template", "spec"),
    "statefulSets": ("spec", "template", "spec"),
    "daemonSets": ("spec", "template", "spec"),
    "jobs": ("spec", "template", "spec"),
    "cronJobs": ("spec", "jobTemplate", "spec", "template", "spec"),
}
CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")


def scrub_credentials(objects: dict[str, list[dict[str, Any]]]) -> Counter[str]:
    """Remove credentials from `objects` in place; how many of each kind were removed."""
    removed: Counter[str] = Counter()
    for section, items in objects.items():
        path = SPEC_PATHS.get(section)
        for obj in items:
            if not isinstance(obj, dict):
                continue  # validation names it
            _annotations(obj.get("metadata"), removed)
            if section in SPEC_PATHS and section != "pods":
                _annotations(
                    ((obj.get("spec") or {}).get("template") or {}).get("metadata"), removed
                )
            spec = _dig(obj, path) if path else None
            if isinstance(spec, dict):
                _pod_spec(spec, removed)
    return removed


def note(removed: Counter[str]) -> str | None:
    """The load's one line on what it removed (None: nothing)."""
    if not removed:
        return None
    parts = ", ".join(f"{n} {what}" for what, n in sorted(removed.items()))
    return (
        f"credentials removed at load, never restored nor written: {parts} "
        "(a snapshot from `desched snapshot` has none)"
    )


def _dig(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for k in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(k)
    return cur


def _annotations(meta: Any, removed: Counter[str]) -> None:
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(ann, dict):
        return
    clean = scrub_data(ann)
    changed = sum(clean[k] != v for k, v in zip(clean, ann.values(), strict=True))
    if changed:
        removed["annotation values"] += changed
        meta["annotations"] = clean


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for f in CONTAINER_FIELDS:
        for c in spec.get(f) or []:
            if isinstance(c, dict):
                yield c


def _pod_spec(spec: dict[str, Any], removed: Counter[str]) -> None:
    volumes = spec.get("volumes")
    token: set[Any] = set()
    if isinstance(volumes, list):
        token = {v.get("name") for v in volumes if isinstance(v, dict) and is_token_volume(v)}
        if token:
            removed["service-account token volumes"] += len(token)
            spec["volumes"] = [
                v for v in volumes if not (isinstance(v, dict) and v.get("name") in token)
            ]
    for c in _containers(spec):
        for k in ("env", "envFrom"):
            if c.get(k):
                removed[f"container {k} lists"] += 1
                del c[k]
        mounts = c.get("volumeMounts")
        if token and isinstance(mounts, list):
            c["volumeMounts"] = [
                m for m in mounts if not (isinstance(m, dict) and m.get("name") in token)
            ]
        for k in ("command", "args"):
            argv = c.get(k)
            if isinstance(argv, list):
                clean = scrub_data(argv)
                changed = sum(a != b for a, b in zip(clean, argv, strict=True))
                if changed:
                    removed[f"container {k} values"] += changed
                    c[k] = clean
