"""Cluster providers: embedded (kwokctl, the default without Docker), kind, existing.

A provider is one module with a `from_config(config, toolchain) -> Provider` function, plus
one entry in `REGISTRY`; modules load only when chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_desched.errors import ConfigError
from pytest_desched.providers.base import (  # choose_provider: re-exported, its old home
    choose_provider,  # noqa: F401
    kind_tools_missing,
    provider_choice,
)
from pytest_desched.tools.groups import TOOL_GROUP

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.providers.base import Provider
    from pytest_desched.tools.toolchain import Toolchain

REGISTRY: dict[str, str] = {
    "embedded": "pytest_desched.providers.embedded.cluster",
    "kind": "pytest_desched.providers.kind",
    "existing": "pytest_desched.providers.existing",
}


def delete_kept(provider: str, name: str, folder: Path, created: bool, toolchain: Toolchain) -> str:
    """Delete cluster `name` that `desched up` kept on `provider` (folder: that run's), if the
    run made it; what was done. The provider's module says how (`delete_kept`)."""
    if provider not in REGISTRY:
        raise ConfigError(
            f"{folder / 'kept.json'}: unknown provider {provider!r}; remove the folder by hand"
        )
    module = importlib.import_module(REGISTRY[provider])
    deleter = getattr(module, "delete_kept", None)
    if deleter is None:
        raise ConfigError(
            f"cluster {name}: the {provider} provider keeps no cluster for desched up"
        )
    return str(deleter(name, folder, created, toolchain))


def make_provider(
    config: DeschedConfig, toolchain: Toolchain, report: Callable[[str], None] | None = None
) -> Provider:
    """The provider object for the configuration (plain function: usable without pytest);
    what `auto` chose, and why, is said through `report`."""
    group = toolchain.groups[TOOL_GROUP["kind"]]
    cached = toolchain.overrides.get("kind") or toolchain.bin_dir(group) / "kind"
    name, why = provider_choice(config.provider, kind_missing=lambda: kind_tools_missing(cached))
    if config.provider == "auto" and report is not None:
        report(f"provider: auto chose {name} ({why}); pin it with --desched-provider {name}")
    module = importlib.import_module(REGISTRY[name])
    return module.from_config(config, toolchain)
