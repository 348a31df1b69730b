"""A release: one descheduler (binary + chart + policy reading) a canary track runs.

The baseline and the candidate of an upgrade canary are two releases of the same kind: each
is named by a spec `tools.candidate.parse_candidate` reads (`pinned`, `version:vX.Y.Z`,
`source:PATH[@LABEL]`, `binary:PATH`, `image:REPO:TAG`) and an optional chart spec, and each
track's session builds its own binary and policy checker and installs its own chart from it
(cached by version, commit or digest). This module adds what holds for any release and is
checked before anything is built: the Go module serves the version, an explicit chart's
appVersion is the release's (or is pinned), and which Kubernetes versions the release's own
README says it was compiled for.
"""

from __future__ import annotations

import json
import re
import subprocess
from contextlib import suppress
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import ConfigError, ToolError
from pytest_desched.tools.candidate import Candidate, parse_candidate, parse_chart_spec
from pytest_desched.tools.gobuild import go_env
from pytest_desched.tools.locate import cached_text
from pytest_desched.tools.tarballs import open_checked
from pytest_desched.tools.versions import load_versions

__all__ = [
    "chart_app_version",
    "check_release",
    "module_dir",
    "parse_release",
    "parse_release_cached",
    "release_skew",
    "release_tree",
    "skew_from_readme",
]

# What the Go module proxy (or `go`) answers for a version it does not have: bad input, not
# an unreachable network.
_NOT_SERVED = re.compile(
    r"unknown revision|invalid version|not found|no matching versions|not available|"
    r"410 Gone|404 Not Found|403 Forbidden",
    re.IGNORECASE,
)
# A row of the README's "Compatibility Matrix": `| v0.35 | v1.35 |`.
_MATRIX_ROW = re.compile(r"^\|\s*v?(\d+)\.(\d+)\s*\|\s*v?(\d+)\.(\d+)\s*\|", re.MULTILINE)
_MINOR = re.compile(r"v?(\d+)\.(\d+)")


def _in_role(exc: ConfigError, role: str) -> ConfigError:
    """parse_candidate's messages start `candidate ...`; a baseline's say `baseline ...`."""
    msg = str(exc)
    if role != "candidate" and msg.startswith("candidate "):
        msg = role + msg[len("candidate") :]
    return ConfigError(msg)


def parse_release(spec: str | None, chart: str | None = None, role: str = "candidate") -> Candidate:
    """A release spec and its chart spec, read and checked without building anything.

    Raises ConfigError naming the role (`baseline ...` / `candidate ...`), the spec and the
    fix; an explicit chart whose appVersion is not the release's is refused here too.
    """
    try:
        rel = parse_candidate(spec, chart)
        _check_chart_app_version(rel)
    except ConfigError as exc:
        raise _in_role(exc, role) from None
    return rel


def _spec_stamp(spec: str | None) -> tuple[Any, ...]:
    """What a spec's files look like now: a changed file is parsed again."""
    out: list[Any] = []
    for part in filter(None, (spec or "").split(":", 1)[-1:]):
        p = Path(part.rpartition("@")[0] or part).expanduser()
        with suppress(OSError, ValueError):  # ValueError: a NUL byte (parse_candidate refuses it)
            st = p.stat()
            out.append((str(p), st.st_size, st.st_mtime_ns))
    return tuple(out)


_PARSED: dict[tuple[Any, ...], Candidate] = {}


def parse_release_cached(spec: str | None, chart: str | None, role: str = "candidate") -> Candidate:
    """parse_release, once per spec and file state (a tarball read costs ~0.5 s)."""
    key = (spec, chart, role, _spec_stamp(spec), _spec_stamp(f"x:{chart}" if chart else None))
    if key not in _PARSED:
        _PARSED[key] = parse_release(spec, chart, role)
    return _PARSED[key]


def chart_app_version(rel: Candidate) -> str | None:
    """The appVersion the release's explicit chart spec will install with, read without
    packaging (a pin wins); None when there is no explicit chart or it is `repo:VERSION`."""
    if not rel.chart:
        return None
    spec = parse_chart_spec(rel.chart, rel.kind)
    if spec.app_version:
        return spec.app_version
    text: str | None = None
    if spec.kind == "tree" and rel.path is not None:
        if rel.path.is_dir():
            p = rel.path / "charts" / "descheduler" / "Chart.yaml"
            text = p.read_text(errors="replace") if p.is_file() else None
        else:
            text = _tar_member(rel.path, "charts/descheduler/Chart.yaml")
    elif spec.kind == "dir" and spec.path is not None:
        text = (spec.path / "Chart.yaml").read_text(errors="replace")
    elif spec.kind == "tgz" and spec.path is not None:
        text = _tar_member(spec.path, "Chart.yaml", depth=1)
    if not text:
        return None
    doc = yaml.safe_load(text) or {}
    app = doc.get("appVersion") if isinstance(doc, dict) else None
    return str(app).strip() if app not in (None, "") else None


def _tar_member(path: Path, rel: str, depth: int | None = None) -> str | None:
    """The text of `<top>/rel` in a tarball (`depth`: that many '/' in the member's name)."""
    with open_checked(path, f"chart {path}", "pass a `helm package` .tgz") as tf:
        for m in tf:
            name = m.name.lstrip("./")
            if not m.isfile() or not name.endswith("/" + rel):
                continue
            if depth is not None and name.count("/") != depth:
                continue
            if depth is None and name.count("/") != rel.count("/") + 1:
                continue
            fh = tf.extractfile(m)
            return fh.read().decode(errors="replace") if fh else None
    return None


def _release_xyz(version: str) -> str:
    """`v0.36.0-g7d2b28bf2` -> `0.36.0`: the release a label names, without build suffixes."""
    m = re.match(r"v?(\d+\.\d+\.\d+)", version)
    return m.group(1) if m else version


def _check_chart_app_version(rel: Candidate) -> None:
    """An explicit chart installs the release's image tag only when its appVersion is the
    release's; another one (a release tag's own charts/ often holds the previous chart) is
    refused unless pinned (`SPEC@appVersion=X.Y.Z`)."""
    app = chart_app_version(rel)
    if app is None:
        return
    if _release_xyz(app) == _release_xyz(rel.version):
        return
    pin = "tree@appVersion=" if rel.chart and rel.chart.startswith("tree") else "DIR@appVersion="
    raise ConfigError(
        f"candidate {rel.ref!r}: its chart {rel.chart!r} says appVersion {app}, not "
        f"{_release_xyz(rel.version)}; pass the chart that release shipped, or pin it "
        f"explicitly ({pin}{_release_xyz(rel.version)})"
    )


def _go_mod_download(module: str, version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=go_env(),
        check=False,
        timeout=300,
    )


def module_dir(module: str, version: str, role: str = "candidate") -> Path:
    """`module@version` in the Go module cache (downloaded once).

    A version the proxy does not serve is bad input (ConfigError: exit 2, before any
    cluster); a proxy that cannot be reached is a ToolError.
    """
    try:
        res = _go_mod_download(module, version)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"go mod download {module}@{version}: {exc}") from None
    try:
        doc = json.loads(res.stdout or "{}")
    except json.JSONDecodeError:
        doc = {}
    err = str(doc.get("Error") or (res.stderr if res.returncode else "")).strip()
    if not err and doc.get("Dir"):
        return Path(doc["Dir"])
    last = (err.splitlines() or ["no answer"])[-1].strip()[:200]
    if _NOT_SERVED.search(err):
        raise ConfigError(
            f"{role} 'version:{version}': {module} {version} is not served by the Go module "
            f"proxy ({last}); name a released tag, or the release's tree with source:PATH"
        )
    raise ToolError(f"go mod download {module}@{version}: {last}")


def check_release(rel: Candidate, role: str = "candidate") -> None:
    """What parsing cannot see: a `version:` release the Go module proxy does not serve."""
    if rel.kind == "version":
        module_dir(load_versions().descheduler.module, rel.version, role)


def skew_from_readme(readme: str | None, version: str, kube: str) -> dict[str, Any]:
    """The release's minor, the Kubernetes minor its README's compatibility matrix pairs it
    with, and how far the cluster's Kubernetes is from it (never a refusal: a fact to show)."""
    out: dict[str, Any] = {"descheduler": version, "kubernetes": kube}
    mv, mk = _MINOR.match(version), _MINOR.match(kube)
    rows = {(int(a), int(b)): (int(c), int(d)) for a, b, c, d in _MATRIX_ROW.findall(readme or "")}
    if not (mv and mk):
        return {**out, "note": "unknown: a version is not vX.Y"}
    compiled = rows.get((int(mv.group(1)), int(mv.group(2))))
    if compiled is None:
        why = "no README" if not readme else "its README's compatibility matrix has no row for it"
        return {**out, "note": f"unknown: {why}"}
    kmaj, kmin = int(mk.group(1)), int(mk.group(2))
    minors = (kmaj - compiled[0]) * 100 + kmin - compiled[1]
    # README: "a particular descheduler release is only tested against the three latest
    # k8s minor versions" (its own and the two before it).
    tested = -2 <= minors <= 0
    out.update(compiled_for=f"v{compiled[0]}.{compiled[1]}", minors=minors, tested=tested)
    if minors == 0:
        out["note"] = "the Kubernetes minor it is compiled for"
    else:
        side = "newer" if minors > 0 else "older"
        out["note"] = f"cluster {abs(minors)} minor(s) {side} than v{compiled[0]}.{compiled[1]}" + (
            "" if tested else "; outside the three minors upstream tests a release against"
        )
    return out


def from_module(rel: Candidate | None) -> bool:
    """The release's tree is its Go module's: the pin (None) or a released version, not a
    source unpacked here (nor a binary or an image, which have none)."""
    return rel is None or (rel.source_dir is None and rel.kind in ("pinned", "version"))


def release_tree(rel: Candidate | None) -> Path | None:
    """The release's own source: a source's unpacked tree (`resolve_source`), a version's or
    the pin's (None) Go module; None for a binary or an image, or a module not at hand."""
    if not from_module(rel):
        return rel.source_dir if rel is not None else None
    pinned = load_versions().descheduler
    with suppress(ConfigError, ToolError):
        return module_dir(pinned.module, rel.version if rel is not None else pinned.version)
    return None


def release_skew(rel: Candidate | None, kube: str) -> dict[str, Any]:
    """The skew of a release (None: the pin) against `kube`, from the README of its own tree
    or Go module (`release_tree`); a binary or image has no README."""
    version = rel.version if rel is not None else load_versions().descheduler.version

    def read() -> str | None:
        tree = release_tree(rel)
        readme = tree / "README.md" if tree is not None else None
        return (
            readme.read_text(errors="replace") if readme is not None and readme.is_file() else None
        )

    if not from_module(rel):
        return skew_from_readme(read(), version, kube)  # a tree at hand, or no README at all
    # a released version's (or the pin's) README, read from its module once (tool cache)
    return skew_from_readme(cached_text(f"descheduler-{version}-README.md", read), version, kube)
