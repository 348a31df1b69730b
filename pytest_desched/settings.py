"""Options of the plugin (command line, environment, defaults) and the resolved Settings.

Every option has a `--desched-*` flag and a `DESCHED_*` environment variable; an explicit
flag always wins over the environment, which wins over the default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

MARKERS = {
    "descheduler_e2e": "an end-to-end descheduler experiment on a real control plane (`-m descheduler_e2e`)",
    "desched_experiment(name, **params)": "run the built-in experiment `name` (positive, nodefit, pdb, "
    "minpodage) with params (variant, namespace, replicas, source, target, overrides); the result is "
    "the `desched_experiment_result` fixture",
}

OPTIONS: list[tuple[str, str, dict[str, Any]]] = [
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


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("desched", "pytest-desched: descheduler runbook experiments")
    for flag, env, kw in OPTIONS:
        kw = dict(kw)
        default = kw.pop("default", None)
        kw["help"] = f"{kw['help']} [env {env}] (default: {default})"
        if kw.get("action") != "store_true":
            kw["default"] = None  # unset, so an explicit value always beats the env var
        group.addoption(flag, dest=flag.lstrip("-").replace("-", "_"), **kw)


def opt(config: pytest.Config, flag: str) -> Any:
    """Command line wins, then the environment variable, then the default."""
    env = next(e for f, e, _ in OPTIONS if f == flag)
    val = config.getoption(flag.lstrip("-").replace("-", "_"))
    kw = next(k for f, _, k in OPTIONS if f == flag)
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


def settings_from_config(c: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Resolve every option (command line, then env var, then default) for one run."""
    run_dir = tmp_path_factory.mktemp("desched")
    art = opt(c, "--desched-artifacts")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    ns = opt(c, "--desched-namespace")
    try:
        workers = int(opt(c, "--desched-workers"))
    except ValueError:
        raise pytest.UsageError("--desched-workers must be an integer >= 2") from None
    kube = opt(c, "--desched-existing-kubeconfig")
    namespace = f"{ns}-{worker}" if worker else ns
    from pytest_desched.lab import LabInputError, check_namespace

    try:  # before the first cluster change: the cluster fixture needs these settings
        check_namespace(namespace)
    except LabInputError as exc:
        raise pytest.UsageError(f"--desched-namespace / DESCHED_NAMESPACE: {exc}") from None
    return Settings(
        provider=opt(c, "--desched-provider"),
        keep=opt(c, "--desched-keep"),
        artifacts=Path(art) if art else tmp_path_factory.getbasetemp() / "desched-artifacts",
        redact=bool(opt(c, "--desched-redact")),
        cache_dir=Path(opt(c, "--desched-cache-dir")) if opt(c, "--desched-cache-dir") else None,
        bins=parse_bins(opt(c, "--desched-bin")),
        workers=workers,
        chart_source=opt(c, "--desched-chart-source"),
        namespace=namespace,
        release=opt(c, "--desched-release"),
        descheduler_version=opt(c, "--desched-descheduler-version"),
        existing_context=opt(c, "--desched-existing-context"),
        existing_kubeconfig=Path(kube) if kube else None,
        allow_existing=bool(opt(c, "--desched-allow-existing")),
        run_dir=run_dir,
    )
