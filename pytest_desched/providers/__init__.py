"""Cluster providers: embedded (kwokctl, the default without Docker), kind, existing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_desched.providers.base import Provider
    from pytest_desched.settings import Settings
    from pytest_desched.toolchain import Toolchain


def make_provider(s: Settings, toolchain: Toolchain) -> Provider:
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
