"""The shapes of the files the replay reads, as JSON Schemas checked (jsonschema-rs) before
anything else looks at them: a snapshot, a descheduler JSON log's lines, a round record.

A wrong type anywhere (`objects.nodes: 1`, a policy that is a mapping, a header that is a
string, labels that are a list, a log line whose pod is a number, a log line given as a round
record) is one ConfigError (exit 2) naming the file, the path of the field and what it is,
instead of a TypeError deep in the restore or a ledger of nothing. Fields never read are left
free (a real cluster's objects carry many more), and the checks that are about values rather
than types (names, kinds, timestamps, pods on missing nodes) stay in
`format.Snapshot.problems`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from pytest_desched.errors import InputError

__all__ = [
    "LOG_LINE_SCHEMA",
    "ROUND_RECORD_SCHEMA",
    "SNAPSHOT_SCHEMA",
    "check_shape",
    "first_problem",
]

_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_OBJ = {"type": "object"}
_STR_MAP = {"type": "object", "additionalProperties": _STR}
_QTY_MAP = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
_LIST_OF_OBJ = {"type": "array", "items": _OBJ}
_USAGE = {
    "type": "object",
    "required": ["cpu", "memory"],
    "properties": {"cpu": {"type": ["string", "number"]}, "memory": {"type": ["string", "number"]}},
}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


_META = _obj(
    name=_STR,
    namespace=_STR,
    uid=_STR,
    labels=_STR_MAP,
    annotations=_STR_MAP,
    creationTimestamp=_STR,
    ownerReferences={
        "type": "array",
        "items": _obj(apiVersion=_STR, kind=_STR, name=_STR, uid=_STR, controller=_BOOL),
    },
)
_CONTAINERS = {
    "type": "array",
    "items": _obj(name=_STR, image=_STR, resources=_obj(requests=_QTY_MAP, limits=_QTY_MAP)),
}
_POD_SPEC = _obj(
    nodeName=_STR,
    containers=_CONTAINERS,
    initContainers=_CONTAINERS,
    nodeSelector=_STR_MAP,
    affinity=_OBJ,
    tolerations=_LIST_OF_OBJ,
    volumes=_LIST_OF_OBJ,
    priority=_INT,
    priorityClassName=_STR,
)
_SELECTOR = _obj(matchLabels=_STR_MAP, matchExpressions=_LIST_OF_OBJ)
_TEMPLATE = _obj(metadata=_META, spec=_POD_SPEC)
_WORKLOAD = _obj(replicas=_INT, selector=_SELECTOR, template=_TEMPLATE)


def _kube(spec: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A section: a list of Kubernetes objects (kind, metadata, spec, status and `fields`)."""
    props = {"kind": _STR, "apiVersion": _STR, "metadata": _META, "spec": spec or _OBJ}
    return {"type": "array", "items": _obj(**{**props, "status": _OBJ, **fields})}


SNAPSHOT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["kind", "apiVersion"],
    "properties": {
        "apiVersion": _STR,
        "kind": _STR,
        "policy": _STR_OR_NULL,
        "header": {
            "type": ["object", "null"],
            "properties": {
                "takenAt": _STR,
                "redacted": _BOOL,
                "notes": {"type": "array", "items": _STR},
                "source": _OBJ,
                "takenWith": _obj(requests={"type": "array", "items": _STR}),
                "descheduler": {
                    "type": ["object", "null"],
                    "properties": {
                        "version": _STR_OR_NULL,
                        "name": _STR_OR_NULL,
                        "namespace": _STR_OR_NULL,
                        "image": _STR_OR_NULL,
                        "args": {"type": "array"},
                        "configMap": {"type": ["object", "null"]},
                    },
                },
                "otherDeschedulers": _LIST_OF_OBJ,
                "usage": _obj(recorded=_BOOL, why=_STR, nodes=_INT, pods=_INT),
            },
        },
        # what metrics.k8s.io served (capture/usage.py); absent in older snapshots
        "usage": {
            "type": ["object", "null"],
            "properties": {
                "source": _STR,
                "takenAt": _STR,
                "nodes": {"type": "object", "additionalProperties": _USAGE},
                "pods": {"type": "object", "additionalProperties": _USAGE},
            },
        },
        "objects": {
            "type": ["object", "null"],
            "properties": {
                "nodes": _kube(
                    _obj(taints=_LIST_OF_OBJ, unschedulable=_BOOL),
                    status=_obj(allocatable=_QTY_MAP, capacity=_QTY_MAP, conditions=_LIST_OF_OBJ),
                ),
                "pods": _kube(_POD_SPEC),
                "priorityClasses": _kube(value=_INT),
                "podDisruptionBudgets": _kube(
                    _obj(
                        minAvailable={"type": ["integer", "string"]},
                        maxUnavailable={"type": ["integer", "string"]},
                        selector=_SELECTOR,
                    )
                ),
                **{s: _kube(_WORKLOAD) for s in ("deployments", "replicaSets", "statefulSets")},
                "daemonSets": _kube(_obj(selector=_SELECTOR, template=_TEMPLATE)),
                "jobs": _kube(_obj(template=_TEMPLATE)),
                "cronJobs": _kube(_obj(schedule=_STR, suspend=_BOOL, jobTemplate=_OBJ)),
            },
            "additionalProperties": _kube(),
        },
    },
}

# One line of a descheduler JSON log (klog's JSON format) that has a "msg": the fields the
# log parser reads (descheduler/logparse.py), with the types v0.36.0 writes them as.
_NAMED = {"type": ["object", "string"], "properties": {"name": _STR, "namespace": _STR}}
LOG_LINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "msg": _STR,
        "v": _INT,
        "ts": {"type": ["number", "string"]},
        "err": _STR,
        "pod": _NAMED,
        "node": _NAMED,
        **{k: _STR for k in ("strategy", "plugin", "profile", "reason", "checks")},
        **{k: _INT for k in ("totalEvicted", "evictionRequests")},
    },
}

# A round record (evidence/<experiment>/<round>.json, evidence.record.RoundRecord.to_dict):
# what `desched replay --from-record` reads.
_DECISION = {
    "type": "object",
    "required": ["fate", "layer", "namespace", "name"],
    "properties": {
        **{k: _STR for k in ("fate", "layer", "namespace", "name")},
        **{k: _STR_OR_NULL for k in ("reason", "strategy", "node")},
        "checks": {"type": ["array", "null"], "items": _STR},
        "status_code": {"type": ["integer", "null"]},
    },
}
ROUND_RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["experiment", "round_name"],
    "properties": {
        "experiment": _STR,
        "round_name": _STR,
        "namespace": _STR_OR_NULL,
        "versions": {"type": "object", "additionalProperties": _STR_OR_NULL},
        "log_path": _STR_OR_NULL,
        "decisions": {"type": "array", "items": _DECISION},
        "caps": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
        "counts": {"type": "object", "additionalProperties": _INT},
        "audit": _obj(available=_BOOL, by_code={"type": ["object", "null"]}),
        "verdict": _STR,
        "deciding_layer": _STR_OR_NULL,
    },
}
SCHEMAS = {
    "snapshot": SNAPSHOT_SCHEMA,
    "log line": LOG_LINE_SCHEMA,
    "round record": ROUND_RECORD_SCHEMA,
}

_JSON_TYPE = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
_WANTED = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer"}
_WANTED |= {"number": "a number", "boolean": "a boolean", "null": "null"}


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out  # "" for the document itself


def _what(value: Any) -> str:
    if value is None:
        return "null"
    kind = _JSON_TYPE.get(type(value), "a number" if isinstance(value, int | float) else "?")
    if isinstance(value, dict | list):
        return kind
    return f"{value[:40]!r} ({kind})" if isinstance(value, str) else f"{str(value)[:40]} ({kind})"


def _non_json(doc: Any) -> tuple[list[Any], Any] | None:
    """The path and value of the first value JSON has no type for (a YAML !!binary, a set)."""
    todo: list[tuple[list[Any], Any]] = [([], doc)]
    while todo:
        path, v = todo.pop()
        if isinstance(v, dict):
            todo.extend(([*path, k], x) for k, x in v.items())
        elif isinstance(v, list):
            todo.extend(([*path, i], x) for i, x in enumerate(v))
        elif not (v is None or isinstance(v, str | int | float)):
            return path, v
    return None


@functools.cache
def _validator(kind: str) -> Any:
    # heavy: the validator (Rust) is built once, only when such a file is read
    import jsonschema_rs

    return jsonschema_rs.validator_for(SCHEMAS[kind])


def first_problem(kind: str, doc: Any) -> tuple[str, str] | None:
    """(path, problem) of the first field of `doc` that breaks the `kind` schema, or None.

    jsonschema-rs: 10,000 pods are checked in ~25 ms (the Python jsonschema took 3.8 s)."""
    try:
        error = next(iter(_validator(kind).iter_errors(doc)), None)
    except ValueError:  # a value that is not JSON data at all
        found = _non_json(doc)
        path, value = found if found else ([], doc)
        return _path(path), f"is a {type(value).__name__}, not JSON data"
    if error is None:
        return None
    name = type(error.kind).__name__
    if name == "Type":
        types = sorted(map(str, error.kind.types), key=lambda t: t == "null")  # null last
        wanted = " or ".join(_WANTED.get(t, t) for t in types)
        return _path(error.instance_path), f"is {_what(error.instance)}, not {wanted}"
    if name == "Required":
        return _path(error.instance_path), f"has no {error.kind.property!r}"
    return _path(error.instance_path), error.message[:120]


def check_shape(doc: Any, source: str) -> None:
    """InputError naming the first field (by path) whose type is not what the replay reads."""
    found = first_problem("snapshot", doc)
    if found is not None:
        raise InputError(source, *found, "fix the field's type")
