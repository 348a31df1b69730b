"""DeschedSession without a cluster: phases, lazy stages, input checks, keep and close.

Where a stage would start a cluster, a double is put in its place directly
(`session._cluster`, `_release`, `_provider`): the logic under test is the session's own
(validation order, what close() undoes and in which order), and every double records what
was done to it so the tests assert on what happened, not on what was called.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import pytest_desched.descheduler.cleanup as cleanup
from pytest_desched.config import build_config
from pytest_desched.descheduler.policy import PolicyError, load_default
from pytest_desched.errors import ConfigError, ProviderError
from pytest_desched.experiments import ExperimentContext, ExperimentResult, lab_policy
from pytest_desched.experiments import lookup as lookup_experiment
from pytest_desched.session import DeschedSession, interrupts_unwind

WORKERS = ["w-1", "w-2", "w-3"]


@pytest.fixture(autouse=True)
def _no_desched_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("DESCHED_"):
            monkeypatch.delenv(key)


def _config(tmp_path: Path, **values: Any) -> Any:
    flags = {"--desched-cache-dir": str(tmp_path / "cache"), "--desched-provider": "embedded"}
    flags.update({f"--desched-{k.replace('_', '-')}": v for k, v in values.items()})
    return build_config(flags, run_dir=tmp_path / "run")


class StrictCluster:
    """Only what validation may read; anything else (an API client...) is an AttributeError."""

    provider, name = "fake", "fake-cluster"

    def __init__(self, workers: list[str] | None = None) -> None:
        self.workers = list(WORKERS if workers is None else workers)
        self.scoped = 0  # how often a policy was held to this cluster's scope

    @property
    def lab_node_selector(self) -> None:
        """A throwaway cluster: no scope (descheduler.policy.scope reads it once a policy)."""
        self.scoped += 1


class StrictRelease:
    def __init__(self, namespace: str = "kube-system") -> None:
        self.namespace = namespace


@pytest.fixture
def session(tmp_path: Path) -> Iterator[DeschedSession]:
    s = DeschedSession(_config(tmp_path), report=lambda _: None)
    s._cluster = StrictCluster()  # type: ignore[assignment]
    s._release = StrictRelease()  # type: ignore[assignment]
    yield s


# -- phases --------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def test_phase_accumulates_into_timings_and_tells_every_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr("pytest_desched.session.time", clock)
    seen_a: list[tuple[str, float]] = []
    seen_b: list[tuple[str, float]] = []
    s = DeschedSession(
        _config(tmp_path), report=lambda _: None, on_phase=[lambda n, dt: seen_a.append((n, dt))]
    )
    s.on_phase.append(lambda n, dt: seen_b.append((n, dt)))
    with s.phase("install"):
        clock.now += 1.5
    with s.phase("bring_up"):
        clock.now += 0.25
    with s.phase("install"):  # repeated: added up
        clock.now += 2.25
    assert s.timings == {"install": 3.75, "bring_up": 0.25}
    assert seen_a == seen_b == [("install", 1.5), ("bring_up", 0.25), ("install", 2.25)]


def test_phase_is_recorded_when_the_block_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr("pytest_desched.session.time", clock)
    seen: list[str] = []
    s = DeschedSession(
        _config(tmp_path), report=lambda _: None, on_phase=[lambda n, _: seen.append(n)]
    )
    with pytest.raises(KeyboardInterrupt), s.phase("teardown.cluster"):
        clock.now += 4.0
        raise KeyboardInterrupt
    assert s.timings == {"teardown.cluster": 4.0}
    assert seen == ["teardown.cluster"]


# -- lazy stages ---------------------------------------------------------------------------
def test_untouched_session_creates_nothing_on_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_desched.providers as providers

    def no_provider(*a: Any, **kw: Any) -> Any:
        raise AssertionError("close() of an untouched session made a provider")

    monkeypatch.setattr(providers, "make_provider", no_provider)
    config = _config(tmp_path)
    s = DeschedSession(config, report=lambda _: None)
    assert s.close() == {}
    assert s._provider is None and s._cluster is None and s._release is None
    assert s._toolchain is None  # not even the toolchain was resolved
    assert s.timings == {}
    assert not (tmp_path / "cache").exists()
    assert not config.run_dir.exists()
    assert not config.artifacts.exists()


def test_exiting_an_untouched_session_with_an_error_creates_nothing(tmp_path: Path) -> None:
    s = DeschedSession(_config(tmp_path), report=lambda _: None)
    s.__exit__(RuntimeError, RuntimeError("x"), None)
    assert s.failed is True
    assert s._provider is None
    assert not (tmp_path / "cache").exists()


# -- context: every input checked before any change ------------------------------------------
@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"variant": "nosuch"}, r"unknown policy variant 'nosuch'; use one of \('runbook', 'pdb-lister-workaround'\)"),
        ({"overrides": ["maxNoOfPodsToEvictTotal", 1]}, "overrides must be a mapping of policy path -> value, got list"),
        ({"namespace": "kube-system"}, "lab namespace 'kube-system' is reserved"),
        ({"namespace": "default"}, "lab namespace 'default' is reserved"),
        ({"namespace": "Bad_NS"}, "not a valid RFC 1123 label"),
        ({"namespace": ""}, "must be a non-empty string"),
        ({"source": "w-9"}, r"source node 'w-9' is not a lab worker of this cluster; use one of \['w-1', 'w-2', 'w-3'\]"),
        ({"target": "control-plane"}, "target node 'control-plane' is not a lab worker"),
        ({"source": "w-2", "target": "w-2"}, "source and target nodes must differ"),
        ({"replicas": 0}, "replicas must be an integer >= 1, got 0"),
        ({"replicas": True}, "replicas must be an integer >= 1, got True"),
        ({"replicas": "3"}, "replicas must be an integer >= 1, got '3'"),
    ],
)  # fmt: skip
def test_context_refuses_bad_input_before_any_change(
    session: DeschedSession, kw: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigError, match=match) as ei:
        session.context(**kw)
    assert "\n" not in str(ei.value)  # one line
    assert session._cluster.scoped == 0  # type: ignore[union-attr]  # no policy was made
    assert session._evidence is None
    assert not session.config.artifacts.exists()
    assert session._provider is None


@pytest.mark.parametrize("cycles", [1, "1"])
def test_run_refuses_no_loop_with_one_cycle_before_any_change(
    session: DeschedSession, cycles: object
) -> None:
    # one cycle cannot show a loop (a pod coming back in a later cycle): refused, not passed
    with pytest.raises(ConfigError, match=r"no_loop=True with 1 cycle\(s\) of positive") as ei:
        session.run("positive", no_loop=True, cycles=cycles)
    assert "cycles >= 2" in str(ei.value) and "\n" not in str(ei.value)
    assert session._cluster.scoped == 0  # type: ignore[union-attr]  # no policy was made
    assert session._evidence is None and session._namespaces_used == set()


def test_context_reserves_the_release_namespace(tmp_path: Path) -> None:
    s = DeschedSession(_config(tmp_path), report=lambda _: None)
    s._cluster = StrictCluster()  # type: ignore[assignment]
    s._release = StrictRelease(namespace="desched-system")  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="'desched-system' is reserved"):
        s.context(namespace="desched-system")


def test_context_refuses_a_cluster_with_one_worker(tmp_path: Path) -> None:
    s = DeschedSession(_config(tmp_path), report=lambda _: None)
    s._cluster = StrictCluster(workers=["w-1"])  # type: ignore[assignment]
    s._release = StrictRelease()  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="target node None is not a lab worker"):
        s.context()


def test_context_refuses_an_invalid_policy_before_any_change(session: DeschedSession) -> None:
    bad = load_default().to_dict()
    bad["profiles"][0]["plugins"]["deschedule"]["enabled"] = ["NoSuchPlugin"]
    with pytest.raises(PolicyError):
        session.context(policy=bad)
    assert session._evidence is None
    with pytest.raises(TypeError):
        session.context(policy=42)


def test_context_defaults_come_from_the_config_and_workers(session: DeschedSession) -> None:
    ctx = session.context()
    assert isinstance(ctx, ExperimentContext)
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # the config's namespace per xdist worker
    assert (ctx.namespace, ctx.source, ctx.target, ctx.replicas) == (
        f"descheduler-lab-{worker}" if worker else "descheduler-lab",
        "w-1",
        "w-2",
        3,
    )
    assert ctx.policy == lab_policy("runbook")
    assert ctx.policy_label is None  # a built-in variant is filed under its own name
    assert ctx.keep_lab is False
    assert ctx.log_dir == session.config.run_dir / "round-logs"
    assert ctx.evidence is session.evidence
    assert session._cluster.scoped == 1  # type: ignore[union-attr]


def test_context_overrides_are_recorded_with_why(session: DeschedSession) -> None:
    ctx = session.context(
        variant="pdb-lister-workaround",
        namespace="lab-x",
        source="w-3",
        target="w-1",
        replicas=4,
        overrides={"maxNoOfPodsToEvictTotal": 1},
        why="unit test",
    )
    assert (ctx.namespace, ctx.source, ctx.target, ctx.replicas) == ("lab-x", "w-3", "w-1", 4)
    last = ctx.policy.overrides[-1]
    assert (last["path"], last["new"], last["why"]) == ("maxNoOfPodsToEvictTotal", 1, "unit test")
    base = lab_policy("pdb-lister-workaround")
    assert ctx.policy.overrides[:-1] == base.overrides
    assert session._cluster.scoped == 1  # type: ignore[union-attr]


def test_custom_policy_gets_a_label_from_its_digest(session: DeschedSession) -> None:
    own = load_default().override(
        "profiles.safe-rebalance.DefaultEvictor.minPodAge", "0s", why="mine"
    )
    for given in (own, own.to_dict(), own.to_yaml()):
        ctx = session.context(policy=given)
        assert ctx.policy_label == f"custom-{own.digest()[:8]}"
        assert ctx.policy.digest() == own.digest()
    # the label names the caller's policy, before any override the call adds
    ctx = session.context(policy=own, overrides={"maxNoOfPodsToEvictTotal": 1})
    assert ctx.policy_label == f"custom-{own.digest()[:8]}"
    assert ctx.policy.digest() != own.digest()


# -- keep ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("keep", "failed", "kept"),
    [
        ("never", False, False),
        ("never", True, False),
        ("on-failure", False, False),
        ("on-failure", True, True),
        ("always", False, True),
        ("always", True, True),
    ],
)
def test_keep_follows_the_option_and_failed(
    tmp_path: Path, keep: str, failed: bool, kept: bool
) -> None:
    s = DeschedSession(_config(tmp_path, keep=keep), report=lambda _: None)
    assert s.keep is (keep == "always")
    s.failed = failed
    assert s.keep is kept


class FakeProvider:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.keep = False
        self.stopped_with_keep: list[bool] = []

    def stop(self) -> None:
        self.log.append("cluster")
        self.stopped_with_keep.append(self.keep)

    def resume_hint(self) -> str:
        return "export KUBECONFIG=/x/kubeconfig"


def _staged(
    tmp_path: Path, keep: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[DeschedSession, list[str], FakeProvider]:
    log: list[str] = []
    s = DeschedSession(_config(tmp_path, keep=keep), report=lambda _: None)
    provider = FakeProvider(log)
    s._provider = provider  # type: ignore[assignment]
    s._cluster = StrictCluster()  # type: ignore[assignment]
    s._release = SimpleNamespace(installed=True, name="descheduler")  # type: ignore[assignment]
    monkeypatch.setattr(
        cleanup, "cleanup_release", lambda c, r: log.append("cleanup") or {"leftovers": []}
    )
    monkeypatch.setattr(
        cleanup, "emergency_stop", lambda c, r: log.append("stop") or {"suspended": True}
    )
    return s, log, provider


def test_close_removes_release_then_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, log, provider = _staged(tmp_path, "on-failure", monkeypatch)
    out = s.close()
    assert log == ["cleanup", "cluster"]  # the runbook's reverse ownership order
    assert provider.stopped_with_keep == [False]
    assert out == {"cleanup": {"leftovers": []}}
    assert set(s.timings) == {"teardown.release", "teardown.cluster"}


def test_close_on_failure_keeps_and_only_stops_the_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, log, provider = _staged(tmp_path, "on-failure", monkeypatch)
    s.__exit__(AssertionError, AssertionError("x"), None)  # a failure inside `with session`
    assert s.failed
    assert log == ["stop", "cluster"]  # emergency stop, never an uninstall
    assert provider.stopped_with_keep == [True]
    assert s.info["kept"] == "export KUBECONFIG=/x/kubeconfig"


def test_close_stops_the_cluster_even_when_release_cleanup_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, log, provider = _staged(tmp_path, "never", monkeypatch)

    def broken(c: Any, r: Any) -> Any:
        raise RuntimeError("API server gone")

    monkeypatch.setattr(cleanup, "cleanup_release", broken)
    with pytest.raises(RuntimeError, match="API server gone"):
        s.close()
    assert log == ["cluster"]
    assert provider.stopped_with_keep == [False]


def test_failed_enter_still_tears_down_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (fixed): `__enter__` brings up the cluster, then installs the release. When the install
    raises (a refused version, an unsafe render, Ctrl-C), `with` never calls `__exit__`, so
    close() never runs: the cluster started for `desched run` stays up (kwokctl components
    keep running; only a later run reaps it), although exit 130 promises a clean-up."""
    log: list[str] = []
    s = DeschedSession(_config(tmp_path), report=lambda _: None)
    provider = FakeProvider(log)
    s._provider = provider  # type: ignore[assignment]
    s._cluster = StrictCluster()  # type: ignore[assignment]  # the cluster is up

    def refused(name: str, version: str | None = None, workdir: Path | None = None) -> Any:
        raise ConfigError("descheduler version '7d2b28bf2' has no published image")

    monkeypatch.setattr(s, "new_release", refused)
    with pytest.raises(ConfigError), s:
        pytest.fail("the body must not run")
    assert log == ["cluster"], "the cluster started by __enter__ was left running"


# -- run wires lookup, context and the framework -------------------------------------------
def test_run_uses_the_experiments_default_variant_and_min_pod_age(
    session: DeschedSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_desched.experiments as experiments

    seen: dict[str, Any] = {}

    def fake_run(cls: type, ctx: ExperimentContext, variant: str) -> ExperimentResult:
        seen.update(cls=cls, ctx=ctx, variant=variant)
        return ExperimentResult(cls.title, variant, timings={"act": 1.25, "arrange": 0.5})

    monkeypatch.setattr(experiments, "run_experiment", fake_run)
    records: list[dict[str, Any]] = []
    result = session.run("minpodage", on_record=records.append)
    cls = experiments.REGISTRY["minpodage"]
    assert seen["cls"] is cls
    assert seen["variant"] == cls.default_variant == "pdb-lister-workaround"
    ctx = seen["ctx"]
    assert ctx.on_record == records.append
    # minPodAge is the one experiment that keeps the runbook's unmodified value
    assert ctx.policy == lab_policy("pdb-lister-workaround", keep_min_pod_age=True)
    assert ctx.policy != lab_policy("pdb-lister-workaround")
    assert "experiment.minpodage[pdb-lister-workaround]" in session.timings
    assert session.timings[f"experiment.minpodage[{result.variant}].act"] == 1.25
    assert session.timings[f"experiment.minpodage[{result.variant}].arrange"] == 0.5


def test_run_refuses_an_unknown_experiment_before_any_change(session: DeschedSession) -> None:
    with pytest.raises(KeyError, match="unknown experiment 'nosuch'; known: "):
        session.run("nosuch")
    assert session._evidence is None
    assert session._cluster.scoped == 0  # type: ignore[union-attr]


# -- SIGTERM --------------------------------------------------------------------------------
def test_interrupts_unwind_turns_sigterm_into_keyboard_interrupt_then_restores() -> None:
    before = signal.getsignal(signal.SIGTERM)
    unwound: list[str] = []
    with pytest.raises(KeyboardInterrupt, match="signal"), interrupts_unwind():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            unwound.append("finally ran")
    assert unwound == ["finally ran"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_interrupts_unwind_leaves_other_threads_alone() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[Any] = []

    def worker() -> None:
        with interrupts_unwind():
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [before]


# -- the final lab-namespace scan: only where the cluster stays ----------------------------
class FakeReaper:
    def __init__(self, log: list[str]) -> None:
        self.log, self.pending = log, ["descheduler-lab", "descheduler-lab-2"]

    def wait_all(self) -> list[str]:
        self.log.append("scan")
        gone, self.pending = self.pending, []
        return gone


class DeletingProvider(FakeProvider):
    """Deletes whole and checks it, as EmbeddedProvider.stop does; `left` fakes a leak."""

    name = "embedded"
    deletion_is_cleanup_proof = True

    def __init__(self, log: list[str], left: bool = False) -> None:
        super().__init__(log)
        self.left = left
        self.teardown: dict[str, Any] | None = None

    def stop(self) -> None:
        super().stop()
        if not self.keep:
            text = "embedded cluster c: 1 processes ([42]) left" if self.left else "c deleted"
            self.teardown = {"deleted": True, "left": self.left, "text": text}


def _with_reaper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: FakeProvider, created: bool = True
) -> tuple[DeschedSession, list[str]]:
    from pytest_desched import interrupts

    interrupts.reset()  # the signal tests above leave theirs: no signal arrived here
    s, log, _ = _staged(tmp_path, "on-failure", monkeypatch)
    provider.log = log
    s._provider = provider  # type: ignore[assignment]
    cluster = StrictCluster()
    cluster.namespace_reaper = FakeReaper(log)  # type: ignore[attr-defined]
    cluster.created = created  # type: ignore[attr-defined]
    s._cluster = cluster  # type: ignore[assignment]
    return s, log


def test_a_discarded_embedded_cluster_is_not_scanned_its_checked_deletion_is_the_proof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, log = _with_reaper(tmp_path, monkeypatch, DeletingProvider([]))
    out = s.close()
    assert "scan" not in log, log  # no wait for namespaces that go with the cluster
    assert log == ["cleanup", "cluster"]
    assert out["namespaces_discarded"] == ["descheduler-lab", "descheduler-lab-2"]
    assert out["cluster_deleted"] == "c deleted"
    assert "teardown.namespaces" not in s.timings


def test_a_discarded_cluster_whose_deletion_left_processes_fails_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, log = _with_reaper(tmp_path, monkeypatch, DeletingProvider([], left=True))
    with pytest.raises(ProviderError, match=r"1 processes \(\[42\]\) left"):
        s.close()
    assert "scan" not in log


@pytest.mark.parametrize(
    ("provider_kind", "keep", "created"),
    [
        ("kind", "never", True),  # kind's stop() does not check its deletion
        ("existing", "never", False),  # a user's cluster stays
        ("embedded", "always", True),  # a kept embedded cluster stays
        ("embedded", "never", False),  # an embedded cluster this session did not create
    ],
)
def test_the_final_scan_still_runs_where_the_cluster_stays_or_is_unchecked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider_kind: str, keep: str, created: bool
) -> None:
    provider = DeletingProvider([]) if provider_kind == "embedded" else FakeProvider([])
    s, log = _with_reaper(tmp_path, monkeypatch, provider, created=created)
    s.config = replace(s.config, keep=keep)
    out = s.close()
    assert log.index("scan") < log.index("cluster"), log  # the cluster stops after the scan
    assert out["namespaces_gone"] == ["descheduler-lab", "descheduler-lab-2"]
    assert "namespaces_discarded" not in out


@pytest.mark.parametrize("keep", ["always", "never"])
def test_a_kept_clusters_run_folder_outlives_the_runs_temporary_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: str
) -> None:
    """The kept cluster's kubeconfig (its resume hint) lives in the run folder: `desched`
    removes its temporary folders at exit (scratch), but not that one."""
    from pytest_desched import scratch

    before = scratch.made()
    s, _ = _with_reaper(tmp_path, monkeypatch, DeletingProvider([]))
    # under tmp_path: a kept folder is left by design, and this test's must not outlive it
    s.config = replace(s.config, keep=keep, run_dir=scratch.make(parent=tmp_path))
    s.close()
    assert scratch.remove_all(but=before) == []
    assert s.config.run_dir.is_dir() is (keep == "always")


def test_an_experiment_the_provider_cannot_keep_is_refused_before_its_lab(
    session: DeschedSession,
) -> None:
    """too-many-restarts needs restarts, which an existing cluster's nodes cannot be asked
    for: refused before any namespace or policy (the plugin skips with the same reason)."""
    from pytest_desched.capabilities import CAPABILITIES

    session._cluster.capabilities = CAPABILITIES["existing"]  # type: ignore[union-attr]
    assert session.refusal(lookup_experiment("positive")) is None  # declares no need
    with pytest.raises(ConfigError, match="existing provider's kubelets own their pods' status"):
        session.run("too-many-restarts")
    assert session._cluster.scoped == 0  # type: ignore[union-attr]  # no policy was made
    assert session._evidence is None and session._namespaces_used == set()
