"""Provide every binary the plugin runs: an explicit path, PATH, the version cache, or a Go build.

Nothing is downloaded as a prebuilt binary: each tool is built from its pinned Go
module with the ordinary ``go`` command (``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``)
inside a small wrapper module, and cached as ``<cache>/bin/<group>/<version>/<tool>``.

An upgrade canary's candidate (`tools.candidate`) changes only the descheduler and
the policy checker: a source tree is built in place (``-mod=vendor`` when it vendors,
``GOPROXY=off``), cached by its commit as ``<version>-src<commit[:12]>``; every other
tool stays the baseline's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from pytest_desched.errors import ConfigError, ToolError
from pytest_desched.log import Reporter, say
from pytest_desched.names import check as check_name
from pytest_desched.names import inside
from pytest_desched.tools import lint_bin
from pytest_desched.tools.api_probe import helper_tags
from pytest_desched.tools.candidate import Candidate, resolve_source
from pytest_desched.tools.gobuild import (
    copy_helper,
    go_build_cmd,
    go_env,
    missing_packages,
    module_source_dir,
    run_logged,
    tree_go_env,
    write_wrapper_module,
)
from pytest_desched.tools.groups import (
    HELM_ENV,
    ON_REQUEST,
    POLICYCHECK_SOURCE,
    POLICYCHECK_TREE_DIR,
    TOOL_GROUP,
    Group,
    build_groups,
    candidate_groups,
)
from pytest_desched.tools.kube_versions import at_kubernetes
from pytest_desched.tools.locate import (
    default_cache_dir,
    file_lock,
    probe_version,
    select_binary,
    version_matches,
)
from pytest_desched.tools.versions import Versions, load_versions


def checker_tags(group: Group, env: dict[str, str]) -> tuple[str, ...]:
    """Build tags fitting the policy checker to its descheduler module's API (api_probe), as
    in a tree; every other group keeps its pinned tags (Prometheus' `remove_all_sd`), the
    project's own kindnetd (a source_dir against client-go) included: probing client-go for
    the descheduler's API refused the kind build."""
    if group.source_dir != POLICYCHECK_SOURCE:
        return group.tags
    mod_dir = module_source_dir(group.module, group.version, env)
    return helper_tags(mod_dir) if mod_dir is not None else ()


class Toolchain:
    """Resolve (and if needed build) binaries; one instance per run, safe across xdist workers."""

    def __init__(
        self,
        versions: Versions | None = None,
        cache_dir: Path | None = None,
        overrides: dict[str, Path] | None = None,
        use_path: bool = True,
        report: Reporter = say,
        descheduler_version: str | None = None,
        candidate: Candidate | None = None,
        kubernetes_version: str | None = None,
        helm: str | None = None,
    ) -> None:
        if descheduler_version is not None:  # it becomes a cache folder and a lock file name
            check_name("version", descheduler_version, "", "descheduler version")
        # The Helm major ("4", "3"): given, else DESCHED_HELM (a toolchain made outside a
        # configured run, e.g. by `desched lint`, follows it too), else the pinned default.
        major = (helm or os.environ.get(HELM_ENV) or "").strip().lstrip("v") or None
        try:
            self.versions = (versions or load_versions()).with_helm(major)
        except ValueError as exc:
            raise ConfigError(f"--desched-helm / {HELM_ENV}: {exc}") from None
        if kubernetes_version:  # the cluster's Kubernetes (tools.kube_versions), checked by config
            self.versions = at_kubernetes(self.versions, kubernetes_version)
        self.cache_dir = (cache_dir or default_cache_dir()).expanduser()
        self.overrides = dict(overrides or {})
        self.use_path = use_path
        self.report = report
        # The canary's candidate: its descheduler and policy checker, every other tool as pinned.
        self.candidate = candidate
        self.notes: dict[str, str] = {}  # tool -> what differs from a plain build (evidence)
        if candidate is not None and not candidate.pinned:
            if descheduler_version and descheduler_version != candidate.version:
                raise ToolError(
                    f"descheduler version {descheduler_version} and candidate {candidate.ref} "
                    "both pick the descheduler; give only the candidate"
                )
            self.groups, self.notes = candidate_groups(self.versions, candidate)
            for tool in ("descheduler", "policycheck"):  # never the baseline's binaries
                self.overrides.pop(tool, None)
            if candidate.kind == "binary" and candidate.path is not None:
                self.overrides["descheduler"] = candidate.path
        else:
            self.groups = build_groups(self.versions, descheduler_version)
        self._resolved: dict[str, Path] = {}
        self.sources: dict[str, str] = {}
        # tool -> why the lint-bin wheel's binary was not taken (stale, missing, not installed)
        self.lint_bin_skipped: dict[str, str] = {}
        self._source: Candidate | None = None  # the candidate with its tree unpacked

    # -- locations -------------------------------------------------------
    def bin_dir(self, group: Group) -> Path:
        # by version, by the candidate tree's commit, and by the helper's own source
        return inside(self.cache_dir, "bin", group.name, group.dir_name)

    def log_path(self, group: Group) -> Path:
        return inside(self.cache_dir, "logs", f"{group.key}.log")

    def wanted_version(self, tool: str) -> str:
        return self.groups[TOOL_GROUP[tool]].version

    # -- resolution ------------------------------------------------------
    def resolved(self) -> dict[str, Path]:
        """The tools resolved so far (for reports): tool -> binary path."""
        return dict(self._resolved)

    def _select(self, tool: str) -> tuple[Path | None, str]:
        """The binary an override, PATH or the cache gives `tool` (None: it must be built)."""
        group = self.groups[TOOL_GROUP[tool]]
        # The project's own helper and a candidate tree's builds are never taken from PATH:
        # only a build of that source matches it.
        from_source = group.source_dir is not None or bool(group.tree_key)
        on_path = shutil.which(tool) if self.use_path and not from_source else None
        prebuilt = None
        if tool in lint_bin.TOOLS and not group.tree_key:  # a candidate tree is never prebuilt
            prebuilt, why = lint_bin.pick(tool, group.key, lint_bin.installed())
            if prebuilt is None:
                self.lint_bin_skipped[tool] = why
        return select_binary(
            tool,
            group.version,
            self.overrides.get(tool),
            Path(on_path) if on_path else None,
            self.bin_dir(group) / tool,
            prebuilt=prebuilt,
        )

    def where(self, tool: str) -> tuple[Path | None, str]:
        """Where `path(tool)` would take it from (explicit, PATH, lint-bin, cache, built) and
        the binary, or (None, "build"); builds nothing."""
        if tool in self._resolved:
            return self._resolved[tool], self.sources[tool]
        return self._select(tool)

    def needs_build(self, tool: str) -> bool:
        """Whether `path(tool)` would build it (nothing resolved, cached or on PATH); builds
        nothing, so a caller can say what is coming before it starts."""
        return self.where(tool)[0] is None

    def path(self, tool: str) -> Path:
        if tool in self._resolved:
            return self._resolved[tool]
        group = self.groups[TOOL_GROUP[tool]]
        cached = self.bin_dir(group) / tool
        chosen, why = self._select(tool)
        if chosen is None:
            self.build(group)
            chosen, why = cached, "built"
            found = probe_version(tool, cached)
            if not version_matches(found, group.version):
                raise ToolError(
                    f"{tool} built at {cached} reports version {found or 'unknown'}, pinned is "
                    f"{group.version}: the version ldflags did not apply; remove "
                    f"{self.bin_dir(group)} and rebuild (log: {self.log_path(group)})"
                )
        self._resolved[tool] = chosen
        self.sources[tool] = why
        return chosen

    def ensure(self, tools: list[str]) -> dict[str, Path]:
        return {t: self.path(t) for t in tools}

    # -- building --------------------------------------------------------
    def _lock(self, group: Group) -> contextlib.AbstractContextManager[None]:
        return file_lock(inside(self.cache_dir, "locks", f"{group.key}.lock"))

    def source_candidate(self) -> Candidate:
        """The source candidate with its tree unpacked into the cache (once per source key)."""
        if self._source is None:
            if self.candidate is None or self.candidate.kind != "source":
                raise ToolError("this toolchain has no source candidate to build")
            self._source = resolve_source(self.candidate, self.cache_dir, self.report)
        return self._source

    def build_info(self, tool: str) -> dict[str, object]:
        """BUILDINFO.json of a tool built by this toolchain ({} for explicit, PATH or prebuilt)."""
        group = self.groups[TOOL_GROUP[tool]]
        try:
            return dict(json.loads((self.bin_dir(group) / "BUILDINFO.json").read_text()))
        except (OSError, ValueError):
            return {}

    def build(self, group: Group) -> None:
        """Build every binary of `group` into the cache (no-op if another process just did)."""
        if group.tree_key:
            self.build_tree(group)
            return
        out_dir = self.bin_dir(group)
        with self._lock(group):
            if all((out_dir / b).is_file() for b in group.packages):
                return
            if shutil.which("go") is None:
                raise ToolError(
                    f"{group.name} {group.version}: not cached and no `go` on PATH; install Go "
                    f"1.26+ or pass the binary with --desched-bin TOOL=PATH"
                )
            src = inside(self.cache_dir, "src", group.key)
            log = self.log_path(group)
            log.parent.mkdir(parents=True, exist_ok=True)
            src.mkdir(parents=True, exist_ok=True)
            env = go_env()
            started = time.monotonic()
            self.report(
                f"building {group.name} {group.version} ({', '.join(group.packages)}); log: {log}"
            )
            with open(log, "w") as logf:
                write_wrapper_module(group, src, env, logf, self.versions)
                # the pin's own tags (prometheus.tags); the checker's fit its module's API
                tags = checker_tags(group, env)
                tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
                tmp.mkdir(parents=True, exist_ok=True)
                cmd = go_build_cmd(group, tmp, tags)
                try:
                    run_logged(cmd, src, env, logf, log, group, self.report)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                # go names each output after its package's last element; rename to the tool name.
                for tool, pkg in group.packages.items():
                    produced = tmp / pkg.rstrip("/").split("/")[-1]
                    if pkg.split("/")[-1].startswith("v") and pkg.split("/")[-1][1:].isdigit():
                        produced = tmp / pkg.split("/")[-2]
                    if produced.name != tool:
                        produced.rename(tmp / tool)
                if out_dir.exists():
                    shutil.rmtree(out_dir)
                tmp.rename(out_dir)
            (out_dir / "BUILDINFO.json").write_text(
                json.dumps(
                    {
                        "module": group.module,
                        "version": group.version,
                        **({"tags": list(tags)} if tags else {}),
                        "seconds": round(time.monotonic() - started, 1),
                        "go": subprocess.run(
                            ["go", "version"], capture_output=True, text=True, env=env
                        ).stdout.strip(),
                    }
                )
            )
            self.report(f"built {group.name} {group.version} in {time.monotonic() - started:.0f}s")

    def build_tree(self, group: Group) -> None:
        """Build a candidate tree's main package in the tree (the helper copied in first).

        ``-mod=vendor`` with ``GOPROXY=off`` when the tree vendors (nothing is fetched),
        ``-trimpath``, the label in pkg/version. A helper that does not compile against the
        tree is a ToolError naming each package its vendor/ lacks.
        """
        out_dir = self.bin_dir(group)
        with self._lock(group):
            if all((out_dir / b).is_file() for b in group.packages):
                return
            if shutil.which("go") is None:
                raise ToolError(
                    f"{group.name} {group.version}: not cached and no `go` on PATH; install Go "
                    "1.26+ to build the candidate's source"
                )
            cand = self.source_candidate()
            tree = cand.source_dir
            assert tree is not None
            log = self.log_path(group)
            log.parent.mkdir(parents=True, exist_ok=True)
            env = tree_go_env(tree)
            vendored = "-mod=vendor" in env["GOFLAGS"]
            started = time.monotonic()
            self.report(
                f"building {group.name} {group.version} from {cand.path} (commit "
                f"{cand.commit or 'unknown'}, {'vendor/' if vendored else 'module cache'}); "
                f"log: {log}"
            )
            tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
            tmp.mkdir(parents=True, exist_ok=True)
            tags = helper_tags(tree) if group.source_dir is not None else ()
            cmd = go_build_cmd(group, tmp, tags)
            # One helper copy in the tree at a time (builds of other helper sources wait).
            helper_lock = (
                file_lock(self.cache_dir / "locks" / f"{tree.parent.name}-helper.lock")
                if group.source_dir is not None
                else contextlib.nullcontext()
            )
            try:
                with open(log, "w") as logf, helper_lock:
                    if group.source_dir is not None:
                        copy_helper(group.source_dir, tree / POLICYCHECK_TREE_DIR)
                    try:
                        run_logged(cmd, tree, env, logf, log, group, self.report)
                    except ToolError as exc:
                        logf.flush()
                        raise self._tree_build_error(group, cand, log, exc) from None
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            for tool, pkg in group.packages.items():
                produced = tmp / pkg.rstrip("/").split("/")[-1]
                if produced.name != tool:
                    produced.rename(tmp / tool)
            if out_dir.exists():
                shutil.rmtree(out_dir)
            tmp.rename(out_dir)
            seconds = round(time.monotonic() - started, 1)
            (out_dir / "BUILDINFO.json").write_text(
                json.dumps(
                    {
                        "module": group.module,
                        "version": group.version,
                        "commit": cand.commit,
                        "source": str(cand.path),
                        "source_key": cand.source_key,
                        "source_sha256": cand.sha256,
                        "tree": str(tree),
                        "helper_digest": group.source_digest or None,
                        "goflags": env["GOFLAGS"],
                        "tags": list(tags),
                        "goproxy": env.get("GOPROXY"),
                        "seconds": seconds,
                        "go": subprocess.run(
                            ["go", "version"], capture_output=True, text=True, env=env
                        ).stdout.strip(),
                    }
                )
            )
            self.report(f"built {group.name} {group.version} from source in {seconds:.0f}s")

    def _tree_build_error(
        self, group: Group, cand: Candidate, log: Path, exc: ToolError
    ) -> ToolError:
        """A failed tree build, said plainly: the packages the tree lacks, else the errors."""
        text = log.read_text(errors="replace") if log.is_file() else ""
        missing = missing_packages(text)
        what = (
            "the project's policy checker (pytest_desched/tools/policycheck)"
            if group.source_dir is not None
            else "the descheduler"
        )
        if missing:
            return ToolError(
                f"{what} does not compile against candidate {cand.ref} ({group.version}): the "
                f"tree's vendor/ lacks package(s) {', '.join(missing)}; add them to the "
                f"candidate's vendor/ (`go mod vendor` with them imported) or lint with the "
                f"baseline's rules; full log: {log}"
            )
        errors = [
            ln.strip() for ln in text.splitlines() if re.match(r"^\S+\.go:\d+:\d+: ", ln.strip())
        ]
        detail = "; ".join(errors[:5]) or str(exc)
        return ToolError(
            f"{what} does not compile against candidate {cand.ref} ({group.version}): {detail}; "
            f"full log: {log}"
        )


def main(argv: list[str] | None = None) -> int:
    """`python -m pytest_desched.tools.toolchain [ARGS]`: `desched tools [ARGS]` under an old
    name, run as that command (its flags, output and exit codes: one way to build the tools)."""
    import sys

    say("note: `python -m pytest_desched.tools.toolchain` is `desched tools`; use that")
    args = sys.argv[1:] if argv is None else argv
    # a process, not an import: the CLI is the floor above (tests/unit/test_import_graph.py)
    cmd = [sys.executable, "-m", "pytest_desched.cli", "tools", *args]
    return subprocess.run(cmd, check=False).returncode


def provide(tc: Toolchain, tools: list[str] | None = None) -> Iterator[dict[str, str]]:
    """Build or find each tool (default: all but ON_REQUEST's); yield tool, version, source, path.
    Every name is checked before the first build."""
    unknown = [t for t in tools or () if t not in TOOL_GROUP]
    if unknown:
        raise ConfigError(f"unknown tool(s) {unknown}; known: {sorted(TOOL_GROUP)}")
    for tool in tools or [t for t in TOOL_GROUP if t not in ON_REQUEST]:
        p = tc.path(tool)
        yield {
            "tool": tool,
            "version": tc.wanted_version(tool),
            "source": tc.sources[tool],
            "path": str(p),
        }


if __name__ == "__main__":
    raise SystemExit(main())
