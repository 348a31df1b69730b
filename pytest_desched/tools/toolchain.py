"""Provide every binary the plugin runs: an explicit path, PATH, the version cache, or a Go build.

Nothing is downloaded as a prebuilt binary: each tool is built from its pinned Go
module with the ordinary ``go`` command (``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``)
inside a small wrapper module, and cached as ``<cache>/bin/<group>/<version>/<tool>``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pytest_desched.errors import ToolError
from pytest_desched.tools.versions import Versions, load_versions

Reporter = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(f"[desched] {msg}", file=sys.stderr, flush=True)


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
        if self.source_dir is not None:
            return f"{self.name}-{self.version}-{self.source_digest}"
        return f"{self.name}-{self.version}"


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
        report: Reporter = _stderr,
        descheduler_version: str | None = None,
    ) -> None:
        self.versions = versions or load_versions()
        self.cache_dir = (cache_dir or default_cache_dir()).expanduser()
        self.overrides = dict(overrides or {})
        self.use_path = use_path
        self.report = report
        self.groups = build_groups(self.versions, descheduler_version)
        self._resolved: dict[str, Path] = {}
        self.sources: dict[str, str] = {}

    # -- locations -------------------------------------------------------
    def bin_dir(self, group: Group) -> Path:
        if group.source_dir is not None:  # by version, and by the helper's own source
            return self.cache_dir / "bin" / group.name / f"{group.version}-{group.source_digest}"
        return self.cache_dir / "bin" / group.name / group.version

    def log_path(self, group: Group) -> Path:
        return self.cache_dir / "logs" / f"{group.key}.log"

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
        # The project's own helper is never taken from PATH: only its build matches its source.
        on_path = shutil.which(tool) if self.use_path and group.source_dir is None else None
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
        return file_lock(self.cache_dir / "locks" / f"{group.key}.lock")

    def build(self, group: Group) -> None:
        """Build every binary of `group` into the cache (no-op if another process just did)."""
        out_dir = self.bin_dir(group)
        with self._lock(group):
            if all((out_dir / b).is_file() for b in group.packages):
                return
            if shutil.which("go") is None:
                raise ToolError(
                    f"{group.name} {group.version}: not cached and no `go` on PATH; install Go "
                    f"1.26+ or pass the binary with --desched-bin TOOL=PATH"
                )
            src = self.cache_dir / "src" / group.key
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
                cmd = [
                    "go",
                    "build",
                    "-v",
                    "-trimpath",
                    "-ldflags",
                    " ".join(("-s", "-w", *group.ldflags)),
                    "-o",
                    str(tmp) + "/",
                    *group.packages.values(),
                ]
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
    if group.name == "kubernetes":
        staging = (versions or load_versions()).kubernetes.extra.get("staging_version")
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
    args = ap.parse_args(argv)
    tc = Toolchain(cache_dir=args.cache_dir, descheduler_version=args.descheduler_version)
    tools = args.tools or [t for t in TOOL_GROUP if t != "kind"]
    started = time.monotonic()
    try:
        for tool in tools:
            p = tc.path(tool)
            print(f"{tool:<24} {tc.wanted_version(tool):<10} {tc.sources[tool]:<8} {p}")
    except ToolError as exc:
        _stderr(f"error: {exc}")
        return 1
    _stderr(f"tools ready in {time.monotonic() - started:.1f}s (cache: {tc.cache_dir})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
