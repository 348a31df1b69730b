"""The user's explanations of expected change, and their matching against what was observed.

An explanation file says which changes an upgrade is expected to bring and why:

    changes:
      - experiment: "positive[runbook]"   # glob (* and ?) on name[variant]; default "*"
        pods: "spread-demo@*"             # glob (* and ?) on owner@worker-N; default "*"
        kind: continue-evicting           # a change kind (KINDS): required
        # bug: descheduler#1882 / metric: NAME / path: "rbac:ClusterRole*" narrow further
        reason: "PR 1883 starts the PDB lister, so PodsWithoutPDB sees the PDB"
        link: https://github.com/kubernetes-sigs/descheduler/pull/1883

`kind` is required (a reason alone would explain every change); a rollback trigger's kind
(TRIGGERS) also needs `link`; `pods`/`bug`/`metric`/`path` are refused on a kind they
cannot narrow. Every explanation must match at least one observed change: one that matches nothing is
*stale* (the upgrade does not do what its author believes) and fails the verdict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.canary.capacity import CAPACITY_KINDS, CAPACITY_TRIGGERS
from pytest_desched.errors import ConfigError
from pytest_desched.inputs_safe import load_yaml, read_text

# The change kinds the diff reports (compare.diff_classes) plus the round-level ones.
KINDS = (
    "continue-evicting",
    "more-evictions",
    "fewer-evictions",
    "candidate-set-grew",
    "candidate-set-shrank",
    "fate-changed",
    "replacement-seen",
    "lost-metric",
    "bug-fixed",
    "bug-new",
    "bug-reached",
    "bug-intermittent",
    "round-missing",
    "outcome-changed",
    "metrics-unproven",
    "events-lost",
    "track-error",
    "static",
    *CAPACITY_KINDS,
)
# The runbook's rollback triggers: the candidate set grows, a fail-closed round becomes
# continue-evicting, a metric the baseline served is gone, a known bug appears.
# And the rebuild window's (canary/capacity.py): an owner left with less capacity than the
# baseline left it at the same number of evictions, a pod left Pending.
TRIGGERS = (
    "continue-evicting",
    "candidate-set-grew",
    "lost-metric",
    "bug-new",
    *CAPACITY_TRIGGERS,
)
_FIELDS = {"experiment", "pods", "kind", "reason", "link", "bug", "metric", "path"}


def glob(text: str, pattern: str) -> bool:
    """`*` and `?` wildcards only: `positive[runbook]` means itself, not a character class."""
    rx = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(rx, text) is not None


@dataclass(frozen=True)
class Explanation:
    """One expected change, as the user wrote it (`source` says where, for messages)."""

    reason: str
    experiment: str = "*"
    pods: str = "*"
    kind: str | None = None
    link: str | None = None
    bug: str | None = None
    metric: str | None = None
    path: str | None = None  # glob (* and ?) on a static difference's area:path
    source: str = ""

    def matches(self, change: Change) -> bool:
        return (
            glob(change.experiment, self.experiment)
            and glob(change.subject, self.pods if change.is_pods else "*")
            and self.kind == change.kind
            and (self.bug is None or change.subject == self.bug)
            and (self.metric is None or change.subject == self.metric)
            and (self.path is None or glob(change.subject, self.path))
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


NO_ROUND = -1  # a change of the whole run (an outcome, a metric, a track), not of one round


@dataclass(frozen=True)
class Change:
    """One observed change: a pod class, a metric or a known bug, in one experiment's round."""

    experiment: str
    round: int
    kind: str
    subject: str  # owner@worker-N, a metric name, or a bug id
    detail: str

    @property
    def where(self) -> str:
        """`experiment round N` for a round's change, the experiment alone for a run's."""
        if self.round == NO_ROUND:
            return self.experiment
        return f"{self.experiment} round {self.round}"

    @property
    def is_pods(self) -> bool:
        return "@" in self.subject

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Which narrowing key applies to which kinds of change: one that cannot narrow the kind it
# is written for (e.g. `pods:` on a lost metric) would silently explain more than it says.
POD_KINDS = (
    "continue-evicting",
    "more-evictions",
    "fewer-evictions",
    "candidate-set-grew",
    "candidate-set-shrank",
    "fate-changed",
    "replacement-seen",
)
NARROWS = {
    "pods": POD_KINDS,
    "bug": ("bug-fixed", "bug-new", "bug-reached", "bug-intermittent"),
    "metric": ("lost-metric",),
    "path": ("static",),
}


def _lines(text: str) -> list[int]:
    """The 1-based line of each item of the `changes:` list (0 where YAML gives none)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if getattr(key, "value", None) == "changes" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def load_explanations(source: str | Path | Sequence[Mapping[str, Any]] | None) -> list[Explanation]:
    """Parse and check an explanation file (or its list) before any cluster exists.

    Each entry names the kind of change it explains (`kind:`); a reason alone would explain
    every change, a rollback trigger and a broken track included. A trigger (TRIGGERS) is explained only by an entry that names it and links to why.
    """
    if source is None:
        return []
    where = "explanations"
    lines: list[int] = []
    if isinstance(source, (str, Path)):
        path = Path(source)
        where = str(path)
        text = read_text(path, what="explanation file (--expect)")  # bounded: exit 2
        doc = load_yaml(text, str(path)) or {}
        items = doc.get("changes") if isinstance(doc, Mapping) else None
        if items is None:
            raise ConfigError(f"{path}: expected a mapping with a `changes:` list")
        lines = _lines(text)
    else:
        items = list(source)
    if not isinstance(items, list):
        raise ConfigError(f"{where}: `changes` must be a list of mappings")
    out: list[Explanation] = []
    for i, item in enumerate(items):
        line = f":{lines[i]}" if i < len(lines) and lines[i] else ""
        at = f"{where}{line}: changes[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{at}: must be a mapping with at least `kind` and `reason`")
        unknown = sorted(set(item) - _FIELDS)
        if unknown:
            raise ConfigError(f"{at}: unknown key(s) {unknown}; allowed: {sorted(_FIELDS)}")
        if not str(item.get("reason") or "").strip():
            raise ConfigError(f"{at}: `reason` is required (why this change is expected)")
        kind = item.get("kind")
        if kind is None:
            raise ConfigError(
                f"{at}: `kind` is required: name the kind of change this explains (one of "
                f"{list(KINDS)}); a reason alone would explain every change, rollback "
                "triggers included"
            )
        if not isinstance(kind, str) or kind not in KINDS:
            extra = " (a wildcard kind would explain every change)" if "*" in str(kind) else ""
            raise ConfigError(f"{at}: kind {kind!r} is not one of {list(KINDS)}{extra}")
        for key, kinds in NARROWS.items():
            if item.get(key) is not None and kind not in kinds:
                raise ConfigError(
                    f"{at}: `{key}` narrows only {list(kinds)}, not kind {kind!r}: it would "
                    f"narrow nothing here; remove it or name one of those kinds"
                )
        if kind in TRIGGERS and not str(item.get("link") or "").strip():
            raise ConfigError(
                f"{at}: kind {kind!r} is a rollback trigger: its explanation needs `link` "
                "(the upstream change, issue or review that makes it expected)"
            )
        out.append(
            Explanation(
                reason=str(item["reason"]).strip(),
                experiment=str(item.get("experiment") or "*"),
                pods=str(item.get("pods") or "*"),
                kind=kind,
                link=item.get("link"),
                bug=item.get("bug"),
                metric=item.get("metric"),
                path=item.get("path"),
                source=at,
            )
        )
    return out
