"""Fixtures: thin wrappers over one DeschedSession per pytest session, plus factories.

The default fixtures (`desched_cluster`, `desched_release`, ...) are the session's stages;
`desched_cluster_factory` and `desched_release_factory` make more of them for tests that
need two clusters or two releases (pytest-postgresql style), each cleaned up after its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_desched import interrupts
from pytest_desched.artifacts_dir import release_if_empty
from pytest_desched.errors import ConfigError, PolicyError, ProviderError, ToolError
from pytest_desched.plugin.options import config_from_pytest, opt
from pytest_desched.plugin.reporting import junit_entry, terminal_reporter
from pytest_desched.plugin.state import set_entry, state
from pytest_desched.session import DeschedSession, interrupts_unwind

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.evidence.writer import EvidenceWriter
    from pytest_desched.experiments import Experiment, ExperimentContext, ExperimentResult
    from pytest_desched.providers.base import Cluster
    from pytest_desched.tools.toolchain import Toolchain

T = TypeVar("T")


@pytest.fixture(scope="session")
def desched_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeschedConfig]:
    """The run's configuration; while in use, SIGTERM unwinds like Ctrl-C. The evidence folder
    it claimed is removed at the end if nothing was written to it (a run that failed before
    its first record left one empty folder per attempt)."""
    config = config_from_pytest(request.config, tmp_path_factory)
    claimed = not opt(request.config, "--desched-artifacts")  # a folder the user named stays
    try:
        with interrupts_unwind():
            yield config
    finally:
        if claimed and release_if_empty(config.artifacts):
            state(request.config).artifacts = None  # the summary names no folder that is gone


def _session_for(
    request: pytest.FixtureRequest, config: DeschedConfig, info: dict[str, Any]
) -> DeschedSession:

    return DeschedSession(config, report=terminal_reporter(request.config), info=info)


@pytest.fixture(scope="session")
def desched_session(
    request: pytest.FixtureRequest, desched_settings: DeschedConfig
) -> Iterator[DeschedSession]:
    """The engine for this pytest session; its stages start when a fixture first needs them."""
    st = state(request.config)
    session = _session_for(request, desched_settings, st.info)
    st.session = session
    try:
        yield session
    finally:
        session.failed = request.session.testsfailed > 0
        try:
            session.close()
        finally:
            if interrupts.interrupted():  # what the cleanup verified, kept or left
                session.report(interrupts.exit_message())


@pytest.fixture(scope="session")
def desched_toolchain(desched_session: DeschedSession) -> Toolchain:
    return _said_in_one_line(lambda: desched_session.toolchain)


def _said_in_one_line(call: Callable[[], T]) -> T:
    """`call()`, with a named failure of the engine as the one line it already is, not a
    40-line traceback: no cluster or no tool (ProviderError, ToolError: the test errors with
    the message and its fix), or the user's inputs refused before any change (usage error)."""
    failed = ""
    try:
        return call()
    except (ProviderError, ToolError) as exc:
        failed = str(exc)
    except (ConfigError, PolicyError) as exc:
        raise pytest.UsageError(str(exc)) from None
    pytest.fail(failed, pytrace=False)  # outside the except: no "During handling..." copy


def _cluster(session: DeschedSession) -> Cluster:
    return _said_in_one_line(lambda: session.cluster)


@pytest.fixture(scope="session")
def desched_cluster(desched_session: DeschedSession) -> Cluster:
    """The session's cluster; deleted on pass, fail, Ctrl-C and SIGTERM unless kept."""
    return _cluster(desched_session)


@pytest.fixture(scope="session")
def desched_evidence(
    request: pytest.FixtureRequest, desched_session: DeschedSession, desched_cluster: Cluster
) -> EvidenceWriter:
    state(request.config).redactor = desched_session.redactor
    return desched_session.evidence


@pytest.fixture(scope="session")
def desched_release(desched_session: DeschedSession, desched_cluster: Cluster) -> Release:
    """The chart at its pinned version, first-installed suspended and in dry run (runbook)."""
    return _said_in_one_line(lambda: desched_session.release)


@pytest.fixture
def desched_context(
    request: pytest.FixtureRequest,
    desched_session: DeschedSession,
    desched_release: Release,
    desched_evidence: EvidenceWriter,
) -> Callable[..., ExperimentContext]:
    """Factory for an ExperimentContext: `desched_context(variant=..., source=..., ...)`.

    Every input (namespace, nodes, replicas, variant, overrides, policy) is checked before
    the experiment changes anything: a bad one is a one-line UsageError naming the input and
    the fix. `policy` is anything `Policy.coerce` takes (Policy, path, mapping, YAML text).
    """

    def make(**params: Any) -> ExperimentContext:
        params.setdefault("why", f"test override in {request.node.nodeid}")
        try:
            return desched_session.context(**params)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None

    return make


@pytest.fixture
def desched_experiment(
    request: pytest.FixtureRequest,
    desched_session: DeschedSession,
    desched_release: Release,
    desched_evidence: EvidenceWriter,
) -> Callable[..., ExperimentResult]:
    """Run an experiment: `desched_experiment("positive", variant=..., replicas=3)`.

    Takes a registered name or an `Experiment` subclass. A pass returns the result; an
    expected failure raises KnownUpstreamBug; anything else fails the test. An experiment the
    provider cannot run (`Experiment.refusal`: say, pod status its kubelets overwrite) skips.
    """

    def run(
        experiment: str | type[Experiment], variant: str | None = None, **params: Any
    ) -> ExperimentResult:
        # heavy: the kubernetes client, kept out of pytest start-up
        from pytest_desched.experiments import lookup

        try:
            cls = lookup(experiment)
        except KeyError as exc:
            raise pytest.UsageError(str(exc.args[0])) from None
        refusal = desched_session.refusal(cls)
        if refusal is not None:  # what the provider cannot do: a platform's skip
            pytest.skip(refusal)
        entry: dict[str, Any] = {"nodeid": request.node.nodeid, "rounds": []}
        params.setdefault("why", f"test override in {request.node.nodeid}")
        result = _said_in_one_line(
            lambda: desched_session.run(
                cls, variant=variant, on_record=entry["rounds"].append, **params
            )
        )
        entry["name"] = f"{cls.name}[{result.variant}]"
        entry["result"] = result
        state(request.config).results.append(entry)
        set_entry(request.node, entry)
        for k, v in junit_entry(entry).items():  # key figures reach JUnit for failures too
            request.node.user_properties.append((k, v))
        # The page is written at session end; its path is known now, so JUnit can carry it.
        request.node.user_properties.append(("desched.report", str(desched_session.report_path)))
        # Which Kubernetes this test's cluster ran: merged shards of a grid are told apart by it.
        request.node.user_properties.append(
            ("desched.kubernetes", str(desched_session.info.get("server") or ""))
        )
        return result.raise_for_outcome()

    return run


def _marker(
    request: pytest.FixtureRequest, name: str, usage: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The closest `@pytest.mark.<name>(...)`'s arguments; a usage error without one."""
    m = request.node.get_closest_marker(name)
    if m is None or not m.args:
        raise pytest.UsageError(f"{request.fixturename} needs @pytest.mark.{name}({usage})")
    return m.args, m.kwargs


@pytest.fixture
def desched_experiment_result(
    request: pytest.FixtureRequest, desched_experiment: Callable[..., ExperimentResult]
) -> ExperimentResult:
    """The result of the experiment named by `@pytest.mark.desched_experiment(name, **params)`."""
    args, kwargs = _marker(request, "desched_experiment", "name, ...")
    return desched_experiment(args[0], **kwargs)


@pytest.fixture
def desched_lab(
    desched_cluster: Cluster, desched_settings: DeschedConfig, desched_release: Release
) -> Iterator[Any]:
    """A Lab in the session's lab namespace for hand-written experiments; torn down after."""
    # heavy: the kubernetes client, kept out of pytest start-up
    from pytest_desched.lab.lab import Lab

    lab = Lab(
        desched_cluster, desched_settings.namespace, image=desched_release.versions.workload_image
    )
    try:
        yield lab
    finally:
        lab.teardown()


@pytest.fixture
def desched_cluster_factory(
    request: pytest.FixtureRequest, desched_settings: DeschedConfig
) -> Iterator[Callable[..., DeschedSession]]:
    """Make another session (its own cluster) with config changes: `factory(workers=4)`.

    Returns the session; its cluster (`.cluster`) and release (`.release`) start on first
    use, and everything it made is removed after the test.
    """
    made: list[DeschedSession] = []

    def make(**changes: Any) -> DeschedSession:
        import tempfile
        from pathlib import Path

        run_dir = Path(tempfile.mkdtemp(prefix="desched-", dir=desched_settings.run_dir))
        try:
            config = desched_settings.with_(run_dir=run_dir, **changes)
        except (ConfigError, TypeError) as exc:
            raise pytest.UsageError(f"desched_cluster_factory: {exc}") from None
        session = _session_for(request, config, {})
        made.append(session)
        return session

    try:
        yield make
    finally:
        for session in reversed(made):
            session.close()


@pytest.fixture
def desched_release_factory(
    desched_session: DeschedSession, desched_cluster: Cluster
) -> Iterator[Callable[..., Release]]:
    """Install another release in the session's cluster: `factory("canary", version=...)`.

    First install, as always: suspended and in dry run. Uninstalled after the test.
    """
    # heavy: the kubernetes client, kept out of pytest start-up
    from pytest_desched.descheduler.cleanup import cleanup_release

    made: list[Release] = []

    def make(name: str, version: str | None = None) -> Release:
        rel = desched_session.new_release(name, version=version)
        made.append(rel)
        return rel

    try:
        yield make
    finally:
        for rel in reversed(made):
            if rel.installed:
                cleanup_release(desched_cluster, rel)


_VALUES_KW = ("values", "baseline_values", "candidate_values")


@pytest.fixture
def desched_canary(
    request: pytest.FixtureRequest, desched_settings: DeschedConfig
) -> Callable[..., Any]:
    """Run an upgrade canary: `desched_canary("source:PATH", expect=FILE)` -> CanaryReport.

    `baseline=SPEC, baseline_chart=CHART` start from another release than the pin;
    `values=[...]` (both tracks), `baseline_values=` / `candidate_values=` as the options;
    `round_timeout=` seconds before a round's Job is stopped and read (default 120).
    `provider=` both tracks' provider, where not the session's.
    `snapshot=FILE` canaries on that snapshot instead of the lab (`desched canary --snapshot`).

    Each call brings up its own two clusters (baseline and candidate) and removes them; the
    report goes under `<artifacts>/canary-N/`. The test decides what the verdict means
    (`assert report.ok, report.verdict.reasons`).
    """
    import tempfile
    from pathlib import Path

    # heavy: the kubernetes client, kept out of pytest start-up
    from pytest_desched.canary.engine import run_canary

    say = terminal_reporter(request.config)
    count = [0]

    def run(candidate: str, chart: str | None = None, **kw: Any) -> Any:
        count[0] += 1
        run_dir = Path(tempfile.mkdtemp(prefix="canary-", dir=desched_settings.run_dir))
        name = f"canary-{request.node.name}-{count[0]}".replace("/", "_")
        # values=, baseline_values=, candidate_values=: Helm values files, as the options
        files: dict[str, Any] = {k: tuple(map(Path, kw.pop(k))) for k in _VALUES_KW if k in kw}
        if "round_timeout" in kw:  # each round's Job stopped and read after this (seconds)
            files["round_timeout"] = float(kw.pop("round_timeout"))
        if "provider" in kw:  # both tracks' (an experiment that needs what one provider serves)
            files["provider"] = kw.pop("provider")
        config = desched_settings.with_(
            run_dir=run_dir, artifacts=desched_settings.artifacts / name, **files
        )
        try:
            if "snapshot" in kw:  # the canary on a snapshot (canary/snapshot.py)
                # heavy: modules beside the canary's, kept out of pytest start-up
                from pytest_desched.canary.snapshot import run_snapshot_canary

                snap = kw.pop("snapshot")
                rep = run_snapshot_canary(config, candidate, snap, chart, report=say, **kw)
            else:
                rep = run_canary(config, candidate, chart, report=say, **kw)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        request.node.user_properties.append(("desched.canary", str(config.artifacts)))
        request.node.user_properties.append(("desched.canary.ok", str(rep.ok)))
        return rep

    return run


@pytest.fixture
def desched_canary_report(
    request: pytest.FixtureRequest, desched_canary: Callable[..., Any]
) -> Any:
    """The report of `@pytest.mark.desched_canary(candidate, chart=None, expect=..., ...)`."""
    args, kwargs = _marker(request, "desched_canary", "SPEC, ...")
    return desched_canary(*args, **kwargs)


__all__ = [
    "desched_canary",
    "desched_canary_report",
    "desched_cluster",
    "desched_cluster_factory",
    "desched_context",
    "desched_evidence",
    "desched_experiment",
    "desched_experiment_result",
    "desched_lab",
    "desched_release",
    "desched_release_factory",
    "desched_session",
    "desched_settings",
    "desched_toolchain",
]
