"""The plugin's per-run state, kept in pytest's Stash rather than on pytest's own objects.

One `PluginState` per pytest config (the experiments' entries for the summary, the session's
info, the redactor and the evidence folder once a fixture resolved them) and one entry per test
item (what the makereport hook completes with the outcome).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class PluginState:
    """What the fixtures learn and the reporting hooks print, for one pytest run."""

    results: list[dict[str, Any]] = field(default_factory=list)  # one entry per experiment run
    info: dict[str, Any] = field(default_factory=dict)  # provider, cluster, chart, cleanup...
    session: Any = None  # the DeschedSession, once a fixture started it
    redactor: Any = None  # the session's Redactor, once evidence is written
    artifacts: Path | None = None  # the evidence folder, once the settings resolved it
    exitstatus: int | None = None  # the session's, once it finished (pytest_sessionfinish)


_STATE = pytest.StashKey[PluginState]()
_ENTRY = pytest.StashKey[dict[str, Any]]()


def state(config: pytest.Config) -> PluginState:
    """This run's state (created on first use, so hooks before configure see an empty one)."""
    return config.stash.setdefault(_STATE, PluginState())


def set_entry(item: pytest.Item, entry: dict[str, Any]) -> None:
    """The experiment entry this test item ran (the makereport hook adds its outcome)."""
    item.stash[_ENTRY] = entry


def entry_of(item: pytest.Item) -> dict[str, Any] | None:
    return item.stash.get(_ENTRY, None)
