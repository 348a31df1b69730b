"""Where tools live and how one is recognised: the cache folder, its lock, version probes.

A binary is taken as it is (explicit option, PATH, cache) only when it reports the pinned
version, or from the pytest-desched-lint-bin wheel when its manifest says it was built as
pinned (`tools.lint_bin`); `select_binary` says which, or that it must be built.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from pytest_desched.errors import ToolError
from pytest_desched.tools.lint_bin import SOURCE as LINT_BIN


def default_cache_dir() -> Path:
    """$DESCHED_CACHE_DIR, else $XDG_CACHE_HOME/pytest-desched, else ~/.cache/pytest-desched."""
    if os.environ.get("DESCHED_CACHE_DIR"):
        return Path(os.environ["DESCHED_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-desched"


def cached_text(name: str, read: Callable[[], str | None]) -> str | None:
    """A text read once from a release's Go module (`read`), kept in the tool cache under
    `name`: a run then needs neither the module proxy nor a `go mod download` that writes
    the user's module cache ($HOME/go). None (nothing to read) is not kept."""
    path = default_cache_dir() / "texts" / name
    if path.is_file():
        return path.read_text(errors="replace")
    text = read()
    if text is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)  # whole or absent, whoever reads beside it
    return text


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every process (xdist workers, parallel runs) on this host.

    `filelock` takes an OS lock (flock) on its own descriptor, so two holders in one process
    exclude each other too; the lock file is opened without following a planted symlink.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path):
        yield


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
    "actionlint": (["-version"], r"^(v?[\d.]+)"),
    "metrics-server": (["--version"], r"^(v[\w.\-+]+)"),
    # "prometheus, version 3.16.0 (...)": the release; the pin is its module tag (v0.316.0)
    "prometheus": (["--version"], r"prometheus, version ([\d.]+)"),
}


def module_tag_of(tool: str, reported: str) -> str:
    """The Go module tag a binary's reported version stands for: Prometheus 3.16.0 is
    github.com/prometheus/prometheus v0.316.0; every other tool reports its tag."""
    if tool != "prometheus" or not re.fullmatch(r"\d+\.\d+\.\d+", reported):
        return reported
    major, minor, patch = reported.split(".")
    return f"v0.{major}{int(minor):02d}.{patch}"


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
    return module_tag_of(tool, m.group(1)) if m else None


def version_matches(found: str | None, wanted: str) -> bool:
    return found is not None and _norm(found) == _norm(wanted)


def select_binary(
    tool: str,
    wanted: str,
    explicit: Path | None,
    on_path: Path | None,
    cached: Path | None,
    probe: Callable[[str, Path], str | None] = probe_version,
    prebuilt: Path | None = None,
) -> tuple[Path | None, str]:
    """Pick the binary to use, in order: explicit option, PATH, the lint-bin wheel, cache;
    (None, why) means build.

    An explicit binary with the wrong version is an error (the user asked for it);
    a wrong version on PATH is skipped with a note, since PATH is not a request. `prebuilt`
    is the wheel's binary, already checked against the pins and its sha256 (`lint_bin.pick`).
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
    if prebuilt is not None:
        return prebuilt, LINT_BIN
    if cached is not None and cached.is_file() and os.access(cached, os.X_OK):
        return cached, "cache"
    return None, "build"
