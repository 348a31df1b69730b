"""pytest entry point (`pytest11: desched`): options, markers, fixtures and reporting.

No cluster work happens at import or configure time, so `pytest --help` and
`pytest --markers` work on any machine. The engine is `pytest_desched.session`.
"""

from __future__ import annotations

import pytest

from pytest_desched.plugin import fixtures, internal, sharding, workers
from pytest_desched.plugin.fixtures import *  # noqa: F403 (pytest finds fixtures by name here)
from pytest_desched.plugin.options import MARKERS, add_options, check_early, opt
from pytest_desched.plugin.reporting import (
    pytest_keyboard_interrupt,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_unconfigure,
)
from pytest_desched.plugin.state import state
from pytest_desched.tools.versions import load_versions

__all__ = [
    *fixtures.__all__,
    "pytest_keyboard_interrupt",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_unconfigure",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    check_early(config)  # bad input is a usage error before any cluster work
    if not config.pluginmanager.is_registered(internal):  # a crash in the plugin exits 70
        config.pluginmanager.register(internal, "desched-internal")
    sharding.configure(config)  # --desched-shard K/N: checked now, its hooks registered
    workers.configure(config)  # under pytest-xdist: each worker a shard, the controller merges
    state(config)  # the run's Stash entry, read by the fixtures and the summary


def pytest_report_header(config: pytest.Config) -> list[str]:

    try:  # with the Helm this run uses (--desched-helm): the one its records name
        v = load_versions().with_helm(opt(config, "--desched-helm"))
    except Exception as exc:  # a broken install must not break --help
        return [f"desched: cannot read pinned versions: {exc}"]
    pins = ", ".join(f"{k} {val}" for k, val in v.summary().items())
    kube = opt(config, "--desched-kubernetes") or f"{v.kubernetes.version} (pin)"
    return [
        f"desched: provider={opt(config, '--desched-provider')} "
        f"keep={opt(config, '--desched-keep')} kubernetes={kube}",
        f"desched pins: {pins}",
    ]
