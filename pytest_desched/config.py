"""One frozen configuration for a run, from explicit values, `DESCHED_*` variables, defaults.

No pytest here: the plugin's options, the `desched` command and library callers all resolve
through `resolve()` and `build_config()`, so a rule about an option is written once. An
explicit value always wins over the environment variable, which wins over the default.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_desched import names, scratch
from pytest_desched.artifacts_dir import claim, default_run_dir
from pytest_desched.capabilities import capabilities_of
from pytest_desched.errors import ConfigError, LabInputError
from pytest_desched.log import say
from pytest_desched.tools.candidate import Candidate
from pytest_desched.tools.groups import HELM_ENV, HELM_HELP, HELM_MAJORS, parse_bins
from pytest_desched.tools.kube_versions import KubeChoice, choose_kubernetes
from pytest_desched.tools.release import parse_release_cached
from pytest_desched.tools.versions import load_versions

__all__ = [
    "OPTIONS",
    "PROVIDERS",
    "ConfigError",
    "DeschedConfig",
    "add_config_options",
    "build_config",
    "cli_flag",
    "config_from_args",
    "ini_key",
    "resolve",
    "respell",
    "unknown_provider",
]

# The providers a run may name (`auto` picks one); keep in step with providers.REGISTRY.
PROVIDERS = ("auto", "embedded", "kind", "existing")


def unknown_provider(name: object) -> str:
    """The one message for a provider name that is none of PROVIDERS."""
    return (
        f"unknown provider {name!r}; use one of {', '.join(PROVIDERS)} "
        "(--desched-provider or DESCHED_PROVIDER)"
    )


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
        {
            "default": None,
            "help": "evidence folder (default: ./desched-artifacts/<UTC timestamp>-<run id>/, "
            "with ./desched-artifacts/latest pointing at it)",
        },
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
    ("--desched-helm", HELM_ENV, {"default": "4", "choices": list(HELM_MAJORS), "help": HELM_HELP}),
    (
        "--desched-kubernetes",
        "DESCHED_KUBERNETES",
        {
            "default": None,
            "metavar": "VERSION",
            "help": "Kubernetes of the clusters built (vX.Y.Z, a release the Go module proxy "
            "serves; default the pin); built and cached by version",
        },
    ),
    *(
        (
            f"--desched-{track}-kubernetes",
            f"DESCHED_{track.upper()}_KUBERNETES",
            {
                "default": None,
                "metavar": "VERSION",
                "help": f"the {track} track's Kubernetes (default --desched-kubernetes): a "
                "control-plane upgrade canaried as one, or beside the descheduler's",
            },
        )
        for track in ("baseline", "candidate")
    ),
    (
        "--desched-workers",
        "DESCHED_WORKERS",
        {"default": "3", "help": "kwok worker nodes of the embedded cluster"},
    ),
    (
        "--desched-kind-cluster",
        "DESCHED_KIND_CLUSTER",
        {
            "default": None,
            "metavar": "NAME",
            "help": "use this kind cluster you already have (implies the kind provider; "
            "never created, never deleted; no node image is built)",
        },
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
        "--desched-descheduler",
        "DESCHED_DESCHEDULER",
        {"default": None, "help": "run another descheduler release or commit, built side by side"},
    ),
    (
        "--desched-policy",
        "DESCHED_POLICY",
        {
            "default": None,
            "metavar": "FILE",
            "help": "your DeschedulerPolicy file: the experiments run the runbook's checks on it, "
            "scoped to the lab (default: the runbook's safe-rebalance policy)",
        },
    ),
    (
        "--desched-values",
        "DESCHED_VALUES",
        {
            "default": None,
            "action": "append",
            "metavar": "FILE",
            "help": "your Helm values file for the release under test (repeatable, Helm's order; "
            "env: comma-separated); suspend=true and the first install's dry run stay on top",
        },
    ),
    (
        "--desched-candidate",
        "DESCHED_CANDIDATE",
        {
            "default": None,
            "help": "the descheduler under test (upgrade canary): version:vX.Y.Z, "
            "source:PATH[@LABEL] (checkout or .tar.gz), binary:PATH, image:REPO:TAG (kind/"
            "existing only) or pinned",
        },
    ),
    (
        "--desched-candidate-chart",
        "DESCHED_CANDIDATE_CHART",
        {
            "default": None,
            "help": "the candidate's chart: tree (the source's charts/descheduler), repo:VERSION, "
            "a chart directory or .tgz; optional @version=X,appVersion=Y pins (default: the "
            "baseline's chart)",
        },
    ),
    (
        "--desched-baseline",
        "DESCHED_BASELINE",
        {
            "default": None,
            "help": "the canary's baseline, any form --desched-candidate takes (default: pinned)",
        },
    ),
    (
        "--desched-baseline-chart",
        "DESCHED_BASELINE_CHART",
        {"default": None, "help": "the baseline's chart, as --desched-candidate-chart"},
    ),
    *(
        (
            f"--desched-{track}-values",
            f"DESCHED_{track.upper()}_VALUES",
            {
                "default": None,
                "action": "append",
                "metavar": "FILE",
                "help": f"Helm values for the {track} track only, after --desched-values",
            },
        )
        for track in ("baseline", "candidate")
    ),
]


OPTION_ENV = {flag: env for flag, env, _ in OPTIONS}
# Old spellings that still work for this release, with a note (issue 38: one name everywhere).
DEPRECATED = {"--desched-descheduler-version": "--desched-descheduler"}
OLD_ENV = {"DESCHED_DESCHEDULER": "DESCHED_DESCHEDULER_VERSION"}  # new env -> its old name

# -- one option, four spellings --------------------------------------------------------------
# The plugin's flag (`--desched-workers`) is the key; the `desched` command drops the prefix
# (`--workers`), the environment variable is in OPTIONS, the pytest ini key is the flag in
# snake case (`desched_workers`). Messages name the plugin flag; each front end respells them.

# Which `desched` subcommands take an option (the plugin takes every one). An option not
# listed here (a new one) is taken by every command that builds a configuration.
CONFIG_COMMANDS = ("run", "up", "canary", "replay", "matrix")
# A canary's two releases (tools.release), their charts and per-track values.
_TRACK_OPTIONS = tuple(
    f"--desched-{t}{s}" for t in ("candidate", "baseline") for s in ("", "-chart", "-values")
)
_CLUSTER = ("run", "up", "canary", "matrix")
OPTION_COMMANDS: dict[str, tuple[str, ...]] = {
    "--desched-provider": _CLUSTER,
    "--desched-existing-context": _CLUSTER,
    "--desched-kind-cluster": _CLUSTER,
    "--desched-existing-kubeconfig": (*_CLUSTER, "replay"),  # replay --host: same opt-in
    "--desched-allow-existing": (*_CLUSTER, "replay"),
    "--desched-workers": _CLUSTER,
    "--desched-kubernetes": (*_CLUSTER, "replay"),
    "--desched-baseline-kubernetes": ("canary",),
    "--desched-candidate-kubernetes": ("canary",),
    "--desched-namespace": _CLUSTER,
    "--desched-descheduler": ("run", "up", "canary"),  # matrix: its RELEASE arguments
    "--desched-keep": ("run", "canary", "replay", "matrix"),  # `up` always keeps
    "--desched-artifacts": ("run", "canary", "replay", "matrix"),
    "--desched-redact": ("run", "canary", "replay", "matrix"),
    **dict.fromkeys(_TRACK_OPTIONS, ("canary",)),
}
# The `--help` section each option is listed under (unlisted: "input options").
OPTION_GROUPS: dict[str, str] = {
    **dict.fromkeys(
        (
            "--desched-provider",
            "--desched-existing-context",
            "--desched-existing-kubeconfig",
            "--desched-kind-cluster",
            "--desched-allow-existing",
            "--desched-workers",
            "--desched-kubernetes",
            "--desched-namespace",
            "--desched-release",
            "--desched-chart-source",
            "--desched-descheduler",
            "--desched-bin",
            "--desched-helm",
            "--desched-cache-dir",
            "--desched-keep",
        ),
        "cluster options",
    ),
    "--desched-artifacts": "evidence options",
    "--desched-redact": "evidence options",
    **dict.fromkeys(
        (*_TRACK_OPTIONS, "--desched-baseline-kubernetes", "--desched-candidate-kubernetes"),
        "candidate options",
    ),
}


def shown_default(default: Any) -> str:
    """` (default: X)` for an option's help, nothing when unset (None, False): no noise."""
    return "" if default in (None, False) else f" (default: {default})"


def cli_flag(flag: str) -> str:
    """`--desched-workers` -> `--workers` (the `desched` command's spelling)."""
    return "--" + flag.removeprefix("--desched-")


def ini_key(flag: str) -> str:
    """`--desched-workers` -> `desched_workers` (the pytest ini key)."""
    return flag.lstrip("-").replace("-", "_")


def commands_of(flag: str) -> tuple[str, ...]:
    """The `desched` subcommands that take `flag`."""
    return OPTION_COMMANDS.get(flag, CONFIG_COMMANDS)


_FLAG_RE = re.compile(r"--desched-[a-z][a-z-]*[a-z]")


def respell(message: str, spelling: Callable[[str], str | None]) -> str:
    """`message` with each known plugin flag replaced by `spelling(flag)` (None: leave it)."""

    def sub(m: re.Match[str]) -> str:
        flag = m.group(0)
        return (spelling(flag) if flag in OPTION_ENV else None) or flag

    return _FLAG_RE.sub(sub, message)


def named(flag: str) -> str:
    """How a message names an option: its flag and its environment variable."""
    return f"{flag} / {OPTION_ENV[flag]}"


def env_true(raw: object) -> bool:
    """A switch's environment value: 1, true, yes or on (any case) turn it on."""
    return str(raw).lower() in ("1", "true", "yes", "on")


_NOTED: set[str] = set()


def deprecated(old: str, new: str) -> None:
    """Say once that `old` is deprecated (it still works this release)."""
    if old not in _NOTED:
        _NOTED.add(old)
        say(f"note: {old} is deprecated; use {new} (the old name goes in the next release)")


def resolve(flag: str, explicit: Any = None, ini: Any = None) -> Any:
    """One option: the explicit value, else its environment variable, else the ini value
    (pytest's `desched_*` keys), else its default."""
    kw = next(k for f, _, k in OPTIONS if f == flag)
    if explicit not in (None, False):
        return explicit
    source = OPTION_ENV[flag]
    raw = os.environ.get(source)
    if not raw and os.environ.get(OLD_ENV.get(source, "")):
        source = OLD_ENV[source]
        raw = os.environ[source]
        deprecated(source, OPTION_ENV[flag])
    if not raw and ini not in (None, "", False, []):
        raw, source = ini, f"ini key {ini_key(flag)}"
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, list | tuple):  # a list option's ini key (pytest "paths")
            return [str(x) for x in raw]
    if raw:
        if kw.get("action") == "append":  # a list option: comma-separated in the environment
            return [p.strip() for p in raw.split(",") if p.strip()]
        if kw.get("action") == "store_true":
            return env_true(raw)
        if "choices" in kw and raw not in kw["choices"]:
            raise ConfigError(f"{source}={raw!r}: choose from {kw['choices']}")
        return raw
    return kw.get("default", False if kw.get("action") == "store_true" else None)


@dataclass(frozen=True)
class DeschedConfig:
    """Everything a session needs to know, resolved and validated once, before any change."""

    provider: str = "auto"
    keep: str = "never"
    artifacts: Path = Path("desched-artifacts")
    redact: bool = False
    cache_dir: Path | None = None
    bins: dict[str, Path] = field(default_factory=dict)
    helm: str = "4"  # the Helm major (tools.versions.Versions.with_helm)
    workers: int = 3
    chart_source: str = "auto"
    namespace: str = "descheduler-lab"
    release: str = "descheduler"
    descheduler_version: str | None = None
    # The clusters' Kubernetes (tools.kube_versions): None is the pin; checked as served.
    kubernetes: str | None = None
    # A canary's per-track Kubernetes (None: `kubernetes`): the cluster upgrade canaried.
    baseline_kubernetes: str | None = None
    candidate_kubernetes: str | None = None
    # The upgrade canary's candidate and its chart, as specs (tools.candidate); parsed
    # and checked by validate(), the parsed form is `parsed_candidate()`.
    candidate: str | None = None
    candidate_chart: str | None = None
    # The canary's baseline release (default: the pin) and each track's own values files,
    # applied after `values` (Helm's order): how values change with the upgrade.
    baseline: str | None = None
    baseline_chart: str | None = None
    baseline_values: tuple[Path, ...] = ()
    candidate_values: tuple[Path, ...] = ()
    # The user's own inputs (descheduler.inputs): a DeschedulerPolicy file and Helm values
    # files in Helm's order; read and checked before any cluster change.
    policy: Path | None = None
    values: tuple[Path, ...] = ()
    existing_context: str | None = None
    existing_kubeconfig: Path | None = None
    allow_existing: bool = False
    kind_cluster: str | None = None  # a kind cluster the user has: used, never created/deleted
    run_dir: Path = field(default_factory=scratch.make)  # removed at the end (scratch)
    # How long one round's Job may run before it is stopped and read (rounds.stop_round); a
    # library setting (the fixtures' `round_timeout=`), no option: tests of a release that hangs
    # (#1839) need not wait the default.
    round_timeout: float = 120.0
    extra: dict[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> DeschedConfig:
        """A copy with some fields changed (validated again)."""
        return validate(replace(self, **changes))

    def kube_choice(self) -> KubeChoice:
        """The Kubernetes version this run's clusters are built at, and where it came from."""
        return choose_kubernetes(load_versions(), self.kubernetes, named("--desched-kubernetes"))

    def parsed_candidate(self) -> Candidate | None:
        """The candidate these specs name (None: no candidate, the pinned run)."""
        if not (self.candidate or self.candidate_chart):
            return None
        return parse_release_cached(self.candidate, self.candidate_chart)

    def parsed_baseline(self) -> Candidate | None:
        """The canary's baseline release (None: the pin), read like a candidate."""
        if not (self.baseline or self.baseline_chart):
            return None
        return parse_release_cached(self.baseline, self.baseline_chart, "baseline")


def validate(c: DeschedConfig) -> DeschedConfig:
    """Every cheap input check, before the first cluster change."""
    if c.provider not in PROVIDERS:
        raise ConfigError(unknown_provider(c.provider))
    if not isinstance(c.workers, int) or c.workers < 2:
        raise ConfigError(
            f"{named('--desched-workers')} must be an integer >= 2, got {c.workers!r} "
            "(the descheduler skips smaller clusters)"
        )
    try:
        names.check_namespace(c.namespace)
    except LabInputError as exc:
        raise ConfigError(f"{named('--desched-namespace')}: {exc}") from None
    names.check("namespace", c.namespace, "", named("--desched-namespace"))
    names.check("release", c.release, "", named("--desched-release"))
    if c.descheduler_version is not None:
        names.check("version", c.descheduler_version, "", named("--desched-descheduler"))
    c.kube_choice()  # an unserved Kubernetes is refused before anything is built
    for track in ("baseline", "candidate"):
        flag = f"--desched-{track}-kubernetes"
        if getattr(c, f"{track}_kubernetes") is not None:
            choose_kubernetes(load_versions(), getattr(c, f"{track}_kubernetes"), named(flag))
    caps = capabilities_of(c.provider)
    if c.kind_cluster is not None and not (caps and caps.adopts_named_cluster):
        raise ConfigError(
            f"--desched-kind-cluster {c.kind_cluster} needs the kind provider, not "
            f"{c.provider!r}; drop --desched-provider {c.provider} (the option implies kind)"
        )
    if c.kubernetes is not None:
        check_kubernetes_on(c, c.provider)
    check_candidate(c)
    check_input_files(c)
    return c


def check_kubernetes_on(c: DeschedConfig, provider: str) -> None:
    """A chosen Kubernetes needs a cluster this run builds (`auto`: asked again once chosen)."""
    if c.kubernetes is None:
        return
    version = c.kube_choice().version
    caps = capabilities_of(provider)
    why = caps and caps.kubernetes_refusal(version)
    if why:
        raise ConfigError(why)
    if c.kind_cluster is not None:
        raise ConfigError(
            f"--desched-kubernetes {version} and --desched-kind-cluster {c.kind_cluster}: a kind "
            "cluster you name runs the Kubernetes it was created with; give only one"
        )


def check_input_files(c: DeschedConfig) -> None:
    """--desched-policy / --desched-values name readable files (their content: inputs.py)."""
    files = [("--desched-policy", c.policy)] if c.policy else []
    for flag in ("values", "baseline_values", "candidate_values"):
        files += [(f"--desched-{flag.replace('_', '-')}", v) for v in getattr(c, flag)]
    for flag, path in files:
        if not path.exists():
            raise ConfigError(f"{flag} {path}: no such file")
        if not path.is_file():
            raise ConfigError(f"{flag} {path}: not a regular file")
        try:
            with path.open("rb"):
                pass
        except OSError as exc:
            raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror})") from None


def check_candidate(c: DeschedConfig) -> Candidate | None:
    """The candidate's (and a canary's baseline's) spec, chart and provider fit together;
    before any cluster change. Returns the candidate."""
    found: dict[str, Candidate | None] = {}
    for role in ("candidate", "baseline"):
        flag = f"--desched-{role}"
        try:
            rel = found[role] = getattr(c, f"parsed_{role}")()
        except ConfigError as exc:
            raise ConfigError(f"{named(flag)}: {exc}") from None
        if rel is None or rel.pinned:
            continue
        if c.descheduler_version and c.descheduler_version != rel.version:
            raise ConfigError(
                f"--desched-descheduler {c.descheduler_version} and {flag} "
                f"{rel.ref} both pick the descheduler; give only {flag}"
            )
        caps = capabilities_of(c.provider)  # None for auto: the session asks once it is chosen
        why = caps and caps.candidate_refusal(
            f"{flag} {rel.ref}", rel.kind == "image", rel.has_published_image
        )
        if why:
            raise ConfigError(why)
    return found["candidate"]


def _paths(items: Any) -> tuple[Path, ...]:
    return tuple(Path(v).expanduser() for v in items or ())


def build_config(
    values: Mapping[str, Any] | None = None,
    run_dir: Path | None = None,
    *,
    ini: Mapping[str, Any] | None = None,
    **fields: Any,
) -> DeschedConfig:
    """Resolve every option ({"--desched-flag": explicit value}, then `DESCHED_*`, then
    `ini` {"--desched-flag": the ini key's value}, then the default) into a validated config."""
    v = dict(values or {})
    ini = dict(ini or {})
    for old, new in DEPRECATED.items():  # an old flag's value, when the new one is not given
        if v.get(old) not in (None, False) and v.get(new) in (None, False):
            deprecated(old, new)
            v[new] = v[old]

    def get(flag: str) -> Any:
        return resolve(flag, v.get(flag), ini.get(flag))

    try:
        workers = int(get("--desched-workers"))
    except (TypeError, ValueError):
        raise ConfigError(
            f"{named('--desched-workers')} must be an integer >= 2, got {get('--desched-workers')!r}"
        ) from None
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    ns = get("--desched-namespace")
    art = get("--desched-artifacts")
    kube = get("--desched-existing-kubeconfig")
    kind_cluster = get("--desched-kind-cluster") or None
    provider = get("--desched-provider")
    if kind_cluster and provider == "auto":
        provider = "kind"  # a kind cluster the user named: nothing else to choose
    pol = get("--desched-policy")
    run_dir = run_dir or scratch.make()
    config = DeschedConfig(
        provider=provider,
        keep=get("--desched-keep"),
        artifacts=Path(art) if art else default_run_dir(),
        redact=bool(get("--desched-redact")),
        cache_dir=Path(get("--desched-cache-dir")) if get("--desched-cache-dir") else None,
        bins=parse_bins(get("--desched-bin")),
        helm=get("--desched-helm"),
        workers=workers,
        chart_source=get("--desched-chart-source"),
        namespace=f"{ns}-{worker}" if worker else ns,
        release=get("--desched-release"),
        descheduler_version=get("--desched-descheduler"),
        kubernetes=get("--desched-kubernetes") or None,
        baseline_kubernetes=get("--desched-baseline-kubernetes") or None,
        candidate_kubernetes=get("--desched-candidate-kubernetes") or None,
        candidate=get("--desched-candidate"),
        candidate_chart=get("--desched-candidate-chart"),
        baseline=get("--desched-baseline"),
        baseline_chart=get("--desched-baseline-chart"),
        baseline_values=_paths(get("--desched-baseline-values")),
        candidate_values=_paths(get("--desched-candidate-values")),
        policy=Path(pol).expanduser() if pol else None,
        values=_paths(get("--desched-values")),
        existing_context=get("--desched-existing-context"),
        existing_kubeconfig=Path(kube) if kube else None,
        allow_existing=bool(get("--desched-allow-existing")),
        kind_cluster=kind_cluster,
        run_dir=run_dir,
    )
    return validate(replace(config, **fields)) if fields else validate(config)


# -- the `desched` command's face of the options ------------------------------
def add_config_options(ap: argparse.ArgumentParser, command: str | None = None) -> None:
    """The plugin's options that `command` takes, without their prefix, grouped for --help;
    an option whose spelling the command already has for itself is left to the command."""
    taken = set(ap._option_string_actions)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for flag, env, kw in OPTIONS:
        short = cli_flag(flag)
        if (command and command not in commands_of(flag)) or short in taken:
            continue
        title = OPTION_GROUPS.get(flag, "input options")
        if title not in groups:
            groups[title] = ap.add_argument_group(title)
        kw = dict(kw)
        default = kw.pop("default", False if kw.get("action") == "store_true" else None)
        kw["help"] = f"{kw['help']} [env {env}]{shown_default(default)}"
        if kw.get("action") != "store_true":
            kw["default"] = None  # unset, so an explicit value beats the environment
            kw.setdefault("metavar", flag.removeprefix("--desched-").upper().replace("-", "_"))
        groups[title].add_argument(short, dest=flag, **kw)
        for old in (o for o, n in DEPRECATED.items() if n == flag):
            groups[title].add_argument(
                cli_flag(old), dest=old, metavar=kw.get("metavar"), help=f"deprecated: {short}"
            )


def config_from_args(args: argparse.Namespace, **fields: Any) -> DeschedConfig:
    """The configuration a `desched` subcommand's parsed arguments give (and its run folder)."""
    values = {flag: getattr(args, flag, None) for flag in [*OPTION_ENV, *DEPRECATED]}
    config = build_config(values, **fields)
    if not resolve("--desched-artifacts", values["--desched-artifacts"]):
        claim(config.artifacts)  # ./desched-artifacts/<stamp>-<id>/ and `latest`
    return config
