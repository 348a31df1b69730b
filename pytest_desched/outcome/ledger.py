"""The per-pod fate ledger every use produces: each pod, its fate per round, and what decided it.

One `PodFate` (one pod in one round), one `PodRow` (one pod across rounds), one
`RoundFigures` (a round's numbers) and one `Ledger` serve an experiment's round, a replay,
an incident's log, a canary track and the dry-run fidelity halves. Each use fills the fields
it has and leaves the rest at their defaults; the forms it was read in before are views of
the one type (`Ledger.pods` and `select` for an experiment, `PodFate.shown` for fidelity,
the `log` and `runbook` forms of `RoundFigures.to_dict`), so evidence files and replay JSON
keep their shape.

Pure: no cluster, no I/O, no log parsing (the builders that read a log live with their use:
replay/ledger.py, canary/compare.py, fidelity/compare.py), so this package sits under every
one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, Protocol

from pytest_desched.outcome.fates import CHAIN, FATE_RANK, Fate, Layer, deciding_label
from pytest_desched.outcome.identity import answer_label, identity_label

EXPERIMENT = "experiment"  # Ledger.source of an experiment's round (Ledger.of)


@dataclass  # not frozen: a replay adds what followed an eviction (replacement, at_s)
class PodFate:
    """One pod in one round: its fate, the layer that decided it, and the evidence for it.

    The first fields are every use's; the pod's own facts (namespace, name, uid, owner, node)
    are filled where the use keys fates by more than `namespace/name` (an experiment's round,
    a fidelity half); `audit_codes`/`live_after` only an experiment measures; `identity`,
    `budgets`, `message` only the fidelity comparison uses; `inferred`, `replacement`, `at_s`
    only a replay.
    """

    fate: Fate
    layer: Layer | None = None
    detail: str = ""
    strategy: str | None = None
    status_code: int | None = None
    checks: Sequence[str] = ()
    inferred: bool = False  # a replay's guess from the caps, no log line decided the pod
    replacement: str | None = None  # after an eviction: ready | pending | missing | none
    at_s: float | None = None  # a timeline replay: seconds into the incident window, when
    namespace: str = ""
    name: str = ""
    uid: str = ""
    workload: str | None = None
    owner_kind: str | None = None
    node: str | None = None  # the node it ran on before the round
    identity: str = ""  # fidelity: namespace-relative identity, the same in both halves
    audit_codes: tuple[int, ...] = ()  # the API server's answers to eviction requests
    live_after: bool = True  # the UID is still a live pod after the round
    budgets: tuple[Any, ...] = ()  # fidelity: the PDBs that select the pod (explain.Budget)
    message: str = ""  # the API server's answer to a refused eviction, as the log gives it

    def __post_init__(self) -> None:
        # Builders and old JSON hand words; the ledger holds the vocabulary (Fate("x") raises
        # on a word that is none of it, so a typo cannot pass as a fate nobody counts).
        if not isinstance(self.fate, Fate):
            self.fate = Fate(self.fate)
        if self.layer is not None and not isinstance(self.layer, Layer):
            self.layer = Layer(self.layer)

    # -- one pod ------------------------------------------------------------------------
    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def evicted(self) -> bool:
        """Evicted by the log, and the UID not live after the round (an experiment's test)."""
        return self.fate == Fate.EVICTED and not self.live_after

    @property
    def deciding(self) -> str:
        """The deciding layer as a round verdict labels it (`api-server(evicted)`, `policy`
        for a pod no strategy picked): what an experiment's `decided_by` compares."""
        return deciding_label(self.fate, self.layer)

    @property
    def label(self) -> str:
        """The fate as a replay's ledger shows it: `refused 429 [checks] (inferred) at t=..`."""
        tail = f" {self.status_code}" if self.status_code else ""
        checks = f" [{', '.join(self.checks)}]" if self.checks else ""
        inf = " (inferred)" if self.inferred else ""
        at = f" at t={self.at_s:.1f}s" if self.at_s is not None else ""
        return f"{self.fate}{tail}{checks}{inf}{at}"

    def short(self) -> str:
        """An experiment's row in a check's detail: `(name@node fate layer ... live)`."""
        bits = [f"{self.name}@{self.node}", str(self.fate), self.deciding]
        if self.checks:
            bits.append(f"checks={list(self.checks)}")
        if self.strategy:
            bits.append(self.strategy)
        if self.audit_codes:
            bits.append(f"audit={list(self.audit_codes)}")
        bits.append("live" if self.live_after else "gone")
        return "(" + " ".join(bits) + ")"

    # -- the fidelity comparison's view ----------------------------------------------------
    def shown(self) -> str:
        """The fate as the fidelity halves compare it: a filter's checks, a refusal's code."""
        if self.fate == Fate.REFUSED and self.status_code:
            return f"{self.fate}({self.status_code})"
        if self.fate == Fate.FILTERED and self.checks:
            return f"{self.fate}({','.join(self.checks)})"
        return str(self.fate)

    def same_as(self) -> tuple[str, str | None]:
        """What must match across the fidelity halves: the fate as shown and, for an
        eviction, the strategy that made it."""
        return self.shown(), self.strategy if self.fate == Fate.EVICTED else None

    # -- serialized forms ------------------------------------------------------------------
    def experiment_dict(self) -> dict[str, Any]:
        """An experiment's evidence row (`<round>-ledger.json`): the layer as its label."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "workload": self.workload,
            "owner_kind": self.owner_kind,
            "node": self.node,
            "fate": self.fate.value,
            "layer": self.deciding,
            "checks": list(self.checks),
            "strategy": self.strategy,
            "audit_codes": list(self.audit_codes),
            "live_after": self.live_after,
        }


# The fields of a replay ledger's fate in its JSON (`desched replay -o json`), in order.
REPLAY_FATE_FIELDS = (
    "fate",
    "layer",
    "detail",
    "strategy",
    "status_code",
    "checks",
    "inferred",
    "replacement",
    "at_s",
)


def rank(fate: Fate | str) -> int:
    """How far along the chain a fate got (0: no decision); the furthest wins."""
    return _RANK_OF_WORD.get(str(fate), 0)


_RANK_OF_WORD = {f.value: n for f, n in FATE_RANK.items()}


@dataclass
class PodRow:
    """One pod across a ledger's rounds."""

    pod: str  # namespace/name
    node: str | None = None
    owner: str | None = None  # Kind/name
    origin: str = "snapshot"  # snapshot | replacement of <pod> (round N) | log | record | lab
    fates: list[PodFate] = field(default_factory=list)


@dataclass
class RoundFigures:
    """A round's numbers. Two uses fill two sets of fields, each with its JSON form:

    - `log` (a replay's or a log's ledger): the counts by fate and layer as the log showed
      them, the caps, the API server's answers when audited;
    - `runbook` (a canary track, `canary/compare.round_figures`): the runbook's figures of the
      lab's pods that existed before the round; a replacement the round's own eviction
      created is listed or not by a race, so it is counted apart (`replacements_listed`).
    """

    name: str = ""
    # -- the log form
    by_fate: dict[str, int] = field(default_factory=dict)
    by_layer: dict[str, int] = field(default_factory=dict)
    total_evicted: int | None = None
    eviction_requests: int | None = None
    skipped: str | None = None
    dry_run: bool = False  # the round was a dry run
    duration_s: float | None = None
    caps: dict[str, Any] = field(default_factory=dict)
    audit_by_code: dict[str, int] | None = None
    errors: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # -- the runbook form
    candidates: int = 0  # pre-round lab pods a strategy picked (any fate)
    replacements_listed: int = 0  # pods created in this round that a strategy still listed
    protected: dict[str, int] = field(default_factory=dict)  # evictor filter check -> pods
    nodefit: int = 0
    limited: int = 0
    pdb_refusals: int = 0  # eviction answered 429
    other_refusals: int = 0
    evictions: int = 0
    dry_run_fates: int = 0  # pods the round would have evicted (its JSON key: dry_run)
    ready_latency_s: float | None = None
    pending: int = 0
    final_skew: int | None = None  # max - min lab pods per node after the round
    verdict: str = ""
    deciding_layer: str | None = None
    known_bugs: list[str] = field(default_factory=list)
    metric_names: list[str] = field(default_factory=list)
    version: str = ""  # the descheduler version that ran the round
    # EvictionFailed events that reached the API for the round's refusals, and how many were
    # owed (one per refusal with the notification on); None: the experiment does not count them.
    events_delivered: int | None = None
    events_owed: int | None = None
    no_cycle: str | None = None  # why the round completed no descheduling cycle
    # Each owner's capacity over the round's rebuild window (outcome/availability.py's JSON:
    # owner -> min available, desired, seconds below desired, Pending, slowest Ready, series).
    availability: dict[str, dict[str, Any]] = field(default_factory=dict)
    form: Literal["log", "runbook"] = "log"

    @property
    def min_available(self) -> str | None:
        """The owner left with the least of its desired capacity, `web 3/6`, for the report."""
        if not self.availability:
            return None
        o, w = min(
            self.availability.items(),
            key=lambda kv: (kv[1].get("min_available", 0) - kv[1].get("desired", 0), kv[0]),
        )
        return f"{o} {w.get('min_available')}/{w.get('desired')}"

    @property
    def events(self) -> str | None:
        """`delivered/owed` EvictionFailed events, for the report."""
        if self.events_owed is None:
            return None
        return f"{self.events_delivered}/{self.events_owed}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON of this round's form (`form`), as each use wrote it before."""
        if self.form == "runbook":
            return {
                ("dry_run" if n == "dry_run_fates" else n): _copy(getattr(self, n))
                for n in _RUNBOOK_FIELDS
            }
        return {n: _copy(getattr(self, n)) for n in _LOG_FIELDS}


def _copy(value: Any) -> Any:
    return (
        {k: _copy(v) for k, v in value.items()}
        if isinstance(value, dict)
        else [_copy(v) for v in value]
        if isinstance(value, list)
        else value
    )


_ALL = [f.name for f in fields(RoundFigures)]
_LOG_FIELDS = _ALL[: _ALL.index("candidates")]
_RUNBOOK_FIELDS = _ALL[_ALL.index("candidates") : _ALL.index("form")]


class _Decision(Protocol):
    """A parsed log decision (descheduler/decisions.PodDecision), as a ledger reads it."""

    namespace: str
    name: str
    fate: Fate
    layer: Layer
    strategy: str | None
    checks: list[str]


class _Pod(Protocol):
    """A lab pod before the round (lab/snapshot.PodInfo), as a ledger reads it."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def uid(self) -> str: ...

    @property
    def workload(self) -> str | None: ...

    @property
    def owner_kind(self) -> str | None: ...

    @property
    def node(self) -> str | None: ...

    @property
    def key(self) -> str: ...


class _Live(Protocol):
    @property
    def uid(self) -> str: ...


class _Snapshot(Protocol):
    @property
    def pods(self) -> Sequence[_Pod]: ...

    @property
    def live(self) -> Sequence[_Live]: ...


class _Round(Protocol):
    name: str


class _RoundView(Protocol):
    """An experiment's round (experiments/framework.RoundView), as a ledger reads it."""

    @property
    def before(self) -> _Snapshot: ...

    @property
    def after(self) -> _Snapshot: ...

    @property
    def decisions(self) -> Sequence[_Decision]: ...

    @property
    def refused_by_api(self) -> Mapping[str, Sequence[int]]: ...

    @property
    def audit(self) -> Mapping[str, Any]: ...

    @property
    def rnd(self) -> _Round: ...


def furthest(decisions: Sequence[_Decision]) -> _Decision | None:
    """An experiment pod's deciding decision: an eviction, else the furthest link reached."""
    if not decisions:
        return None
    at = {layer: i for i, layer in enumerate(CHAIN)}
    evicted = [d for d in decisions if d.fate == Fate.EVICTED]
    return evicted[0] if evicted else max(decisions, key=lambda d: at.get(d.layer, -1))


@dataclass
class Ledger:
    """Every pod a use saw, its fate in each round, and each round's figures.

    `source`: replay | log | record | experiment. An experiment's ledger (`Ledger.of`) is one
    round of the lab's pods before it, each row's fate carrying the pod's uid, workload,
    audit answers and whether it is live after; `pods` and `select` read that round.
    """

    source: str = EXPERIMENT
    descheduler_version: str | None = None
    rows: list[PodRow] = field(default_factory=list)
    rounds: list[RoundFigures] = field(default_factory=list)
    comparison: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    audit_available: bool = False  # an experiment's round: the API server's audit log was read

    # -- building an experiment's round ------------------------------------------------------
    @classmethod
    def of(cls, view: _RoundView, after: _Snapshot | None = None) -> Ledger:
        """Every lab pod before an experiment's round, with the round's evidence joined."""
        after = after or view.after
        live = {p.uid for p in after.live}
        by_pod: dict[tuple[str, str], list[_Decision]] = {}
        for d in view.decisions:
            by_pod.setdefault((d.namespace, d.name), []).append(d)
        fates = []
        for p in view.before.pods:
            top = furthest(by_pod.get((p.namespace, p.name), []))
            fate = PodFate(
                top.fate if top else Fate.NOT_PICKED,
                top.layer if top else Layer.POLICY,
                strategy=top.strategy if top else None,
                checks=tuple(top.checks) if top else (),
                namespace=p.namespace,
                name=p.name,
                uid=p.uid,
                workload=p.workload,
                owner_kind=p.owner_kind,
                node=p.node,
                audit_codes=tuple(view.refused_by_api.get(p.key, ())),
                live_after=p.uid in live,
            )
            fates.append(fate)
        led = cls.of_round(fates, view.rnd.name, bool(view.audit.get("available")))
        # the round's rebuild window, when the runner has closed it (Runner.availability)
        led.rounds[0].availability = dict(
            (getattr(view, "extra", None) or {}).get("availability") or {}
        )
        return led

    @classmethod
    def of_round(
        cls, fates: Iterable[PodFate], round_name: str = "", audit_available: bool = False
    ) -> Ledger:
        """An experiment's ledger of one round from its pods' fates (each naming its pod)."""
        rows = [PodRow(f.key, f.node, origin="lab", fates=[f]) for f in fates]
        return cls(rows=rows, rounds=[RoundFigures(round_name)], audit_available=audit_available)

    # -- reading it ------------------------------------------------------------------------
    def row(self, pod: str) -> PodRow | None:
        return next((r for r in self.rows if r.pod == pod), None)

    def fates(self, round_index: int = 0) -> dict[str, PodFate]:
        return {r.pod: r.fates[round_index] for r in self.rows if len(r.fates) > round_index}

    @property
    def pods(self) -> list[PodFate]:
        """The first round's fates, one per pod in row order (an experiment's rows)."""
        return [r.fates[0] for r in self.rows if r.fates]

    @property
    def round_name(self) -> str:
        return self.rounds[0].name if self.rounds else ""

    def select(self, workload: Any = None, pods: Iterable[Any] | None = None) -> list[PodFate]:
        """First-round fates of `workload` and/or `pods` (names, or `namespace/name` when names
        repeat across the lab's namespaces); a lab object stands for its name."""
        workload = None if workload is None else _name_of(workload, "workload")
        if isinstance(pods, str):
            raise TypeError(f"Ledger.select(pods={pods!r}): give a list of pod names, [{pods!r}]")
        wanted = None if pods is None else {_name_of(p, "pods") for p in pods}
        return [
            f
            for f in self.pods
            if (workload is None or f.workload == workload)
            and (wanted is None or f.name in wanted or f.key in wanted)
        ]

    # -- serialized forms --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ledger's JSON in its use's form (an experiment's evidence file, a replay's
        result). A replay's rows are written by hand (asdict took ~7 s at 10,000 rows x 15
        rounds): a fate holds scalars and `checks` only, and `fates` is a row's last field."""
        if self.source == EXPERIMENT:
            out: dict[str, Any] = {
                "round": self.round_name,
                "audit_available": self.audit_available,
                "pods": [f.experiment_dict() for f in self.pods],
            }
            if self.rounds and self.rounds[0].availability:
                out["availability"] = _copy(self.rounds[0].availability)
            return out
        row_f = [f.name for f in fields(PodRow)]
        rows = [{n: getattr(r, n) for n in row_f} for r in self.rows]
        for d, r in zip(rows, self.rows, strict=True):
            d["fates"] = [
                {**{n: getattr(f, n) for n in REPLAY_FATE_FIELDS}, "checks": [*f.checks]}
                for f in r.fates
            ]
        head = asdict(replace(self, rows=[], rounds=[]))
        del head["audit_available"]
        return {**head, "rows": rows, "rounds": [r.to_dict() for r in self.rounds]}

    def to_markdown(self, max_rows: int = 500) -> str:
        out = [f"## Fate ledger ({self.source}, descheduler {self.descheduler_version or '?'})", ""]
        for i, r in enumerate(self.rounds, 1):
            counts = ", ".join(f"{k} {v}" for k, v in sorted(r.by_fate.items())) or "no decisions"
            audit = f"; API server: {r.audit_by_code}" if r.audit_by_code else ""
            skipped = f"; skipped: {r.skipped}" if r.skipped else ""
            if stale := r.extra.get("stale"):  # a timeline round short of due changes
                skipped += f"; **run on a stale state**: {len(stale)} due change(s) missing"
            out.append(
                f"- round {i} `{r.name}`: {counts}; totalEvicted {r.total_evicted}{audit}{skipped}"
            )
        heads = " | ".join(f"round {i}" for i in range(1, len(self.rounds) + 1)) or "round 1"
        out += [
            "",
            f"| pod | node | owner | {heads} | layer |",
            "|---|---|---|" + "---|" * max(1, len(self.rounds)) + "---|",
        ]
        for row in self.rows[:max_rows]:
            cells = " | ".join(f.label for f in row.fates)
            layer = (row.fates[-1].layer or "") if row.fates else ""
            origin = "" if row.origin in ("snapshot", "log", "record") else f" ({row.origin})"
            out.append(
                f"| {row.pod}{origin} | {row.node or ''} | {row.owner or ''} | {cells} | {layer} |"
            )
        if len(self.rows) > max_rows:
            out.append(f"| ... {len(self.rows) - max_rows} more rows in the JSON | | | | |")
        if self.comparison:
            out += _comparison_lines(self.comparison)
        if self.notes:
            out += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def to_text(self) -> str:
        lines = []
        for row in self.rows:
            fates = "; ".join(f"{f.label} [{f.layer or '-'}]" for f in row.fates)
            lines.append(f"{row.pod:60} {row.node or '-':24} {fates}")
        return "\n".join(lines) + "\n"


def _comparison_lines(c: Mapping[str, Any]) -> list[str]:
    """A replay's comparison with the incident's log, in markdown."""
    out = [
        "",
        "## Compared with the incident's log",
        "",
        _same_line("same evictions", c["same_evictions"], c, "evicted"),
        _same_line("same refusals", c["same_refusals"], c, "refused"),
        f"- pods that differ: {len(c['differ'])}",
    ]
    out += [
        f"- `{d['pod']}`: incident {d['incident']}, replay {d['replay']}: {d['why']}"
        for d in c["differ"][:100]
    ]
    ids = c.get("identities_differ") or []
    out.append(
        f"- same fates up to order (the same pod identities per outcome): "
        f"{answer_label(c.get('same_fates_up_to_order'))}"
    )
    out += [
        f"  - {identity_label(d['identity'])}: incident {len(d['incident'])} "
        f"({', '.join(d['incident']) or 'none'}), replay {len(d['replay'])} "
        f"({', '.join(d['replay']) or 'none'})"
        for d in ids[:100]
    ]
    if left_out := c.get("not_compared") or []:
        out += ["", f"## Not compared ({len(left_out)} pods)", ""]
        out += [f"- `{n['pod']}` {n['fate']}: {n['why']}" for n in left_out[:200]]
        if len(left_out) > 200:
            out.append(f"- ... {len(left_out) - 200} more in the JSON")
    return out


def _same_line(what: str, value: Any, c: Mapping[str, Any], side: str) -> str:
    """`- same evictions: yes (compared 3 of 3 evicted pods)`: the answer and its coverage."""
    cov = (c.get("coverage") or {}).get(side) or {}
    return f"- {what}: {answer_label(value)}" + (f" ({cov['line']})" if cov else "")


__all__ = [
    "EXPERIMENT",
    "REPLAY_FATE_FIELDS",
    "Ledger",
    "PodFate",
    "PodRow",
    "RoundFigures",
    "furthest",
    "rank",
]


def _name_of(obj: Any, arg: str) -> str:
    """A name, or a lab object's (`.name`): the lab's objects are accepted wherever names are."""
    if isinstance(obj, str):
        return obj
    name = getattr(obj, "name", None)
    if isinstance(name, str):
        return name
    raise TypeError(
        f"Ledger.select({arg}=...): {type(obj).__name__} is neither a name nor a lab object "
        "with a name; pass the name (a str) or the lab's Deployment/Pod object"
    )
