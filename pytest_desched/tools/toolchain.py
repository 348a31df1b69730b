"""Provide every binary the plugin runs: an explicit path, PATH, the version cache, or a Go build.

Nothing is downloaded as a prebuilt binary: each tool is built from its pinned Go
module with the ordinary ``go`` command (``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``)
inside a small wrapper module, and cached as ``<cache>/bin/<group>/<version>/<tool>``.

An upgrade canary's candidate (`descheduler.candidate`) changes only the descheduler and
the policy checker: a source tree is built in place (``-mod=vendor`` when it vendors,
``GOPROXY=off``), cached by its commit as ``<version>-src<commit[:12]>``; every other
tool stays the baseline's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_desched.errors import ToolError
from pytest_desched.log import Reporter, say
from pytest_desched.names import inside
from pytest_desched.tools.versions import Versions, load_versions

if TYPE_CHECKING:
    from pytest_desched.descheduler.candidate import Candidate


def default_cache_dir() -> Path:
    """$DESCHED_CACHE_DIR, else $XDG_CACHE_HOME/pytest-desched, else ~/.cache/pytest-desched."""
    if os.environ.get("DESCHED_CACHE_DIR"):
        return Path(os.environ["DESCHED_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-desched"


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every process (xdist workers, parallel runs) on this host."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Group:
    """One `go build` invocation: a module at a version and the main packages it yields."""

    name: str
    module: str
    version: str
    packages: dict[str, str]  # binary name -> main package
    ldflags: tuple[str, ...] = ()
    # The project's own Go source (main package) built inside the wrapper, against `module`.
    source_dir: Path | None = None
    # A candidate source tree's key (commit or sha256-...): built inside that tree, not a wrapper.
    tree_key: str = ""

    @property
    def source_digest(self) -> str:
        """Short sha256 of the project's own Go source: a changed helper is a new build."""
        if self.source_dir is None:
            return ""
        h = hashlib.sha256()
        for f in sorted(self.source_dir.glob("*.go")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        return h.hexdigest()[:12]

    @property
    def key(self) -> str:
        base = f"{self.name}-{self.version}"
        if self.tree_key:
            base += f"-src{self.tree_key[:12]}"
        if self.source_dir is not None:
            base += f"-{self.source_digest}"
        return base

    @property
    def dir_name(self) -> str:
        """The cache folder under bin/<name>/: version, source tree and helper source."""
        return self.key[len(self.name) + 1 :]


def _kube_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


POLICYCHECK_PACKAGE = "desched.local/wrapper/policycheck"
POLICYCHECK_SOURCE = Path(__file__).resolve().parent / "policycheck"


def build_groups(v: Versions, descheduler_version: str | None = None) -> dict[str, Group]:
    """The build recipe of each pinned tool; `descheduler_version` builds another release or commit."""
    k, dv = v.kubernetes, descheduler_version or v.descheduler.version
    return {
        "kubernetes": Group(
            "kubernetes",
            k.module,
            k.version,
            {b: f"{k.module}/cmd/{b}" for b in k.binaries},
            _kube_ldflags(k.version),
        ),
        "etcd": Group("etcd", v.etcd.module, v.etcd.version, {"etcd": v.etcd.module}),
        "kwok": Group(
            "kwok",
            v.kwok.module,
            v.kwok.version,
            {b: f"{v.kwok.module}/cmd/{b}" for b in v.kwok.binaries},
            (f"-X {v.kwok.module}/pkg/consts.Version={v.kwok.version.lstrip('v')}",),
        ),
        "descheduler": Group(
            "descheduler",
            v.descheduler.module,
            dv,
            {"descheduler": f"{v.descheduler.module}/cmd/descheduler"},
            (f"-X {v.descheduler.module}/pkg/version.version={dv}",),
        ),
        "helm": Group(
            "helm",
            v.helm.module,
            v.helm.version,
            {"helm": f"{v.helm.module}/cmd/helm"},
            (f"-X {v.helm.module}/internal/version.version={v.helm.version}",),
        ),
        "kind": Group("kind", v.kind.module, v.kind.version, {"kind": v.kind.module}),
        # The project's policy checker, built against the descheduler source under test.
        "policycheck": Group(
            "policycheck",
            v.descheduler.module,
            dv,
            {"policycheck": POLICYCHECK_PACKAGE},
            (f"-X {v.descheduler.module}/pkg/version.version={dv}",),
            POLICYCHECK_SOURCE,
        ),
    }


# The helper's package inside a candidate's source tree (copied there at build time).
POLICYCHECK_TREE_DIR = "cmd/desched-policycheck"


def candidate_groups(v: Versions, cand: Candidate) -> tuple[dict[str, Group], dict[str, str]]:
    """The build recipes with a candidate's descheduler and policy checker; notes say what differs.

    Every other group stays the baseline's. A `binary:` of another version has no source to
    build the policy checker against, so the checks keep the baseline's rules (a note says so).
    """
    notes: dict[str, str] = {}
    if cand.kind in ("version", "image"):  # a Go module tag (an image's tag names its source)
        return build_groups(v, cand.version), notes
    groups = build_groups(v)
    if cand.kind == "source":
        if not cand.module or not cand.source_key:
            raise ToolError(f"candidate {cand.ref}: parse it with parse_candidate first")
        ldflags = (f"-X {cand.module}/pkg/version.version={cand.version}",)
        groups["descheduler"] = Group(
            "descheduler",
            cand.module,
            cand.version,
            {"descheduler": "./cmd/descheduler"},
            ldflags,
            tree_key=cand.source_key,
        )
        groups["policycheck"] = Group(
            "policycheck",
            cand.module,
            cand.version,
            {"policycheck": f"./{POLICYCHECK_TREE_DIR}"},
            ldflags,
            POLICYCHECK_SOURCE,
            tree_key=cand.source_key,
        )
    elif cand.kind == "binary":
        pinned = v.descheduler.version
        if version_matches(cand.version, pinned):
            return groups, notes
        groups["descheduler"] = dataclasses.replace(groups["descheduler"], version=cand.version)
        notes["policycheck"] = (
            f"the candidate binary reports {cand.version} and comes without its source: the "
            f"policy checks use the baseline's ({pinned}) rules"
        )
    return groups, notes


TOOL_GROUP = {
    "kube-apiserver": "kubernetes",
    "kube-controller-manager": "kubernetes",
    "kube-scheduler": "kubernetes",
    "kubectl": "kubernetes",
    "etcd": "etcd",
    "kwok": "kwok",
    "kwokctl": "kwok",
    "descheduler": "descheduler",
    "helm": "helm",
    "kind": "kind",
    "policycheck": "policycheck",
}

# How to ask a binary for its version: argv tail and a regex whose group 1 is the version.
VERSION_PROBES: dict[str, tuple[list[str], str]] = {
    "kube-apiserver": (["--version"], r"Kubernetes (v[\w.\-+]+)"),
    "kube-controller-manager": (["--version"], r"Kubernetes (v[\w.\-+]+)"),
    "kube-scheduler": (["--version"], r"Kubernetes (v[\w.\-+]+)"),
    "kubectl": (["version", "--client", "-o", "json"], r'"gitVersion":\s*"(v[^"]+)"'),
    "etcd": (["--version"], r"etcd Version: ([\w.\-+]+)"),
    "kwok": (["--version"], r"version v?([\w.\-+]+)"),
    "kwokctl": (["--version"], r"version v?([\w.\-+]+)"),
    "descheduler": (["version"], r'GitVersion:"?(v[\w.\-+]+)'),
    "helm": (["version", "--short"], r"(v[\w.\-]+)"),
    "kind": (["version"], r"kind (v[\w.\-]+)"),
    "policycheck": (["version"], r'GitVersion:"?(v[\w.\-+]+)'),
}


def _norm(version: str) -> str:
    return version.strip().lstrip("v").split("+")[0]


def probe_version(tool: str, path: Path) -> str | None:
    """The version a binary reports about itself, or None when it cannot say."""
    args, pattern = VERSION_PROBES[tool]
    env = dict(os.environ, KUBECONFIG=os.devnull)  # a version probe reads no kubeconfig
    try:
        out = subprocess.run(
            [str(path), *args], capture_output=True, text=True, timeout=30, check=False, env=env
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m else None


def version_matches(found: str | None, wanted: str) -> bool:
    return found is not None and _norm(found) == _norm(wanted)


def select_binary(
    tool: str,
    wanted: str,
    explicit: Path | None,
    on_path: Path | None,
    cached: Path | None,
    probe: Callable[[str, Path], str | None] = probe_version,
) -> tuple[Path | None, str]:
    """Pick the binary to use, in order: explicit option, PATH, cache; (None, why) means build.

    An explicit binary with the wrong version is an error (the user asked for it);
    a wrong version on PATH is skipped with a note, since PATH is not a request.
    """
    if explicit is not None:
        found = probe(tool, explicit)
        if not version_matches(found, wanted):
            raise ToolError(
                f"{tool}: {explicit} reports version {found or 'unknown'}, pinned is {wanted}; "
                f"point the option at a {wanted} binary or drop it to build one"
            )
        return explicit, "explicit"
    if on_path is not None and version_matches(probe(tool, on_path), wanted):
        return on_path, "PATH"
    if cached is not None and cached.is_file() and os.access(cached, os.X_OK):
        return cached, "cache"
    return None, "build"


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
    ) -> None:
        if descheduler_version is not None:  # it becomes a cache folder and a lock file name
            from pytest_desched.names import check

            check("version", descheduler_version, "", "descheduler version")
        self.versions = versions or load_versions()
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

    def path(self, tool: str) -> Path:
        if tool in self._resolved:
            return self._resolved[tool]
        group = self.groups[TOOL_GROUP[tool]]
        cached = self.bin_dir(group) / tool
        # The project's own helper and a candidate tree's builds are never taken from PATH:
        # only a build of that source matches it.
        from_source = group.source_dir is not None or bool(group.tree_key)
        on_path = shutil.which(tool) if self.use_path and not from_source else None
        chosen, why = select_binary(
            tool,
            group.version,
            self.overrides.get(tool),
            Path(on_path) if on_path else None,
            cached,
        )
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
            from pytest_desched.descheduler.candidate import resolve_source

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
                tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
                tmp.mkdir(parents=True, exist_ok=True)
                cmd = go_build_cmd(group, tmp)
                try:
                    _run_logged(cmd, src, env, logf, log, group, self.report)
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
            cmd = go_build_cmd(group, tmp)
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
                        _run_logged(cmd, tree, env, logf, log, group, self.report)
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


_MISSING_PACKAGE = re.compile(
    r"(?:cannot find module providing package|no required module provides package) "
    r"([\w.\-/~]+)|package ([\w.\-/~]+) is not in std"
)


def missing_packages(log_text: str) -> list[str]:
    """The packages a failed `go build` could not find, in order, each once."""
    out: list[str] = []
    for m in _MISSING_PACKAGE.finditer(log_text):
        pkg = (m.group(1) or m.group(2)).rstrip(":;")
        if pkg not in out:
            out.append(pkg)
    return out


def copy_helper(source_dir: Path, dest: Path) -> list[str]:
    """Copy whatever *.go the helper's folder holds now into `dest` (replaced whole)."""
    files = sorted(source_dir.glob("*.go"))
    if not files:
        raise ToolError(f"no *.go files in {source_dir}: the policy checker's source is missing")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in files:
        shutil.copyfile(f, dest / f.name)
    return [f.name for f in files]


def tree_go_env(tree: Path) -> dict[str, str]:
    """The environment of a build inside a source tree: vendored and offline when it vendors."""
    env = go_env()
    env["GOWORK"] = "off"
    if (tree / "vendor" / "modules.txt").is_file():
        env["GOFLAGS"] = "-mod=vendor -buildvcs=false"
        env["GOPROXY"] = "off"
    else:
        env["GOFLAGS"] = "-mod=readonly -buildvcs=false"
    return env


def go_build_cmd(group: Group, out_dir: Path) -> list[str]:
    """`go build` of every package of `group` into `out_dir`, stripped and reproducible."""
    ldflags = " ".join(("-s", "-w", *group.ldflags))
    return ["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", f"{out_dir}/",
            *group.packages.values()]  # fmt: skip


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"})
    return env


def module_gomod(module: str, version: str, env: dict[str, str], logf) -> str:
    """The text of `module@version`'s own go.mod, via `go mod download -json`."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    logf.write(res.stderr)
    if res.returncode != 0:
        raise ToolError(
            f"go mod download {module}@{version} failed: {res.stdout[-500:]} {res.stderr[-500:]}"
        )
    info = json.loads(res.stdout)
    return Path(info["GoMod"]).read_text()


_REPLACE_RE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+\S+)?\s+=>\s+(\S+)(?:\s+(\S+))?\s*$")


def wrapper_gomod(group: Group, upstream_gomod: str, staging_version: str | None) -> str:
    """go.mod of the wrapper: require the module, carry over its replaces and godebug.

    Local replaces (`=> ./staging/...`) only work inside the upstream repo; for
    k8s.io/kubernetes they are pinned to the published staging modules instead.
    """
    lines = [f"module desched.local/wrapper/{group.name}", "", "go 1.26.0", ""]
    lines.append(f"require {group.module} {group.version}")
    in_block = in_godebug = False
    for raw in upstream_gomod.splitlines():
        s = raw.split("//")[0].strip()
        if s.startswith("replace ("):
            in_block = True
            continue
        if s.startswith("godebug ("):
            in_godebug = True
            lines.append("godebug (")
            continue
        if (in_block or in_godebug) and s == ")":
            if in_godebug:
                lines.append(")")
            in_block = in_godebug = False
            continue
        if in_godebug:
            if s:
                lines.append(f"\t{s}")
            continue
        if s.startswith("godebug "):
            lines.append(s)
            continue
        if not (in_block or s.startswith("replace ")):
            continue
        m = _REPLACE_RE.match(s)
        if not m:
            continue
        old, new, new_ver = m.groups()
        if new.startswith("./staging/") and staging_version:
            lines.append(f"replace {old} => {old} {staging_version}")
        elif new_ver and not new.startswith("."):
            lines.append(f"replace {old} => {new} {new_ver}")
    return "\n".join(lines) + "\n"


def write_wrapper_module(
    group: Group, src: Path, env: dict[str, str], logf, versions: Versions | None = None
) -> None:
    staging = None
    kube = (versions or load_versions()).kubernetes
    if group.module == kube.module:  # kubernetes, and the kind node's kubelet/kubeadm/kube-proxy
        staging = kube.extra.get("staging_version")
    gomod = wrapper_gomod(group, module_gomod(group.module, group.version, env, logf), staging)
    (src / "go.mod").write_text(gomod)
    if group.source_dir is not None:
        # The wrapper module *is* the helper: its main package, built against group.module.
        for f in group.source_dir.glob("*.go"):
            shutil.copyfile(f, src / f.name)
    else:
        imports = "\n".join(f'\t_ "{p}"' for p in group.packages.values())
        (src / "tools.go").write_text(
            f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"
        )
    res = subprocess.run(
        ["go", "mod", "tidy"], cwd=src, env=env, stdout=logf, stderr=subprocess.STDOUT, check=False
    )
    if res.returncode != 0:
        raise ToolError(f"{group.name}: `go mod tidy` in {src} failed; see {logf.name}")


def _run_logged(cmd, cwd, env, logf, log: Path, group: Group, report: Reporter) -> None:
    """Run a build, streaming its output to the log and a progress line every 30 s."""
    logf.write("$ " + " ".join(cmd) + "\n")
    logf.flush()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    count = 0
    started = time.monotonic()
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(30):
            report(f"  {group.name}: {count} packages compiled, {time.monotonic() - started:.0f}s")

    t = threading.Thread(target=heartbeat, daemon=True)
    t.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            logf.write(line)
            count += 1
        rc = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        stop.set()
        logf.flush()
    if rc != 0:
        raise ToolError(
            f"building {group.name} {group.version} failed (exit {rc}): `{' '.join(cmd[:3])} ...` "
            f"in {cwd}; full log: {log}"
        )


def main(argv: list[str] | None = None) -> int:
    """`python -m pytest_desched.tools.toolchain [tool ...]`: build/resolve tools, print their paths."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("tools", nargs="*", help="tools to provide (default: all but kind)")
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--descheduler-version", default=None, help="another release tag or commit")
    ap.add_argument(
        "--candidate",
        default=None,
        help="a canary candidate (version:, source:PATH[@LABEL], binary:PATH): its descheduler "
        "and policy checker",
    )
    args = ap.parse_args(argv)
    from pytest_desched.errors import ConfigError

    try:
        cand = None
        if args.candidate:
            from pytest_desched.descheduler.candidate import parse_candidate

            cand = parse_candidate(args.candidate)
        tc = Toolchain(
            cache_dir=args.cache_dir, descheduler_version=args.descheduler_version, candidate=cand
        )
    except (ConfigError, ToolError) as exc:
        say(f"error: {exc}")
        return 2
    started = time.monotonic()
    try:
        for row in provide(tc, args.tools):
            print(f"{row['tool']:<24} {row['version']:<10} {row['source']:<8} {row['path']}")
    except ConfigError as exc:
        say(f"error: {exc}")
        return 2
    except ToolError as exc:
        say(f"error: {exc}")
        return 1
    say(f"tools ready in {time.monotonic() - started:.1f}s (cache: {tc.cache_dir})")
    return 0


def provide(tc: Toolchain, tools: list[str] | None = None) -> Iterator[dict[str, str]]:
    """Build or find each tool (default: all but kind); yield tool, version, source, path.
    Every name is checked before the first build."""
    from pytest_desched.errors import ConfigError

    unknown = [t for t in tools or () if t not in TOOL_GROUP]
    if unknown:
        raise ConfigError(f"unknown tool(s) {unknown}; known: {sorted(TOOL_GROUP)}")
    for tool in tools or [t for t in TOOL_GROUP if t != "kind"]:
        p = tc.path(tool)
        yield {
            "tool": tool,
            "version": tc.wanted_version(tool),
            "source": tc.sources[tool],
            "path": str(p),
        }


if __name__ == "__main__":
    raise SystemExit(main())
