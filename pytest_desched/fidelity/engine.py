"""Run one fidelity experiment: the same lab state once in dry run, once for real, compared.

Both halves run in one cluster at the same descheduler version and policy. Each round of the
real half (the experiment as `desched run` runs it) is preceded by its dry-run twin: a Job
from the same CronJob with dry run forced on (rounds.force_dry_run), on the same lab, whose
pods (UIDs, nodes) and PDB status must be unchanged when the real round starts. A dry run
evicts nothing, so the real round sees what the twin saw: one arrange, one release, one
policy. The real half carries one more check, `dry-run-fidelity`, made from
fidelity/compare.py and carried by both halves' round records.

When a twin's cycle fell short of the real one, the proof behind descheduler#1917 (the
mirror probe) needs a lab in the state the dry run saw, which the real round has changed:
the dry-run half then runs again as before, on a lab of its own built by the same arrange
step after the real half's (its node labels restored first), with its own release, and the
probe runs on that lab. Every input (both halves' policies, their scope) is checked before
the first change.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_desched.capabilities import MIRROR_BINARY
from pytest_desched.descheduler.known_bugs import signatures
from pytest_desched.errors import ConfigError
from pytest_desched.experiments.declared import drive, lookup
from pytest_desched.experiments.framework import Runner
from pytest_desched.experiments.results import Check
from pytest_desched.fidelity.compare import (
    VERDICT_OF,
    FidelityResult,
    Half,
    Mode,
    Outcome,
    PodFate,
    PodRef,
    compare,
    fates_of,
    identity_of,
    merge,
    verdict_summary,
)
from pytest_desched.fidelity.explain import BUG_1917, NOT_COMPARABLE, budgets_of, half_gap
from pytest_desched.fidelity.mirror_jobs import JOB_BUDGET, JOB_RUN_TIMEOUT, JOBS, job_runs
from pytest_desched.fidelity.mirror_probe import (
    LOCAL,
    NOT_PROBED,
    Expect,
    OneShot,
    binary_runs,
    probe,
)
from pytest_desched.outcome.fates import Fate
from pytest_desched.outcome.verdict import Verdict

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_desched.descheduler.chart import Release
    from pytest_desched.evidence.assemble import LabObservation
    from pytest_desched.experiments.framework import RoundView
    from pytest_desched.experiments.results import ExperimentResult
    from pytest_desched.lab.recorder import Recorder
    from pytest_desched.session import DeschedSession

DRY_SUFFIX = "+dry-run"  # the dry-run half's records are filed under `name[variant+dry-run]`
DRY_RELEASE_SUFFIX = "-dryrun"  # the re-run dry-run half's own release on a throwaway cluster
CHECK_ID = "dry-run-fidelity"
# The dry-run half's own checks that may fail without spoiling the comparison: a skipped
# cycle with #1917's signature proven is evidence, not a broken state (cycle_gaps refuses
# any other skip first).
DRY_TOLERATED = frozenset({"round-not-skipped"})
# One-shot runs of the mirror probe on a twin's lab whose cycle showed #1917 (or decided
# nothing): before the real round, so without its count; the run that named the most is
# taken, and a comparison it does not settle sends the dry-run half to a lab of its own.
TWIN_PROBE_RUNS = 2


class TwinRunner(Runner):
    """The real half: each of its rounds is preceded by the dry-run twin's (`twin`)."""

    twin: DryTwin | None = None

    def run_round(self, name: str) -> RoundView:
        if self.twin is not None:
            with self.timed("dry_twin"):
                self.twin.twin_round(name)
        return super().run_round(name)


class DryTwin(Runner):
    """The dry-run half on the real half's lab and release: its rounds' Jobs run in dry run
    (rounds.force_dry_run), so they run the real half's policy and binary, evictions off.

    What a round record observes of the lab is read right after the twin's round, before the
    real round changes it; the records are built once the comparison is known."""

    dry_run_rounds = True

    def __init__(self, real: Runner, variant: str) -> None:
        super().__init__(real.ctx, real.result.name, variant)
        self.lab = real.lab  # the same lab object: its namespaces as the arrange left them
        self.result.variant += DRY_SUFFIX
        self._observed: dict[int, LabObservation] = {}
        # round index -> the mirror probe's fates and how, probed on the twin's own lab
        self.settled: dict[int, tuple[tuple[PodFate, ...] | None, str]] = {}

    def twin_round(self, name: str) -> RoundView:
        """One dry-run round, then what its record observes and, when its cycle shows
        descheduler#1917's signature or decided nothing, up to TWIN_PROBE_RUNS mirror probe
        runs: all before the real round."""
        view = self.run_round(f"{name}-dry")
        with self.timed("stop_recording"):
            self.stop_recording()
        with self.timed("observe"):
            self._observed[id(view.rec)] = super().observe(view.rec)
        sigs = signatures(self.facts) if self.facts is not None else {}
        if BUG_1917 in sigs or (not view.decisions and view.before.live):
            self.settled[len(self.views) - 1] = _settled(self, None, max_runs=TWIN_PROBE_RUNS)
        return view

    def observe(self, rec: Recorder) -> LabObservation:
        seen = self._observed.pop(id(rec), None)
        return seen if seen is not None else super().observe(rec)


class DryRunRunner(Runner):
    """The re-run dry-run half: its policy goes on with dry run on, or, when it is the real
    half's very policy (it names no lab namespace), its rounds run on the real half's release
    with dry run forced (`dry_run_rounds`), and there is nothing to apply."""

    def ensure_policy(self) -> None:
        rel, pol = self.ctx.release, self.ctx.policy
        if self.dry_run_rounds:
            if rel.policy is None or rel.policy.digest() != pol.digest():
                raise ConfigError(
                    f"{self.label}: the release {rel.name} does not hold this half's policy"
                )
        elif rel.policy is None or rel.policy.digest() != pol.digest() or rel.dry_run is not True:
            rel.apply_policy(pol, dry_run=True)
        self.result.policy_digest = pol.digest()
        self.result.overrides = list(pol.overrides)


@dataclass
class FidelityOutcome:
    """A fidelity run: both halves' results, the comparison, and one verdict."""

    name: str
    dry: ExperimentResult
    real: ExperimentResult
    comparison: FidelityResult | None
    outcome: Outcome = "pass"
    message: str = ""
    duration_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.real.label

    @property
    def head(self) -> str:
        return f"{self.name}[{self.real.variant}]"

    @property
    def final_verdict(self) -> Verdict:
        """pass, fail, or no verdict ("error": the halves were not compared, exit 3)."""
        return Verdict(VERDICT_OF[self.outcome], (self.message,) if self.message else ())

    def summary(self) -> dict[str, Any]:
        return {
            **verdict_summary(self.name, self.outcome, self.message, self.comparison),
            "dry_run": {"label": self.dry.label, "outcome": self.dry.outcome},
            "real": {"label": self.real.label, "outcome": self.real.outcome},
            "duration_s": round(self.duration_s, 2),
            "timings": self.timings,
        }


def scope_problems(dry: Runner, real: Runner) -> list[str]:
    """Where the two halves' policies differ once each lab namespace reads `<lab>`.

    The halves must run one policy: a difference (a namespace list naming one half's lab,
    a cap, a plugin) would make the comparison say nothing about dry run.
    """

    def norm(r: Runner) -> dict[str, Any]:
        text = json.dumps(r.ctx.policy.to_dict(), sort_keys=True)
        return json.loads(text.replace(json.dumps(r.ctx.namespace), '"<lab>"'))

    a, b = norm(dry), norm(real)
    if a == b:
        return []
    out: list[str] = []
    _diff(a, b, "", out)
    return out or ["the policies differ"]


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k), b.get(k), f"{path}.{k}" if path else str(k), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: dry run {a!r}, real {b!r}")


def half_of(r: Runner, v: RoundView, mode: Mode) -> Half:
    """One round of one half as compare() reads it (the lab must still be up)."""
    lab_ns = r.ctx.namespace

    def ident(p: Any) -> str:
        return identity_of(p.namespace, lab_ns, p.workload, p.owner, p.name)

    pdb = v.before.pdb
    # The lab's PDB as the API gives it, with its budget before the round (budgets_of).
    pdbs = (
        [
            {
                "metadata": {"namespace": pdb.get("namespace"), "name": pdb.get("name")},
                "spec": {"selector": pdb.get("selector")},
                "status": {"disruptionsAllowed": pdb.get("disruptionsAllowed")},
            }
        ]
        if pdb
        else []
    )
    pods = [
        PodRef(p.key, ident(p), p.node, p.namespace, budgets_of(p.namespace, p.labels, pdbs))
        for p in v.before.live
    ]
    pending: dict[str, tuple[str, ...]] = {}
    if mode == "real":
        for p in r.lab.snapshot().pending():
            pending[ident(p)] = (*pending.get(ident(p), ()), p.name)
    return Half(
        mode,
        fates_of(pods, v.decisions, mode),
        caps=dict(r.ctx.policy.limits),
        pdb_disruptions_allowed=pdb.get("disruptionsAllowed") if pdb else None,
        pending=pending,
        signatures=signatures(r.facts) if r.facts is not None else {},
        skipped=v.rnd.result.skipped,
        user=v.rnd.user,
    )


def run_fidelity(
    session: DeschedSession,
    experiment: str,
    variant: str | None = None,
    *,
    name: str | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    namespaces: tuple[str, str] | None = None,
    **params: Any,
) -> FidelityOutcome:
    """Both halves of `experiment` on the session's cluster; never raises on a failure.

    The real half runs as `desched run` runs it, each round preceded by its dry-run twin on
    the same lab (see the module docstring); the round records of both carry the comparison.
    When a twin fell short of its real round, the dry-run half is run again on a lab of its
    own and the mirror probe runs on that lab before teardown.
    `namespaces`: the real and the re-run dry-run half's lab namespaces (default: fresh ones).
    ConfigError (exit 2) before any change when the halves' policies differ in scope.
    """
    t0 = time.monotonic()
    cls = lookup(experiment)
    variant = variant or cls.default_variant
    if cls.keep_min_pod_age:
        params.setdefault("keep_min_pod_age", True)
    title = cls.title or cls.name
    if "namespace" in params:
        raise ConfigError("fidelity runs two labs: give namespaces=(real, dry), not namespace=")
    if namespaces is not None and (len(namespaces) != 2 or namespaces[0] == namespaces[1]):
        raise ConfigError(f"fidelity namespaces {namespaces!r}: give two different namespaces")
    # On a throwaway cluster a re-run dry-run half gets a release of its own (suspended, dry
    # run, the same policy), installed beside its arrange; elsewhere it switches the session's.
    own_release = session.cluster.capabilities.discardable
    runners: list[Runner] = []
    for i, runner_cls in enumerate((TwinRunner, DryRunRunner)):
        ns = namespaces[i] if namespaces is not None else None
        defer = own_release and runner_cls is DryRunRunner
        ctx = session.context(
            variant=variant, namespace=ns, defer_release=defer, on_record=on_record, **params
        )
        runners.append(runner_cls(ctx, title, variant))
    real, dry = runners
    real_exp, dry_exp = cls(real), cls(dry)  # a strategy experiment builds its policy here
    dry.result.variant += DRY_SUFFIX
    problems = scope_problems(dry, real)
    if problems:
        raise ConfigError(
            f"fidelity {cls.name}: the dry-run half's policy differs in scope from the real "
            f"half's ({'; '.join(problems)}); give a policy that does not name the lab "
            "namespace, so both halves run the same one"
        )
    if dry.ctx.policy.digest() == real.ctx.policy.digest():  # it names no lab namespace
        dry.ctx = replace(dry.ctx, release=real.ctx.release, prepare_release=None)
        dry.dry_run_rounds = True  # a re-run needs no release of its own
    elif own_release:
        dry.ctx = replace(dry.ctx, prepare_release=lambda: _dry_release(session, dry))
    assert isinstance(real, TwinRunner)
    real.twin = DryTwin(real, variant)
    out = FidelityOutcome(name or f"fidelity-{cls.name}", real.twin.result, real.result, None)
    setup = time.monotonic() - t0
    half, real_ended = _halves(session, out, cls, variant, real, real_exp, dry, dry_exp)
    out.duration_s = time.monotonic() - t0
    out.timings = {
        "setup": round(setup, 3),
        **{f"real.{k}": v for k, v in real.result.timings.items()},
        **{f"dry.{k}": v for k, v in half.result.timings.items()},
        "conclude": round(time.monotonic() - real_ended, 3),
    }
    return out


def _dry_release(session: DeschedSession, dry: Runner) -> Release:
    """The re-run dry-run half's own release with its policy on, dry run (see run_fidelity)."""
    rel = session.lane_release(session.config.release + DRY_RELEASE_SUFFIX)
    pol = dry.ctx.policy
    if rel.policy is None or rel.policy.digest() != pol.digest() or rel.dry_run is not True:
        rel.apply_policy(pol, dry_run=True)
    return rel


def _halves(
    session: DeschedSession,
    out: FidelityOutcome,
    cls: Any,
    variant: str,
    real: TwinRunner,
    real_exp: Any,
    dry: Runner,
    dry_exp: Any,
) -> tuple[Runner, float]:
    """The real half with its dry-run twins, compared; the dry-run half re-run on a lab of its
    own only when a twin fell short (the verdict goes on `out`). Returns the dry-run half the
    verdict stands on and when the real half ended."""
    real_halves: list[Half] = []
    twin = real.twin
    assert twin is not None
    twinned: list[bool] = []

    def capture_real() -> None:  # while the real lab is up: its Pending pods, the twins' records
        real_halves.extend(half_of(real, v, "real") for v in real.views)
        twinned.append(_conclude_twin(out, twin, real, real_halves))

    with session.phase(f"fidelity.{cls.name}[{variant}].real"):
        drive(real, real_exp, before_record=capture_real)
    real_ended = time.monotonic()
    session._record_result(real.result, cls.name)
    real_entry = session.report_entries[-1] if session.report_entries else None
    if real.result.outcome == "error" or not real_halves:
        out.outcome, out.message = "error", f"real half: {real.result.message}"
        return twin, real_ended
    if twinned and twinned[0]:
        half: Runner = twin
    else:
        half = dry
        out.dry = dry.result
        dry.result.notes.append(
            "the dry-run twin on the real lab fell short of the real round "
            f"({out.comparison.line() if out.comparison else 'not compared'}): the dry-run half "
            "ran again on a lab of its own, for the mirror probe"
        )
        with session.phase(f"fidelity.{cls.name}[{variant}].dry-run"):
            drive(
                dry,
                dry_exp,
                assess=False,
                before_record=lambda: _compare(out, dry, real_halves, real.result.label),
            )
    session._record_result(half.result, cls.name)
    _judge(out, half, real)
    _carry_to_real(out, half, real)
    if real_entry is not None:  # the report shows the real half's records as amended
        real_entry["rounds"] = list(real.result.records)
    # the HTML report shows the comparison with either half's entry
    for entry in (real_entry, session.report_entries[-1] if session.report_entries else None):
        if entry is not None:
            entry["summary"]["fidelity"] = out.summary()
    return half, real_ended


def _conclude_twin(
    out: FidelityOutcome, twin: DryTwin, real: Runner, real_halves: list[Half]
) -> bool:
    """The twins' rounds against the real ones: True when every one compared holds, and then
    the twins' records are built with the comparison; False leaves them to a re-run."""
    try:
        halves = [half_of(twin, v, "dry-run") for v in twin.views]
        probed: dict[str, Any] | None = None
        for i, (fates, how) in twin.settled.items():
            halves[i] = replace(halves[i], settled=fates, settled_how=how)
            probed = {"how": how, "settled": [f.shown() for f in fates] if fates else None}
        results = [compare(d, r) for d, r in zip(halves, real_halves, strict=False)]
        if len(halves) != len(real_halves) or not all(r.ok for r in results):
            out.comparison = merge(results) if results else None
            return False
        _conclude(out, twin, halves, results, real_halves, real.result.label, probed, real.views)
        for view in twin.views:
            twin.record(view)
        twin.finish()
    except Exception as exc:  # the twin's own error, as drive would record it
        twin.result.outcome = "error"
        twin.result.message = f"{twin.label} did not complete: {type(exc).__name__}: {exc}"
    return True


def _carry_to_real(out: FidelityOutcome, dry: Runner, real: Runner) -> None:
    """The real half's round records (written before the dry-run half ran) get the same
    comparison as the dry-run half's: each is replaced by an amended copy, written again
    (a built record is never changed), so either half shows the verdict."""
    records = real.result.records
    for i, (d, r) in enumerate(zip(dry.result.records, list(records), strict=False)):
        fid = d.get("fidelity")
        if not fid:
            continue
        records[i] = {**r, "fidelity": {**fid, "half": "real", "other": dry.result.label}}
        if real.ctx.evidence is not None:
            real.ctx.evidence.write_round(records[i])
    real.result.notes.append(
        f"dry-run fidelity ({out.name}, against {dry.result.label}): "
        + (out.comparison.line() if out.comparison else out.message)
    )


def _compare(out: FidelityOutcome, dry: Runner, real_halves: list[Half], other: str) -> None:
    """The dry-run half's rounds against the real ones (`other`: the real half's label); the
    probe when the Job's fell short."""
    halves = [half_of(dry, v, "dry-run") for v in dry.views]
    results = [compare(d, r) for d, r in zip(halves, real_halves, strict=False)]
    probed: dict[str, Any] | None = None
    if any(not res.ok for res in results):
        want = max(sum(f.fate != Fate.NOT_PICKED for f in h.fates) for h in real_halves)
        fates, how = _settled(dry, want)
        probed = {"how": how, "settled": [f.shown() for f in fates] if fates else None}
        halves = [replace(h, settled=fates, settled_how=how) for h in halves]
        results = [compare(d, r) for d, r in zip(halves, real_halves, strict=False)]
    _conclude(out, dry, halves, results, real_halves, other, probed, None)


def _conclude(
    out: FidelityOutcome,
    dry: Runner,
    halves: list[Half],
    results: list[FidelityResult],
    real_halves: list[Half],
    other: str,
    probed: dict[str, Any] | None,
    real_views: list[RoundView] | None,
) -> None:
    """The comparison onto `out`, the dry-run rounds' records and the dry-run half's checks.

    `real_views`: the real rounds, when the dry-run rounds ran on the same lab (twins): the
    same state is then the same pods by UID, not only by identity and node."""
    out.comparison = c = merge(results)
    for v, res in zip(dry.views, results, strict=False):
        v.extra["fidelity"] = {
            **res.to_dict(),
            "mirror_probe": probed,
            "half": "dry-run",
            "other": other,
        }
        v.extra.setdefault("notes", []).extend(dry.result.notes)
    problems = [f"{len(dry.views)} dry-run round(s), {len(real_halves)} real"]
    if len(dry.views) == len(real_halves):
        problems = [
            f"round {i}: the pods (identity, node) or the PDB differ"
            for i, (d, r) in enumerate(zip(halves, real_halves, strict=True))
            if _shape(d) != _shape(r)
        ]
        for i, (d, r) in enumerate(zip(dry.views, real_views or [], strict=False)):
            if d.before.uids != r.before.uids:
                problems.append(
                    f"round {i}: the lab's pods changed between the dry-run and the real round "
                    f"(UIDs {sorted(d.before.uids ^ r.before.uids)[:5]})"
                )
    dry.check(
        "same-state",
        "both halves held the same pods (identity, node) and PDB status before each round",
        not problems,
        "; ".join(problems),
    )
    bugs = sorted(
        {
            b
            for r in c.differences
            for b in (r.explained_by or "").replace(",", " ").split()
            if b.startswith("descheduler#")
        }
    )
    dry.result.checks.append(
        Check(
            CHECK_ID,
            "every difference between the dry-run and the real round is explained",
            c.ok,
            c.line()
            + "".join(
                f"; UNEXPLAINED {r.identity} on {r.node}: dry run "
                f"{r.dry.shown() if r.dry else '(missing)'}, real "
                f"{r.real.shown() if r.real else '(missing)'}"
                for r in c.unexplained
            ),
            known_bug=", ".join(bugs) or None,
        )
    )


def _shape(h: Half) -> tuple[list[tuple[str, str]], int | None]:
    return sorted((f.identity, f.node or "") for f in h.fates), h.pdb_disruptions_allowed


def _settled(
    dry: Runner, want: int | None, max_runs: int | None = None
) -> tuple[tuple[PodFate, ...] | None, str]:
    """The mirror probe's settled cycle as fates of the dry lab's pods, on an unchanged lab,
    and what the probe did; fates None where it cannot run (no local binary), found no
    complete cycle in its time, or the lab changed meanwhile (the text says which).
    `want=None`: a twin's lab before the real round (mirror_probe.probe)."""
    rel, cluster = dry.ctx.release, dry.ctx.cluster
    form = cluster.capabilities.mirror_probe
    if form is None or (form == MIRROR_BINARY and rel.binary is None) or not dry.views:
        how = (
            f"{NOT_PROBED}: {cluster.capabilities.local_binary_gap}, and it runs the "
            "descheduler binary one-shot beside the cluster"
        )
        dry.result.notes.append(how)
        return None, how
    v = dry.views[-1]
    before = v.before.uids
    expected = {x.key: Expect(x.node, x.ready) for x in v.before.live}
    runs: contextlib.AbstractContextManager[OneShot]
    limits: dict[str, float] = {}
    if form == MIRROR_BINARY and rel.binary is not None:
        version = dry.ctx.descheduler_version
        runs = binary_runs(rel.binary, cluster.kubeconfig, rel.live_policy_yaml(), version)
        what = LOCAL
    else:  # MIRROR_JOBS: the round's own Job again, from the suspended CronJob, dry run forced
        runs = contextlib.nullcontext(job_runs(cluster, rel, v.rnd.name, dry.ctx.log_dir))
        what, limits = JOBS, {"budget": JOB_BUDGET, "run_timeout": JOB_RUN_TIMEOUT}
    with runs as run_once:
        p = probe(run_once, what, cluster.core, expected, want, max_runs=max_runs, **limits)
    dry.result.notes.append(f"dry-run mirror probe: {p.how}")
    if p.settled is None:
        return None, p.how
    if dry.lab.snapshot().uids != before:
        how = f"{p.how}; unusable: the lab's pods changed meanwhile"
        dry.result.notes.append(how)
        return None, how
    refs = [
        PodRef(
            x.key,
            identity_of(x.namespace, dry.ctx.namespace, x.workload, x.owner, x.name),
            x.node,
            x.namespace,
        )
        for x in v.before.live
    ]
    return fates_of(refs, p.settled.decisions, "dry-run"), p.how


def cycle_gaps(dry: Runner, real: Runner) -> list[str]:
    """Each round of either half that completed no cycle the comparison can stand on
    (explain.half_gap: skipped, Job failed, exit code not measured; the dry-run half's skip
    only with descheduler#1917's signature proven)."""
    out = []
    halves: tuple[tuple[Runner, Mode], ...] = ((real, "real"), (dry, "dry-run"))
    for r, mode in halves:
        sigs = signatures(r.facts) if r.facts is not None else {}
        for i, v in enumerate(r.views):
            rnd = v.rnd
            if gap := half_gap(mode, rnd.result.skipped, rnd.succeeded, rnd.exit_code, sigs):
                out.append(f"round {i}: {gap}")
    return out


def _judge(out: FidelityOutcome, dry: Runner, real: Runner) -> None:
    """pass: the comparison holds and both halves did what they must; else fail or error.

    A half whose round completed no cycle compared nothing: an error ("not comparable"),
    whatever the rows say (both halves skipping alike agree on nothing but the skip).
    """
    broken = [c for c in dry.result.failed if c.id not in DRY_TOLERATED | {CHECK_ID}]
    gaps = cycle_gaps(dry, real)
    if dry.result.outcome == "error":
        out.outcome, out.message = "error", f"dry-run half: {dry.result.message}"
    elif gaps:
        out.outcome, out.message = "error", NOT_COMPARABLE + "; ".join(gaps)
    elif out.comparison is None:
        out.outcome, out.message = "error", "the halves were not compared"
    elif not out.comparison.ok:
        out.outcome, out.message = "fail", dry.result.message or out.comparison.line()
    elif broken:
        out.outcome = "fail"
        out.message = "dry-run half failed: " + "; ".join(f"[{c.id}] {c.detail}" for c in broken)
    elif real.result.outcome == "fail":
        out.outcome, out.message = "fail", real.result.message
    else:  # pass, or an expected failure of the real half (a proven known bug)
        out.outcome = "pass"
        out.message = out.comparison.line()
