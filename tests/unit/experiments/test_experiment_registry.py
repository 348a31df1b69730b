"""The experiment registry and `run_experiment`'s guarantees, without a cluster.

`run_experiment` runs on a real `Runner` and a real `ExperimentContext` (its policy is the
real lab policy); only what would reach a cluster is a double: the lab (records teardown),
the release (records the policy it was given) and the emergency stop (records that it ran).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import FrozenInstanceError, dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pytest

import pytest_desched.experiments.declared as declared
from pytest_desched.experiments import (
    REGISTRY,
    Experiment,
    ExperimentContext,
    ExperimentResult,
    lab_policy,
    lookup,
    minpodage,
    nodefit,
    pdb,
    positive,
    run_experiment,
)
from pytest_desched.tools.versions import load_versions


@pytest.fixture(autouse=True)
def registry() -> Iterator[dict[str, type[Experiment]]]:
    """Classes a test defines leave the registry as it found it."""
    before = dict(REGISTRY)
    yield REGISTRY
    REGISTRY.clear()
    REGISTRY.update(before)


# -- registry -------------------------------------------------------------------------------
def test_builtins_are_registered_under_their_names() -> None:
    assert {n: c.__module__ for n, c in REGISTRY.items()}.items() >= {
        "positive": positive.__name__,
        "nodefit": nodefit.__name__,
        "pdb": pdb.__name__,
        "minpodage": minpodage.__name__,
    }.items()
    for name, cls in REGISTRY.items():
        assert cls.name == name and cls.title, name


def test_defining_a_named_subclass_registers_it() -> None:
    class Probe(Experiment):
        name = "unit-probe"
        title = "unit-probe-experiment"

    assert REGISTRY["unit-probe"] is Probe
    assert lookup("unit-probe") is Probe
    assert lookup(Probe) is Probe


def test_an_unnamed_subclass_is_a_base_not_an_experiment() -> None:
    before = dict(REGISTRY)

    class Base(Experiment):
        pass

    assert before == REGISTRY
    assert lookup(Base) is Base  # still runnable when passed as a class


def test_a_duplicate_name_from_another_class_is_refused() -> None:
    class First(Experiment):
        name = "unit-dup"

    with pytest.raises(ValueError, match=f"experiment name 'unit-dup' is taken by {__name__}"):

        class Second(Experiment):
            name = "unit-dup"

    assert REGISTRY["unit-dup"] is First  # the first one keeps the name


def test_a_builtin_name_cannot_be_taken_over() -> None:
    with pytest.raises(ValueError, match=f"'positive' is taken by {positive.__name__}"):

        class MyPositive(Experiment):
            name = "positive"

    assert REGISTRY["positive"].__module__ == positive.__name__


def test_lookup_of_an_unknown_name_names_the_known_ones() -> None:
    with pytest.raises(KeyError) as ei:
        lookup("nosuch")
    msg = ei.value.args[0]
    assert msg == f"unknown experiment 'nosuch'; known: {sorted(REGISTRY)}"
    for name in ("minpodage", "nodefit", "pdb", "positive"):
        assert repr(name) in msg


def test_lookup_refuses_a_class_that_is_not_an_experiment() -> None:
    with pytest.raises(KeyError, match="unknown experiment"):
        lookup(dict)  # type: ignore[arg-type]


# -- run_experiment ---------------------------------------------------------------------------
class FakeLab:
    def __init__(self, events: list[str], snapshot_fails: bool = False) -> None:
        self.events_log = events
        self.snapshot_fails = snapshot_fails

    def snapshot(self) -> Any:
        self.events_log.append("lab.snapshot")
        if self.snapshot_fails:
            raise ConnectionError("API server unreachable")
        return SimpleNamespace(pods=[], pdb={"disruptionsAllowed": 1})

    def events(self) -> list[dict[str, Any]]:
        return []

    def teardown(self, background: bool = False) -> None:
        self.events_log.append("lab.teardown")


class FakeRelease:
    versions = load_versions()
    descheduler_version = versions.descheduler.version
    name = "descheduler"

    def __init__(self, events: list[str]) -> None:
        self.events_log = events
        self.policy: Any = None
        self.dry_run: bool | None = True
        self.applied: list[tuple[str, bool]] = []

    def apply_policy(self, policy: Any, dry_run: bool = False) -> dict[str, Any]:
        self.events_log.append("release.apply_policy")
        self.applied.append((policy.digest(), dry_run))
        self.policy, self.dry_run = policy, dry_run
        return {}


@dataclass(frozen=True)
class FakeContext(ExperimentContext):
    """A real ExperimentContext whose lab is the double (a field: copies keep it)."""

    fake_lab: FakeLab = field(default_factory=lambda: FakeLab([]))

    def lab(self) -> Any:
        return self.fake_lab


@pytest.fixture
def events() -> list[str]:
    return []


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> list[tuple[Any, Any]]:
    """Emergency stops, as (cluster, release)."""
    seen: list[tuple[Any, Any]] = []

    def emergency_stop(cluster: Any, release: Any) -> dict[str, Any]:
        events.append("emergency_stop")
        seen.append((cluster, release))
        return {"suspended": True, "deleted_jobs": [], "kept_started_jobs": []}

    monkeypatch.setattr(declared, "emergency_stop", emergency_stop)
    return seen


def _ctx(events: list[str], snapshot_fails: bool = False) -> FakeContext:
    ctx = FakeContext(
        cluster=SimpleNamespace(provider="fake", toolchain=None),  # type: ignore[arg-type]
        release=FakeRelease(events),  # type: ignore[arg-type]
        policy=lab_policy("pdb-lister-workaround"),
        source="w-1",
        target="w-2",
        namespace="lab-unit",
        fake_lab=FakeLab(events, snapshot_fails),
    )
    return ctx


def _experiment(
    events: list[str], act: Any = None, check_ok: bool | None = None
) -> type[Experiment]:
    class Steps(Experiment):  # unnamed: not registered, passed as a class
        title = "unit-steps"

        def arrange(self) -> None:
            events.append("arrange")

        def act(self) -> None:
            events.append("act")
            if act is not None:
                raise act

        def assess(self) -> None:
            events.append("assess")
            if check_ok is not None:
                self.r.check("unit-check", "the unit expectation holds", check_ok, "detail 42")

    return Steps


def test_a_raising_step_is_an_error_with_traceback_stop_and_teardown(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    ctx = _ctx(events)
    exp = _experiment(events, act=RuntimeError("the round could not start"))
    result = run_experiment(exp, ctx, "pdb-lister-workaround")
    assert isinstance(result, ExperimentResult)
    assert result.outcome == "error"
    assert result.label == "unit-steps[pdb-lister-workaround]"
    assert result.message == (
        "unit-steps[pdb-lister-workaround] did not complete: "
        "RuntimeError: the round could not start"
    )
    assert result.error is not None
    assert result.error.startswith("Traceback (most recent call last):")
    assert "in act" in result.error
    assert result.error.rstrip().endswith("RuntimeError: the round could not start")
    # the steps ran in order and stopped at the raising one; the stop came before teardown
    assert events == [
        "release.apply_policy",
        "arrange",
        "act",
        "lab.snapshot",  # failure artifacts: captured before the lab goes
        "emergency_stop",
        "lab.teardown",
    ]
    assert stops == [(ctx.cluster, ctx.release)]
    assert result.artifacts["emergency stop"].startswith("{'suspended': True")
    assert result.artifacts["pdb"] == '{\n "disruptionsAllowed": 1\n}'
    assert set(result.timings) == {"policy", "arrange", "act", "lab_teardown"}
    assert result.checks == []
    assert ctx.release.applied == [(ctx.policy.digest(), False)]  # type: ignore[attr-defined]


def test_a_failed_stop_is_reported_and_never_masks_the_error(
    events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(cluster: Any, release: Any) -> Any:
        raise ConnectionError("refused")

    monkeypatch.setattr(declared, "emergency_stop", broken)
    ctx = _ctx(events, snapshot_fails=True)
    result = run_experiment(_experiment(events, act=ValueError("bad")), ctx, "runbook")
    assert result.outcome == "error"
    assert "ValueError: bad" in result.message
    assert result.artifacts["emergency stop"] == "failed: ConnectionError('refused')"
    assert result.artifacts["collection error"] == "ConnectionError('API server unreachable')"
    assert events[-1] == "lab.teardown"


def test_ctrl_c_in_a_step_still_tears_the_lab_down(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    ctx = _ctx(events)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(_experiment(events, act=KeyboardInterrupt()), ctx, "runbook")
    assert events == ["release.apply_policy", "arrange", "act", "lab.teardown"]
    assert "assess" not in events


def test_a_failed_check_fails_and_stops_the_executor(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    ctx = _ctx(events)
    result = run_experiment(_experiment(events, check_ok=False), ctx, "runbook")
    assert result.outcome == "fail"
    assert result.error is None
    assert result.message.splitlines()[:2] == [
        "unit-steps[runbook] failed 1 check(s):",
        "  - [unit-check] the unit expectation holds: detail 42",
    ]
    assert [c.id for c in result.failed] == ["unit-check"]
    assert len(stops) == 1
    assert events.index("emergency_stop") < events.index("lab.teardown") == len(events) - 1


def test_a_pass_keeps_the_executor_and_records_the_policy(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    ctx = _ctx(events)
    result = run_experiment(_experiment(events, check_ok=True), ctx)
    assert result.outcome == "pass"
    assert result.variant == "runbook"  # the class's default variant
    assert result.message == "" and result.error is None
    assert stops == []
    assert result.artifacts == {}
    assert events == ["release.apply_policy", "arrange", "act", "assess", "lab.teardown"]
    assert result.policy_digest == ctx.policy.digest()
    assert result.overrides == ctx.policy.overrides
    assert set(result.timings) == {
        "policy",
        "arrange",
        "act",
        "assess",
        "cycles",  # cycles 2..K (none here) and the no-rollout check over all of them
        "record",
        "classify",
        "lab_teardown",
    }


def test_the_policy_is_not_reapplied_when_already_live(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    ctx = _ctx(events)
    ctx.release.policy, ctx.release.dry_run = ctx.policy, False  # type: ignore[misc]
    run_experiment(_experiment(events, check_ok=True), ctx)
    assert ctx.release.applied == []  # type: ignore[attr-defined]


def test_a_custom_policy_label_names_the_result(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    ctx = replace(_ctx(events), policy_label="custom-0123abcd")
    result = run_experiment(_experiment(events, check_ok=True), ctx, "runbook")
    assert result.label == "unit-steps[custom-0123abcd]"


def test_run_experiment_by_registered_name(events: list[str], stops: list[tuple[Any, Any]]) -> None:
    class Named(Experiment):
        name = "unit-named"
        title = "unit-named-experiment"
        default_variant = "pdb-lister-workaround"

        def act(self) -> None:
            events.append("named.act")

    result = run_experiment("unit-named", _ctx(events))
    assert result.label == "unit-named-experiment[pdb-lister-workaround]"
    assert result.outcome == "pass"
    assert "named.act" in events
    with pytest.raises(KeyError, match="unknown experiment 'unit-nosuch'"):
        run_experiment("unit-nosuch", _ctx(events))


def test_an_api_server_gone_at_teardown_is_a_provider_error_naming_the_cluster(
    events: list[str], stops: list[tuple[Any, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-apiserver died mid-run: not an unexpected MaxRetryError, a named error (exit 3)."""
    import urllib3

    import pytest_desched.experiments.declared as declared
    from pytest_desched.errors import ProviderError

    refused = urllib3.exceptions.MaxRetryError(
        None,  # type: ignore[arg-type]
        "/api/v1/namespaces/lab-unit",
        urllib3.exceptions.NewConnectionError(None, "[Errno 111] Connection refused"),  # type: ignore[arg-type]
    )
    ctx = replace(
        _ctx(events),
        cluster=SimpleNamespace(provider="embedded", name="desched-x-1", toolchain=None),
    )
    ctx.fake_lab.teardown = lambda background=False: (_ for _ in ()).throw(refused)  # type: ignore[method-assign]
    monkeypatch.setattr(
        declared, "api_health", lambda c, timeout: "kube-apiserver X is unreachable"
    )
    with pytest.raises(ProviderError) as ei:
        run_experiment(_experiment(events, act=refused), ctx, "pdb-lister-workaround")
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(
        "the API server of embedded cluster desched-x-1 stopped answering during "
        "unit-steps[pdb-lister-workaround] (connection refused (NewConnectionError)); "
        "kube-apiserver X is unreachable."
    ), msg
    assert "Rerun" in msg and "lab-unit" in msg
    assert stops == [(ctx.cluster, ctx.release)]  # the emergency stop was still tried first


def test_a_teardown_error_that_is_not_the_api_server_passes_unchanged(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    ctx = _ctx(events)
    ctx.fake_lab.teardown = lambda background=False: (_ for _ in ()).throw(ValueError("mine"))  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="mine"):
        run_experiment(_experiment(events), ctx, "pdb-lister-workaround")


def test_after_a_signal_a_cluster_deleted_whole_gets_no_lab_teardown(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    """Its deletion removes the lab; the teardown's requests would only delay the exit."""
    from pytest_desched import interrupts

    ctx = _ctx(events)
    ctx.cluster.deleted_on_signal = True  # type: ignore[attr-defined]
    interrupts.reset()
    interrupts._received.append((15, 0.0))  # a SIGTERM came during the act
    try:
        with pytest.raises(KeyboardInterrupt):
            run_experiment(_experiment(events, act=KeyboardInterrupt("signal 15")), ctx, "default")
    finally:
        interrupts.reset()
    assert "lab.teardown" not in events
    ctx2 = _ctx(events2 := [])
    interrupts._received.append((15, 0.0))
    try:
        with pytest.raises(KeyboardInterrupt):  # kept or existing: the lab is still removed
            run_experiment(
                _experiment(events2, act=KeyboardInterrupt("signal 15")), ctx2, "default"
            )
    finally:
        interrupts.reset()
    assert events2[-1] == "lab.teardown"


def test_a_context_is_built_whole_never_written_into(
    events: list[str], stops: list[tuple[Any, Any]]
) -> None:
    """Item 3 of issue 30: a field of a built context cannot be set (lanes, fidelity and a
    deferred release derive copies); a run on a copy leaves the caller's context as built."""
    ctx = _ctx(events)
    for name, value in (("policy_label", "x"), ("release", None), ("on_record", print)):
        with pytest.raises(FrozenInstanceError):
            setattr(ctx, name, value)
    installed = FakeRelease(events)
    deferred = replace(ctx, prepare_release=lambda: installed)
    seen: list[Any] = []

    class SeesRelease(Experiment):
        title = "unit-sees-release"

        def act(self) -> None:
            seen.append(self.ctx.release)

    result = run_experiment(SeesRelease, deferred)
    assert result.outcome == "pass", result.message
    assert seen == [installed] and installed.applied  # the installed release ran the policy
    assert deferred.release is ctx.release is not installed  # the caller's: unchanged
    assert stops == []
    # a failing run's emergency stop stops the release it drove, not the placeholder
    failing = replace(ctx, prepare_release=lambda: installed)
    result = run_experiment(_experiment(events, act=RuntimeError("x")), failing)
    assert result.outcome == "error"
    assert stops == [(ctx.cluster, installed)]
