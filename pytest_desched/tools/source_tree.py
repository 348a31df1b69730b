"""What a descheduler source tree (a `git archive` tarball or a checkout) says about itself,
read without extracting it: module, commit, pkg/version's default, the chart's appVersion and
the release markers (`release_markers`). Split out of `candidate`, which labels the tree.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pytest_desched.errors import ConfigError
from pytest_desched.tools.release_markers import ReleaseMarkers, read_markers
from pytest_desched.tools.tarballs import check_member, open_checked

__all__ = ["CHART_NAME", "COMMIT", "LABEL", "SourceInfo", "source_info", "tarball_commit"]

# A label every version-keyed table can read; also a valid image tag (no "+").
LABEL = re.compile(r"v\d+\.\d+\.\d+(?:-[0-9A-Za-z][0-9A-Za-z.-]*)?")
COMMIT = re.compile(r"[0-9a-f]{40}")
CHART_NAME = "descheduler"
# version.go: `version string = "v0.37.0"` or `version = "v0.37.0"` inside the var block.
_VERSION_GO = re.compile(r'^\s*version\s+(?:string\s*)?=\s*"([^"]*)"', re.MULTILINE)


def _fail(spec: str, why: str, fix: str) -> ConfigError:
    return ConfigError(f"candidate {spec!r}: {why}; {fix}")


@dataclass(frozen=True)
class SourceInfo:
    """What a source tree (tarball or directory) says about itself, read without extracting."""

    root: str  # the tree's top directory inside the tarball ("" for a directory)
    commit: str | None
    module: str
    version_go: str | None  # non-empty default of pkg/version's `version`, if any
    app_version: str | None  # charts/descheduler/Chart.yaml appVersion
    has_vendor: bool
    has_chart: bool
    markers: ReleaseMarkers = field(default_factory=ReleaseMarkers)  # release_markers.py


TAR_FIX = "pass a .tar.gz made by `git archive` of a descheduler checkout, or the checkout"


def tarball_commit(path: Path) -> str | None:
    """The commit `git archive` writes into the pax global header (`comment`), if any."""
    with tarfile.open(path) as tf:
        tf.next()  # the global header is read with the first member
        comment = (tf.pax_headers or {}).get("comment", "").strip()
    return comment if COMMIT.fullmatch(comment) else None


def _go_module(gomod: str) -> str:
    m = re.search(r"^module\s+(\S+)", gomod, re.MULTILINE)
    return m.group(1).strip('"') if m else ""


def _version_go_default(text: str | None) -> str | None:
    if not text:
        return None
    m = _VERSION_GO.search(text)
    return m.group(1).strip() if m and m.group(1).strip() else None


def _app_version(chart_yaml: str | None) -> str | None:
    if not chart_yaml:
        return None
    try:
        doc = yaml.safe_load(chart_yaml) or {}
    except yaml.YAMLError:
        return None
    app = doc.get("appVersion") if isinstance(doc, dict) else None
    return str(app).strip() if app not in (None, "") else None


def source_info(path: Path) -> SourceInfo:
    """Read go.mod, pkg/version and the chart's appVersion from a tarball or a directory.

    Raises ConfigError when it is not a descheduler source tree (no go.mod, no
    cmd/descheduler) or the tarball cannot be read.
    """
    spec = f"source:{path}"
    wanted: dict[str, str | None] = dict.fromkeys(_MARKER_FILES)
    manifests: dict[str, str | None] = {}
    git_tag: str | None = None
    has_cmd = has_vendor = False
    root = ""
    commit: str | None = None
    if path.is_dir():
        for rel in wanted:
            p = path / rel
            wanted[rel] = p.read_text(errors="replace") if p.is_file() else None
        has_cmd = (path / "cmd" / "descheduler").is_dir()
        has_vendor = (path / "vendor" / "modules.txt").is_file()
        commit = _git_commit(path)
        git_tag = _git_tag(path) if commit else None
        root = path.name
        for p in sorted((path / "kubernetes").rglob("*.yaml")):
            if p.is_file() and not p.is_symlink():
                manifests[p.relative_to(path).as_posix()] = p.read_text(errors="replace")
    else:
        try:
            with open_checked(path, f"candidate {spec!r}", TAR_FIX) as tf:
                names: list[str] = []
                members: dict[str, tarfile.TarInfo] = {}
                texts: dict[str, str] = {}  # read while streaming: no seek back into the gzip
                for m in tf:
                    check_member(m, f"candidate {spec!r}", TAR_FIX)  # before any unpacking
                    names.append(m.name)
                    members[m.name.rstrip("/")] = m
                    tail = m.name.split("/", 1)[-1]
                    if m.isfile() and any(_wanted_member(n) for n in {m.name, tail}):
                        fh = tf.extractfile(m)
                        texts[m.name] = fh.read().decode(errors="replace") if fh else ""
                root = tar_root(names)
                pre = f"{root}/" if root else ""
                for rel in wanted:
                    wanted[rel] = texts.get(pre + rel)
                for name, text in texts.items():
                    rel = name[len(pre) :] if name.startswith(pre) else name
                    if rel.startswith("kubernetes/") and rel.endswith(".yaml"):
                        manifests[rel] = text
                has_cmd = f"{pre}cmd/descheduler" in members
                has_vendor = f"{pre}vendor/modules.txt" in members
                commit_raw = (tf.pax_headers or {}).get("comment", "").strip()
                commit = commit_raw if COMMIT.fullmatch(commit_raw) else None
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise _fail(
                spec, f"cannot read the tarball ({type(exc).__name__}: {exc})", TAR_FIX
            ) from None
    gomod = wanted["go.mod"]
    if gomod is None or not has_cmd:
        what = "go.mod" if gomod is None else "cmd/descheduler"
        raise _fail(
            spec,
            f"no {what} at the top of the tree{f' ({root}/)' if root else ''}: not a "
            "descheduler source tree",
            "point source: at the repository's top directory or a tarball of it",
        )
    module = _go_module(gomod)
    if not module:
        raise _fail(spec, "go.mod has no module line", "use an unmodified descheduler tree")
    app_version = _app_version(wanted[f"charts/{CHART_NAME}/Chart.yaml"])
    markers = read_markers(
        {
            **manifests,
            "README.md": wanted["README.md"],
            "docs/user-guide.md": wanted["docs/user-guide.md"],
        },
        top_dir=root,
        git_tag=git_tag,
        chart_app_version=app_version,
    )
    return SourceInfo(
        root=root if not path.is_dir() else "",
        commit=commit,
        module=module,
        version_go=_version_go_default(wanted["pkg/version/version.go"]),
        app_version=app_version,
        has_vendor=has_vendor,
        has_chart=wanted[f"charts/{CHART_NAME}/Chart.yaml"] is not None,
        markers=markers,
    )


_MARKER_FILES = (
    "go.mod",
    "pkg/version/version.go",
    f"charts/{CHART_NAME}/Chart.yaml",
    "README.md",
    "docs/user-guide.md",
)


def _wanted_member(rel: str) -> bool:
    """A file source_info reads: one of _MARKER_FILES or a kubernetes/ manifest."""
    return rel in _MARKER_FILES or (rel.startswith("kubernetes/") and rel.endswith(".yaml"))


def tar_root(names: list[str]) -> str:
    """The single top directory of a tarball (`git archive --prefix=`), or "" when none."""
    tops = {n.lstrip("./").split("/", 1)[0] for n in names if n.lstrip("./")}
    if len(tops) == 1:
        top = next(iter(tops))
        if any(n.lstrip("./").startswith(top + "/") for n in names):
            return top
    return ""


def _git_commit(path: Path) -> str | None:
    """HEAD of a clean git checkout; None when not a checkout, dirty, or git is missing."""
    if not (path / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip()
    if head.returncode or dirty.returncode or dirty.stdout.strip() or not COMMIT.fullmatch(commit):
        return None
    return commit


def _git_tag(path: Path) -> str | None:
    """The tag at a clean checkout's HEAD (`git describe --tags --exact-match`), if any."""
    try:
        res = subprocess.run(
            ["git", "-C", str(path), "describe", "--tags", "--exact-match", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    tag = res.stdout.strip()
    return tag if res.returncode == 0 and LABEL.fullmatch("v" + tag.lstrip("v")) else None
