"""A release matrix, judged: one row a release, each cell an experiment, every known bug proven.

A grid (releases x Kubernetes versions) is the same matrix with a row per release and
version: the table gains a Kubernetes column, and each bug's proof names the cells (release @
Kubernetes: experiments) it showed on.

Pure: built from the tracks' results (or a `matrix.json` read back), judged against a
known-bug registry, rendered as text, Markdown and JSON. Per row and per registered bug the
registry says whether the release has it (`KnownBug.affected`, a version range) and the run says whether it
showed it (the signature proven from a round, `ExperimentResult.signatures_seen`, whatever
the registry says), exercised it without showing it, or could not show it at all (no
experiment here runs what the bug breaks). Where the two disagree, the matrix says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.descheduler.known_bugs import ANY_EXPERIMENT, REGISTRY, KnownBug
from pytest_desched.descheduler.policy.release_fields import NON_SAFETY_FIELDS
from pytest_desched.outcome.verdict import Outcome, Verdict
from pytest_desched.render import table

NOT_RUN = "not run"
# What the run says of a bug on one release.
SHOWN, NOT_SHOWN, NOT_EXERCISED = "shown", "not shown", "not exercised"


@dataclass
class Cell:
    """One experiment on one release: what the matrix shows and what judging it needs."""

    label: str  # title[variant], as the canary's outcome rows name it
    experiment: str  # the title: what a bug's `explains` keys on
    outcome: str  # pass | xfail | fail | error | not run
    layer: str | None = None
    evictions: int = 0
    bug: str | None = None  # the known bug an xfail names
    seen: dict[str, str] = field(default_factory=dict)  # bug id -> signature evidence
    triggers: dict[str, str] = field(default_factory=dict)  # bug id -> why its policy triggers it
    rounds: int = 0  # rounds that ran (not stopped at their timeout)
    message: str = ""

    @classmethod
    def of(cls, result: Any, registry: Sequence[KnownBug] = REGISTRY) -> Cell:
        """From an ExperimentResult: its outcome, layer, evictions and bug evidence."""
        policy = _policy_of(result.records[-1]) if result.records else {}
        triggers = {
            b.id: why
            for b in registry
            if b.policy_trigger is not None and (why := b.policy_trigger(policy))
        }
        seen = dict(getattr(result, "signatures_seen", {}) or {}) or dict(result.known_bugs)
        return cls(
            label=result.label,
            experiment=result.name,
            outcome=result.outcome,
            layer=result.blocking_layer,
            evictions=result.evictions,
            bug=(result.classification or {}).get("bug"),
            seen=seen,
            triggers=triggers,
            # rounds that ran their cycle: one stopped at its timeout (job.timed_out, a hang
            # such as #1839) exercised nothing another bug needs
            rounds=sum(1 for r in result.records if not (r.get("job") or {}).get("timed_out")),
            message=(result.message or result.error or "").strip(),
        )

    def shown(self) -> str:
        """The cell as the table shows it: outcome, the bug it xfails on, layer, evictions."""
        if self.outcome == NOT_RUN:
            return NOT_RUN
        out = self.outcome + (f" ({short(self.bug)})" if self.bug else "")
        return f"{out} · {self.layer or '-'} · {self.evictions} evicted"


def _policy_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The policy a round ran: as its descheduler read it, else as applied."""
    eff = record.get("effective_policy")
    if isinstance(eff, dict) and eff:
        return eff
    try:
        doc = yaml.safe_load(record.get("policy_applied") or "")
    except yaml.YAMLError:
        return {}
    return doc if isinstance(doc, dict) else {}


@dataclass
class Row:
    """One release: how the user named it, what ran, each experiment's cell."""

    name: str  # the evidence folder under the matrix's
    spec: str
    chart_spec: str | None = None
    version: str = ""
    chart: dict[str, Any] = field(default_factory=dict)
    skew: dict[str, Any] = field(default_factory=dict)
    cells: list[Cell] = field(default_factory=list)
    error: str | None = None
    teardown_error: str | None = None
    wall_s: float = 0.0
    artifacts: str = ""
    kubernetes: str = ""  # the row's cluster (its track's skew reading); "" in an older json
    # Policy fields the release has none for and runs without (release_fields.NON_SAFETY_FIELDS)
    runs_without: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        name: str,
        spec: str,
        chart_spec: str | None,
        track: Any,
        planned: Sequence[str],
        registry: Sequence[KnownBug] = REGISTRY,
        runs_without: Sequence[str] | None = None,
    ) -> Row:
        """From a TrackResult; an experiment the track did not reach is a `not run` cell."""
        cells = [Cell.of(r, registry) for r in track.results]
        cells += [Cell(label, label, NOT_RUN) for label in planned[len(cells) :]]
        return cls(
            name=name,
            spec=spec,
            chart_spec=chart_spec,
            version=track.descheduler_version,
            chart=dict(track.chart),
            skew=dict(track.skew),
            cells=cells,
            kubernetes=str(track.skew.get("kubernetes") or ""),
            error=track.error,
            teardown_error=track.teardown_error,
            wall_s=round(track.wall_s, 1),
            artifacts=track.artifacts,
            runs_without=list(runs_without or []),
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Row:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "cells": [Cell(**c) for c in d.get("cells") or []]})

    @property
    def ran(self) -> bool:
        return self.error is None and all(c.outcome != NOT_RUN for c in self.cells)

    def at(self, grid: bool) -> str:
        """The release as a proof names it: its version, and in a grid its Kubernetes."""
        name = self.version or self.spec
        return f"{name} @ {self.kubernetes}" if grid and self.kubernetes else name


@dataclass(frozen=True)
class BugFinding:
    """One bug on one release: what the registry says, what the run showed, and if they agree."""

    bug: str
    registry: str  # "has it" | "derived build" | "does not have it"
    run: str  # SHOWN | NOT_SHOWN | NOT_EXERCISED
    cells: tuple[str, ...]  # the cells that showed it (shown) or exercised it (not shown)
    agrees: bool
    note: str = ""


def registry_says(bug: KnownBug, version: str, chart_version: str | None = None) -> str:
    """The registry's word on a release (and, for a chart bug, the chart it ran with)."""
    if bug.chart_range is not None and chart_version and not bug.chart_range.holds(chart_version):
        return "does not have it"
    if version in bug.affected:
        return "has it"
    return "derived build" if bug.applies_to(version) else "does not have it"


def exercised_by(bug: KnownBug, cell: Cell) -> bool:
    """The cell ran what the bug breaks (an experiment it explains, with a policy that
    triggers it where the bug says what does) and completed its rounds."""
    if (
        not bug.explains_checks(cell.experiment)
        or cell.rounds == 0
        or cell.outcome in (NOT_RUN, "error")
    ):
        return False
    return bug.policy_trigger is None or bug.id in cell.triggers


def judge_bug(bug: KnownBug, row: Row) -> BugFinding:
    """The registry's word on `row`'s release against the row's runs."""
    says = registry_says(bug, row.version, str(row.chart.get("version") or "") or None)
    shown = tuple(c.label for c in row.cells if bug.id in c.seen)
    if shown:
        if says != "does not have it":
            return BugFinding(bug.id, says, SHOWN, shown, True)
        note = (
            f"the run shows {bug.id} on {row.version} ({', '.join(shown)}); the registry's "
            f"range ({bug.affected}) leaves it out"
        )
        return BugFinding(bug.id, says, SHOWN, shown, False, note)
    tried = tuple(c.label for c in row.cells if exercised_by(bug, c))
    if not tried:
        what = [e if e != ANY_EXPERIMENT else "any" for e in sorted(bug.explains)] or [
            "none (not an experiment's bug)"
        ]
        return BugFinding(
            bug.id,
            says,
            NOT_EXERCISED,
            (),
            True,
            f"experiments that can show it: {', '.join(what)}",
        )
    if bug.mode != "xfail":
        note = "its loss varies from run to run: an absence proves nothing"
        return BugFinding(bug.id, says, NOT_SHOWN, tried, True, note)
    if says == "has it":
        note = (
            f"the registry says {row.version} has {bug.id}; {', '.join(tried)} exercised it "
            "and showed no signature (does the release carry the fix?)"
        )
        return BugFinding(bug.id, says, NOT_SHOWN, tried, False, note)
    note = "derived build: only its own rounds can say" if says == "derived build" else ""
    return BugFinding(bug.id, says, NOT_SHOWN, tried, True, note)


def unexplained(row: Row, registry: Sequence[KnownBug] = REGISTRY) -> list[str]:
    """Outcomes the registry does not explain: a failure, an error, or an xfail on a bug the
    registry does not give this release."""
    by_id = {b.id: b for b in registry}
    out = []
    for c in row.cells:
        if c.outcome in ("fail", "error"):
            first = (c.message.splitlines() or ["no message"])[0]
            out.append(f"{row.spec} {c.label}: {c.outcome}: {first}")
        elif c.outcome == "xfail":
            bug = by_id.get(c.bug or "")
            if bug is None or not bug.applies_to(row.version):
                out.append(
                    f"{row.spec} {c.label}: xfail on {c.bug}, which the registry does not give "
                    f"{row.version}"
                )
    return out


def short(bug_id: str | None) -> str:
    """`descheduler#1882` -> `#1882` (the table's width); a project entry, which has no
    upstream number (`desched:stale-read-as-idle`), keeps its whole id."""
    repo, sep, number = (bug_id or "").rpartition("#")
    return f"#{number}" if sep and repo and number.isdigit() else bug_id or ""


def _finding_text(f: BugFinding) -> str:
    """A finding in the table's words: `#1882 proven`, `#1882 shown, registry: no ✗`."""
    bug, has = short(f.bug), "yes" if f.registry != "does not have it" else "no"
    if not f.agrees:
        return f"{bug} {f.run}, registry: {has} ✗"
    if f.run == SHOWN:
        return f"{bug} proven"
    if f.run == NOT_SHOWN:
        return f"{bug} not shown" if has == "yes" else f"{bug} absent"
    return f"{bug} not exercised (registry: {has})"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("-", 1)[0]))


@dataclass
class Matrix:
    """Every row, judged against `registry`; `exit_code` is the command's."""

    rows: list[Row]
    labels: list[str]  # the experiment columns, in order
    command: str = ""
    date: str = ""
    wall_s: float = 0.0
    registry: Sequence[KnownBug] = REGISTRY

    def findings(self, row: Row) -> list[BugFinding]:
        return [judge_bug(b, row) for b in self.registry]

    @property
    def grid(self) -> bool:
        """Rows at more than one Kubernetes version: releases x versions."""
        return len({r.kubernetes for r in self.rows}) > 1

    def cells_shown(self) -> list[str]:
        """Per bug, the cells it showed on (`release @ Kubernetes: experiment, ...`), or that
        it showed on none of the cells that exercised it."""
        out = []
        for bug in self.registry:
            where = []
            for row in self._ordered():
                f = judge_bug(bug, row)
                if f.run == SHOWN:
                    where.append(f"{row.at(self.grid)}: {', '.join(f.cells)}")
            if where:
                out.append(f"{short(bug.id)} shows on {len(where)} row(s): " + "; ".join(where))
            else:
                out.append(f"{short(bug.id)} shows on no cell")
        return out

    def _ordered(self) -> list[Row]:
        return sorted(
            self.rows, key=lambda r: (_version_key(r.version), _version_key(r.kubernetes))
        )

    @property
    def disagreements(self) -> list[str]:
        return [
            f"{row.spec}: {f.bug}: {f.note}"
            for row in self.rows
            for f in self.findings(row)
            if not f.agrees
        ]

    @property
    def unexplained(self) -> list[str]:
        return [u for row in self.rows for u in unexplained(row, self.registry)]

    @property
    def not_run(self) -> list[str]:
        out = []
        for row in self.rows:
            missing = [c.label for c in row.cells if c.outcome == NOT_RUN]
            if row.error or missing:
                why = row.error or "the track stopped early"
                out.append(
                    f"{row.spec}: {why}" + (f" (not run: {', '.join(missing)})" if missing else "")
                )
        return out

    @property
    def final_verdict(self) -> Verdict:
        """No verdict (3) when a row could not run (the matrix is incomplete), whatever the
        rows that ran say; else fail (1) on a disagreement or an unexplained outcome; else pass
        (0): every row ran and every outcome is the registry's."""
        if self.not_run:
            return Verdict(Outcome.NO_VERDICT, tuple(self.not_run))
        return Verdict.of([*self.disagreements, *self.unexplained])

    @property
    def exit_code(self) -> int:
        return self.final_verdict.exit_code

    @property
    def headline(self) -> str:
        if self.not_run:
            return "INCOMPLETE: a release could not run (exit 3)"
        if self.disagreements or self.unexplained:
            return (
                "DISAGREES: the registry and the runs differ, or an outcome is unexplained (exit 1)"
            )
        return (
            "OK: every release ran; every outcome is explained by the known-bug registry (exit 0)"
        )

    def proofs(self) -> list[str]:
        """Per bug, across the rows: where the runs showed it, in version order."""
        out = []
        for bug in self.registry:
            by_run: dict[str, list[str]] = {SHOWN: [], NOT_SHOWN: [], NOT_EXERCISED: []}
            rows = self._ordered()
            for row in rows:
                by_run[judge_bug(bug, row).run].append(row.at(self.grid))
            line = f"{bug.id} ({bug.title}): "
            parts = []
            if by_run[SHOWN]:
                tried = [
                    v for v in (r.at(self.grid) for r in rows) if v not in by_run[NOT_EXERCISED]
                ]
                since = ""  # "from X on": shown on X and every newer release, not before
                if by_run[SHOWN] == tried and len(tried) > 1:
                    since = f", on every release that exercised it (oldest run: {tried[0]})"
                elif tried[len(tried) - len(by_run[SHOWN]) :] == by_run[SHOWN]:
                    since = f", from {by_run[SHOWN][0]} on (not on {', '.join(by_run[NOT_SHOWN])})"
                parts.append(f"shown on {', '.join(by_run[SHOWN])}{since}")
            if by_run[NOT_SHOWN]:
                parts.append(f"exercised, not shown on {', '.join(by_run[NOT_SHOWN])}")
            if by_run[NOT_EXERCISED]:
                parts.append(f"not exercised on {', '.join(by_run[NOT_EXERCISED])}")
            chart = f"; in charts {bug.chart_range}" if bug.chart_range else ""
            parts.append(f"registry: {bug.affected}{chart}")
            out.append(line + "; ".join(parts))
        return out

    # -- forms -----------------------------------------------------------------------------
    def table_rows(self) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """One dict a release; experiment columns by position (two variants run under one
        --policy file carry the same label)."""
        headers = {"release": "release", "version": "descheduler", "chart": "chart"}
        headers |= {"kubernetes": "Kubernetes"} if self.grid else {}
        headers |= {f"e{i}": label for i, label in enumerate(self.labels)}
        headers |= {"bugs": "known bugs (run vs registry)", "wall": "wall s"}
        rows = []
        for row in self.rows:
            shown = [c.shown() for c in row.cells]
            rows.append(
                {
                    "release": row.spec,
                    "version": (row.version or "-")
                    + (f" (without {', '.join(row.runs_without)})" if row.runs_without else ""),
                    "chart": row.chart.get("version", "-"),
                    **({"kubernetes": row.kubernetes or "-"} if self.grid else {}),
                    **{f"e{i}": (shown[i:] or [NOT_RUN])[0] for i in range(len(self.labels))},
                    "bugs": "; ".join(_finding_text(f) for f in self.findings(row)),
                    "wall": row.wall_s,
                }
            )
        return rows, headers

    def render(self, fmt: str) -> str:
        """`text` or `md`: the headline, the table, then every proof and problem."""
        rows, headers = self.table_rows()
        md = fmt == "md"
        head = "# Release matrix\n\n" if md else ""
        lines = [f"{head}{'**' if md else ''}{self.headline}{'**' if md else ''}", ""]
        if self.command:
            lines += [f"Run {self.date}, {self.wall_s:.0f} s: `{self.command}`", ""]
        lines += [table(rows, headers, fmt), ""]
        sections = [
            ("Known bugs, proven from the runs", self.proofs()),
            ("Known bugs, by cell", self.cells_shown() if self.grid else []),
            ("Disagreements between the registry and the runs", self.disagreements),
            ("Outcomes the registry does not explain", self.unexplained),
            ("Releases that could not run", self.not_run),
            (
                "Policy fields a release has none for (it ran without them)",
                [
                    f"{r.spec} ({r.version}) ran without "
                    + "; ".join(f"{f}: {NON_SAFETY_FIELDS.get(f, '')}" for f in r.runs_without)
                    for r in self.rows
                    if r.runs_without
                ],
            ),
            (
                "Evidence",
                [f"{r.spec}: {r.artifacts} (skew: {r.skew.get('note', '-')})" for r in self.rows],
            ),
        ]
        for title, items in sections:
            if items:
                lines += [f"## {title}" if md else f"{title}:", ""]
                lines += [f"- {i}" for i in items] + [""]
        return "\n".join(lines).rstrip() + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "date": self.date,
            "wall_s": round(self.wall_s, 1),
            "headline": self.headline,
            "exit_code": self.exit_code,
            "experiments": list(self.labels),
            "releases": [
                {**asdict(r), "bugs": [asdict(f) for f in self.findings(r)]} for r in self.rows
            ],
            "proofs": self.proofs(),
            **({"bug_cells": self.cells_shown()} if self.grid else {}),
            "disagreements": self.disagreements,
            "unexplained": self.unexplained,
            "not_run": self.not_run,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], registry: Sequence[KnownBug] = REGISTRY) -> Matrix:
        """A matrix.json read back, to be judged again (e.g. against another registry)."""
        return cls(
            rows=[Row.from_dict(r) for r in d.get("releases") or []],
            labels=list(d.get("experiments") or []),
            command=str(d.get("command", "")),
            date=str(d.get("date", "")),
            wall_s=float(d.get("wall_s") or 0.0),
            registry=registry,
        )

    def write(self, folder: Path) -> dict[str, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        js, md = folder / "matrix.json", folder / "matrix.md"
        js.write_text(json.dumps(self.to_dict(), indent=2, default=str))
        md.write_text(self.render("md"))
        return {"json": js, "markdown": md}
