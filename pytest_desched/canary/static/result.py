"""The static comparison's result: both sides' labels and every difference, data or Markdown."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_desched.canary.static.difference import AREAS, SEVERITIES, SEVERITY_RANK, Difference
from pytest_desched.redaction import scrub_data, scrub_secrets


def _cell(v: Any, width: int = 60) -> str:
    if v is None:
        return "—"
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    s = s.replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= width else s[: width - 1] + "…"


@dataclass
class StaticComparison:
    """Both sides' labels and every classified difference, for the report and the verdict."""

    baseline: dict[str, Any]  # version, chart version / source / sha256 (chart_label)
    candidate: dict[str, Any]
    differences: list[Difference] = field(default_factory=list)

    def by_severity(self, severity: str) -> list[Difference]:
        return [d for d in self.differences if d.severity == severity]

    def counts(self) -> dict[str, int]:
        return {s: len(self.by_severity(s)) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return scrub_data(
            {
                "baseline": self.baseline,
                "candidate": self.candidate,
                "counts": self.counts(),
                "differences": [asdict(d) for d in self.differences],
            }
        )

    def markdown(self) -> str:
        """One table per area (worst area first), rows by severity: the rollback rows lead."""
        head = (
            f"Baseline {_cell(self.baseline.get('version'))} (chart "
            f"{_cell(self.baseline.get('chart_version'))}) against candidate "
            f"{_cell(self.candidate.get('version'))} (chart {_cell(self.candidate.get('chart_version'))}): "
            + ", ".join(f"{n} {s}" for s, n in self.counts().items())
        )
        if not self.differences:
            return head + "\n\nNo static difference."
        areas: dict[str, list[Difference]] = {}
        for d in self.differences:
            areas.setdefault(d.area, []).append(d)

        def worst(a: str) -> tuple[int, int]:
            return min(SEVERITY_RANK[d.severity] for d in areas[a]), AREAS.index(
                a
            ) if a in AREAS else 99

        lines = [head]
        for area in sorted(areas, key=worst):
            lines += [
                "",
                f"### {area}",
                "",
                "| severity | rule | change | where | baseline | candidate | why it matters |",
                "|---|---|---|---|---|---|---|",
            ]
            for d in sorted(areas[area], key=lambda d: SEVERITY_RANK[d.severity]):
                lines.append(
                    f"| {d.severity} | {d.rule or '—'} | {d.change} | {_cell(d.path, 90)} | {_cell(d.baseline)} "
                    f"| {_cell(d.candidate)} | {_cell(d.message, 240)} |"
                )
        return scrub_secrets("\n".join(lines))
