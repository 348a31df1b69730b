"""The canary's report: one value with JSON and Markdown forms, written beside the evidence."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_desched.canary.compare import RoundDiff
from pytest_desched.canary.control_plane import kubernetes_differ
from pytest_desched.canary.expectations import NO_ROUND
from pytest_desched.canary.tracks import TrackResult
from pytest_desched.canary.verdict import CanaryVerdict
from pytest_desched.evidence.readable import prose
from pytest_desched.evidence.report import write_canary_report
from pytest_desched.outcome.verdict import Outcome, Verdict
from pytest_desched.render import table

FIGURES = (
    ("candidates", "candidates"),
    ("replacements_listed", "replacements listed"),
    ("protected", "protected"),
    ("pdb_refusals", "PDB 429"),
    ("other_refusals", "other refusals"),
    ("events", "EvictionFailed events"),
    ("evictions", "evictions"),
    ("ready_latency_s", "ready s"),
    ("min_available", "min available"),
    ("pending", "Pending"),
    ("final_skew", "skew"),
    ("deciding_layer", "layer"),
)


@dataclass
class CanaryReport:
    baseline: TrackResult
    candidate: TrackResult
    rounds: list[RoundDiff]
    verdict: CanaryVerdict
    static: Any = None  # canary.static.StaticComparison, or None when skipped
    outcomes: list[dict[str, Any]] = field(default_factory=list)  # per experiment, both tracks
    wall_s: float = 0.0
    no_verdict: list[str] = field(default_factory=list)  # why nothing could be judged
    regressions: list[str] = field(default_factory=list)  # the candidate ran no round: FAIL
    not_compared: list[str] = field(default_factory=list)  # what this canary did not compare
    snapshot: Any = None  # canary.fates.SnapshotFates: `desched canary --snapshot`'s pods
    # The tracks' control planes, where their Kubernetes differ: the readings that differ
    # (canary.control_plane.KubeDifference) and why any could not be read.
    control_plane: list[Any] = field(default_factory=list)
    control_plane_gaps: list[str] = field(default_factory=list)

    def control_plane_said(self) -> tuple[bool, list[str]]:
        """Whether the report has a control-plane section, and its gaps: with the tracks'
        Kubernetes different it always has one, so missing readings are said by name
        (TrackResult.readings_gap) rather than look like no difference."""
        b, c = self.baseline, self.candidate
        versions = [t.skew.get("kubernetes") for t in (b, c)]
        differ = kubernetes_differ(versions) or kubernetes_differ(
            [t.control_plane.get("kubernetes") for t in (b, c)]
        )
        gaps = list(self.control_plane_gaps)
        if differ and not gaps:
            gaps = [g for t in (b, c) if (g := t.readings_gap())]
        return bool(differ or self.control_plane or gaps), gaps

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.broken and not self.regressions

    @property
    def broken(self) -> bool:
        """No verdict: a track could not run, or an experiment compared no round at all."""
        return bool(self.baseline.error or self.candidate.error or self.no_verdict)

    @property
    def final_verdict(self) -> Verdict:
        """No verdict (exit 3) when nothing could be judged, else pass (0) or fail (1)."""
        notes = tuple(self.verdict.control_plane)
        if self.broken:
            why = [e for e in (self.baseline.error, self.candidate.error) if e]
            return Verdict(Outcome.NO_VERDICT, (*why, *self.no_verdict), notes)
        if self.ok:
            return Verdict(Outcome.PASS, (), notes)
        return Verdict(Outcome.FAIL, (*self.regressions, *self.verdict.reasons), notes)

    @property
    def headline(self) -> str:
        if self.broken:
            return "NO VERDICT (nothing to judge: see why below; exit 3)"
        return "PASS" if self.ok else "FAIL (roll back or explain)"

    def to_dict(self) -> dict[str, Any]:
        said, gaps = self.control_plane_said()
        return {
            "ok": self.ok,
            "no_verdict": self.no_verdict,
            "regressions": self.regressions,
            "not_compared": self.not_compared,
            "verdict": self.verdict.to_dict(),
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict(),
            "outcomes": self.outcomes,
            "rounds": [r.to_dict() for r in self.rounds],
            "static": self.static.to_dict() if self.static is not None else None,
            **(
                {
                    "control_plane": {
                        "differences": [d.to_dict() for d in self.control_plane],
                        "gaps": gaps,
                        "attributed": self.verdict.control_plane,
                    }
                }
                if said
                else {}
            ),
            "wall_s": round(self.wall_s, 2),
            **({"snapshot": self.snapshot.to_dict()} if self.snapshot is not None else {}),
        }

    def markdown(self) -> str:
        b, c = self.baseline, self.candidate
        bk, ck = (t.skew.get("kubernetes") for t in (b, c))
        # a cluster upgrade canaried: the title names each track's Kubernetes
        on = (
            (f" on Kubernetes {bk}", f" on Kubernetes {ck}") if bk and ck and bk != ck else ("", "")
        )
        lines = [
            f"# Upgrade canary: {b.descheduler_version}{on[0]} -> {c.descheduler_version}{on[1]}",
            "",
            f"**Verdict: {self.headline}**",
            "",
        ]
        lines += [f"- no verdict: {r}" for r in self.no_verdict]
        lines += [f"- regression: {r}" for r in self.regressions]
        lines += [f"- {r}" for r in self.verdict.reasons]
        lines += [
            f"- the control plane's, not the descheduler's: {r}" for r in self.verdict.control_plane
        ]
        lines += [
            f"- the {t.name} track's teardown failed (its results stand): {t.teardown_error}"
            for t in (b, c)
            if t.teardown_error
        ]
        lines += [f"- not compared: {r}" for r in self.not_compared]
        # one Kubernetes for both tracks in the header; per cell when a track has its own
        kubes = {t.skew.get("kubernetes") for t in (b, c) if t.skew.get("kubernetes")}
        tracks = [
            [
                t.name,
                t.descheduler_version,
                _chart_used(t.chart),
                _skew(t.skew, named=len(kubes) > 1),
                f"{t.wall_s:.1f}",
                f"{t.error or ''}{' teardown: ' + t.teardown_error if t.teardown_error else ''}",
            ]
            for t in (b, c)
        ]
        kube = next(iter(kubes)) if len(kubes) == 1 else "the track's cluster"
        heads = ["track", "descheduler", "chart used", f"skew vs Kubernetes {kube}"]
        lines += ["", table(tracks, [*heads, "wall s", "error"], "md")]
        if self.snapshot is not None:
            lines += ["", self.snapshot.markdown().rstrip()]
        if not (self.outcomes or self.rounds or self.snapshot):
            lines += ["", "Behaviour not compared: a static-only canary (no cluster was started)."]
        elif self.rounds or self.outcomes:
            outcomes = [
                # the note as the HTML page writes it
                [
                    o["experiment"],
                    o["baseline"],
                    o["candidate"],
                    prose(o["note"]) if o.get("note") else "",
                ]
                for o in self.outcomes
            ]
            if outcomes:  # a snapshot canary runs no experiment
                lines += ["", "## Experiments", ""]
                lines.append(table(outcomes, ["experiment", "baseline", "candidate", "note"], "md"))
            lines += ["", "## Rounds (baseline / candidate)", ""]
            rounds = []
            for rd in self.rounds:
                cells = []
                for key, _ in FIGURES:
                    bv = getattr(rd.baseline, key, None) if rd.baseline else "-"
                    cv = getattr(rd.candidate, key, None) if rd.candidate else "-"
                    cells.append(f"{_fmt(bv)} / {_fmt(cv)}")
                rounds.append(
                    [f"{rd.experiment}#{rd.index}", *cells, "yes" if rd.changed else "no"]
                )
            heads = ["round", *(label for _, label in FIGURES), "changed"]
            lines.append(table(rounds, heads, "md"))
            classes = [(rd, w) for rd in self.rounds for w in rd.words]
            if classes:
                rows = [
                    [f"{rd.experiment}#{rd.index}", w["pods"], w["baseline"], w["candidate"]]
                    for rd, w in classes
                ]
                lines += ["", "## Pod classes (what happened on each track)", ""]
                lines.append(table(rows, ["round", "pods", "baseline", "candidate"], "md"))
        lines += ["", "## Changes", ""]
        if not self.verdict.judged and self.rounds and not (self.broken or self.regressions):
            lines.append("No change to judge: every compared pod class kept its fates.")
        elif not self.verdict.judged:
            lines.append("No change found, and no pod class was compared (see above).")
        else:
            changes = []
            for j in self.verdict.judged:
                ch = j.change
                where = ch.experiment if ch.round == NO_ROUND else f"{ch.experiment}#{ch.round}"
                kind = f"{ch.kind}{' (trigger)' if j.trigger else ''}"
                changes.append([where, kind, ch.subject, j.status, j.by or "", ch.detail])
            heads = ["experiment", "kind", "pods / subject", "status", "by", "detail"]
            lines.append(table(changes, heads, "md"))
        said, gaps = self.control_plane_said()
        if said:
            lines += ["", "## Control plane (the tracks' Kubernetes differ)", ""]
            lines += [f"- not read: {g}" for g in gaps]
            if not (gaps or self.control_plane):
                lines.append("- read on both tracks: no reading differs")
            gates = [d for d in self.control_plane if d.area == "feature-gate"]
            for d in self.control_plane:
                if d.area != "feature-gate":
                    lines.append(f"- {d.words()}")
            if gates:
                lines.append(
                    f"- feature-gate defaults: {len(gates)} differ (context only; the "
                    "scheduler's effective defaults above carry those that change it)"
                )
        lines += ["", "## Metric families served", ""]
        for t in (b, c):
            names = ", ".join(t.metric_names) if t.metric_names else f"unknown ({t.metrics_why})"
            lines.append(f"- {t.name}: {names}")
        if self.verdict.stale:
            lines += ["", "## Stale explanations", ""]
            lines += [f"- {e.source}: {e.reason}" for e in self.verdict.stale]
        if self.static is not None:
            lines += ["", "## Static comparison", "", self.static.markdown()]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path) -> dict[str, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        js, md = folder / "canary.json", folder / "canary.md"
        js.write_text(json.dumps(self.to_dict(), indent=2, default=str))
        md.write_text(self.markdown())
        # The HTML view reads what canary.json holds, nothing more (evidence/report.py).
        html = write_canary_report(folder / "canary.html", json.loads(js.read_text()))
        return {"json": js, "markdown": md, "html": html}


def _chart_used(chart: dict[str, Any]) -> str:
    """The chart version really installed, its appVersion and where it came from."""
    out = f"{chart.get('version', '?')} (appVersion {chart.get('app_version', '?')}, "
    return (
        out + f"{chart.get('source', '?')}{': ' + chart['origin'] if chart.get('origin') else ''})"
    )


def _skew(skew: dict[str, Any], named: bool = False) -> str:
    """The release against its cluster; `named`: the cluster's version first (the tracks'
    Kubernetes differ, a control-plane upgrade canaried)."""
    if not skew:
        return "-"
    built = f"compiled for {skew['compiled_for']}: " if skew.get("compiled_for") else ""
    where = f"Kubernetes {skew['kubernetes']}: " if named and skew.get("kubernetes") else ""
    return where + built + str(skew.get("note", ""))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, dict):
        return ",".join(f"{k}:{n}" for k, n in sorted(v.items())) or "0"
    return str(v)
