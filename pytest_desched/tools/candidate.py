"""The descheduler under test in an upgrade canary: which build, which label, which chart.

`parse_candidate` reads a spec the user gave (`version:vX.Y.Z`, `source:PATH[@LABEL]`,
`binary:PATH`, `image:REPO:TAG`, `pinned`) and checks it without building anything: the
path exists, the tarball is readable and is a descheduler tree, the version is a label.
`resolve_source` extracts (or copies) a source tree into the cache, once per source key,
so the toolchain can build it and the chart code can package its `charts/descheduler`.

The version label of a source tree
----------------------------------
Every version-keyed table (the log table by minor in `logparse.table_for`, the policy
schema by minor, the known-bug registry, the image tag) reads the label as
`vMAJOR.MINOR.PATCH[-SUFFIX]`, so a label always has that form:

1. `source:PATH@LABEL`: the user's label, as given (it must have that form);
2. else a non-empty default of `version` in the tree's `pkg/version/version.go` (upstream
   leaves it empty and sets it with `-ldflags -X`, so this is rare);
3. else the release the tree's own markers name (a checkout's tag, the image tag of its
   `kubernetes/` manifests, its top directory's name), in the order and with the
   cross-checks of `release_markers`; never the chart alone (a release tag's
   charts/descheduler holds the previous chart);
4. else, where the markers disagree or say nothing (a master snapshot), a build label:
   `v<appVersion of charts/descheduler/Chart.yaml>-g<commit[:9]>`, the commit being
   the `git archive` pax header of a tarball or `git rev-parse HEAD` of a clean checkout;
   a tree with no known commit gets `-d<sha256[:9]>` of its content instead of `-g...`.
   `label_from` then says which markers disagreed or that there were none.

The label names a build; it says nothing about ordering (semver would sort
`v0.36.0-g7d2b28bf2` before `v0.36.0` although it is twelve commits after it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_desched.errors import ConfigError
from pytest_desched.tools.locate import file_lock, probe_version
from pytest_desched.tools.release_markers import release_from_markers
from pytest_desched.tools.source_tree import (
    CHART_NAME,
    LABEL,
    TAR_FIX,
    SourceInfo,
    source_info,
    tar_root,
    tarball_commit,
)
from pytest_desched.tools.tarballs import check_tarball, extract
from pytest_desched.tools.versions import load_versions

__all__ = [
    "CANDIDATE_KINDS",
    "LABEL",
    "Candidate",
    "ChartSpec",
    "SourceInfo",
    "parse_candidate",
    "parse_chart_spec",
    "resolve_source",
    "source_info",
    "tarball_commit",
]

CANDIDATE_KINDS = ("pinned", "version", "source", "binary", "image")
MODULE_TAG = re.compile(r"v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
CHART_VERSION = re.compile(r"v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?")
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar")
SPECS_HELP = (
    "use pinned, version:vX.Y.Z, source:PATH[@LABEL] (a checkout or a .tar.gz of one), "
    "binary:PATH or image:REPO:TAG"
)


@dataclass(frozen=True)
class Candidate:
    """The descheduler under test, as the user named it, with what was read about it.

    `chart`: None means the baseline's chart rule (the pinned chart from the repo, else the
    pinned module's charts/); otherwise a chart spec for `parse_chart_spec`.
    """

    kind: str  # "pinned" | "version" | "source" | "binary" | "image"
    ref: str  # the spec as the user gave it
    version: str  # the version label under test, e.g. "v0.36.0" or "v0.36.0-g7d2b28bf2"
    commit: str | None = None  # full commit when known (source tarball or clean checkout)
    source_dir: Path | None = None  # the extracted tree (source), set by resolve_source
    chart: str | None = None
    path: Path | None = None  # the tarball, directory or binary the spec names
    source_key: str | None = None  # cache key of a source: its commit, else sha256-<hex>
    sha256: str | None = None  # of the tarball (source) or of the binary
    module: str | None = None  # the tree's Go module path (source)
    label_from: str = ""  # how `version` was decided (shown in the evidence)
    image: str | None = None  # image:REF only

    @property
    def pinned(self) -> bool:
        return self.kind == "pinned"

    @property
    def builds_from_source(self) -> bool:
        return self.kind == "source"

    @property
    def has_published_image(self) -> bool:
        """Whether a kubelet could pull an image of this version (no build of our own)."""
        return self.kind in ("pinned", "version", "image")

    def to_dict(self) -> dict[str, Any]:
        """What a record or report shows about the candidate (JSON-ready)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "ref": self.ref,
            "version": self.version,
            "label_from": self.label_from,
        }
        for key in ("commit", "source_key", "sha256", "module", "image", "chart"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.path is not None:
            out["path"] = str(self.path)
        if self.source_dir is not None:
            out["source_dir"] = str(self.source_dir)
        return out

    evidence = to_dict


@dataclass(frozen=True)
class ChartSpec:
    """A parsed candidate chart spec: `tree`, `repo:VERSION` or a path, plus optional pins.

    Pins (`SPEC@version=X,appVersion=Y`) repackage a tree or chart directory with that
    chart version / appVersion; without them the chart keeps its own.
    """

    kind: str  # "tree" | "repo" | "dir" | "tgz"
    ref: str
    path: Path | None = None
    repo_version: str | None = None
    version: str | None = None  # pinned chart version
    app_version: str | None = None  # pinned appVersion


def _fail(spec: str, why: str, fix: str) -> ConfigError:
    return ConfigError(f"candidate {spec!r}: {why}; {fix}")


def _pinned_version() -> str:
    return load_versions().descheduler.version


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_digest(root: Path, skip: tuple[str, ...] = (".git",)) -> str:
    """sha256 over every file's relative path and bytes: the key of a tree without a commit."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0")
            if p.is_symlink():
                h.update(b"L" + os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def derive_label(info: SourceInfo, source_key: str) -> tuple[str, str]:
    """The version label of a tree without a user label, and where it came from (module doc;
    the release markers' order is tools/release_markers.py's)."""
    if info.version_go and LABEL.fullmatch(info.version_go):
        return info.version_go, "pkg/version/version.go"
    release, why = release_from_markers(info.markers)
    if release is not None:
        return release, why
    version, how = _build_label(info, source_key)
    return version, f"{how}; {why}"


def _build_label(info: SourceInfo, source_key: str) -> tuple[str, str]:
    """`v<chart appVersion>-g<commit>` (or `-d<digest>`): a build, not a release."""
    if not info.app_version:
        raise ConfigError(
            f"cannot derive a version label: pkg/version has no default and "
            f"charts/{CHART_NAME}/Chart.yaml has no appVersion"
        )
    base = "v" + info.app_version.lstrip("v")
    if not LABEL.fullmatch(base):
        raise ConfigError(
            f"charts/{CHART_NAME}/Chart.yaml appVersion {info.app_version!r} is not X.Y.Z[-PRE]"
        )
    if info.commit:
        return f"{base}-g{info.commit[:9]}", "Chart.yaml appVersion + commit"
    return f"{base}-d{source_key.split('-', 1)[-1][:9]}", "Chart.yaml appVersion + content digest"


def _split_label(rest: str) -> tuple[str, str | None]:
    """`PATH@LABEL` -> (PATH, LABEL); a path that itself exists keeps any '@' it contains."""
    if "@" not in rest or Path(rest).expanduser().exists():
        return rest, None
    path, _, label = rest.rpartition("@")
    return path, label


def _parse_source(spec: str, rest: str) -> Candidate:
    raw, label = _split_label(rest)
    if not raw:
        raise _fail(spec, "no path after source:", "write source:PATH[@LABEL]")
    path = Path(raw).expanduser().resolve()
    if not path.exists():
        raise _fail(spec, f"{path} does not exist", "point source: at a checkout or a .tar.gz")
    if path.is_file() and not path.name.endswith(TARBALL_SUFFIXES):
        raise _fail(
            spec,
            f"{path.name} is neither a directory nor a {'/'.join(TARBALL_SUFFIXES)} tarball",
            "pass the checkout's directory or `git archive --format=tar.gz` output",
        )
    if label is not None and not LABEL.fullmatch(label):
        raise _fail(
            spec,
            f"label {label!r} is not vMAJOR.MINOR.PATCH[-SUFFIX]",
            "name the build like v0.37.0-rc.1 or v0.36.0-mybranch (version-keyed tables read it)",
        )
    info = source_info(path)
    digest = sha256_file(path) if path.is_file() else None
    if info.commit:
        key = info.commit
    elif digest:
        key = f"sha256-{digest}"
    else:
        key = f"sha256-{tree_digest(path)}"
    if label is not None:
        version, label_from = label, "user label"
    else:
        try:
            version, label_from = derive_label(info, key)
        except ConfigError as exc:
            raise _fail(
                spec, str(exc), "name the build yourself: source:PATH@vX.Y.Z-SUFFIX"
            ) from None
    return Candidate(
        kind="source",
        ref=spec,
        version=version,
        commit=info.commit,
        path=path,
        source_key=key,
        sha256=digest,
        module=info.module,
        label_from=label_from,
    )


def _parse_binary(spec: str, rest: str) -> Candidate:
    if not rest:
        raise _fail(spec, "no path after binary:", "write binary:PATH")
    path = Path(rest).expanduser().resolve()
    if not path.is_file():
        raise _fail(spec, f"{path} is not a file", "point binary: at a descheduler executable")
    if not os.access(path, os.X_OK):
        raise _fail(spec, f"{path} is not executable", f"chmod +x {path}")
    found = probe_version("descheduler", path)
    if not found or not LABEL.fullmatch(found):
        raise _fail(
            spec,
            f"`{path} version` reports {found or 'no version'}, not vMAJOR.MINOR.PATCH[-SUFFIX]",
            "build it with -ldflags '-X sigs.k8s.io/descheduler/pkg/version.version=vX.Y.Z' "
            "or pass its source with source:PATH",
        )
    return Candidate(
        kind="binary",
        ref=spec,
        version=found,
        path=path,
        sha256=sha256_file(path),
        label_from="`descheduler version`",
    )


def _parse_image(spec: str, rest: str) -> Candidate:
    if "@" in rest:
        raise _fail(
            spec,
            "image digests cannot be set through the chart (it renders repository:tag)",
            "pass image:REPOSITORY:TAG",
        )
    repo, sep, tag = rest.rpartition(":")
    if not sep or not repo or "/" in tag:
        raise _fail(
            spec,
            "no tag",
            "pass image:REPOSITORY:TAG, e.g. image:registry.k8s.io/descheduler/descheduler:v0.37.0",
        )
    if not LABEL.fullmatch(tag):
        raise _fail(
            spec,
            f"tag {tag!r} is not a descheduler version vMAJOR.MINOR.PATCH[-SUFFIX]",
            "tag the image with its version; the log table, schema and known bugs are chosen by it",
        )
    return Candidate(kind="image", ref=spec, version=tag, image=rest, label_from="image tag")


def parse_chart_spec(chart: str, candidate_kind: str | None = None) -> ChartSpec:
    """`tree`, `repo:VERSION`, or a chart directory / .tgz, each with optional pins.

    Raises ConfigError naming the spec and the fix; nothing is packaged or fetched here.
    """
    ref = chart.strip()
    if "\x00" in ref:
        raise ConfigError(f"candidate chart {ref[:60]!r}: holds a NUL byte; give a chart path")
    body, pins = ref, {}
    head, sep, tail = ref.rpartition("@")
    if sep and "=" in tail and not Path(ref).expanduser().exists():
        body = head
        for item in filter(None, tail.split(",")):
            k, eq, v = item.partition("=")
            if not eq or k not in ("version", "appVersion") or not CHART_VERSION.fullmatch(v):
                raise ConfigError(
                    f"candidate chart {chart!r}: pin {item!r} is not version=X.Y.Z or "
                    "appVersion=X.Y.Z; write SPEC@version=X.Y.Z,appVersion=X.Y.Z"
                )
            pins[k] = v.lstrip("v")
    if body == "tree":
        if candidate_kind not in (None, "source"):
            raise ConfigError(
                f"candidate chart 'tree' needs a source: candidate (this one is {candidate_kind}); "
                "pass a chart directory, a .tgz or repo:VERSION instead"
            )
        return ChartSpec(
            "tree", ref, version=pins.get("version"), app_version=pins.get("appVersion")
        )
    if body.startswith("repo:"):
        ver = body[len("repo:") :].lstrip("v")
        if not CHART_VERSION.fullmatch(ver):
            raise ConfigError(
                f"candidate chart {chart!r}: {ver!r} is not a chart version X.Y.Z; write repo:0.37.0"
            )
        if pins:
            raise ConfigError(
                f"candidate chart {chart!r}: a repo chart is used as published, no pins"
            )
        return ChartSpec("repo", ref, repo_version=ver)
    path = Path(body).expanduser().resolve()
    if not path.exists():
        raise ConfigError(
            f"candidate chart {chart!r}: {path} does not exist; use tree, repo:VERSION, "
            "a chart directory or a packaged .tgz"
        )
    if path.is_dir():
        if not (path / "Chart.yaml").is_file():
            raise ConfigError(
                f"candidate chart {chart!r}: {path} has no Chart.yaml; point at charts/descheduler"
            )
        return ChartSpec(
            "dir", ref, path=path, version=pins.get("version"), app_version=pins.get("appVersion")
        )
    if pins:
        raise ConfigError(
            f"candidate chart {chart!r}: pins apply to tree or a chart directory, not a packaged "
            ".tgz; unpack it or drop the pins"
        )
    members = check_tarball(path, f"candidate chart {chart!r}", "pass a `helm package` .tgz")
    if not any(m.name.endswith("/Chart.yaml") and m.name.count("/") == 1 for m in members):
        raise ConfigError(
            f"candidate chart {chart!r}: {path} has no NAME/Chart.yaml; pass a `helm package` .tgz"
        )
    return ChartSpec("tgz", ref, path=path)


def parse_candidate(spec: str | None, chart: str | None = None) -> Candidate:
    """The candidate a spec names, validated without building (see the module doc).

    Raises ConfigError naming the input and the fix; nothing is built, extracted or fetched.
    """
    raw = (spec or "pinned").strip() or "pinned"
    kind, sep, rest = raw.partition(":")
    if "\x00" in raw:  # a label or a path with a NUL is never a build, nor a file
        raise _fail(raw[:60], "holds a NUL byte", SPECS_HELP)
    if raw == "pinned":
        cand = Candidate(kind="pinned", ref=raw, version=_pinned_version(), label_from="pin")
    elif not sep or kind not in CANDIDATE_KINDS or kind == "pinned":
        raise ConfigError(f"candidate {raw!r}: unknown form; {SPECS_HELP}")
    elif kind == "version":
        if not MODULE_TAG.fullmatch(rest) or "+" in rest:
            raise _fail(raw, f"{rest!r} is not a Go module tag vX.Y.Z", "write version:v0.37.0")
        cand = Candidate(kind="version", ref=raw, version=rest, label_from="module tag")
    elif kind == "source":
        cand = _parse_source(raw, rest)
    elif kind == "binary":
        cand = _parse_binary(raw, rest)
    else:
        cand = _parse_image(raw, rest)
    if chart is not None and chart.strip():
        parse_chart_spec(chart, cand.kind)  # validated now; packaged at install
        cand = replace(cand, chart=chart.strip())
    return cand


# -- source trees in the cache -------------------------------------------------------------
def source_cache_dir(cache_dir: Path, cand: Candidate) -> Path:
    """Where a source candidate's tree lives: `<cache>/src/candidate-<key>` (never the repo)."""
    if cand.source_key is None:
        raise ConfigError(f"candidate {cand.ref!r} is not a source candidate")
    return cache_dir / "src" / f"candidate-{cand.source_key[:40]}"


def resolve_source(cand: Candidate, cache_dir: Path, report: Any = None) -> Candidate:
    """The candidate with `source_dir` set: its tree extracted (or copied) into the cache once.

    A directory is copied too (without .git): the build adds the policy checker's package
    to the tree, and a user's checkout is never written to.
    """
    if cand.kind != "source" or cand.path is None:
        return cand
    dest = source_cache_dir(cache_dir, cand)
    done = dest / ".complete"
    with file_lock(cache_dir / "locks" / f"{dest.name}.lock"):
        if not done.is_file():
            if report is not None:
                report(f"unpacking candidate source {cand.path} into {dest}")
            shutil.rmtree(dest, ignore_errors=True)
            tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            try:
                if cand.path.is_dir():
                    shutil.copytree(
                        cand.path,
                        tmp / "tree",
                        ignore=shutil.ignore_patterns(".git"),
                        symlinks=True,
                    )
                else:
                    names = extract(cand.path, tmp / "x", f"candidate {cand.ref!r}", TAR_FIX)
                    top = tar_root(names)
                    (tmp / "x" / top if top else tmp / "x").rename(tmp / "tree")
                    with contextlib.suppress(OSError):
                        (tmp / "x").rmdir()
                (tmp / ".complete").write_text(str(cand.path))
                tmp.rename(dest)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    return replace(cand, source_dir=dest / "tree")
