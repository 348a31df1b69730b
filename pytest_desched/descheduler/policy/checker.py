"""The descheduler's own verdict on a policy, from the ``policycheck`` helper.

The helper (pytest_desched/tools/policycheck/main.go) is built by the toolchain against the same
descheduler module as the binary under test, so what it says is what that descheduler does at
start-up: decode (lenient at the top level, strict in plugin args), convert, validate, default,
and build each profile. A second, strict pass lists every field the descheduler would silently
drop. Many documents go through one process (JSON lines), so linting 1,000 files is one exec.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.errors import ToolError

if TYPE_CHECKING:
    from pytest_desched.tools.toolchain import Toolchain

__all__ = ["CheckResult", "DroppedField", "PolicyChecker", "checker_for"]


@dataclass(frozen=True)
class DroppedField:
    """A field the descheduler's decoder ignores (``unknown``) or keeps one of (``duplicate``)."""

    path: str
    kind: str
    message: str
    known: tuple[str, ...] = ()  # field names valid at that place, from the Go type


@dataclass(frozen=True)
class CheckResult:
    """One document's verdict: accepted, or the descheduler's own error and the stage it hit."""

    id: str
    accepted: bool
    stage: str = ""  # decode | validate | startup (| io | protocol)
    error: str = ""
    dropped: tuple[DroppedField, ...] = ()
    strict_error: str = ""
    enabled_plugins: int = 0
    profiles: int = 0
    effective: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> CheckResult:
        dropped = tuple(
            DroppedField(d.get("path", ""), d["kind"], d["message"], tuple(d.get("known") or ()))
            for d in raw.get("dropped") or []
        )
        return cls(
            id=raw.get("id", ""),
            accepted=bool(raw.get("accepted")),
            stage=raw.get("stage", ""),
            error=raw.get("error", ""),
            dropped=dropped,
            strict_error=raw.get("strict_error", ""),
            enabled_plugins=int(raw.get("enabled_plugins") or 0),
            profiles=int(raw.get("profiles") or 0),
            effective=raw.get("effective") or {},
        )


class PolicyChecker:
    """A policycheck binary for one descheduler version; one process per :meth:`check_many`."""

    def __init__(self, binary: Path, version: str) -> None:
        self.binary = binary
        self.version = version

    def check_many(
        self, docs: Iterable[tuple[str, str]], timeout: float = 600
    ) -> list[CheckResult]:
        """Check ``(id, yaml_text)`` pairs in one helper process; results in input order."""
        items = list(docs)
        if not items:
            return []
        stdin = "".join(json.dumps({"id": i, "policy": t}) + "\n" for i, t in items)
        try:
            proc = subprocess.run(
                [str(self.binary)],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolError(f"policycheck {self.binary} could not run: {exc}") from exc
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if proc.returncode != 0 or len(lines) != len(items):
            raise ToolError(
                f"policycheck {self.binary} exited {proc.returncode} with {len(lines)} of "
                f"{len(items)} results: {proc.stderr[-500:]}"
            )
        return [CheckResult.from_json(json.loads(ln)) for ln in lines]

    def check(self, text: str, source: str = "policy") -> CheckResult:
        return self.check_many([(source, text)])[0]

    def check_doc(self, doc: dict[str, Any], source: str = "policy") -> CheckResult:
        """A parsed document, sent as JSON (which is YAML) so nothing is lost in a re-dump."""
        return self.check(json.dumps(doc), source)


_CHECKERS: dict[tuple[str, str], PolicyChecker] = {}


def checker_for(version: str | None = None, toolchain: Toolchain | None = None) -> PolicyChecker:
    """The checker built against descheduler ``version`` (None: the pinned one), built on first use."""
    from pytest_desched.tools.toolchain import Toolchain

    tc = toolchain
    if tc is None or (version is not None and tc.wanted_version("policycheck") != version):
        tc = Toolchain(
            cache_dir=toolchain.cache_dir if toolchain else None, descheduler_version=version
        )
    want = tc.wanted_version("policycheck")
    key = (str(tc.cache_dir), want)
    if key not in _CHECKERS:
        _CHECKERS[key] = PolicyChecker(tc.path("policycheck"), want)
    return _CHECKERS[key]


def results_by_id(results: Sequence[CheckResult]) -> dict[str, CheckResult]:
    return {r.id: r for r in results}
