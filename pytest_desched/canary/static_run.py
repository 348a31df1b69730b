"""The static half of a canary, wired to the two tracks' toolchains: no cluster involved.

Each track's session knows its descheduler (pinned, or the candidate's build), its policy
checker built from the same source, and its chart. The policies compared are the ones the
tracks will run (each experiment variant's), linted and defaulted by each version's own
code; metric names come later, from what each binary served during its rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_desched.canary.expectations import Explanation, glob
from pytest_desched.canary.static import (
    StaticComparison,
    chart_label,
    compare_charts,
    compare_defaults,
    compare_lint,
    compare_metric_names,
)
from pytest_desched.canary.static.difference import Difference, make_difference
from pytest_desched.canary.static.metric_code import compare_declared_metrics, declared_metrics
from pytest_desched.descheduler.chart_source import obtain_chart
from pytest_desched.descheduler.policy.checker import checker_for, facts_for
from pytest_desched.descheduler.policy.lint import lint_policy_doc
from pytest_desched.descheduler.policy.release_fields import (
    CONFIG_PREFIX,
    ReleaseReading,
    is_release_reading,
    missing_key,
    read_for_release,
)
from pytest_desched.errors import ConfigError, PolicyError
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


TRANSLATION = "policy-translation"  # a static difference's area: one track's policy reading


def accept_missing(
    session: DeschedSession, track: str, explanations: Sequence[Explanation]
) -> None:
    """The protections the user's explanation file accepts that `track`'s release runs without:
    an entry of kind `static` whose path matches `policy-translation:<track>:protections[X]`."""
    facts = facts_for()
    names = [*facts.default_pod_protections, *facts.extra_pod_protections]
    names += [CONFIG_PREFIX + p for p in facts.extra_pod_protections]
    accepted: dict[str, str] = {}
    for name in names:
        subject = f"{TRANSLATION}:{track}:{missing_key(name)}"
        for e in explanations:
            if e.kind == "static" and e.path and glob(subject, e.path):
                accepted[missing_key(name)] = e.reason
                break
    session.accepted_missing = accepted


def track_policies(
    session: DeschedSession, variants: Sequence[str], track: str = "canary track"
) -> dict[str, ReleaseReading]:
    """Each variant's policy as the track's release reads it, checked by that release's own
    policy checker before any cluster: what it cannot express is one line and exit 2, naming
    the track as the command does (`canary baseline`, `matrix release v0.33.0`)."""
    # heavy: the kubernetes client, kept out of this module's import
    from pytest_desched.experiments import lab_policy

    # the pin's checker is the one lab_policy validated with; a named release builds its own
    tc = session.toolchain if session.candidate is not None else None
    version = tc.wanted_version("policycheck") if tc is not None else None
    out: dict[str, ReleaseReading] = {}
    for variant in dict.fromkeys(variants):
        pol = lab_policy(variant, base=session.inputs.policy)
        try:
            out[variant] = read_for_release(pol, version, tc, accepted=session.accepted_missing)
        except PolicyError as exc:
            said = "; ".join(exc.problems)
            raise ConfigError(f"{track} policy [{variant}] ({pol.source}): {said}") from None
    return out


def translation_differences(track: str, readings: dict[str, ReleaseReading]) -> list[Difference]:
    """The reading of each policy in its release's fields, as static rows: every translated
    field (info, with its why) and every protection the release runs without (rollback: the
    user's explanation, which accepted it, explains it too)."""
    out: list[Difference] = []
    for variant, r in readings.items():
        for o in r.policy.overrides:
            if is_release_reading(o):
                at = f"{track}:{variant}:{o['path']}"
                out.append(
                    make_difference(
                        "DP009", TRANSLATION, at, "changed", o["old"], o["new"], o["why"]
                    )
                )
        for key in r.lost:
            msg = f"descheduler {r.version} has no field for {key}: the {track} runs without it"
            out.append(
                make_difference(
                    "DP010", TRANSLATION, f"{track}:{key}", "removed", "active", None, msg
                )
            )
    return out


def compare_statically(
    baseline: DeschedSession,
    candidate: DeschedSession,
    variants: Sequence[str],
    report: Callable[[str], None],
    readings: tuple[dict[str, ReleaseReading], dict[str, ReleaseReading]] | None = None,
) -> StaticComparison:
    """Charts, rendered manifests and each variant's policy under both releases (`readings`:
    the policies in each release's fields, from :func:`track_policies`)."""
    if readings is None:
        readings = (
            track_policies(baseline, variants, "canary baseline"),
            track_policies(candidate, variants, "canary candidate"),
        )
    b_read, c_read = readings
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
        releases=((b_chart.version, b_ver), (c_chart.version, c_ver)),
        policies=[r.policy.to_dict() for r in (*b_read.values(), *c_read.values())],
    )
    b_chk, c_chk = checker_for(b_ver, b_tc), checker_for(c_ver, c_tc)
    b_facts, c_facts = b_chk.facts(), c_chk.facts()
    # the user's --policy / --values policy (each track's own), else the runbook's, each in
    # the fields of the release that reads it
    diffs += translation_differences("baseline", b_read)
    diffs += translation_differences("candidate", c_read)
    for variant in dict.fromkeys(variants):
        b_doc = b_read[variant].policy.to_dict()
        c_doc = c_read[variant].policy.to_dict()
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


__all__ = [
    "accept_missing",
    "add_metric_names",
    "compare_statically",
    "track_chart",
    "track_policies",
    "translation_differences",
]
