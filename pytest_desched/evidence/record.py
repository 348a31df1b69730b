"""Per-round evidence a reviewer can audit, written so it can be shared without leaking.

Every descheduler round leaves `<root>/<experiment>/<round>.json` (the full record) and a
short `.txt` summary. Everything written passes through a `Redactor`; secrets are scrubbed
even when name redaction is off, because a token in an artifact is never acceptable.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.decisions import Fate, RoundResult, blocking_layers, decide

REDACTED = "<redacted>"
DEFAULT_MAX_BYTES = 256 * 1024

# ---------------------------------------------------------------------------------------------
# Secret scrubbing: always on, independent of name redaction.

_SENSITIVE = (
    r"token|passw(?:or)?d|secret|api[_-]?key|private[_-]?key"
    r"|client-key-data|client-certificate-data|certificate-authority-data"
)
_SENSITIVE_KEY = re.compile(_SENSITIVE, re.I)
# A key *ending* in a sensitive word holds the secret itself ("token", "clientSecret");
# one merely containing it ("secretName", "tokenExpirationSeconds") only if the value looks secret.
_STRONG_KEY = re.compile(rf"(?:{_SENSITIVE})$", re.I)
_HARMLESS_VALUE = re.compile(r"(?i)(?:|true|false|null|none|~|<redacted>)")
_HEX = re.compile(r"[A-Fa-f0-9]{16,}")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{20,}={0,2}")
_DNS_LIKE = re.compile(r"[a-z0-9.-]+")

_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.S)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_BEARER = re.compile(r"(?i)\b(bearer)\s+(?!<redacted>)[A-Za-z0-9._~+/-]+=*")
_BASIC = re.compile(r"(?i)(authorization\s*[:=]\s*[\"']?basic\s+)[A-Za-z0-9+/]+=*")
_URL_USERINFO = re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+@")
# Credentials in a URL's query string: `?bearer=...`, `&access_token=...`, `?api_key=...`.
_URL_QUERY = re.compile(
    r"(?i)([?&;](?:bearer|access[_-]?token|id[_-]?token|refresh[_-]?token|token|auth"
    r"|authorization|api[_-]?key|apikey|key|password|passwd|pwd|secret|client[_-]?secret"
    r"|sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature)=)"
    r"(?!<redacted>)[^&#\s\"'<>]+"
)
_KEYED = re.compile(
    rf"""(?P<key>["']?[A-Za-z0-9_.-]*(?:{_SENSITIVE})[A-Za-z0-9_.-]*["']?)(?P<sep>\s*[:=]\s*)
    (?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s"',;}}\])]+))""",
    re.I | re.X,
)


def _looks_secret(value: str) -> bool:
    """Long hex, or base64 that is not just a lowercase DNS-ish name."""
    if _HEX.fullmatch(value):
        return True
    return bool(_B64.fullmatch(value)) and not _DNS_LIKE.fullmatch(value)


def _secret_value(key: str, value: str) -> bool:
    key = key.strip("\"'")
    if not _SENSITIVE_KEY.search(key) or _HARMLESS_VALUE.fullmatch(value):
        return False
    return bool(_STRONG_KEY.search(key)) or _looks_secret(value)


def _keyed(m: re.Match[str]) -> str:
    for group, quote in (("dq", '"'), ("sq", "'"), ("bare", "")):
        value = m.group(group)
        if value is not None:
            if not _secret_value(m.group("key"), value):
                return m.group(0)
            return f"{m.group('key')}{m.group('sep')}{quote}{REDACTED}{quote}"
    return m.group(0)


def scrub_secrets(text: str) -> str:
    """Replace tokens, keys and passwords in free text with `<redacted>`."""
    text = _PEM.sub(REDACTED, text)
    text = _JWT.sub(REDACTED, text)
    text = _BEARER.sub(rf"\1 {REDACTED}", text)
    text = _BASIC.sub(rf"\1{REDACTED}", text)
    text = _URL_USERINFO.sub(f"{REDACTED}@", text)
    text = _URL_QUERY.sub(rf"\1{REDACTED}", text)
    return _KEYED.sub(_keyed, text)


def scrub_data(obj: Any) -> Any:
    """`scrub_secrets` over str/dict/list, also catching values whose *key* marks them secret."""
    if isinstance(obj, str):
        return scrub_secrets(obj)
    if isinstance(obj, Mapping):
        env_name = obj.get("name")
        env_secret = isinstance(env_name, str) and bool(_SENSITIVE_KEY.search(env_name))
        k8s_secret = obj.get("kind") == "Secret"
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if isinstance(v, str) and (
                (isinstance(k, str) and _secret_value(k, v))
                or (env_secret and k == "value" and not _HARMLESS_VALUE.fullmatch(v))
            ):
                out[scrub_data(k)] = REDACTED
            elif k8s_secret and k in ("data", "stringData") and isinstance(v, Mapping):
                out[k] = dict.fromkeys(v, REDACTED)
            else:
                out[scrub_data(k)] = scrub_data(v)
        return out
    if isinstance(obj, list | tuple):
        return [scrub_data(v) for v in obj]
    return obj


# ---------------------------------------------------------------------------------------------
# Name redaction.


class Redactor:
    """Consistent pseudonyms (`node-1`, `ns-1`, `redacted-1`) for sharing outside the team.

    Aliases follow first registration, so they are stable within a run and the same node
    reads the same in every artifact. Secrets are scrubbed even by `disabled()`.
    """

    _WORD = "A-Za-z0-9"  # '-', '.', '/' separate words: `worker-1` must not match `worker-10`

    def __init__(
        self,
        node_names: Iterable[str] = (),
        namespaces: Iterable[str] = (),
        extra: Iterable[str] = (),
        *,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self._aliases: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._pattern: re.Pattern[str] | None = None
        for n in node_names:
            self.register_node(n)
        for ns in namespaces:
            self.register_namespace(ns)
        for s in extra:
            self.register(s)

    @classmethod
    def disabled(cls) -> Redactor:
        """No name mapping (the default for in-team runs); secrets are still scrubbed."""
        return cls(enabled=False)

    @property
    def mapping(self) -> dict[str, str]:
        """original -> alias; the key to read shared artifacts back. Never written by the writer."""
        return dict(self._aliases)

    def register_node(self, name: str) -> str:
        return self._register(name, "node")

    def register_namespace(self, name: str) -> str:
        return self._register(name, "ns")

    def register(self, literal: str) -> str:
        """Any other literal to hide (cluster name, user, IP)."""
        return self._register(literal, "redacted")

    def _register(self, name: str, kind: str) -> str:
        if not self.enabled or not name:
            return name
        if name not in self._aliases:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self._aliases[name] = f"{kind}-{self._counts[kind]}"
            self._pattern = None
        return self._aliases[name]

    def _names(self, text: str) -> str:
        if not self._aliases:
            return text
        if self._pattern is None:
            # Longest first: the alternation takes the first branch that matches at a position.
            alts = "|".join(re.escape(n) for n in sorted(self._aliases, key=len, reverse=True))
            w = self._WORD
            self._pattern = re.compile(rf"(?<![{w}])(?:{alts})(?![{w}])")
        return self._pattern.sub(lambda m: self._aliases[m.group(0)], text)

    def redact(self, obj: Any) -> Any:
        """Scrub secrets, then map names in strings and dict keys, recursively."""
        obj = scrub_data(obj)
        return self._walk(obj) if self.enabled else obj

    __call__ = redact

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self._names(obj)
        if isinstance(obj, Mapping):
            return {self._walk(k): self._walk(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._walk(v) for v in obj]
        return obj


# ---------------------------------------------------------------------------------------------
# The record.

_FAILURE_FATES = (Fate.REFUSED, Fate.ERROR, Fate.LIMITED)
_DERIVED = (
    "decisions",
    "counts",
    "cluster_counts",
    "evictions",
    "failures",
    "blocking_layers",
    "verdict",
    "deciding_layer",
)


@dataclass
class RoundRecord:
    """Everything a reviewer needs to audit one descheduler round, as plain JSON data."""

    experiment: str
    round_name: str
    provider: str
    versions: dict[str, str] = field(default_factory=dict)
    chart: dict[str, Any] = field(default_factory=dict)  # source repo|module, version, digest..
    policy_digest: str = ""
    policy_overrides: list[dict[str, Any]] = field(default_factory=list)  # path/old/new/why
    job: dict[str, Any] = field(default_factory=dict)  # name, uid, namespace, succeeded, exit_code
    started_s: float | None = None  # relative to the experiment start
    ended_s: float | None = None
    namespace: str | None = None  # the lab namespace the decisions and verdict are about
    decisions: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    cluster_counts: dict[str, int] = field(default_factory=dict)  # every namespace's fates
    evictions: int = 0
    caps: dict[str, int | None] = field(default_factory=dict)  # perNode/perNamespace/total
    failures: list[dict[str, Any]] = field(default_factory=list)
    blocking_layers: list[str] = field(default_factory=list)
    replacement_ready_latency_s: float | None = None
    pdb_before: dict[str, Any] | None = None
    pdb_after: dict[str, Any] | None = None
    pdb_min_disruptions_allowed_seen: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # reason,type,kind,name,uid,..
    pending_pods: list[str] = field(default_factory=list)
    distribution_before: dict[str, int] = field(default_factory=dict)
    distribution_after: dict[str, int] = field(default_factory=dict)
    # Scraped values, or {"available": False, "why": ...}: an absent metric is never guessed.
    metrics: dict[str, Any] = field(
        default_factory=lambda: {"available": False, "why": "not collected"}
    )
    # The API server's own audit record of each eviction request beside the log's decisions
    # (audit.AuditView.to_dict()), or {"available": False, "why": ...}: never pretended.
    audit: dict[str, Any] = field(
        default_factory=lambda: {"available": False, "why": "not collected"}
    )
    events_delivered: dict[str, Any] = field(default_factory=dict)  # {"delivered", "owed"}
    known_bugs: dict[str, str] = field(default_factory=dict)  # bug id -> signature evidence
    verdict: str = ""
    deciding_layer: str | None = None  # results.decide(...).label: summaries and JUnit show it
    notes: list[str] = field(default_factory=list)
    log_path: str | None = None

    @property
    def events_by_reason(self) -> dict[str, list[str]]:
        """reason -> involved object uids (kind/name when an event carries no uid)."""
        out: dict[str, list[str]] = {}
        for e in self.events:
            obj = e.get("object") or e.get("involvedObject") or e.get("regarding") or {}
            uid = e.get("uid") or obj.get("uid")
            if not uid:
                kind = e.get("kind") or obj.get("kind") or "?"
                uid = f"{kind}/{e.get('name') or obj.get('name') or '?'}"
            seen = out.setdefault(str(e.get("reason") or "?"), [])
            if uid not in seen:
                seen.append(uid)
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["events_by_reason"] = self.events_by_reason
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_round(
        cls,
        experiment: str,
        round_name: str,
        provider: str,
        result: RoundResult,
        namespace: str | None = None,
        replacement: str | None = None,
        **fields: Any,
    ) -> RoundRecord:
        """Build a record whose decision figures come only from the parsed log, never a caller.

        With `namespace`, decisions, counts and the verdict are the lab's own: pods of other
        namespaces (kube-system bystanders) only show in `cluster_counts`.
        """
        clash = sorted(set(fields) & set(_DERIVED))
        if clash:
            raise TypeError(f"{clash} are derived from the RoundResult and cannot be passed")
        ds = result.decisions if namespace is None else result.in_namespace(namespace)
        lab = RoundResult(decisions=ds)
        evictions = len(lab.by_fate(Fate.EVICTED))
        failures = [
            {
                "pod": d.key,
                "fate": d.fate.value,
                "status_code": d.status_code,
                "reason": d.reason,
                "layer": d.layer.value,
            }
            for d in ds
            if d.fate in _FAILURE_FATES
        ]
        notes = list(fields.pop("notes", []))
        if result.skipped:
            notes.append(f"round skipped: {result.skipped}")
        if result.dry_run:
            notes.append("dry run: no eviction reached the API server")
        cluster_evictions = len(result.by_fate(Fate.EVICTED))
        if result.total_evicted is not None and result.total_evicted != cluster_evictions:
            notes.append(
                f"log summary reports {result.total_evicted} evictions, "
                f"{cluster_evictions} evicted pods were parsed"
            )
        notes += [f"error without pod: {e}" for e in result.errors]
        if result.unparsed:
            notes.append(f"{result.unparsed} of {result.lines} log lines were not JSON")
        decided = decide(ds, result.skipped, replacement)
        return cls(
            experiment=experiment,
            round_name=round_name,
            provider=provider,
            namespace=namespace,
            decisions=lab.to_dict()["decisions"],
            counts=lab.counts(),
            cluster_counts=result.counts(),
            evictions=evictions,
            failures=failures,
            blocking_layers=[layer.value for layer in blocking_layers(ds)],
            verdict=decided.verdict,
            deciding_layer=decided.label,
            notes=notes,
            **fields,
        )


# ---------------------------------------------------------------------------------------------
# Human summaries.


def _disruptions_allowed(pdb: Mapping[str, Any] | None) -> Any:
    if not pdb:
        return None
    for src in (pdb, pdb.get("status") or {}):
        for key in ("disruptionsAllowed", "disruptions_allowed"):
            if key in src:
                return src[key]
    return None


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):  # sub-second latencies (kwok is fast) keep their milliseconds
        return f"{value:.3f}{unit}" if abs(value) < 1 else f"{value:.1f}{unit}"
    return f"{value}{unit}"


def _as_dict(record: RoundRecord | Mapping[str, Any]) -> Mapping[str, Any]:
    return record.to_dict() if isinstance(record, RoundRecord) else record


def summary_text(record: RoundRecord | Mapping[str, Any]) -> str:
    """The ~15-line `.txt` next to each round's JSON: what happened and which link decided."""
    r = _as_dict(record)
    caps = r.get("caps") or {}
    cap = " ".join(f"{k}={_fmt(v)}" for k, v in caps.items()) or "-"
    counts = " ".join(f"{k}={v}" for k, v in sorted((r.get("counts") or {}).items())) or "-"
    fails = r.get("failures") or []
    fail_txt = "; ".join(
        f"{f.get('pod')} {_fmt(f.get('status_code'))} {f.get('reason') or '-'} ({f.get('layer')})"
        for f in fails[:5]
    ) + (f"; +{len(fails) - 5} more" if len(fails) > 5 else "")
    before, after = r.get("distribution_before") or {}, r.get("distribution_after") or {}
    dist = ", ".join(
        f"{n} {_fmt(before.get(n))}->{_fmt(after.get(n))}" for n in sorted({*before, *after})
    )
    metrics = r.get("metrics") or {}
    if metrics.get("available") is False:
        metrics_txt = f"unavailable ({metrics.get('why') or 'no reason given'})"
    else:
        metrics_txt = ", ".join(f"{k}={v}" for k, v in metrics.items() if k != "available")
    overrides = "; ".join(
        f"{o.get('path')}: {o.get('old')!r} -> {o.get('new')!r} ({o.get('why') or 'no reason'})"
        for o in r.get("policy_overrides") or []
    )
    job = r.get("job") or {}
    chart = r.get("chart") or {}
    pending = r.get("pending_pods") or []
    lines = [
        f"{r.get('experiment')}/{r.get('round_name')} on {r.get('provider')}: "
        f"verdict={r.get('verdict') or '-'}",
        f"window: {_fmt(r.get('started_s'), 's')} -> {_fmt(r.get('ended_s'), 's')}",
        f"evictions: {r.get('evictions', 0)} (caps {cap}); fates: {counts}",
        f"deciding layer: {r.get('deciding_layer') or '-'}; all blocking layers: "
        f"{', '.join(r.get('blocking_layers') or []) or 'none'}",
        f"failures: {fail_txt or 'none'}",
        f"replacement Ready latency: {_fmt(r.get('replacement_ready_latency_s'), 's')}",
        f"PDB disruptionsAllowed: before={_fmt(_disruptions_allowed(r.get('pdb_before')))} "
        f"after={_fmt(_disruptions_allowed(r.get('pdb_after')))} "
        f"min seen={_fmt(r.get('pdb_min_disruptions_allowed_seen'))}",
        f"pending pods: {len(pending)}{' ' + ', '.join(pending) if pending else ''}",
        f"distribution before->after: {dist or '-'}",
        f"metrics: {metrics_txt or '-'}",
        f"policy: digest={(r.get('policy_digest') or '-')[:12]} overrides: {overrides or 'none'}",
        f"job: {job.get('namespace') or '-'}/{job.get('name') or '-'} uid={job.get('uid') or '-'}"
        f" succeeded={_fmt(job.get('succeeded'))} exit={_fmt(job.get('exit_code'))}",
        f"chart: {chart.get('source') or '-'} {chart.get('version') or '-'} "
        f"app={chart.get('app_version') or '-'} digest={(chart.get('digest') or '-')[:19]}",
    ]
    audit = r.get("audit") or {}
    if audit.get("available"):
        codes = " ".join(f"{c}x{n}" for c, n in sorted((audit.get("by_code") or {}).items()))
        dis = audit.get("disagreements") or []
        lines.append(
            f"API server audit: {audit.get('requests', 0)} eviction request(s) {codes or ''} by "
            f"{', '.join(audit.get('users') or []) or '-'}; "
            + ("agrees with the log" if not dis else f"DISAGREES: {'; '.join(dis)}")
        )
    else:
        lines.append(
            f"API server audit: unavailable ({audit.get('unavailable_why') or audit.get('why') or '-'})"
        )
    ev = r.get("events_delivered") or {}
    if ev:
        lines.append(f"EvictionFailed events delivered: {ev.get('delivered')} of {ev.get('owed')}")
    lines += [f"known bug {k}: {v}" for k, v in (r.get("known_bugs") or {}).items()]
    lines += [f"note: {n}" for n in r.get("notes") or []]
    if r.get("log_path"):
        lines.append(f"log: {r['log_path']}")
    return "\n".join(lines) + "\n"


_OUTCOMES = {"passed": "PASSED", "failed": "FAILED", "xfailed": "XFAIL", "xfail": "XFAIL"}


def summary_line(record_or_experiment_result: Mapping[str, Any]) -> str:
    """One terminal line per experiment: outcome, evictions vs cap, deciding layer, Ready latency.

    Takes a round record dict, or `{"name", "outcome", "rounds": [record dicts]}`; for the
    latter evictions and caps add up and layer/latency come from the last round that has one.
    """
    d = record_or_experiment_result
    rounds = list(d.get("rounds") or [d])
    name = d.get("name") or d.get("experiment") or "?"
    outcome = str(d.get("outcome") or "-")
    outcome = _OUTCOMES.get(outcome.lower(), outcome.upper())
    evictions = sum(int(r.get("evictions") or 0) for r in rounds)
    totals = [(r.get("caps") or {}).get("total") for r in rounds]
    cap = "-" if any(t is None for t in totals) else str(sum(totals))
    layer = rounds[-1].get("deciding_layer") or rounds[-1].get("verdict") or "none"
    latencies = [r.get("replacement_ready_latency_s") for r in rounds]
    ready = next((x for x in reversed(latencies) if x is not None), None)
    evicted = f"evictions={evictions}/{cap}"
    return f"{name}  {outcome}  {evicted}  layer={layer}  ready={_fmt(ready, 's')}"


def junit_properties(record: RoundRecord | Mapping[str, Any]) -> list[tuple[str, str]]:
    """Key figures for `record_property`, so CI dashboards show them without opening artifacts."""
    r = _as_dict(record)
    values = [
        ("evictions", r.get("evictions", 0)),
        ("blocking_layer", r.get("deciding_layer") or "none"),
        ("ready_latency_s", r.get("replacement_ready_latency_s")),
        ("policy_digest", (r.get("policy_digest") or "")[:12]),
        ("job_uid", (r.get("job") or {}).get("uid")),
        ("pdb_disruptions_allowed_after", _disruptions_allowed(r.get("pdb_after"))),
    ]
    return [(k, "" if v is None else str(v)) for k, v in values]


# ---------------------------------------------------------------------------------------------
# Writing.

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """A single path component: no separators, no leading dots, never empty."""
    return _UNSAFE.sub("_", name).lstrip(".")[:120] or "_"


def _default(o: Any) -> Any:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    if isinstance(o, Enum):
        return o.value
    if isinstance(o, set | frozenset):
        return sorted(map(str, o))
    return str(o)


def _plain(obj: Any) -> Any:
    """JSON-native data, so nothing escapes redaction by being stringified after it."""
    return json.loads(json.dumps(obj, default=_default))


def _cap(text: str, max_bytes: int) -> str:
    """Keep head and tail (config at the top, summary and panics at the bottom)."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    marker = (
        f"\n[... pytest-desched: TRUNCATED, {len(data)} bytes exceed max_bytes={max_bytes}; "
        "middle omitted ...]\n"
    )
    budget = max(0, max_bytes - len(marker.encode()))
    head, tail = budget // 2, budget - budget // 2
    return (
        data[:head].decode(errors="ignore")
        + marker
        + (data[-tail:].decode(errors="ignore") if tail else "")
    )


class EvidenceWriter:
    """Writes round records and failure artifacts under `root`, redacted and size-capped."""

    def __init__(
        self, root: Path, redactor: Redactor | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.root = Path(root)
        self.redactor = redactor or Redactor.disabled()
        self.max_bytes = max_bytes

    def path_for(self, experiment: str, name: str) -> Path:
        """Where `name` lands; names are redacted too (they can carry node names)."""
        exp = safe_name(self.redactor.redact(experiment))
        path = self.root / exp / safe_name(self.redactor.redact(name))
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(f"refusing to write outside {self.root}: {path}")
        return path

    def write_round(self, record: RoundRecord) -> Path:
        """Write the full record (never capped: it is the audit trail) and its summary."""
        data = self.redactor.redact(_plain(record.to_dict()))
        base = self.path_for(record.experiment, record.round_name)
        self._write(base.with_name(base.name + ".json"), json.dumps(data, indent=2) + "\n")
        # Built from the redacted data; redacting twice is not idempotent, scrubbing is.
        self._write(base.with_name(base.name + ".txt"), scrub_secrets(summary_text(data)))
        return base.with_name(base.name + ".json")

    def write_text(
        self, experiment: str, name: str, text: str | bytes, *, max_bytes: int | None = None
    ) -> Path:
        """A failure artifact (log, describe output); `.txt` added when `name` has no suffix."""
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        path = self.path_for(experiment, name)
        if not path.suffix:
            path = path.with_name(path.name + ".txt")
        # Redact before capping: a cut token might no longer match the scrubber.
        self._write(path, _cap(self.redactor.redact(text), max_bytes or self.max_bytes))
        return path

    def write_json(
        self, experiment: str, name: str, obj: Any, *, max_bytes: int | None = None
    ) -> Path:
        """A structured failure artifact; if too big it stays valid JSON with the text capped."""
        cap = max_bytes or self.max_bytes
        path = self.path_for(experiment, name)
        if path.suffix != ".json":
            path = path.with_name(path.name + ".json")
        data = self.redactor.redact(_plain(obj))
        text = json.dumps(data, indent=2) + "\n"
        size = len(text.encode())
        if size > cap:
            compact = json.dumps(data, separators=(",", ":"))
            budget = cap - 200
            while True:
                wrapper = {"truncated": True, "original_bytes": size, "max_bytes": cap}
                wrapper["content"] = _cap(compact, max(budget, 0))
                text = json.dumps(wrapper) + "\n"
                excess = len(text.encode()) - cap
                if excess <= 0 or budget <= 0:
                    break
                budget -= excess + 16  # escaping inflates the embedded text; shrink, retry
        self._write(path, text)
        return path

    @staticmethod
    def _write(path: Path, text: str) -> None:
        """Atomic, so a crash mid-run never leaves a half-written record that looks complete."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
