"""The two tracks of a canary: the same experiments on two clusters built the same way.

Each track is a DeschedSession of its own (its own embedded cluster, release, evidence folder),
so the baseline and the candidate never evict from the same pod set. The candidate runs in a
worker thread beside the baseline; an interrupt stops both at once (the candidate's thread
through interrupts.WorkerStop, never inside its cleanup), and each session's own teardown
removes its cluster.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_desched.canary.control_plane import read_profile
from pytest_desched.descheduler.metric_probe import served_metric_names
from pytest_desched.errors import ConfigError, WaitTimeout
from pytest_desched.experiments import REGISTRY, VARIANTS, ExperimentResult, lab_policy, lookup
from pytest_desched.experiments.catalogue import describe
from pytest_desched.interrupts import WorkerStop, on_signal
from pytest_desched.tools.release import release_skew
from pytest_desched.tools.versions import load_versions

if TYPE_CHECKING:
    from pytest_desched.session import DeschedSession

# A track's own work on its session, in place of experiments (the snapshot canary's replay
# round): (track name, its session, its result to fill). What it raises is the track's error.
Work = Callable[[str, "DeschedSession", "TrackResult"], None]
CANCELLED = "cancelled: the other track failed or the run was interrupted"

# The runbook's three experiments, as written and with the #1882 workaround: what an upgrade
# must keep doing (or, where a bug is fixed, start doing).
DEFAULT_EXPERIMENTS: tuple[tuple[str, str], ...] = (
    ("positive", "runbook"),
    ("positive", "pdb-lister-workaround"),
    ("nodefit", "runbook"),
    ("nodefit", "pdb-lister-workaround"),
    ("pdb", "runbook"),
    ("pdb", "pdb-lister-workaround"),
)


def parse_experiments(items: Sequence[str] | None) -> list[tuple[str, str]]:
    """`name` (each variant the catalogue lists) or `name[variant]`, any registered
    experiment; default: the runbook's three, both variants. The one reading of `--experiment`
    for the canary and the matrix, which run the same tracks."""
    if not items:
        return list(DEFAULT_EXPERIMENTS)
    out: list[tuple[str, str]] = []
    for item in items:
        name, _, rest = item.partition("[")
        try:
            cls = lookup(name)
        except KeyError:
            raise ConfigError(
                f"--experiment {item!r}: unknown; known: {', '.join(sorted(REGISTRY))}"
            ) from None
        listed = describe(cls, runbook=[])["variants"]
        for v in [rest.rstrip("]")] if rest else listed:
            if v not in listed:
                raise ConfigError(f"--experiment {item!r}: variant {v!r} not in {listed}")
            # An experiment with a policy of its own builds on its default variant.
            out.append((name, v if v in VARIANTS else cls.default_variant))
    if len(set(out)) != len(out):
        raise ConfigError("--experiment: an experiment is named twice; name each once")
    return out


@dataclass
class TrackResult:
    """What one track ran and found; the diff reads `results[i].records`."""

    name: str  # "baseline" | "candidate"
    descheduler_version: str = ""
    chart: dict[str, Any] = field(default_factory=dict)
    candidate: dict[str, Any] = field(default_factory=dict)
    workers: list[str] = field(default_factory=list)
    results: list[ExperimentResult] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    error: str | None = None
    teardown_error: str | None = None  # the session's teardown failed after the experiments
    metric_names: list[str] | None = None  # families the binary served (metric_probe)
    metrics_why: str = ""  # why metric_names is None
    artifacts: str = ""
    # The release against the cluster's Kubernetes (tools.release.skew_from_readme)
    skew: dict[str, Any] = field(default_factory=dict)
    # The cluster's control-plane readings (canary.control_plane.read_profile), read when the
    # tracks' Kubernetes differ: what a change may be attributed to instead of the release.
    control_plane: dict[str, Any] = field(default_factory=dict)

    def by_label(self) -> dict[str, ExperimentResult]:
        return {r.label: r for r in self.results}

    def readings_gap(self) -> str | None:
        """Why this track's control-plane readings are missing or partial (None: none is).

        A track asked for them records either readings or a `why`; one that holds neither was
        never read (it failed first, or the run did not ask), and the report says so rather
        than leave its control-plane section out as if nothing differed.
        """
        if why := self.control_plane.get("why"):
            return f"{self.name}: {why}"
        if self.control_plane.get("kubernetes"):
            return None
        if self.error:
            return f"{self.name}: no control-plane readings: the track failed first: {self.error}"
        return f"{self.name}: no control-plane readings were taken while its cluster was up"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "descheduler_version": self.descheduler_version,
            "chart": self.chart,
            "candidate": self.candidate,
            "workers": self.workers,
            "experiments": [r.summary() for r in self.results],
            "timings": self.timings,
            "wall_s": round(self.wall_s, 2),
            "error": self.error,
            "teardown_error": self.teardown_error,
            "artifacts": self.artifacts,
            "metric_names": self.metric_names,
            "metrics_why": self.metrics_why,
            "skew": self.skew,
            **({"control_plane": self.control_plane} if self.control_plane else {}),
        }


def run_track(
    name: str,
    session: DeschedSession,
    experiments: Sequence[tuple[str, str]],
    cancel: threading.Event,
    overrides: Mapping[str, Any] | None = None,
    stopper: WorkerStop | None = None,
    work: Work | None = None,
    metrics: bool = True,
    control_plane: bool = False,
) -> TrackResult:
    """Bring up one cluster, run the experiments in order, tear everything down.

    `overrides` (policy path -> value) change this track's policy only, recorded as such:
    how a canary proves it catches a candidate that widens what is evicted. `work` runs
    first, on the same session (the snapshot canary's restore and round). `metrics=False`
    skips the served-metrics probe (a release matrix compares no metric families);
    `control_plane` reads the cluster's control-plane profile while it is up (the tracks'
    Kubernetes differ: canary.control_plane).
    """
    out = TrackResult(name, artifacts=str(session.config.artifacts))
    t0 = time.monotonic()
    try:
        for exp, _ in experiments:  # before the cluster: it starts with the sources they read
            cls = REGISTRY.get(exp)
            if cls is not None and cls.metrics_sources:
                session.need_metrics(cls.metrics_sources, exp)
        rel = session.release
        out.descheduler_version = rel.descheduler_version
        out.chart = rel.chart.evidence()
        describe_release(session, out)
        out.workers = list(session.cluster.workers)
        if control_plane:
            read_control_plane(session, out)
        if work is not None:
            if cancel.is_set():
                out.error = CANCELLED
            else:
                work(name, session, out)
        for exp, variant in experiments:
            if cancel.is_set():
                out.error = CANCELLED
                break
            params: dict[str, Any] = {}
            if overrides:
                params = {"overrides": dict(overrides), "why": f"canary: {name} track only"}
            out.results.append(session.run(exp, variant=variant, **params))
        if metrics and not cancel.is_set():
            probe_metrics(session, out)
        elif not metrics:
            out.metrics_why = "not probed (metrics=False)"
    except BaseException as exc:
        session.failed = True
        cancel.set()  # the other track stops at its next experiment
        out.error = _one_line(exc)
        if not isinstance(exc, Exception):
            raise
    finally:
        if stopper is not None:
            stopper.cleaning_up()  # from here on, no interrupt from the main thread
        try:
            session.close()
        except Exception as exc:  # e.g. a 404 deleting a round Job already gone
            # Said beside the track's results, never instead of them and never out of the
            # thread (where it would lose every result this track has): the experiments
            # already reported, so the comparison still stands on them.
            session.failed = True
            out.teardown_error = _one_line(exc)
        finally:
            out.timings = dict(session.timings)
            out.wall_s = time.monotonic() - t0
    return out


def describe_release(session: DeschedSession, out: TrackResult) -> None:
    """The track's release as the user named it (None: the pin) and its version skew against
    the cluster's Kubernetes, from the README of the release's own tree or module."""
    rel = getattr(session, "candidate", None)
    if rel is not None:
        out.candidate = rel.to_dict() if hasattr(rel, "to_dict") else dict(vars(rel))
    config = getattr(session, "config", None)  # the track's cluster (--kubernetes), else the pin
    kube = (
        config.kube_choice().version if config is not None else load_versions().kubernetes.version
    )
    out.skew = release_skew(rel, kube)


def _one_line(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def first_cause(track: TrackResult) -> str:
    """The track's error with its cause: the first experiment that errored or failed says what
    the descheduler said (RoundFailed carries its own error lines)."""
    parts = [track.error] if track.error else []
    for r in track.results:
        if r.outcome in ("error", "fail") and r.message:
            parts.append(f"first failing experiment {r.label}: {r.message}")
            break
    return "; ".join(parts) or "the track did not report"


def read_control_plane(session: DeschedSession, out: TrackResult) -> None:
    """The cluster's control-plane readings, or why they are missing: a reading that fails
    attributes nothing, it never fails the track."""
    with session.phase("control-plane-readings"):
        try:
            out.control_plane = read_profile(session)
        except Exception as exc:  # a YAML, API or tool error alike: said, never the track's
            out.control_plane = {"why": f"not read: {type(exc).__name__}: {exc}"}


def probe_metrics(session: DeschedSession, out: TrackResult) -> None:
    """The metric families this track's binary serves, or why they are not known."""
    rel, cluster = session.release, session.cluster
    if not cluster.capabilities.runs_local_binary or rel.binary is None:
        out.metrics_why = cluster.capabilities.local_binary_gap
        return
    with session.phase("metrics-probe"):
        try:
            # the policy in this release's own fields (a release without podProtections
            # would refuse the runbook's words at start-up)
            policy = session.release_policy(lab_policy("pdb-lister-workaround"), rel)
            out.metric_names = served_metric_names(rel.binary, cluster.kubeconfig, policy.to_yaml())
        except (WaitTimeout, RuntimeError) as exc:
            out.metrics_why = str(exc)


def run_tracks(
    baseline: DeschedSession,
    candidate: DeschedSession,
    experiments: Sequence[tuple[str, str]],
    parallel: bool = True,
    candidate_overrides: Mapping[str, Any] | None = None,
    work: Work | None = None,
    control_plane: bool = False,
) -> tuple[TrackResult, TrackResult]:
    """Both tracks, in parallel by default (the candidate in a worker thread); `work` is
    each track's own work before its experiments, `control_plane` its readings (run_track)."""
    cancel = threading.Event()
    cp = control_plane
    if not parallel:
        b = run_track("baseline", baseline, experiments, cancel, work=work, control_plane=cp)
        return b, run_track(
            "candidate",
            candidate,
            experiments,
            cancel,
            candidate_overrides,
            work=work,
            control_plane=cp,
        )
    box: dict[str, TrackResult] = {}
    stopper = WorkerStop()

    def worker() -> None:
        try:
            stopper.bind()
            box["candidate"] = run_track(
                "candidate",
                candidate,
                experiments,
                cancel,
                candidate_overrides,
                stopper,
                work,
                control_plane=cp,
            )
        except BaseException as exc:  # nothing leaves this thread unsaid (nor a stop())
            cancel.set()
            box["candidate"] = TrackResult("candidate", error=f"the track failed: {_one_line(exc)}")

    t = threading.Thread(target=worker, name="desched-canary-candidate")
    t.start()
    try:
        with on_signal(stopper.stop):  # the candidate stops (and cleans up) at once, beside us
            b = run_track("baseline", baseline, experiments, cancel, work=work, control_plane=cp)
        t.join()
    except BaseException:
        cancel.set()
        stopper.stop()  # the candidate's work stops now, not at its next experiment
        t.join()  # the candidate's session tears down its cluster before we go
        raise
    return b, box.get("candidate") or TrackResult("candidate", error="the track did not report")
