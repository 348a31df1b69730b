"""The snapshot file: one YAML document, a header, the incident's policy, and trimmed objects.

Kept apart from taking (`snapshot`), restoring (`restore`) and generating (`generator`) a
snapshot, because all three meet only here: a generated cluster and a real one are the same
file, so everything downstream is tested on both. Loading validates before anything else
runs (ConfigError naming the file and the fix), and refuses a file that carries a Secret or a
ServiceAccount, whoever wrote it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import ConfigError
from pytest_desched.inputs_safe import load_json, load_yaml, read_text
from pytest_desched.names import DNS_LABEL, PATH_SEGMENT
from pytest_desched.replay.capture.consistency import header_notes
from pytest_desched.replay.capture.credentials import note, scrub_credentials
from pytest_desched.replay.capture.schema import check_shape
from pytest_desched.replay.capture.usage import problems as usage_problems
from pytest_desched.replay.objects import KINDS

API_VERSION = "desched.pytest.io/v1alpha1"
KIND = "ClusterSnapshot"

# section -> (apiVersion, kind, namespaced) (the kind's from `objects.KINDS`), in restore order (owners after their pods: see
# restore.py; the order here is the file's, for people reading it).
_SECTION_KINDS = {
    "namespaces": "Namespace",
    "nodes": "Node",
    "priorityClasses": "PriorityClass",
    "storageClasses": "StorageClass",
    "persistentVolumes": "PersistentVolume",
    "persistentVolumeClaims": "PersistentVolumeClaim",
    "podDisruptionBudgets": "PodDisruptionBudget",
    "deployments": "Deployment",
    "replicaSets": "ReplicaSet",
    "statefulSets": "StatefulSet",
    "daemonSets": "DaemonSet",
    "jobs": "Job",
    "cronJobs": "CronJob",
    "pods": "Pod",
}
SECTIONS: dict[str, tuple[str, str, bool]] = {
    section: (KINDS[kind].api_version, kind, KINDS[kind].namespaced)
    for section, kind in _SECTION_KINDS.items()
}
KIND_SECTION = {kind: section for section, (_, kind, _) in SECTIONS.items()}
# Never in a snapshot, whoever wrote the file: credentials, or objects that exist to carry them.
FORBIDDEN_KINDS = frozenset({"Secret", "ServiceAccount", "TokenRequest"})
# The descheduler's own workload: not restored (the replay installs its own release).
DESCHEDULER_LABEL = ("app.kubernetes.io/name", "descheduler")

JSON_ABOVE = 2000  # pods; above this a snapshot is written as JSON (see Snapshot.dump)
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def _field_problems(section: str, name: str, obj: dict[str, Any]) -> list[str]:
    """Wrong field types that would crash the restore (checked before anything starts)."""
    out = []
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, dict):
        out.append(f"{section} {name}: spec is {type(spec).__name__}, not a mapping")
        spec = {}
    node = (spec or {}).get("nodeName")
    if node is not None and not isinstance(node, str):
        out.append(f"{section} {name}: spec.nodeName is {type(node).__name__}, not a node name")
    if section == "priorityClasses" and not isinstance(obj.get("value", 0), int):
        out.append(f"{section} {name}: value {str(obj.get('value'))[:30]!r} is not an integer")
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if ts is not None:
        try:
            utc(ts)
        except (TypeError, ValueError):
            out.append(
                f"{section} {name}: metadata.creationTimestamp {str(ts)[:40]!r} is not RFC 3339"
            )
    return out


def copy_json(x: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars), twice as fast as copy.deepcopy, in
    which planning a 10,000-pod restore spent most of its 4 s."""
    if type(x) is dict:
        return {k: copy_json(v) for k, v in x.items()}
    if type(x) is list:
        return [copy_json(v) for v in x]
    return x


def utc(ts: str | dt.datetime | None) -> dt.datetime | None:
    """An RFC 3339 timestamp (or datetime) as an aware UTC datetime; None stays None."""
    if ts is None or ts == "":
        return None
    if isinstance(ts, dt.datetime):
        return ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)
    return dt.datetime.fromisoformat(str(ts).replace("Z", "+00:00")).astimezone(dt.UTC)


def rfc3339(t: dt.datetime) -> str:
    """Second precision, 'Z': how the API server writes metav1.Time."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _loader() -> type[yaml.SafeLoader]:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 10k pods in ~2 s, not ~20


def _dumper() -> type[yaml.SafeDumper]:
    return getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def key(obj: dict[str, Any]) -> str:
    """`namespace/name` of a namespaced object, `name` of a cluster-scoped one."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with controller=true (else the first one), or None."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), refs[0] if refs else None)


@dataclass
class Snapshot:
    """A cluster at one instant: header (where, when, what was filtered), policy, objects."""

    header: dict[str, Any] = field(default_factory=dict)
    policy: str | None = None  # the incident's policy.yaml, as its ConfigMap held it
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # What loading the file found and changed or doubts (credentials removed, a header its
    # body disagrees with): the replay's ledger carries each line. Never written back.
    load_notes: list[str] = field(default_factory=list)
    # What metrics.k8s.io served when it was taken (capture/usage.py); None: none recorded
    # (an older snapshot, or a cluster without the API: header.usage says why).
    usage: dict[str, Any] | None = None

    # -- access ---------------------------------------------------------------------------
    def items(self, section: str) -> list[dict[str, Any]]:
        if section not in SECTIONS:
            raise KeyError(f"unknown snapshot section {section!r}; known: {list(SECTIONS)}")
        return self.objects.setdefault(section, [])

    @property
    def pods(self) -> list[dict[str, Any]]:
        return self.items("pods")

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self.items("nodes")

    @property
    def taken_at(self) -> dt.datetime:
        t = utc(self.header.get("takenAt"))
        if t is None:
            raise ConfigError("snapshot header has no takenAt; the file is not a ClusterSnapshot")
        return t

    @property
    def descheduler(self) -> dict[str, Any]:
        """What the snapshot found of the incident's descheduler (kind, image, version, args)."""
        return dict(self.header.get("descheduler") or {})

    @property
    def descheduler_version(self) -> str | None:
        return self.descheduler.get("version")

    def all_objects(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for section in SECTIONS:
            for obj in self.objects.get(section) or []:
                yield section, obj

    def counts(self) -> dict[str, int]:
        return {s: len(v) for s, v in self.objects.items() if v}

    # -- file -----------------------------------------------------------------------------
    def to_doc(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "header": self.header,
            "policy": self.policy,
            "objects": {s: self.objects[s] for s in SECTIONS if self.objects.get(s)},
            **({"usage": self.usage} if self.usage else {}),  # absent: none recorded
        }

    def dump(self, fmt: str = "auto") -> str:
        """YAML, or for big snapshots JSON (a YAML parser reads it too, 50x faster to load).

        `auto`: block YAML up to JSON_ABOVE pods; PyYAML needs ~16 s for 10,000 pods.
        """
        if fmt == "json" or (fmt == "auto" and len(self.pods) > JSON_ABOVE):
            return json.dumps(self.to_doc(), separators=(",", ":")) + "\n"
        return yaml.dump(self.to_doc(), Dumper=_dumper(), sort_keys=False, width=1000)

    def write(self, path: str | Path, fmt: str = "auto") -> Path:
        """Write the file (0600: even redacted, a snapshot describes a cluster)."""
        import os

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = self.dump(fmt)
        if path.exists() and not path.is_file():  # a FIFO, /dev/stdout...: written as it is
            with open(path, "w") as fh:
                fh.write(text)
            return path
        # whole or not at all: an interrupted write leaves no half snapshot under the name
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)
        return path

    @classmethod
    def from_doc(cls, doc: Any, source: str = "<snapshot>") -> Snapshot:
        if not isinstance(doc, dict) or doc.get("kind") != KIND:
            raise ConfigError(
                f"{source}: not a {KIND} (kind {doc.get('kind') if isinstance(doc, dict) else type(doc).__name__!r}); "
                "write one with `desched snapshot` or pytest_desched.replay.gen.generator"
            )
        if doc.get("apiVersion") != API_VERSION:
            raise ConfigError(
                f"{source}: apiVersion {doc.get('apiVersion')!r}, this version reads {API_VERSION}"
            )
        check_shape(doc, source)  # every field the replay reads has its type (exit 2, path)
        objects = doc.get("objects") or {}
        snap = cls(
            header=dict(doc.get("header") or {}),
            policy=doc.get("policy"),
            objects={k: list(v or []) for k, v in objects.items()},
            usage=doc.get("usage") or None,  # an older snapshot has none: it still loads
        )
        snap.validate(source)
        snap.load_notes += header_notes(snap, source)  # or ConfigError: objects missing
        removed = note(scrub_credentials(snap.objects))  # never restored, never in evidence
        if removed:
            snap.load_notes.append(removed)
        return snap

    @classmethod
    def load(cls, path: str | Path) -> Snapshot:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"snapshot {path}: no such file; take one with `desched snapshot`")
        text = read_text(path, kind="bulk", what="snapshot")  # bounded: size, type, UTF-8
        if text.lstrip().startswith("{"):
            doc = load_json(text, str(path), kind="bulk")
        else:
            doc = load_yaml(text, str(path), kube=True, kind="bulk")  # timestamps as text
        return cls.from_doc(doc, str(path))

    # -- validation -----------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Everything wrong with the file, one line each; empty when it can be restored."""
        out: list[str] = []
        unknown = sorted(set(self.objects) - set(SECTIONS))
        if unknown:
            out.append(f"unknown sections {unknown} (known: {list(SECTIONS)})")
        try:
            self.taken_at  # noqa: B018
        except (ConfigError, ValueError) as exc:
            out.append(f"header.takenAt: {exc}")
        seen: set[tuple[str, str]] = set()
        for section, obj in self.all_objects():
            _, kind, namespaced = SECTIONS[section]
            if not isinstance(obj, dict):
                out.append(f"{section}: an entry is {type(obj).__name__}, not an object")
                continue
            if obj.get("kind", kind) in FORBIDDEN_KINDS:
                out.append(
                    f"{section}: holds a {obj.get('kind')}, which never belongs in a snapshot"
                )
            elif obj.get("kind", kind) != kind:  # `kind: secret` restored as a Pod, no more
                out.append(f"{section}: kind {obj.get('kind')!r} is not {kind}; fix the kind")
            meta = obj.get("metadata") or {}
            if not isinstance(meta, dict):
                out.append(f"{section}: metadata is {type(meta).__name__}, not a mapping")
                continue
            name, ns = meta.get("name"), meta.get("namespace")
            if not isinstance(name, str) or not _DNS1123_SUBDOMAIN.fullmatch(name):
                out.append(f"{section}: metadata.name {str(name)[:60]!r} is not a DNS-1123 name")
            if namespaced and not ns:
                out.append(f"{section} {name}: no metadata.namespace")
            elif ns is not None and not (isinstance(ns, str) and DNS_LABEL.fullmatch(ns)):
                out.append(f"{section} {name}: metadata.namespace {str(ns)[:60]!r} is not a label")
            out.extend(_field_problems(section, str(name), obj))
            k = (section, f"{ns}/{name}")
            if k in seen:
                out.append(f"{section} {ns}/{name}: listed twice")
            seen.add(k)
        for section in FORBIDDEN_SECTIONS:
            if self.objects.get(section):
                out.append(f"section {section!r} never belongs in a snapshot")
        nodes = {
            n["metadata"].get("name")
            for n in self.nodes
            if isinstance(n, dict) and isinstance(n.get("metadata"), dict)
        }
        stray = sorted(
            key(p)
            for p in self.pods
            if isinstance(p, dict)
            and isinstance(p.get("metadata"), dict)
            and isinstance(p.get("spec"), dict)
            and isinstance(p["spec"].get("nodeName"), str)
            and p["spec"]["nodeName"] not in nodes
        )
        if stray:
            out.append(f"{len(stray)} pods are bound to nodes the snapshot lacks, e.g. {stray[:3]}")
        if not self.nodes:
            out.append("no nodes: nothing to schedule on (an empty snapshot?)")
        if self.usage is not None:
            out.extend(usage_problems(self.usage, {str(n) for n in nodes}))
        version = (self.header.get("descheduler") or {}).get("version")
        if version is not None and not (
            isinstance(version, str) and PATH_SEGMENT.fullmatch(version) and ".." not in version
        ):
            out.append(f"header.descheduler.version {str(version)[:60]!r} is not a tag or commit")
        return out

    def validate(self, source: str = "<snapshot>") -> Snapshot:
        problems = self.problems()
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems[:20])
            more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
            raise ConfigError(f"snapshot {source} cannot be restored:\n{lines}{more}")
        return self


FORBIDDEN_SECTIONS = ("secrets", "serviceAccounts", "serviceaccounts")
