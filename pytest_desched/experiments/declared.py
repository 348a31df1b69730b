"""Experiments as declared steps: `Experiment` subclasses register by name, `run_experiment`
runs arrange, act and assess on a `Runner`, then records, classifies and tears down."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pytest_desched.descheduler.policy import Policy

from pytest_desched import interrupts
from pytest_desched.descheduler.cleanup import emergency_stop
from pytest_desched.errors import ControlPlaneDied, ProviderError, RoundHung
from pytest_desched.experiments.assertions import Expect
from pytest_desched.experiments.checks_made import checks_in, steps
from pytest_desched.experiments.cycles import run_cycles
from pytest_desched.experiments.framework import ExperimentContext, Runner
from pytest_desched.experiments.results import ExperimentResult
from pytest_desched.kube import api_failure, api_health, control_plane_death, server_gone
from pytest_desched.log import say

REGISTRY: dict[str, type[Experiment]] = {}


class Experiment:
    """One experiment as declared steps; a subclass with a `name` registers itself.

    The framework runs `arrange` (lab state; the release's policy is put in place at the
    same time, so `arrange` must not read the release), `act` (rounds, via `self.r.run_round`) and
    `assess` (checks via `self.r.check`, and per round `view.replacement` / `view.extra`
    for its record), then writes every round's record, classifies and tears the lab down.
    State between steps lives on the instance.
    """

    name: ClassVar[str] = ""  # registry key: desched_experiment("positive")
    title: ClassVar[str] = ""  # the records' name: "positive-affinity-migration"
    default_variant: ClassVar[str] = "runbook"
    keep_min_pod_age: ClassVar[bool] = False  # run with the runbook's unmodified minPodAge
    default_cycles: ClassVar[int] = 1  # K when the caller asks for none (experiments/cycles.py)
    # The variant label of the records when `policy_for` gives the experiment's own policy
    # (None: the context's label stays).
    own_policy_label: ClassVar[str | None] = None
    # The metrics sources its policy reads (capabilities.METRICS_SOURCES): the cluster is
    # started with them (session.need_metrics).
    metrics_sources: ClassVar[tuple[str, ...]] = ()
    # Why its lab makes containers restart (Lab.set_restarts), which not every provider can
    # (Capabilities.restarts_refusal); "" when it makes none.
    needs_restarts: ClassVar[str] = ""

    @classmethod
    def refusal(cls, caps: Any) -> str | None:
        """Why this experiment cannot run on a provider with `caps`; None if it can."""
        if cls.needs_restarts:
            return caps.restarts_refusal(f"experiment {cls.name} ({cls.needs_restarts})")
        return None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__ and cls.name:  # a subclass registers only a name of its own
            if not cls.__dict__.get("title"):
                cls.title = cls.name  # records are filed under the title
            if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
                raise ValueError(
                    f"experiment name {cls.name!r} is taken by {REGISTRY[cls.name].__module__}"
                )
            REGISTRY[cls.name] = cls

    @classmethod
    def checks(cls) -> frozenset[str]:
        """The check ids this experiment can make, read from its code (checks_made.py): its
        steps' own, those of the helpers they call, and those the runner makes every round."""
        return checks_in([*steps(cls, _STEPS), *_ROUND_STEPS], (Runner, Expect, cls))

    def __init__(self, runner: Runner) -> None:
        self.r = runner
        self.lab = runner.lab
        # The context is the caller's, built once; an experiment with a policy of its own gets
        # a copy carrying it, before any step (and before a fidelity half reads its policy).
        own = self.policy_for(runner.ctx)
        if own is not None:
            label = self.own_policy_label or runner.ctx.policy_label
            runner.ctx = replace(runner.ctx, policy=own, policy_label=label)
            if self.own_policy_label:
                runner.result.variant = self.own_policy_label

    @property
    def ctx(self) -> ExperimentContext:
        """The runner's context: the caller's, or the copy with this experiment's own policy
        and, once a deferred release is installed, that release (Runner.use_release)."""
        return self.r.ctx

    def policy_for(self, ctx: ExperimentContext) -> Policy | None:
        """The policy this experiment runs instead of `ctx.policy`, or None for ctx.policy.

        Checked (validated, scoped to the cluster) before anything changes; `self.ctx` is
        `ctx` while it runs."""
        return None

    def arrange(self) -> None:
        """Build the lab state the experiment needs."""

    def act(self) -> None:
        """Run the round(s)."""

    def assess(self) -> None:
        """Add checks; set each round view's `replacement` and `extra` for its record."""

    def between_cycles(self, cycle: int) -> None:
        """A multi-cycle run calls this before cycle 2..K (lab changes between cycles)."""

    def after_cycles(self) -> None:
        """After the last cycle and the loop verdict (`result.cycles`, `result.loops`)."""


_STEPS = ("policy_for", "arrange", "act", "assess", "between_cycles", "after_cycles")
# What the framework runs around every experiment's steps (drive): their checks are every
# experiment's (round-finished, job-completed, no-rollout, ...).
_ROUND_STEPS = (Runner.run_round, Runner.record, Runner.check_no_rollout, run_cycles)


def round_checks() -> frozenset[str]:
    """The check ids the framework makes in any experiment, whatever its steps."""
    return checks_in(_ROUND_STEPS, (Runner,))


def lookup(experiment: str | type[Experiment]) -> type[Experiment]:
    """A registered experiment by name, or an Experiment subclass as it is."""
    if isinstance(experiment, type) and issubclass(experiment, Experiment):
        return experiment
    if experiment not in REGISTRY:
        raise KeyError(f"unknown experiment {experiment!r}; known: {sorted(REGISTRY)}")
    return REGISTRY[experiment]


def run_experiment(
    experiment: str | type[Experiment], ctx: ExperimentContext, variant: str | None = None
) -> ExperimentResult:
    """Run the declared steps; always returns the result (outcome pass/xfail/fail/error).

    On anything but a pass or an expected failure the executor is stopped first (runbook:
    emergency stop) and the lab's logs, events and pods are kept as artifacts.
    """
    cls = lookup(experiment)
    r = Runner(ctx, cls.title or cls.name, variant or cls.default_variant)
    return drive(r, cls(r))


def drive(
    r: Runner,
    exp: Experiment,
    *,
    assess: bool = True,
    before_record: Callable[[], Any] | None = None,
) -> ExperimentResult:
    """The declared steps of `exp` on `r` (run_experiment's body; see it).

    `assess=False` runs the rounds without the experiment's own checks (a dry-run half of a
    fidelity run, fidelity/engine.py); `before_record` runs after assess, while the lab is
    still up, so what it adds to the round views' `extra` lands in their records.
    """
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("arrange", lambda: _arrange_beside_policy(r, exp)),
        ("act", exp.act),
    ]
    if assess:
        steps.append(("assess", exp.assess))

        def cycles() -> None:
            run_cycles(r, exp)
            r.check_no_rollout()

        steps.append(("cycles", cycles))
    if before_record is not None:
        steps.append(("before_record", before_record))
    steps += [
        ("record", lambda: [r.record(view) for view in r.views]),
        ("classify", r.finish),
    ]
    hung = False  # a round did not finish (RoundHung): only recording and classifying remain
    try:
        try:
            for step, fn in steps:
                if hung and step not in ("record", "classify"):
                    continue
                try:
                    with r.timed(step):
                        fn()
                except RoundHung:
                    hung = True
        except Exception as exc:  # a step raised: an error, never an expected failure
            if interrupts.interrupted():  # a signal landed inside a library call, which
                # wrapped it (pydantic: "ValidationError ... KeyboardInterrupt"): it unwinds
                # as the interrupt it is, never as the experiment's error (exit 1)
                raise KeyboardInterrupt(f"signal, surfaced as {type(exc).__name__}") from exc
            r.result.outcome = "error"
            r.result.error = "".join(traceback.format_exception(exc))
            r.result.message = f"{r.label} did not complete: {type(exc).__name__}: {exc}"
            r.result.duration_s = time.monotonic() - r.t0
        if r.result.outcome != "pass":  # kept for the report even when a known bug explains it
            r.result.artifacts = r.failure_artifacts()
        if r.result.outcome in ("fail", "error"):
            _stop(r.ctx, r.result)  # the release it drove (a deferred one: installed)
    finally:  # Ctrl-C and SIGTERM too: the lab never outlives its experiment
        try:
            r.point("teardown")
        finally:
            with r.timed("lab_teardown"):
                _teardown(r)
    return r.result


def _teardown(r: Runner) -> None:
    """The lab's teardown; a failure because the API server is gone is named, not a traceback.

    After a signal the control plane may be why the user interrupted (etcd or the API server
    died): its requests are then bounded to a second and latched (kube.AFTER_SIGNAL_TIMEOUT_S),
    and a teardown that cannot reach it must not turn exit 130 into an error: it is said. Without
    a signal, an API server that stopped answering mid-run is a ProviderError naming the
    cluster (exit 3), not an unexpected transport error: the outcome is unknown, and the
    cluster's deletion (which needs no API server) is what cleans up. A throwaway cluster's
    deletion removes the lab with it; a kept one's lab is named. After a signal, a cluster
    the session deletes whole (`deleted_on_signal`) gets no lab teardown at all: its requests
    cost up to a second under load, of the 2 s a SIGTERM is given. A cluster process that
    died (kube.control_plane_death: etcd out of memory) is named before any request, exit 3.
    """
    if interrupts.interrupted() and getattr(r.ctx.cluster, "deleted_on_signal", False):
        r.stop_recording()  # the lab goes with the cluster, deleted whole next: no requests
        return
    where = (
        f"its namespace {r.ctx.namespace} goes with the cluster when that is deleted "
        "(a kept cluster keeps it: delete it there)"
    )
    died = control_plane_death()
    if died and not interrupts.interrupted():  # its requests would fail or hang: the cause
        r.stop_recording()  # is named instead (which process died, its log), exit 3
        raise ControlPlaneDied(f"{died}\nDuring {r.label}, whose lab was not removed: {where}")
    try:
        r.teardown()
    except Exception as exc:
        if interrupts.interrupted():
            why = api_failure(exc) or f"{type(exc).__name__}: {str(exc)[:200]}"
            say(f"{r.label}: lab teardown after the signal failed ({why}); {where}")
            return
        gone = server_gone(exc)
        if gone is None:
            raise
        raise ProviderError(
            f"the API server of {r.ctx.cluster.provider} cluster {r.ctx.cluster.name} stopped "
            f"answering during {r.label} ({gone}); {api_health(r.ctx.cluster, timeout=2.0)}. "
            f"The experiment's outcome is unknown and its lab was not removed: {where}. "
            "Rerun; if it recurs, rerun with --desched-keep on-failure and read the cluster's "
            "kube-apiserver and etcd logs"
        ) from None


def _arrange_beside_policy(r: Runner, exp: Experiment) -> None:
    """The release's policy (a helm upgrade: seconds) goes on while the lab is arranged.

    They touch different objects (the release's ConfigMap and CronJob; the lab's namespace and
    node labels) and the round, which needs both, starts only after both ended. A lane's own
    release is installed first in the same thread (`ctx.prepare_release`). The policy step's
    error wins over the arrange's: it is the one a user must fix first.
    """
    import threading

    failed: list[BaseException] = []

    def policy() -> None:
        try:
            with r.timed("policy"):
                if r.ctx.prepare_release is not None:
                    r.use_release(r.ctx.prepare_release())
                r.ensure_policy()
        except BaseException as exc:  # re-raised in the experiment's own thread below
            failed.append(exc)

    t = threading.Thread(target=policy, name=f"policy {r.label}", daemon=True)
    t.start()
    try:
        exp.arrange()
    finally:
        t.join()
        if failed:
            raise failed[0]


def _stop(ctx: ExperimentContext, result: ExperimentResult) -> None:
    """Runbook: on anything unexpected, stop the executor first; never mask the failure."""
    try:
        result.artifacts["emergency stop"] = str(emergency_stop(ctx.cluster, ctx.release))
    except Exception as stop_exc:
        result.artifacts["emergency stop"] = f"failed: {stop_exc!r}"
