"""`desched canary --snapshot SNAP`: the upgrade canary on the user's own cluster state.

The runbook's lab experiments are not the user's cluster. This restores the same snapshot (a
`desched snapshot` file, or a recorded window's starting state) once per track, each on a
cluster of its own, runs one round of each release with that track's values on it, and
compares every pod's fate by identity (canary/fates.py over the comparison core). The parts
are the lab canary's and the replay's, not copies: the tracks are canary/tracks.run_tracks
(serial or parallel, interrupts, teardown) with the replay (replay/run.Replay.run_on: policy,
restore, round, ledger) as each track's work; the changes, triggers, `--expect` explanations
and verdict are canary/compare, verdict and expectations'; the report is CanaryReport with a
per-pod section (canary.md, canary.json, canary.html).

Each track's policy: the track's values' `deschedulerPolicy` as its own chart renders it (or
`--policy`), else the snapshot's own ConfigMap. Everything is checked before any cluster:
the explanations, both releases, the snapshot (schema, restorability, this machine's memory
for the clusters at once), each track's values and policy with that release's own checker.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.canary.compare import diff_rounds, no_cycle
from pytest_desched.canary.engine import check_releases, compare_tracks, track_configs
from pytest_desched.canary.expectations import load_explanations
from pytest_desched.canary.fates import (
    SnapshotFates,
    TrackRound,
    attach_verdict,
    compare_fates,
    round_record,
    track_round,
)
from pytest_desched.canary.report import CanaryReport
from pytest_desched.canary.tracks import TrackResult, run_tracks
from pytest_desched.canary.verdict import changes_of, judge
from pytest_desched.capabilities import capabilities_of
from pytest_desched.descheduler.known_bugs import RoundFacts, signatures
from pytest_desched.descheduler.node_selector import node_facts
from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.lint import lint_or_refuse
from pytest_desched.descheduler.policy.lint_metrics import sources_read
from pytest_desched.errors import ConfigError
from pytest_desched.inputs_safe import read_text
from pytest_desched.log import tagged
from pytest_desched.outcome.identity import NOT_COMPARABLE
from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.capture.timeline import KIND as TIMELINE_KIND
from pytest_desched.replay.capture.timeline import Timeline
from pytest_desched.replay.inputs import ReplayInputs, check_inputs, check_usage
from pytest_desched.replay.rebuild.capacity import check_capacity
from pytest_desched.replay.rebuild.plan import plan_restore, runner_values
from pytest_desched.replay.run import Replay, ReplayOptions, usage_sources

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.session import DeschedSession

_say = tagged("desched canary")
NO_STATIC = (
    "charts, rendered manifests and policies: a snapshot canary runs no static comparison "
    "(`desched canary --static-only` does)"
)


def load_start(path: str | Path) -> tuple[Snapshot, str]:
    """The snapshot to restore: a `desched snapshot` file, or a `desched record` window's
    starting state; and how reports name it."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"--snapshot {p}: no such file; take one with `desched snapshot` (or give a "
            "`desched record` window)"
        )
    first = read_text(p, kind="bulk", what="snapshot").split("\n", 1)[0]
    try:
        head = json.loads(first) if first.lstrip().startswith("{") else None
    except ValueError:
        head = None
    if isinstance(head, dict) and head.get("kind") == TIMELINE_KIND:
        return Timeline.load(p).snapshot, f"{p} (the recorded window's start)"
    return Snapshot.load(p), str(p)


def track_policy(session: DeschedSession, snap: Snapshot, source: str) -> Policy:
    """The policy this track runs: its values' (or --policy), else the snapshot's, checked
    by this track's own release (its policy checker) before any cluster."""
    user = session.inputs.policy  # values rendered by the track's chart, linted by its checker
    if user is not None:
        return user
    if not snap.policy:
        raise ConfigError(
            f"{source} holds no descheduler policy (no descheduler found when it was taken); "
            "give --policy FILE, or --values with deschedulerPolicy"
        )
    pol = Policy.from_yaml(snap.policy, source=f"{source}:policy (the snapshot's ConfigMap)")
    tc = session.toolchain
    lint_or_refuse(pol.to_dict(), pol.source, tc.wanted_version("policycheck"), tc)
    return pol


def _session(cfg: DeschedConfig, name: str, report: Callable[[str], None]) -> DeschedSession:
    # heavy: the kubernetes client, kept out of `desched canary`'s input checks
    from pytest_desched.session import DeschedSession

    return DeschedSession(cfg, report=lambda m: report(f"[{name}] {m}"), placement=runner_values())


class TrackReplay(Replay):
    """One track's replay: the round's nodes and the round itself kept in `box` for the
    comparison (its known-bug facts)."""

    def __init__(self, box: dict[str, Any], inp: ReplayInputs, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.box, self.inp = box, inp

    def before_round(self, i: int, cluster: Any) -> dict[str, Any]:
        self.box["nodes"] = node_facts(cluster.core.list_node().items, self.inp.policy.to_dict())
        return {}

    def after_round(self, i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        self.box["round"] = rnd
        return {}


def run_snapshot_canary(
    config: DeschedConfig,
    candidate: str,
    snapshot: str | Path,
    candidate_chart: str | None = None,
    expect: str | Path | None = None,
    report: Callable[[str], None] = _say,
    parallel: bool = True,
    baseline: str | None = None,
    baseline_chart: str | None = None,
    round_timeout: float = 300,
    restore_timeout: float = 300,
) -> CanaryReport:
    """Both tracks on the snapshot, the per-pod comparison, the verdict; the report is written
    under config.artifacts (canary.md, canary.json, canary.html)."""
    t0 = time.monotonic()
    explanations = load_explanations(expect)
    baseline = baseline or config.baseline
    baseline_chart = baseline_chart or config.baseline_chart
    check_releases(candidate, candidate_chart, baseline, baseline_chart)
    snap, source = load_start(snapshot)
    caps = capabilities_of(config.provider)  # None: auto, which a replay resolves to embedded
    if caps is not None and not caps.restores_etcd:
        raise ConfigError(
            f"desched canary --snapshot restores the snapshot onto fresh embedded clusters; "
            f"provider {config.provider!r} is not one (use --provider embedded)"
        )
    check_capacity(snap, source, copies=2 if parallel else 1)
    plan_restore(snap)  # a snapshot the restore would refuse is refused before any build
    b_cfg, c_cfg = track_configs(
        config.with_(provider="embedded"),
        candidate,
        candidate_chart,
        True,
        baseline,
        baseline_chart,
    )
    sessions = {"baseline": _session(b_cfg, "baseline", report)}
    sessions["candidate"] = _session(c_cfg, "candidate", report)
    try:  # every track's input, before any cluster: its values, its policy, by its release
        policies = {name: track_policy(s, snap, source) for name, s in sessions.items()}
        base = check_inputs(
            snap, None, policies["baseline"], 1, None, source=source, policy_checked=True
        )
        inputs = {}
        for name, p in policies.items():  # each track's policy and the usage it reads
            srcs = tuple(sources_read(p.to_dict()))
            check_usage(snap, Path(source), srcs, None)  # refused without usage, one line
            inputs[name] = dataclasses.replace(base, policy=p, metrics_sources=srcs)
        if any(i.serves_usage for i in inputs.values()):  # both tracks alike: same usage
            for name, sess in sessions.items():
                sess.need_metrics(usage_sources(inputs[name]), f"snapshot canary {name}")
    except BaseException:
        for s in sessions.values():
            s.close()
        raise
    seen: dict[str, dict[str, Any]] = {"baseline": {}, "candidate": {}}
    options = ReplayOptions(round_timeout=round_timeout, restore_timeout=restore_timeout)

    def work(name: str, session: DeschedSession, out: TrackResult) -> None:
        track = TrackReplay(seen[name], inputs[name], snap, options, report=session.report)
        seen[name]["result"] = track.run_on(session, inputs[name])

    mode = "parallel" if parallel else "serial"
    report(f"restoring {source} once per track and running one round on each ({mode})")
    b, c = run_tracks(sessions["baseline"], sessions["candidate"], (), parallel, work=work)
    rep = judge_snapshot(b, c, seen, inputs, sessions, explanations, source, snap)
    rep.wall_s = time.monotonic() - t0
    paths = rep.write(config.artifacts)
    report(f"snapshot canary {rep.headline}; report: {paths['markdown']}")
    return rep


def _track_round(
    t: TrackResult, box: dict[str, Any], inp: Any, session: Any
) -> tuple[TrackRound, dict[str, Any]]:
    """One track's round: its ledger as compared, and the round's own facts for its record."""
    result, rnd = box["result"], box.get("round")
    extra: dict[str, Any] = {"known_bugs": {}}
    if rnd is not None:
        extra["job"] = {"succeeded": rnd.succeeded, "exit_code": rnd.exit_code}
        facts = RoundFacts(
            "snapshot",
            result.descheduler,
            frozenset(),
            decisions=tuple(rnd.result.decisions),
            log=rnd.logs,
            **box.get("nodes", {}),
        )
        extra["known_bugs"] = signatures(facts)
    fig = result.ledger.rounds[0] if result.ledger.rounds else None
    verdict = f"skipped:{fig.skipped}" if fig is not None and fig.skipped else ""
    gap = no_cycle({"verdict": verdict, **extra}) if fig is not None else "no round ran"
    values = [p.name for p in session.inputs.values_paths]
    tr = track_round(t.name, result.ledger, result.descheduler, gap, values, inp.policy.source)
    return tr, extra


def judge_snapshot(
    b: TrackResult,
    c: TrackResult,
    seen: dict[str, dict[str, Any]],
    inputs: dict[str, Any],
    sessions: dict[str, Any],
    explanations: list[Any],
    source: str,
    snap: Snapshot,
) -> CanaryReport:
    """The per-pod comparison, the lab canary's round diff over it, and the verdict."""
    label = f"snapshot[{Path(source.split(' (')[0]).name}]"
    head = {"path": source, "takenAt": snap.header.get("takenAt"), "nodes": len(snap.nodes)}
    head |= {"pods": len(snap.pods), "descheduler": snap.descheduler_version}
    rounds = []
    fates: SnapshotFates | None = None
    if "result" in seen["baseline"] and "result" in seen["candidate"]:
        tb, xb = _track_round(b, seen["baseline"], inputs["baseline"], sessions["baseline"])
        tc, xc = _track_round(c, seen["candidate"], inputs["candidate"], sessions["candidate"])
        fates, compared = compare_fates(tb, tc, head)
        rb, rc = round_record(tb, compared) | xb, round_record(tc, compared) | xc
        rounds = diff_rounds(label, [rb], [rc], {}, {})
        for rd in rounds:  # the table lists the classes that changed (a cluster has thousands)
            changed = {cd.pods for cd in rd.classes}
            rd.words = [w for w in rd.words if w["pods"] in changed]
    _, _, run_changes = compare_tracks(b, c)  # track errors, served metric families
    verdict = judge([*changes_of(rounds), *run_changes], explanations)
    rep = CanaryReport(b, c, rounds, verdict)
    rep.snapshot, rep.not_compared = fates, [NO_STATIC]
    if fates is not None:
        attach_verdict(fates, rounds, verdict.judged, explanations)
        rep.no_verdict, rep.regressions = _no_verdict(fates, label)
    return rep


def _no_verdict(fates: SnapshotFates, label: str) -> tuple[list[str], list[str]]:
    """No verdict when the baseline's round is no reference or nothing was compared; a
    candidate round that completed no cycle where the baseline's did is a regression."""
    gaps = {n.what: n.why for n in fates.not_compared if n.what.endswith(" round)")}
    base, cand = gaps.get("(baseline round)"), gaps.get("(candidate round)")
    if base:
        return [f"{label}: {NOT_COMPARABLE}, the baseline is no reference ({base})"], []
    if cand:
        return [], [
            f"{label}: the candidate completed no descheduling cycle ({cand}); the baseline's did"
        ]
    if not fates.coverage.comparable:
        return [f"{label}: {NOT_COMPARABLE}: {fates.coverage.line()}"], []
    return [], []


def from_args(args: Any, config: DeschedConfig, candidate: str, report: Any) -> CanaryReport:
    """`desched canary --snapshot SNAP ...` from its parsed command line."""
    lab_only = [
        f
        for f, on in (("--experiment", args.experiment), ("--static-only", args.static_only))
        if on
    ]
    if lab_only:
        raise ConfigError(
            f"desched canary --snapshot runs one round of each release on the snapshot; "
            f"{' and '.join(lab_only)} belong to the lab form: drop them (or drop --snapshot)"
        )
    return run_snapshot_canary(
        config,
        candidate,
        args.snapshot,
        getattr(config, "candidate_chart", None),
        expect=args.expect,
        report=report,
        parallel=not args.serial,
    )
