"""What DeschedSession's two halves read from the whole, declared for the type checker.

`SessionExperiments` and `SessionLifecycle` are mixins of `DeschedSession`; each takes the
session's state and stages from it. This names them once (declared only: `DeschedSession`
sets and defines every one), so each half is checked against what it really uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from pathlib import Path

    from pytest_desched.config import DeschedConfig
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.descheduler.inputs import UserInputs
    from pytest_desched.evidence.views_ahead import ViewsAhead
    from pytest_desched.evidence.writer import EvidenceWriter
    from pytest_desched.log import Reporter
    from pytest_desched.providers.base import Cluster, Provider
    from pytest_desched.redaction import Redactor
    from pytest_desched.tools.toolchain import Toolchain


class SessionState:
    """The session's state and stages as its halves see them (see DeschedSession)."""

    if TYPE_CHECKING:
        config: DeschedConfig
        report: Reporter
        info: dict[str, Any]
        timings: dict[str, float]
        failed: bool
        report_entries: list[dict[str, Any]]
        _provider: Provider | None
        metrics_sources: tuple[str, ...]
        _cluster: Cluster | None
        _release: Release | None
        _lane_releases: dict[str, Release]
        _namespaces_used: set[str]
        _views_ahead: ViewsAhead | None
        _rounds_written: dict[str, tuple[int, list[str]]]

        def phase(self, name: str) -> AbstractContextManager[None]: ...

        @property
        def cluster(self) -> Cluster: ...

        @property
        def toolchain(self) -> Toolchain: ...

        @property
        def release(self) -> Release: ...

        @property
        def evidence(self) -> EvidenceWriter: ...

        @property
        def redactor(self) -> Redactor: ...

        @property
        def inputs(self) -> UserInputs: ...

        def new_release(
            self, name: str, version: str | None = None, workdir: Path | None = None
        ) -> Release: ...
