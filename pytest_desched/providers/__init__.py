"""Cluster providers: embedded (kwokctl, the default without Docker), kind, existing.

A provider is one module with a `from_config(config, toolchain) -> Provider` function, plus
one entry in `REGISTRY`; modules load only when chosen (kind needs pytest-kind-ng).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pytest_desched.providers.base import choose_provider

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.providers.base import Provider
    from pytest_desched.tools.toolchain import Toolchain

REGISTRY: dict[str, str] = {
    "embedded": "pytest_desched.providers.embedded.cluster",
    "kind": "pytest_desched.providers.kind",
    "existing": "pytest_desched.providers.existing",
}


def make_provider(config: DeschedConfig, toolchain: Toolchain) -> Provider:
    """The provider object for the configuration (plain function: usable without pytest)."""
    name = choose_provider(config.provider)
    module = importlib.import_module(REGISTRY[name])
    return module.from_config(config, toolchain)
