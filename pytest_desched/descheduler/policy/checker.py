"""The descheduler's own verdict on a policy, and the facts of its policy API, from ``policycheck``.

The helper (pytest_desched/tools/policycheck/main.go) is built by the toolchain against the same
descheduler module as the binary under test, so what it says is what that descheduler does at
start-up: decode (lenient at the top level, strict in plugin args), convert, validate, default,
and build each profile. A second, strict pass lists every field the descheduler would silently
drop. Many documents go through one process (JSON lines), so linting 1,000 files is one exec.

Python keeps no schema tables: plugin names, the extension points each plugin implements, which
plugins take a namespace include list, the default evictor and the field names come from
:meth:`PolicyChecker.facts` (a ``describe`` request), asked once per helper binary and process.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_desched.errors import ToolError
from pytest_desched.tools.toolchain import Toolchain

__all__ = [
    "CheckResult",
    "DeschedulerFacts",
    "DroppedField",
    "PluginFacts",
    "PolicyChecker",
    "checker_for",
    "facts_for",
]

DESCRIBE: Mapping[str, Any] = {"id": "describe", "describe": True}
# Results kept per checker, by document text: Policy.validate runs on the same few policies
# many times per session, and each uncached call is one helper exec.
_RESULT_CACHE_SIZE = 512


@dataclass(frozen=True)
class DroppedField:
    """A field the descheduler drops (``unknown``), keeps one of (``duplicate``), or decodes and
    never reads (``ignored``: a never-run extension point, a ``disabled`` list, a second
    pluginConfig entry, a value a plugin only logs as invalid at run time)."""

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
    notes: tuple[str, ...] = ()  # accepted, but only a live cluster can check these

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
            notes=tuple(raw.get("notes") or ()),
        )


@dataclass(frozen=True)
class PluginFacts:
    """One registered plugin: where it can be enabled and what its args accept."""

    extension_points: frozenset[str]
    arg_fields: tuple[str, ...]
    namespace_fields: tuple[str, ...]  # args fields of type {include, exclude}

    @property
    def namespaced(self) -> bool:
        """Whether ``namespaces.include`` can hold it to one namespace (LowNodeUtilization's
        ``evictableNamespaces`` only excludes)."""
        return "namespaces" in self.namespace_fields


@dataclass(frozen=True)
class DeschedulerFacts:
    """What one descheduler build says about its policy API (the helper's ``describe``)."""

    version: str
    api_version: str
    kind: str
    top_level_fields: tuple[str, ...]
    extension_points: tuple[str, ...]  # every key of profiles[].plugins
    run_points: tuple[str, ...]  # the keys a profile runs (the others are never read)
    evicting_points: tuple[str, ...]  # the keys whose plugins evict
    plugins: Mapping[str, PluginFacts]
    default_evictor: str
    default_pod_protections: tuple[str, ...]  # what podProtections.defaultDisabled accepts
    extra_pod_protections: tuple[str, ...]  # what podProtections.extraEnabled accepts
    deprecated_evictor_flags: tuple[str, ...]
    # Probes whose answer this build's messages did not give (its pod protections or deprecated
    # flags then read as empty): a newer descheduler may word its validation differently.
    probe_errors: tuple[str, ...] = ()

    @property
    def namespaced_plugins(self) -> tuple[str, ...]:
        return tuple(sorted(n for n, p in self.plugins.items() if p.namespaced))

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> DeschedulerFacts:
        return cls(
            version=raw["version"],
            api_version=raw["apiVersion"],
            kind=raw["kind"],
            top_level_fields=tuple(raw["topLevelFields"]),
            extension_points=tuple(raw["extensionPoints"]),
            run_points=tuple(raw["runPoints"]),
            evicting_points=tuple(raw["evictingPoints"]),
            plugins={
                name: PluginFacts(
                    frozenset(p["extensionPoints"]),
                    tuple(p["argFields"]),
                    tuple(p["namespaceFields"]),
                )
                for name, p in sorted(raw["plugins"].items())
            },
            default_evictor=raw["defaultEvictor"],
            default_pod_protections=tuple(raw["defaultPodProtections"]),
            extra_pod_protections=tuple(raw["extraPodProtections"]),
            deprecated_evictor_flags=tuple(raw["deprecatedEvictorFlags"]),
            probe_errors=tuple(raw.get("errors") or ()),
        )


class PolicyChecker:
    """A policycheck binary for one descheduler version; one process per :meth:`check_many`."""

    def __init__(self, binary: Path, version: str) -> None:
        self.binary = binary
        self.version = version
        self._facts: DeschedulerFacts | None = None
        self._results: dict[tuple[str, str], CheckResult] = {}

    def _run(self, requests: Sequence[Mapping[str, Any]], timeout: float) -> list[dict[str, Any]]:
        stdin = "".join(json.dumps(r) + "\n" for r in requests)
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
        if proc.returncode != 0 or len(lines) != len(requests):
            raise ToolError(
                f"policycheck {self.binary} exited {proc.returncode} with {len(lines)} of "
                f"{len(requests)} results: {proc.stderr[-500:]}"
            )
        return [json.loads(ln) for ln in lines]

    def facts(self) -> DeschedulerFacts:
        """This descheduler's policy API, asked once per checker (one exec, or none: the
        first `check_many` asks it in the same exec)."""
        if self._facts is None:
            [raw] = self._run([DESCRIBE], timeout=120)
            self._take_facts(raw)
        assert self._facts is not None
        return self._facts

    def _take_facts(self, raw: Mapping[str, Any]) -> None:
        desc = raw.get("describe") or {}
        if not desc.get("plugins") or not desc.get("defaultEvictor"):
            raise ToolError(f"policycheck {self.binary} describe: {desc.get('errors')}")
        self._facts = DeschedulerFacts.from_json(desc)

    def check_many(
        self, docs: Iterable[tuple[str, str]], timeout: float = 600
    ) -> list[CheckResult]:
        """Check ``(id, yaml_text)`` pairs in one helper process; results in input order.

        A pair checked before by this checker is answered from memory (the id is part of the
        key: the descheduler's errors name the file).
        """
        items = list(docs)
        known = {k: self._results[k] for k in items if k in self._results}
        todo = list(dict.fromkeys(k for k in items if k not in known))
        if todo:
            requests: list[Mapping[str, Any]] = [{"id": i, "policy": t} for i, t in todo]
            describe = self._facts is None  # every check's lint asks it next: same exec
            raws = self._run(requests + [DESCRIBE] * describe, timeout)
            if describe:
                with contextlib.suppress(ToolError):  # facts() asks again, and says why
                    self._take_facts(raws.pop())
            fresh = {k: CheckResult.from_json(r) for k, r in zip(todo, raws, strict=True)}
            known.update(fresh)
            if len(self._results) + len(fresh) > _RESULT_CACHE_SIZE:
                self._results.clear()
            if len(fresh) <= _RESULT_CACHE_SIZE:
                self._results.update(fresh)
        return [known[k] for k in items]

    def check(self, text: str, source: str = "policy") -> CheckResult:
        return self.check_many([(source, text)])[0]

    def check_doc(self, doc: Mapping[str, Any], source: str = "policy") -> CheckResult:
        """A parsed document, sent as JSON (which is YAML) so nothing is lost in a re-dump."""
        return self.check(json.dumps(doc), source)


_CHECKERS: dict[tuple[str, str], PolicyChecker] = {}


def checker_for(version: str | None = None, toolchain: Toolchain | None = None) -> PolicyChecker:
    """The checker built against descheduler ``version`` (None: the pinned one), built on first use."""
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


def facts_for(version: str | None = None, toolchain: Toolchain | None = None) -> DeschedulerFacts:
    """The policy API of descheduler ``version`` (None: the pinned one), from its own code."""
    return checker_for(version, toolchain).facts()


def results_by_id(results: Sequence[CheckResult]) -> dict[str, CheckResult]:
    return {r.id: r for r in results}
