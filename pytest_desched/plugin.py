"""pytest entry point: options, markers, thin fixtures, report header and summary.

No cluster work happens at import or configure time, so `pytest --help` and
`pytest --markers` work on any machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_desched.chart import Release
    from pytest_desched.evidence import EvidenceWriter
    from pytest_desched.experiments import ExperimentResult
    from pytest_desched.providers.base import Cluster
    from pytest_desched.toolchain import Toolchain

MARKERS = {
    "descheduler_e2e": "an end-to-end descheduler experiment on a real control plane (`-m descheduler_e2e`)",
    "desched_experiment(name, **params)": "run the built-in experiment `name` (positive, nodefit, pdb, "
    "minpodage) with params (variant, namespace, replicas, source, target, overrides); the result is "
    "the `desched_experiment_result` fixture",
}

_OPTIONS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "--desched-provider",
        "DESCHED_PROVIDER",
        {
            "default": "auto",
            "help": "auto|embedded|kind|existing (auto: kind when a Docker engine answers, else embedded)",
        },
    ),
    (
        "--desched-existing-context",
        "DESCHED_EXISTING_CONTEXT",
        {
            "default": None,
            "help": "kubeconfig context of an existing cluster (required for provider=existing)",
        },
    ),
    (
        "--desched-existing-kubeconfig",
        "DESCHED_EXISTING_KUBECONFIG",
        {
            "default": None,
            "help": "kubeconfig for provider=existing (default $KUBECONFIG; never ~/.kube/config implicitly)",
        },
    ),
    (
        "--desched-allow-existing",
        "DESCHED_ALLOW_EXISTING",
        {
            "action": "store_true",
            "help": "explicit opt-in to run experiments on an existing cluster",
        },
    ),
    (
        "--desched-keep",
        "DESCHED_KEEP",
        {
            "default": "never",
            "choices": ["always", "on-failure", "never"],
            "help": "keep the cluster (and last lab) after the run",
        },
    ),
    (
        "--desched-artifacts",
        "DESCHED_ARTIFACTS",
        {"default": None, "help": "evidence folder (default: <basetemp>/desched-artifacts)"},
    ),
    (
        "--desched-redact",
        "DESCHED_REDACT",
        {"action": "store_true", "help": "replace node names, namespaces and tokens in evidence"},
    ),
    (
        "--desched-cache-dir",
        "DESCHED_CACHE_DIR",
        {"default": None, "help": "tool/build cache (default $XDG_CACHE_HOME/pytest-desched)"},
    ),
    (
        "--desched-bin",
        "DESCHED_BIN",
        {
            "default": None,
            "help": "comma list TOOL=PATH of binaries to use instead of building (version-checked)",
        },
    ),
    (
        "--desched-workers",
        "DESCHED_WORKERS",
        {"default": "3", "help": "kwok worker nodes of the embedded cluster"},
    ),
    (
        "--desched-chart-source",
        "DESCHED_CHART_SOURCE",
        {
            "default": "auto",
            "choices": ["auto", "repo", "module"],
            "help": "chart from the Helm repo, the pinned Go module, or auto",
        },
    ),
    (
        "--desched-namespace",
        "DESCHED_NAMESPACE",
        {"default": "descheduler-lab", "help": "lab namespace (made unique per xdist worker)"},
    ),
    (
        "--desched-release",
        "DESCHED_RELEASE",
        {"default": "descheduler", "help": "helm release name in kube-system"},
    ),
    (
        "--desched-descheduler-version",
        "DESCHED_DESCHEDULER_VERSION",
        {
            "default": None,
            "help": "run another descheduler release or commit (canary), built side by side",
        },
    ),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("desched", "pytest-desched: descheduler runbook experiments")
    for flag, env, kw in _OPTIONS:
        kw = dict(kw)
        default = kw.pop("default", None)
        kw["help"] = f"{kw['help']} [env {env}] (default: {default})"
        if kw.get("action") != "store_true":
            kw["default"] = None  # unset, so an explicit value always beats the env var
        group.addoption(flag, dest=flag.lstrip("-").replace("-", "_"), **kw)


def _opt(config: pytest.Config, flag: str) -> Any:
    """Command line wins, then the environment variable, then the default."""
    env = next(e for f, e, _ in _OPTIONS if f == flag)
    val = config.getoption(flag.lstrip("-").replace("-", "_"))
    kw = next(k for f, _, k in _OPTIONS if f == flag)
    if val not in (None, False):
        return val
    raw = os.environ.get(env)
    if raw:
        if kw.get("action") == "store_true":
            return raw.lower() in ("1", "true", "yes")
        if "choices" in kw and raw not in kw["choices"]:
            raise pytest.UsageError(f"{env}={raw!r}: choose from {kw['choices']}")
        return raw
    return kw.get("default", False if kw.get("action") == "store_true" else None)


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
    if hasattr(signal, "SIGTERM") and _is_main_thread():
        # SIGTERM (CI cancel, `timeout`) unwinds like Ctrl-C, so fixtures tear down.
        def _term(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, _term)


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


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


# --- settings -------------------------------------------------------------------
@dataclass
class Settings:
    provider: str
    keep: str
    artifacts: Path
    redact: bool
    cache_dir: Path | None
    bins: dict[str, Path]
    workers: int
    chart_source: str
    namespace: str
    release: str
    descheduler_version: str | None
    existing_context: str | None
    existing_kubeconfig: Path | None
    allow_existing: bool
    run_dir: Path
    extra: dict[str, Any] = field(default_factory=dict)


def parse_bins(raw: str | None) -> dict[str, Path]:
    """`kubectl=/usr/bin/kubectl,helm=/opt/helm` -> {tool: path}; a bad entry is an error."""
    from pytest_desched.toolchain import TOOL_GROUP

    out: dict[str, Path] = {}
    for item in filter(None, (raw or "").split(",")):
        tool, sep, path = item.partition("=")
        tool = tool.strip()
        if not sep or tool not in TOOL_GROUP:
            raise pytest.UsageError(
                f"--desched-bin: {item!r} is not TOOL=PATH with TOOL in {sorted(TOOL_GROUP)}"
            )
        p = Path(path).expanduser()
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise pytest.UsageError(f"--desched-bin: {p} is not an executable file")
        out[tool] = p
    return out


@pytest.fixture(scope="session")
def desched_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Settings:
    c = request.config
    run_dir = tmp_path_factory.mktemp("desched")
    art = _opt(c, "--desched-artifacts")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    ns = _opt(c, "--desched-namespace")
    try:
        workers = int(_opt(c, "--desched-workers"))
    except ValueError:
        raise pytest.UsageError("--desched-workers must be an integer >= 2") from None
    kube = _opt(c, "--desched-existing-kubeconfig")
    return Settings(
        provider=_opt(c, "--desched-provider"),
        keep=_opt(c, "--desched-keep"),
        artifacts=Path(art) if art else tmp_path_factory.getbasetemp() / "desched-artifacts",
        redact=bool(_opt(c, "--desched-redact")),
        cache_dir=Path(_opt(c, "--desched-cache-dir")) if _opt(c, "--desched-cache-dir") else None,
        bins=parse_bins(_opt(c, "--desched-bin")),
        workers=workers,
        chart_source=_opt(c, "--desched-chart-source"),
        namespace=f"{ns}-{worker}" if worker else ns,
        release=_opt(c, "--desched-release"),
        descheduler_version=_opt(c, "--desched-descheduler-version"),
        existing_context=_opt(c, "--desched-existing-context"),
        existing_kubeconfig=Path(kube) if kube else None,
        allow_existing=bool(_opt(c, "--desched-allow-existing")),
        run_dir=run_dir,
    )


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


def make_provider(s: Settings, toolchain: Toolchain) -> Any:
    """The provider object for the settings (plain function: usable without pytest)."""
    from pytest_desched.providers.base import choose_provider

    name = choose_provider(s.provider)
    keep = s.keep == "always"
    if name == "embedded":
        from pytest_desched.providers.embedded import EmbeddedProvider

        return EmbeddedProvider(
            toolchain,
            workers=s.workers,
            keep=keep,
            kubeconfig_dir=s.run_dir,
            report=toolchain.report,
        )
    if name == "kind":
        from pytest_desched.providers.embedded import unique_name
        from pytest_desched.providers.kind import KindProvider

        return KindProvider(
            toolchain, s.run_dir / "kind", unique_name("desched-kind"), workers=s.workers, keep=keep
        )
    from pytest_desched.providers.existing import ExistingProvider

    return ExistingProvider(s.existing_kubeconfig, s.existing_context, toolchain, s.allow_existing)


@pytest.fixture(scope="session")
def desched_cluster(
    request: pytest.FixtureRequest, desched_settings: Settings, desched_toolchain: Toolchain
) -> Iterator[Cluster]:
    """The session's cluster; deleted on pass, fail, Ctrl-C and SIGTERM unless kept."""
    from pytest_desched.providers.base import ProviderError

    try:
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
    """Factory for an ExperimentContext: `desched_context(variant=..., source=..., ...)`."""
    from pytest_desched.experiments import ExperimentContext, lab_policy

    def make(
        variant: str = "runbook",
        namespace: str | None = None,
        replicas: int = 3,
        source: str | None = None,
        target: str | None = None,
        overrides: dict[str, Any] | None = None,
        keep_min_pod_age: bool = False,
        policy: Any = None,
    ) -> ExperimentContext:
        pol = policy or lab_policy(variant, keep_min_pod_age=keep_min_pod_age)
        for path, value in (overrides or {}).items():
            pol = pol.override(path, value, why=f"test override in {request.node.nodeid}")
        pol.validate()
        w = desched_cluster.workers
        src, dst = source or w[0], target or w[1]
        for n in (src, dst):
            if n not in w:
                raise pytest.UsageError(f"node {n!r} is not a lab worker of this cluster ({w})")
        if src == dst:
            raise pytest.UsageError("source and target nodes must differ")
        return ExperimentContext(
            cluster=desched_cluster,
            release=desched_release,
            policy=pol,
            source=src,
            target=dst,
            namespace=namespace or desched_settings.namespace,
            replicas=replicas,
            log_dir=desched_settings.run_dir / "round-logs",  # raw; redacted copies go to evidence
            evidence=desched_evidence,
            keep_lab=False,
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
            "name": f"{name}[{variant}]",
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
            if k == "blocking_layer":  # the layer that decided the lab's pods, as in the summary
                verdict = str(rec.get("verdict") or "")
                v = (
                    verdict.removeprefix("stopped-by:")
                    if verdict.startswith("stopped-by:")
                    else ("api-server(evicted)" if rec.get("evictions") else v)
                )
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
