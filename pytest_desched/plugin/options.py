"""The plugin's options: `--desched-*` flags over config.OPTIONS, resolved into a config.

No cluster work happens here, so `pytest --help` and `--markers` work on any machine; a bad
value is a `pytest.UsageError` before any fixture runs.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_desched.artifacts_dir import claim
from pytest_desched.config import (
    DEPRECATED,
    OPTIONS,
    DeschedConfig,
    build_config,
    env_true,
    ini_key,
    resolve,
    shown_default,
)
from pytest_desched.errors import ConfigError
from pytest_desched.inputs_safe import max_bytes
from pytest_desched.plugin.state import state

MARKERS = {
    "descheduler_e2e": "an end-to-end descheduler experiment on a real control plane (`-m descheduler_e2e`)",
    "faults": "a fault-matrix case: the embedded provider breaks its own cluster mid-round (`-m faults`)",
    "desched_experiment(name, **params)": "run the registered experiment `name` (positive, nodefit, pdb, "
    "minpodage, or your own Experiment subclass) with params (variant, namespace, replicas, source, "
    "target, overrides, policy); the result is the `desched_experiment_result` fixture",
    "desched_canary(candidate, chart=None, expect=None, experiments=None, baseline=None, "
    "baseline_chart=None)": "an upgrade canary of `candidate` (version:vX.Y.Z, source:PATH, "
    "binary:PATH) against `baseline` (same forms; default: --desched-baseline, else the pin), "
    "each on its own cluster; the report is the `desched_canary_report` fixture",
}


# Options of the plugin alone (they pick tests at collection; `desched` collects none):
# flag > `DESCHED_*`. How sharding works: plugin/sharding.py and docs/ci.md.
SHARD_OPTIONS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "--desched-shard",
        "DESCHED_SHARD",
        {
            "metavar": "K/N",
            "help": "run only shard K of N of the selected tests (one CI job "
            "each), balanced by recorded durations; `desched merge` joins the N evidence folders",
        },
    ),
    (
        "--desched-shard-run-id",
        "DESCHED_SHARD_RUN_ID",
        {
            "metavar": "ID",
            "help": "the id every shard of one run shares (default: "
            "$GITHUB_RUN_ID, else $CI_PIPELINE_ID)",
        },
    ),
    (
        "--desched-shard-durations",
        "DESCHED_SHARD_DURATIONS",
        {
            "metavar": "FILE",
            "help": "seconds per test id, as `desched merge` writes them "
            "(default: <rootdir>/desched-durations.json if present, else equal weights)",
        },
    ),
    (
        "--desched-shard-allow-empty",
        "DESCHED_SHARD_ALLOW_EMPTY",
        {
            "action": "store_true",
            "help": "a shard left without tests (N > tests) passes "
            "and says so, instead of a usage error",
        },
    ),
]


def add_options(parser: pytest.Parser) -> None:
    """Each option as a `--desched-*` flag and a `desched_*` ini key (pyproject.toml's
    `[tool.pytest.ini_options]`, pytest.ini, tox.ini): flag > `DESCHED_*` > ini > default."""
    group = parser.getgroup("desched", "pytest-desched: descheduler runbook experiments")
    for flag, env, kw in OPTIONS:
        kw = dict(kw)
        default = kw.pop("default", False if kw.get("action") == "store_true" else None)
        kw["help"] = f"{kw['help']} [env {env}] [ini {ini_key(flag)}]{shown_default(default)}"
        if kw.get("action") != "store_true":
            kw["default"] = None  # unset, so an explicit value always beats the env var
        group.addoption(flag, dest=_dest(flag), **kw)
        switch, many = kw.get("action") == "store_true", kw.get("action") == "append"
        ini_type: Literal["bool", "paths", "string"] = (
            "bool" if switch else "paths" if many else "string"
        )
        parser.addini(  # a list option's files: one per line, relative to the ini file
            ini_key(flag),
            f"{kw['help'].partition(' [env')[0]} (flag {flag}, env {env} win over it)",
            type=ini_type,
            default=False if switch else [] if many else "",
        )
    for flag, env, kw in SHARD_OPTIONS:
        group.addoption(flag, dest=_dest(flag), **{**kw, "help": f"{kw['help']} [env {env}]"})
    for old, new in DEPRECATED.items():  # still works this release; build_config says so
        group.addoption(old, dest=_dest(old), default=None, help=f"deprecated: use {new}")


def _dest(flag: str) -> str:
    return ini_key(flag)


def shard_opt(config: pytest.Config, flag: str) -> Any:
    """A SHARD_OPTIONS value: the command line, then its environment variable."""
    value = config.getoption(_dest(flag))
    if value:
        return value
    env = os.environ.get(dict((f, e) for f, e, _ in SHARD_OPTIONS)[flag], "")
    if flag == "--desched-shard-allow-empty":
        return env_true(env)
    return env or None


def _ini(config: pytest.Config, flag: str) -> Any:
    """The ini key's value ("" or False when unset)."""
    return config.getini(ini_key(flag))


def opt(config: pytest.Config, flag: str) -> Any:
    """Command line wins, then the environment variable, then the ini key, then the default."""
    try:
        return resolve(flag, config.getoption(_dest(flag)), _ini(config, flag))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def config_from_pytest(c: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> DeschedConfig:
    """Resolve every option for one run; the run's temp dir holds its private files.

    The evidence does not go to the temp dir (pytest deletes all but the last three): by
    default it is a fresh `./desched-artifacts/<UTC timestamp>-<run id>/`, `latest` beside it.
    """
    values = {flag: c.getoption(_dest(flag)) for flag in [*(f for f, _, _ in OPTIONS), *DEPRECATED]}
    ini = {flag: _ini(c, flag) for flag, _, _ in OPTIONS}
    run_dir = tmp_path_factory.mktemp("desched")
    try:
        config = build_config(values, run_dir=run_dir, ini=ini)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    art = opt(c, "--desched-artifacts")
    worker = getattr(c, "workerinput", {}).get("workerid")
    if art and worker:  # each xdist worker its own DIR-gwK; plugin/workers.py merges into DIR
        config = replace(config, artifacts=Path(f"{str(art).rstrip('/')}-{worker}"))
    if not art:
        claim(config.artifacts)
    state(c).artifacts = config.artifacts  # the summary prints it
    return config


def check_input_files(policy: str | None, values: list[str] | None) -> None:
    """The user's --desched-policy / --desched-values: readable YAML mappings (file:line)."""
    # heavy: descheduler.inputs and its imports, kept out of pytest start-up
    from pytest_desched.descheduler.inputs import read_input

    for flag, path in [("--desched-policy", policy)] * bool(policy) + [
        ("--desched-values", v) for v in values or ()
    ]:
        read_input(flag, Path(str(path)).expanduser())


def check_early(c: pytest.Config) -> None:
    """Every option and `DESCHED_*` variable checked at configure time, before any test runs
    (even in a run that uses no desched fixture): the whole configuration is resolved and
    validated as the fixtures will (config.build_config, nothing created), then the input
    files' content and the input size limits (DESCHED_MAX_INPUT_BYTES, ..._BULK_BYTES)."""
    import tempfile

    if c.getoption("help", False):  # --help shows the valid values; it must work
        return
    values = {flag: c.getoption(_dest(flag)) for flag in [*(f for f, _, _ in OPTIONS), *DEPRECATED]}
    ini = {flag: _ini(c, flag) for flag, _, _ in OPTIONS}
    try:
        for kind in ("small", "bulk"):
            max_bytes(kind)
        build_config(values, run_dir=Path(tempfile.gettempdir()), ini=ini)  # no folder made
        check_input_files(opt(c, "--desched-policy"), opt(c, "--desched-values"))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
