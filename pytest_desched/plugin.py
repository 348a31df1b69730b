"""pytest entry point: markers, thin fixtures, report header and summary.

Options live in settings.py; no cluster work happens at import or configure time, so
`pytest --help` and `pytest --markers` work on any machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_desched.settings import (
    MARKERS,
    Settings,
    add_options,
    parse_bins,
    settings_from_config,
)
from pytest_desched.settings import opt as _opt

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_desched.chart import Release
    from pytest_desched.evidence import EvidenceWriter
    from pytest_desched.experiments import ExperimentResult
    from pytest_desched.providers.base import Cluster
    from pytest_desched.toolchain import Toolchain


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    # Cheap input checks up front: bad input is a usage error before any cluster work.
    parse_bins(_opt(config, "--desched-bin"))
    try:
        if int(_opt(config, "--desched-workers")) < 2:
            raise ValueError
    except ValueError:
        raise pytest.UsageError(
            "--desched-workers must be an integer >= 2 (the descheduler skips smaller clusters)"
        ) from None
    config._desched_results = []  # type: ignore[attr-defined]
    config._desched_info = {}  # type: ignore[attr-defined]


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _sigterm_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """SIGTERM (CI cancel, `timeout`) unwinds like Ctrl-C while the block runs.

    Installed by the first desched fixture, so a cluster's teardown runs on SIGTERM; sessions
    that use no desched fixture keep their own handler. The previous one is restored after.
    """
    if not (hasattr(signal, "SIGTERM") and _is_main_thread()):
        yield
        return
    try:
        previous = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from pytest_desched.versions import load_versions

    try:
        v = load_versions()
    except Exception as exc:  # a broken install must not break --help
        return [f"desched: cannot read pinned versions: {exc}"]
    prov = _opt(config, "--desched-provider")
    pins = ", ".join(f"{k} {val}" for k, val in v.summary().items())
    return [
        f"desched: provider={prov} keep={_opt(config, '--desched-keep')}",
        f"desched pins: {pins}",
    ]


@pytest.fixture(scope="session")
def desched_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Settings]:
    """The run's options; while in use, SIGTERM unwinds like Ctrl-C (see `sigterm_unwinds`)."""
    settings = settings_from_config(request.config, tmp_path_factory)
    with sigterm_unwinds():
        yield settings


def terminal_reporter(config: pytest.Config) -> Callable[[str], None]:
    """Progress lines that reach the terminal even while pytest captures output."""
    capman = config.pluginmanager.getplugin("capturemanager")
    tw = config.get_terminal_writer()

    def report(msg: str) -> None:
        if capman is None:
            tw.line(f"[desched] {msg}")
            return
        with capman.global_and_fixture_disabled():
            tw.line(f"[desched] {msg}")

    return report


@pytest.fixture(scope="session")
def desched_toolchain(request: pytest.FixtureRequest, desched_settings: Settings) -> Toolchain:
    from pytest_desched.toolchain import Toolchain

    return Toolchain(
        cache_dir=desched_settings.cache_dir,
        overrides=desched_settings.bins,
        descheduler_version=desched_settings.descheduler_version,
        report=terminal_reporter(request.config),
    )


@pytest.fixture(scope="session")
def desched_cluster(
    request: pytest.FixtureRequest, desched_settings: Settings, desched_toolchain: Toolchain
) -> Iterator[Cluster]:
    """The session's cluster; deleted on pass, fail, Ctrl-C and SIGTERM unless kept."""
    from pytest_desched.providers.base import ProviderError

    try:
        from pytest_desched.providers import make_provider

        provider = make_provider(desched_settings, desched_toolchain)
    except ProviderError as exc:
        pytest.fail(str(exc), pytrace=False)
    t0 = time.monotonic()
    try:
        cluster = provider.start()
    except ProviderError as exc:
        provider.stop()
        pytest.fail(str(exc), pytrace=False)
    except BaseException:
        provider.stop()
        raise
    info = request.config._desched_info  # type: ignore[attr-defined]
    info.update(
        provider=cluster.provider,
        cluster=cluster.name,
        kubeconfig=str(cluster.kubeconfig),
        bring_up_s=round(time.monotonic() - t0, 2),
        server=cluster.server_version(),
        tools={t: str(p) for t, p in desched_toolchain._resolved.items()},
    )
    try:
        yield cluster
    finally:
        failed = request.session.testsfailed > 0
        if desched_settings.keep == "on-failure" and failed:
            provider.keep = True
        if getattr(provider, "keep", False):
            info["kept"] = provider.resume_hint()
        provider.stop()


@pytest.fixture(scope="session")
def desched_evidence(
    request: pytest.FixtureRequest, desched_settings: Settings, desched_cluster: Cluster
) -> EvidenceWriter:
    from pytest_desched.evidence import EvidenceWriter, Redactor

    red = (
        Redactor(
            node_names=desched_cluster.workers,
            namespaces=[desched_settings.namespace, "kube-system"],
            extra=[desched_cluster.name],
        )
        if desched_settings.redact
        else Redactor.disabled()
    )
    request.config._desched_redactor = red  # type: ignore[attr-defined]
    return EvidenceWriter(desched_settings.artifacts, red)


@pytest.fixture(scope="session")
def desched_release(
    request: pytest.FixtureRequest,
    desched_settings: Settings,
    desched_cluster: Cluster,
    desched_toolchain: Toolchain,
) -> Iterator[Release]:
    """The chart at its pinned version, first-installed suspended and in dry-run (runbook step 1)."""
    from pytest_desched.chart import Release, obtain_chart
    from pytest_desched.safety import cleanup_release

    chart = obtain_chart(
        desched_toolchain, desched_toolchain.versions, desched_settings.chart_source
    )
    wd = desched_settings.run_dir / "release"
    wd.mkdir(parents=True, exist_ok=True)
    rel = Release(
        desched_cluster,
        chart,
        desched_toolchain.versions,
        wd,
        name=desched_settings.release,
        report=desched_toolchain.report,
    )
    request.config._desched_info["chart"] = chart.evidence()  # type: ignore[attr-defined]
    try:
        rel.install_first()
        yield rel
    finally:
        keep = desched_settings.keep == "always" or (
            desched_settings.keep == "on-failure" and request.session.testsfailed
        )
        if rel.installed and not keep:
            report = cleanup_release(desched_cluster, rel)
            request.config._desched_info["cleanup"] = report  # type: ignore[attr-defined]
        elif rel.installed:
            from pytest_desched.safety import emergency_stop

            request.config._desched_info["emergency_stop"] = emergency_stop(desched_cluster, rel)  # type: ignore[attr-defined]


@pytest.fixture
def desched_context(
    request: pytest.FixtureRequest,
    desched_settings: Settings,
    desched_cluster: Cluster,
    desched_release: Release,
    desched_evidence: EvidenceWriter,
) -> Callable[..., Any]:
    """Factory for an ExperimentContext: `desched_context(variant=..., source=..., ...)`.

    Every input (namespace, nodes, replicas, variant, overrides, policy) is checked here,
    before the experiment changes anything: a bad one is a one-line UsageError/PolicyError
    naming the input and the fix, never an API server error after `helm upgrade` ran.
    `policy` is anything `Policy.coerce` takes (Policy, path, mapping, YAML text).
    """
    from pytest_desched.experiments import VARIANTS, ExperimentContext, lab_policy
    from pytest_desched.lab import LabInputError, check_lab_inputs
    from pytest_desched.policy import Policy

    def make(
        variant: str = "runbook",
        namespace: str | None = None,
        replicas: int = 3,
        source: str | None = None,
        target: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        keep_min_pod_age: bool = False,
        policy: Any = None,
    ) -> ExperimentContext:
        w = desched_cluster.workers
        try:
            if policy is None and variant not in VARIANTS:
                raise LabInputError(f"unknown policy variant {variant!r}; use one of {VARIANTS}")
            if overrides is not None and not isinstance(overrides, Mapping):
                raise LabInputError(
                    f"overrides must be a mapping of policy path -> value, got "
                    f"{type(overrides).__name__}"
                )
            ns, src, dst, replicas = check_lab_inputs(
                w,
                namespace=desched_settings.namespace if namespace is None else namespace,
                source=source or (w[0] if w else None),
                target=target or (w[1] if len(w) > 1 else None),
                replicas=replicas,
                release_namespace=desched_release.namespace,
            )
        except LabInputError as exc:
            raise pytest.UsageError(str(exc)) from None
        if policy is None:
            pol = lab_policy(variant, keep_min_pod_age=keep_min_pod_age)
        else:
            pol = Policy.coerce(policy)
        # A caller's own policy is filed under its own name, not the built-in variant's.
        label = None if policy is None else f"custom-{pol.digest()[:8]}"
        for path, value in (overrides or {}).items():
            pol = pol.override(path, value, why=f"test override in {request.node.nodeid}")
        pol = desched_cluster.scope_policy(pol, ns)  # existing clusters: the lab only
        pol.validate()
        return ExperimentContext(
            cluster=desched_cluster,
            release=desched_release,
            policy=pol,
            source=src,
            target=dst,
            namespace=ns,
            replicas=replicas,
            log_dir=desched_settings.run_dir / "round-logs",  # raw; redacted copies go to evidence
            evidence=desched_evidence,
            keep_lab=False,
            policy_label=label,
        )

    return make


@pytest.fixture
def desched_experiment(
    request: pytest.FixtureRequest, desched_context: Callable[..., Any]
) -> Callable[..., ExperimentResult]:
    """Run a built-in experiment by name: `desched_experiment("positive", variant=..., replicas=3)`."""
    from pytest_desched.experiments import EXPERIMENTS

    def run(name: str, variant: str | None = None, **params: Any) -> ExperimentResult:
        if name not in EXPERIMENTS:
            raise pytest.UsageError(f"unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}")
        default_variant = "pdb-lister-workaround" if name == "minpodage" else "runbook"
        variant = variant or default_variant
        if name == "minpodage":
            params.setdefault("keep_min_pod_age", True)
        ctx = desched_context(variant=variant, **params)
        results = request.config._desched_results  # type: ignore[attr-defined]
        entry: dict[str, Any] = {
            "name": f"{name}[{ctx.policy_label or variant}]",
            "nodeid": request.node.nodeid,
            "rounds": [],
        }
        ctx.on_record = entry["rounds"].append
        results.append(entry)
        request.node._desched_entry = entry
        try:
            return EXPERIMENTS[name](ctx, variant=variant)
        except Exception as exc:
            entry["error"] = str(exc).splitlines()[0][:200]
            raise
        finally:  # key figures reach JUnit for failures too
            for k, v in _junit(entry).items():
                request.node.user_properties.append((k, v))

    return run


@pytest.fixture
def desched_experiment_result(
    request: pytest.FixtureRequest, desched_experiment: Callable[..., ExperimentResult]
) -> ExperimentResult:
    """The result of the experiment named by `@pytest.mark.desched_experiment(name, **params)`."""
    m = request.node.get_closest_marker("desched_experiment")
    if m is None or not m.args:
        raise pytest.UsageError(
            "desched_experiment_result needs @pytest.mark.desched_experiment(name, ...)"
        )
    return desched_experiment(m.args[0], **m.kwargs)


@pytest.fixture
def desched_lab(
    desched_cluster: Cluster, desched_settings: Settings, desched_release: Release
) -> Iterator[Any]:
    """A Lab in the session's lab namespace for hand-written experiments; torn down after."""
    from pytest_desched.lab import Lab

    lab = Lab(
        desched_cluster, desched_settings.namespace, image=desched_release.versions.workload_image
    )
    try:
        yield lab
    finally:
        lab.teardown()


def _junit(entry: dict[str, Any]) -> dict[str, str]:
    from pytest_desched.evidence import junit_properties

    out: dict[str, str] = {}
    for i, rec in enumerate(entry["rounds"]):
        for k, v in junit_properties(rec):
            out[f"desched.{i}.{k}" if i else f"desched.{k}"] = v
    return out


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    rep = yield
    entry = getattr(item, "_desched_entry", None)
    if entry is not None and rep.when == "call":
        entry["outcome"] = "xfailed" if hasattr(rep, "wasxfail") and rep.skipped else rep.outcome
    exc = call.excinfo.value if call.excinfo else None
    arts = getattr(exc, "artifacts", None)
    if rep.when == "call" and arts:
        from pytest_desched.evidence import scrub_secrets

        red = getattr(item.config, "_desched_redactor", None)
        for name, text in arts.items():
            shown = red.redact(text) if red is not None else scrub_secrets(text)
            rep.sections.append((f"desched {name}", shown[-20000:]))
    return rep


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    from pytest_desched.evidence import summary_line

    results = getattr(config, "_desched_results", [])
    info = getattr(config, "_desched_info", {})
    if not results and not info:
        return
    tr = terminalreporter
    red = getattr(config, "_desched_redactor", None)
    show = red.redact if red is not None else (lambda x: x)
    tr.section("pytest-desched")
    if info.get("provider"):
        tr.line(
            show(
                f"cluster {info.get('cluster')} provider={info.get('provider')} server={info.get('server')} "
                f"bring-up={info.get('bring_up_s')}s kubeconfig={info.get('kubeconfig')}"
            )
        )
    if info.get("chart"):
        tr.line(f"chart {info['chart']}")
    for entry in results:
        tr.line(show(summary_line(entry)))
    for k in ("cleanup", "emergency_stop"):
        if info.get(k):
            tr.line(show(f"{k}: {info[k]}"))
    if info.get("kept"):
        tr.line(info["kept"])
    try:
        settings_art = config.getoption("desched_artifacts") or os.environ.get("DESCHED_ARTIFACTS")
        tr.line(
            f"evidence: {settings_art or Path(str(config._tmp_path_factory.getbasetemp())) / 'desched-artifacts'}"
        )  # type: ignore[attr-defined]
    except Exception:
        pass
