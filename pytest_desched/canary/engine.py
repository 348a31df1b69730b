"""`run_canary`: a candidate descheduler and chart against the baseline, judged by the runbook.

Order: every input is checked (candidate spec, explanation file, experiment names) before
anything is built or started; then the static comparison (charts, policy under both
versions: no cluster); then both tracks in parallel on clusters of their own; then the
per-round diff and the verdict. The CLI (`desched canary`) and the pytest fixture
(`desched_canary`) are thin front ends over this function.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_desched.canary.compare import diff_rounds, no_cycle, node_roles
from pytest_desched.canary.control_plane import (
    attribute,
    attribute_outcome,
    differences,
    kubernetes_differ,
)
from pytest_desched.canary.expectations import NO_ROUND, Change, load_explanations
from pytest_desched.canary.report import CanaryReport
from pytest_desched.canary.static_run import (
    accept_missing,
    add_metric_names,
    compare_statically,
    track_chart,
    track_policies,
)
from pytest_desched.canary.tracks import (
    TrackResult,
    describe_release,
    first_cause,
    parse_experiments,
    run_tracks,
)
from pytest_desched.canary.verdict import ChangeKey, changes_of, judge
from pytest_desched.capabilities import capabilities_of
from pytest_desched.config import DeschedConfig
from pytest_desched.errors import ConfigError, PolicyError
from pytest_desched.experiments import lab_policy
from pytest_desched.log import tagged
from pytest_desched.outcome.identity import NOT_COMPARABLE
from pytest_desched.session import DeschedSession
from pytest_desched.tools.release import check_release, parse_release_cached

STATIC_ONLY_GAP = (
    "behaviour: a static-only canary starts no cluster, so no round, pod fate, eviction, "
    "refusal code, event, experiment outcome or served metric was compared"
)
NO_STATIC_GAP = "charts, rendered manifests and policies: the static comparison was skipped"


_say = tagged("desched canary")


def track_configs(
    config: DeschedConfig,
    candidate: str,
    candidate_chart: str | None,
    behaviour: bool = True,
    baseline: str | None = None,
    baseline_chart: str | None = None,
) -> tuple[DeschedConfig, DeschedConfig]:
    """The same settings twice, each track with its own release, values, run and evidence
    folders.

    Both tracks are a release named the same way (tools.release): the track's config names
    it as `candidate`/`candidate_chart` (None: the pin), so each session builds its own
    binary and policy checker and installs its own chart. `values` go to both tracks, then
    the track's own (`baseline_values` / `candidate_values`), in Helm's order.

    A static-only canary (`behaviour=False`) starts no cluster, so the provider's rules do not
    apply to it: its tracks are configured as embedded ones (a `source:` candidate is fine
    under `--desched-provider kind`, and nothing touches an existing cluster).
    """
    if not behaviour:
        config = config.with_(provider="embedded")
    caps = capabilities_of(config.provider)
    if caps is not None and caps.shared:
        # Two versions must never evict from the same pod set: the engine refuses it here
        # rather than relying on the user to pass --dry-run to one of them.
        raise ConfigError(
            "desched canary runs each track on a cluster of its own; on an existing cluster "
            "the two versions would share the pod set. Use --provider embedded (or kind)"
        )
    return (
        track_config(config, "baseline", baseline, baseline_chart, config.baseline_values),
        track_config(config, "candidate", candidate, candidate_chart, config.candidate_values),
    )


def track_config(
    config: DeschedConfig,
    name: str,
    spec: str | None,
    chart: str | None,
    own_values: Sequence[Path] = (),
) -> DeschedConfig:
    """One track: its release (None or `pinned`: the pin) and chart, its run and evidence
    folders named `name`, the shared values then its own (Helm's order). A canary makes two,
    a release matrix one per release."""
    run_dir = config.run_dir / name
    run_dir.mkdir(parents=True, exist_ok=True)
    changes: dict[str, Any] = {
        "run_dir": run_dir,
        "artifacts": config.artifacts / name,
        "candidate": None if spec in (None, "pinned") else spec,
        "candidate_chart": chart,
        "values": (*config.values, *own_values),
        "baseline": None,
        "baseline_chart": None,
        "baseline_values": (),
        "candidate_values": (),
        # the track's own Kubernetes (a cluster upgrade), else the run's
        "kubernetes": getattr(config, f"{name}_kubernetes", None) or config.kubernetes,
        "baseline_kubernetes": None,
        "candidate_kubernetes": None,
    }
    return config.with_(**changes)


def check_releases(
    candidate: str, candidate_chart: str | None, baseline: str | None, baseline_chart: str | None
) -> None:
    """Both releases read and checked (spec, chart, a version the Go proxy serves) before
    anything is built or started: bad input is one line and exit 2."""
    for role, spec, chart in (
        ("baseline", baseline, baseline_chart),
        ("candidate", candidate, candidate_chart),
    ):
        check_release(parse_release_cached(spec, chart, role), role)


# An outcome's rank: moving right is worse. Any move to the right is an outcome change
# (pass -> xfail means the candidate now needs a known bug's excuse where the baseline did
# not; xfail -> fail means the excuse no longer holds).
OUTCOME_RANK = {"pass": 0, "xfail": 1, "fail": 2, "error": 3, "not run": 3}


def outcome_changes(
    baseline: TrackResult, candidate: TrackResult
) -> tuple[list[dict[str, Any]], list[tuple[Change, str | None]]]:
    """Per experiment: both outcomes; any outcome that got worse on the candidate is a change."""
    rows: list[dict[str, Any]] = []
    changes: list[tuple[Change, str | None]] = []
    b_by, c_by = baseline.by_label(), candidate.by_label()
    for label in list(dict.fromkeys([*b_by, *c_by])):
        b, c = b_by.get(label), c_by.get(label)
        bo = b.outcome if b else "not run"
        co = c.outcome if c else "not run"
        note = ""
        if b and c and bo == "xfail" and co == "pass":
            bug = b.classification.get("bug")
            note = f"the candidate fixes {bug}: the baseline's expected failure passes"
        rows.append({"experiment": label, "baseline": bo, "candidate": co, "note": note})
        if OUTCOME_RANK.get(co, 3) > OUTCOME_RANK.get(bo, 3):
            why = (c.message if c else "") or candidate.error or "not run"
            changes.append(
                (Change(label, NO_ROUND, "outcome-changed", label, f"{bo} -> {co}: {why}"), None)
            )
    return rows, changes


def _rounds(t: TrackResult, label: str) -> tuple[int, str]:
    r = t.by_label().get(label)
    if r is None:
        return 0, "not run"
    return len(r.records), (r.outcome + (f": {r.message}" if r.message else ""))


def _brief(t: TrackResult, label: str) -> str:
    """A track's outcome in a few words: its failed checks' ids, or the bug that excused them.

    Never its whole message: a reason that quoted the candidate's message in full ended in
    the candidate's known-bug evidence, and a cut reason (pytest shows a list's head and
    tail) then read as the baseline's (CI: the v0.33.0 baseline "showed" #1882's signature,
    which was the v0.36.0 candidate's). The candidate's message stays in its own results.
    """
    r = t.by_label().get(label)
    if r is None:
        return "not run"
    if r.outcome == "xfail":
        return f"xfail ({r.classification.get('bug') or 'a known bug'})"
    if r.outcome == "fail":
        ids = [c.id for c in r.failed]
        return f"fail [{', '.join(ids)}]" if ids else "fail"
    if r.outcome == "error":
        lines = (r.message or r.error or "").strip().splitlines()
        return f"error: {lines[0]}" if lines else "error"
    return r.outcome


def _gaps(t: TrackResult, label: str) -> dict[int, str]:
    """Round index -> why, for each round of the experiment that completed no cycle."""
    r = t.by_label().get(label)
    records = r.records if r is not None else []
    return {i: why for i, rec in enumerate(records) if (why := no_cycle(rec))}


def no_verdict_reasons(b: TrackResult, c: TrackResult) -> list[str]:
    """Why the behaviour comparison cannot give a verdict: the baseline is no reference.

    A pass needs something compared: an experiment whose baseline ran no round, failed or
    errored (it did not do what the experiment expects), or has a round that completed no
    descheduling cycle (skipped, Job failed, exit code not measured) leaves nothing to judge
    the candidate against, whatever the candidate did: fail -> fail is never "no change".
    No experiment at all is the same. Each reason names what happened on both tracks.
    """
    labels = list(dict.fromkeys([*b.by_label(), *c.by_label()]))
    if not labels:
        return ["no experiment ran on either track: nothing was compared"]
    out = []
    for label in labels:
        (nb, bwhy), (nc, cwhy) = _rounds(b, label), _rounds(c, label)
        if nb == 0:
            out.append(
                f"{label}: zero compared rounds (baseline ran none: {bwhy}; candidate ran {nc}"
                + (f": {cwhy})" if nc == 0 else ")")
            )
            continue
        base = b.by_label()[label]
        gaps = _gaps(b, label)
        if base.outcome not in ("fail", "error") and not gaps:
            continue
        said = (
            [f"the baseline's experiment ended {bwhy}"] if base.outcome in ("fail", "error") else []
        )
        said += [f"the baseline's round {i}: {why}" for i, why in gaps.items()]
        cand_gaps = [f"round {i}: {why}" for i, why in _gaps(c, label).items()]
        brief = _brief(c, label)
        cand = "; ".join([brief, *cand_gaps]) if nc else f"ran no round: {brief}"
        out.append(
            f"{label}: {NOT_COMPARABLE}, the baseline is no reference ({'; '.join(said)}); "
            f"candidate: {cand}"
        )
    return out


def candidate_ran_nothing(b: TrackResult, c: TrackResult) -> list[str]:
    """Experiments the baseline ran rounds of and the candidate ran none, or rounds whose
    descheduling cycle the baseline completed and the candidate did not (skipped, Job failed):
    a regression, never explained away (e.g. a candidate that exits 1 at start-up), with the
    candidate's words."""
    out = []
    for label in b.by_label():
        (nb, _), (nc, cwhy) = _rounds(b, label), _rounds(c, label)
        if nb > 0 and nc == 0 and not c.error:
            out.append(f"{label}: the candidate ran no round (the baseline ran {nb}): {cwhy}")
            continue
        base_gaps = _gaps(b, label)
        for i, why in _gaps(c, label).items():
            if i < nb and i not in base_gaps and not c.error:
                out.append(
                    f"{label} round {i}: the candidate completed no descheduling cycle ({why}); "
                    "the baseline's did"
                )
    return out


def static_changes(static: Any) -> list[tuple[Change, str | None]]:
    """Static differences of rollback severity need an explanation like behaviour changes."""
    if static is None:
        return []
    return [
        (Change("static", NO_ROUND, "static", f"{d.area}:{d.path}", d.message), None)
        for d in static.differences
        if d.severity == "rollback" and d.area != "metrics"  # judged from the tracks
    ]


def metric_changes(b: TrackResult, c: TrackResult) -> list[tuple[Change, str | None]]:
    """A family the baseline's binary served and the candidate's does not: a trigger.

    A track whose probe did not complete proves nothing about its metrics: on either track
    that is a finding of its own (`metrics-unproven`, subject the track), never a silent
    pass. Without the baseline's set there is no reference, so nothing can be "lost" either;
    the user explains it (e.g. a provider that cannot run the binary) or the canary fails.
    """
    if b.error or c.error:
        return []  # the track's own error is the reason; no second one for the same cause
    unproven: list[tuple[Change, str | None]] = [
        (
            Change(
                "metrics",
                NO_ROUND,
                "metrics-unproven",
                t.name,
                t.metrics_why or f"the {t.name}'s metric probe did not complete",
            ),
            None,
        )
        for t in (b, c)
        if t.metric_names is None
    ]
    if unproven or not b.metric_names:
        return unproven
    assert c.metric_names is not None
    return [
        (
            Change(
                "metrics", NO_ROUND, "lost-metric", name, "served by the baseline's binary only"
            ),
            None,
        )
        for name in sorted(set(b.metric_names) - set(c.metric_names))
    ]


def control_plane_attribution(
    b: TrackResult, c: TrackResult, rounds: Sequence[Any]
) -> tuple[list[Any], list[str], dict[ChangeKey, str]]:
    """Where the tracks' clusters run different Kubernetes: their readings that differ, what
    could not be read, and each pod-class change those readings explain (canary.control_plane).

    Same Kubernetes on both tracks (or readings missing): nothing is attributed. Where they
    differ, a track without readings is a gap said by name (TrackResult.readings_gap).
    """
    bk, ck = b.control_plane.get("kubernetes"), c.control_plane.get("kubernetes")
    chosen = [t.skew.get("kubernetes") for t in (b, c)]
    if kubernetes_differ(chosen) or kubernetes_differ([bk, ck]):
        gaps = [g for t in (b, c) if (g := t.readings_gap())]
    else:
        gaps = [f"{t.name}: {t.control_plane['why']}" for t in (b, c) if t.control_plane.get("why")]
    if not (bk and ck) or bk == ck:
        return [], gaps, {}
    diffs = differences(b.control_plane, c.control_plane)
    out: dict[ChangeKey, str] = {}
    for rd in rounds:
        for cd in rd.classes:
            if why := attribute(cd, diffs, (bk, ck)):
                for kind in cd.kinds:
                    out[(rd.experiment, rd.index, kind, cd.pods)] = why
    for label, r in c.by_label().items():  # an outcome the candidate's placement made worse
        if r.outcome == "fail" and (
            why := attribute_outcome([x.id for x in r.failed], diffs, (bk, ck))
        ):
            out[(label, NO_ROUND, "outcome-changed", label)] = why
    return diffs, gaps, out


def compare_tracks(
    b: TrackResult, c: TrackResult, comparison: Any = None, behaviour: bool = True
) -> tuple[list[Any], list[dict[str, Any]], list[tuple[Change, str | None]]]:
    """Round diffs, per-experiment outcome rows and every change to judge, from two tracks.

    `behaviour=False` (static-only): no binary ran, so served metrics are not judged; the
    report lists them among what was not compared (STATIC_ONLY_GAP) instead.
    """
    rounds = []
    b_by, c_by = b.by_label(), c.by_label()
    for label in list(dict.fromkeys([*b_by, *c_by])):
        br, cr = b_by.get(label), c_by.get(label)
        rounds += diff_rounds(
            label,
            br.records if br else [],
            cr.records if cr else [],
            node_roles(b.workers),
            node_roles(c.workers),
        )
    rows, outcome_ch = outcome_changes(b, c)
    changes = [
        *changes_of(rounds),
        *outcome_ch,
        *static_changes(comparison),
        *(metric_changes(b, c) if behaviour else []),
    ]
    for track in (b, c):  # a track that broke is one reason, not one per round it missed
        if track.error:
            missing = f"no round on {track.name}"
            changes = [
                (ch, by)
                for ch, by in changes
                if not (ch.kind == "round-missing" and ch.detail == missing)
                and not (ch.kind == "outcome-changed" and track.name == "candidate")
            ]
            cause = first_cause(track)
            changes.insert(
                0, (Change(track.name, NO_ROUND, "track-error", track.name, cause), None)
            )
    return rounds, rows, changes


def static_only_tracks(base: Any, cand: Any) -> tuple[TrackResult, TrackResult]:
    """Track headers for a static-only canary: versions and charts, no cluster, no rounds."""
    out = []
    for name, s in (("baseline", base), ("candidate", cand)):
        t = TrackResult(name, descheduler_version=s.toolchain.wanted_version("descheduler"))
        t.chart = track_chart(s).evidence()
        t.metrics_why = "static-only canary: no binary was run"
        describe_release(s, t)
        out.append(t)
    return out[0], out[1]


def run_canary(
    config: DeschedConfig,
    candidate: str,
    candidate_chart: str | None = None,
    expect: str | Path | Sequence[Mapping[str, Any]] | None = None,
    experiments: Sequence[str] | None = None,
    report: Callable[[str], None] = _say,
    parallel: bool = True,
    static: bool = True,
    candidate_overrides: Mapping[str, Any] | None = None,
    behaviour: bool = True,
    baseline: str | None = None,
    baseline_chart: str | None = None,
) -> CanaryReport:
    """Run the canary end to end and return its report (written under config.artifacts).

    `behaviour=False` is the static-only canary (charts and policies, no cluster): what CI
    can check before anything runs; its verdict judges the static differences alone.
    `baseline`/`baseline_chart` (default: the config's, else the pin) name the release the
    upgrade starts from, in any form the candidate takes.
    """
    t0 = time.monotonic()
    if not (static or behaviour):
        raise ConfigError(
            "a canary with neither the static nor the behaviour comparison: drop one flag"
        )
    explanations = load_explanations(expect)
    baseline = baseline or config.baseline
    baseline_chart = baseline_chart or config.baseline_chart
    check_releases(candidate, candidate_chart, baseline, baseline_chart)  # before anything runs
    exps = parse_experiments(experiments)
    if candidate_overrides:  # a bad path or value is refused now, not on the candidate's cluster
        for _, variant in exps:
            pol = lab_policy(variant)
            try:
                for path, value in candidate_overrides.items():
                    pol = pol.override(path, value, why="canary candidate override")
                pol.validate()
            except (PolicyError, KeyError, ValueError) as exc:
                raise ConfigError(f"canary candidate_overrides: {exc}") from None
    base_cfg, cand_cfg = track_configs(
        config, candidate, candidate_chart, behaviour, baseline, baseline_chart
    )

    def session(name: str, cfg: DeschedConfig) -> DeschedSession:
        return DeschedSession(cfg, report=lambda m: report(f"[{name}] {m}"))

    base_s, cand_s = session("baseline", base_cfg), session("candidate", cand_cfg)
    comparison = None
    variants = [v for _, v in exps]
    try:
        # each track's policies in its own release's fields, checked by that release's own
        # policy checker: what one cannot express is refused here, before any cluster
        for name, s in (("baseline", base_s), ("candidate", cand_s)):
            accept_missing(s, name, explanations)
        readings = (
            track_policies(base_s, variants, "canary baseline"),
            track_policies(cand_s, variants, "canary candidate"),
        )
        if static:
            report("static comparison: charts, rendered manifests, policy under both versions")
            comparison = compare_statically(base_s, cand_s, variants, report, readings)
    except BaseException:
        base_s.close()
        cand_s.close()
        raise
    if not behaviour:
        b, c = static_only_tracks(base_s, cand_s)
        rounds, rows, changes = compare_tracks(b, c, comparison, behaviour=False)
        rep = CanaryReport(b, c, rounds, judge(changes, explanations), comparison, rows)
        rep.not_compared = [STATIC_ONLY_GAP]
        rep.wall_s = time.monotonic() - t0
        paths = rep.write(config.artifacts)
        report(f"static canary {rep.headline}; report: {paths['markdown']}")
        return rep
    mode = "parallel" if parallel else "serial"
    report(f"running {len(exps)} experiment(s) on both tracks ({mode})")
    # Each track on its own Kubernetes (a cluster upgrade canaried): read both control planes.
    kubes = {cfg.kube_choice().version for cfg in (base_cfg, cand_cfg)}
    b, c = run_tracks(
        base_s, cand_s, exps, parallel, candidate_overrides, control_plane=len(kubes) > 1
    )
    if static:
        add_metric_names(comparison, b, c)
    rounds, rows, changes = compare_tracks(b, c, comparison)
    diffs, gaps, attributed = control_plane_attribution(b, c, rounds)
    verdict = judge(changes, explanations, attributed)
    rep = CanaryReport(b, c, rounds, verdict, comparison, rows, time.monotonic() - t0)
    rep.control_plane, rep.control_plane_gaps = diffs, gaps
    rep.no_verdict = no_verdict_reasons(b, c)
    rep.regressions = candidate_ran_nothing(b, c)
    if not static:
        rep.not_compared = [NO_STATIC_GAP]
    paths = rep.write(config.artifacts)
    report(f"canary {rep.headline}; report: {paths['markdown']}")
    return rep
