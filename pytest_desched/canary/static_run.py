"""The static half of a canary, wired to the two tracks' toolchains: no cluster involved.

Each track's session knows its descheduler (pinned, or the candidate's build), its policy
checker built from the same source, and its chart. The policies compared are the ones the
tracks will run (each experiment variant's), linted and defaulted by each version's own
code; metric names come later, from what each binary served during its rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_desched.canary.static import (
    StaticComparison,
    chart_label,
    compare_charts,
    compare_defaults,
    compare_lint,
    compare_metric_names,
)
from pytest_desched.canary.static.metric_code import compare_declared_metrics, declared_metrics
from pytest_desched.descheduler.chart_source import obtain_chart
from pytest_desched.descheduler.policy.checker import checker_for
from pytest_desched.descheduler.policy.lint import lint_policy_doc
from pytest_desched.proc import helm_env
from pytest_desched.tools.release import release_tree

if TYPE_CHECKING:
    from pytest_desched.canary.tracks import TrackResult
    from pytest_desched.descheduler.chart_source import ChartRef
    from pytest_desched.session import DeschedSession


def track_chart(session: DeschedSession) -> ChartRef:
    """The chart the track's release will install (cached; the same call install makes)."""
    tc = session.toolchain
    return obtain_chart(
        tc,
        tc.versions,
        session.config.chart_source,
        report=session.report,
        candidate=session.candidate,
    )


def compare_statically(
    baseline: DeschedSession,
    candidate: DeschedSession,
    variants: Sequence[str],
    report: Callable[[str], None],
) -> StaticComparison:
    # heavy: kubernetes client (0.2-0.7 s), kept out of this module's import
    from pytest_desched.experiments import lab_policy

    b_chart, c_chart = track_chart(baseline), track_chart(candidate)
    b_tc, c_tc = baseline.toolchain, candidate.toolchain
    b_ver = b_tc.wanted_version("descheduler")
    c_ver = c_tc.wanted_version("descheduler")
    helm = b_tc.path("helm")
    env = helm_env(b_tc.cache_dir / "charts")
    report(
        f"static: chart {b_chart.version} ({b_chart.source}) vs {c_chart.version} ({c_chart.source})"
    )
    # each track's Helm values (--values, then its own) render its chart, coalesced by helm
    diffs = compare_charts(
        helm,
        b_chart.path,
        c_chart.path,
        env,
        values_files=baseline.config.values,
        candidate_values_files=candidate.config.values,
    )
    b_chk, c_chk = checker_for(b_ver, b_tc), checker_for(c_ver, c_tc)
    b_facts, c_facts = b_chk.facts(), c_chk.facts()
    # the user's --policy / --values policy (each track's own), else the runbook's
    b_user, c_user = baseline.inputs.policy, candidate.inputs.policy
    for variant in dict.fromkeys(variants):
        b_doc = lab_policy(variant, base=b_user).to_dict()
        c_doc = lab_policy(variant, base=c_user).to_dict()
        b_find, b_res = lint_policy_doc(b_doc, f"policy[{variant}]", b_chk)
        c_find, c_res = lint_policy_doc(c_doc, f"policy[{variant}]", c_chk)
        diffs += compare_lint(b_find, c_find)
        diffs += compare_defaults(
            b_res.effective,
            c_res.effective,
            baseline_protections=b_facts.default_pod_protections,
            candidate_protections=c_facts.default_pod_protections,
        )
    # the metric families each release's own code declares, deprecated ones marked
    b_decl = declared_metrics(release_tree(baseline.candidate))
    c_decl = declared_metrics(release_tree(candidate.candidate))
    if b_decl is not None and c_decl is not None:
        diffs += compare_declared_metrics(b_decl, c_decl)
    unique = list({(d.area, d.path, d.change, repr(d.candidate)): d for d in diffs}.values())
    return StaticComparison(
        chart_label(b_chart.path, b_ver, b_chart.source),
        chart_label(c_chart.path, c_ver, c_chart.source),
        unique,
    )


def add_metric_names(
    static: StaticComparison | None, baseline: TrackResult, candidate: TrackResult
) -> None:
    """Fold the metric families each binary served (metric_probe) into the comparison."""
    b, c = baseline.metric_names, candidate.metric_names
    if static is not None and b and c:
        said = {(d.path, d.change) for d in static.differences if d.area == "metrics"}
        static.differences += [
            d for d in compare_metric_names(b, c) if (d.path, d.change) not in said
        ]


__all__ = ["add_metric_names", "compare_statically", "track_chart"]
