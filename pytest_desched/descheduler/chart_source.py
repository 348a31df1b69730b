"""Where the chart comes from: the pinned release, a repo version, the Go module's tree, a
candidate's own; each obtained once into the cache and identified by its digest (ChartRef)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.errors import CommandError, ConfigError, ToolError, UnsafeRender
from pytest_desched.log import Reporter, say
from pytest_desched.proc import helm_env, run
from pytest_desched.tools import lint_bin
from pytest_desched.tools.candidate import parse_chart_spec, resolve_source, tree_digest
from pytest_desched.tools.gobuild import go_env
from pytest_desched.tools.locate import file_lock

if TYPE_CHECKING:
    from pytest_desched.tools.candidate import Candidate
    from pytest_desched.tools.toolchain import Toolchain
    from pytest_desched.tools.versions import Versions


@dataclass(frozen=True)
class ChartRef:
    path: Path  # packaged .tgz
    source: str  # "repo", "module", or a candidate's: "candidate-tree|dir|tgz|repo"
    version: str
    app_version: str
    digest: str  # sha256 of the .tgz
    origin: str = ""  # where a candidate chart came from: a path, or the repo URL
    commit: str | None = None  # the source tree's commit (candidate-tree)
    content_digest: str | None = None  # sha256 of the chart's files before packaging

    def evidence(self) -> dict[str, str]:
        out = {
            "source": self.source,
            "version": self.version,
            "app_version": self.app_version,
            "digest": f"sha256:{self.digest}",
        }
        if self.origin:
            out["origin"] = self.origin
        if self.commit:
            out["commit"] = self.commit
        if self.content_digest:
            out["content_digest"] = f"sha256:{self.content_digest}"
        return out


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def chart_meta(tgz: Path) -> dict[str, Any]:
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            if m.name.endswith("/Chart.yaml") and m.name.count("/") == 1:
                return yaml.safe_load(tf.extractfile(m).read())  # type: ignore[union-attr]
    raise UnsafeRender(f"{tgz}: no Chart.yaml inside")


def obtain_chart(
    toolchain: Toolchain,
    versions: Versions,
    source: str = "auto",
    report: Reporter = say,
    repo_timeout: float = 20,
    candidate: Candidate | None = None,
) -> ChartRef:
    """The chart at the pinned version: the Helm repo when reachable, else the pinned module's.

    The module (sigs.k8s.io/descheduler at the pinned tag) carries charts/descheduler with
    an older Chart.yaml version; it is packaged as the pinned chart/app version. A
    candidate with its own chart spec gets that chart instead (`obtain_candidate_chart`).
    """
    if candidate is not None and candidate.chart:
        return obtain_candidate_chart(toolchain, versions, candidate, report, repo_timeout)
    cache = toolchain.cache_dir / "charts"
    cache.mkdir(parents=True, exist_ok=True)
    name, ver, app = versions.chart_name, versions.chart_version, versions.chart_app_version
    helm = str(toolchain.path("helm"))
    env = helm_env(cache)
    errors: list[str] = []
    if source in ("auto", "repo"):
        dest = cache / "repo"
        target = dest / f"{name}-{ver}.tgz"
        shipped = lint_bin_chart(versions) if source == "auto" and not target.is_file() else None
        if shipped is not None:  # the lint-bin wheel's copy: no network, no Go
            return shipped
        if not target.is_file():
            dest.mkdir(exist_ok=True)
            try:
                run(
                    [
                        helm,
                        "pull",
                        name,
                        "--repo",
                        versions.chart_repo,
                        "--version",
                        ver,
                        "-d",
                        str(dest),
                    ],
                    env=env,
                    timeout=repo_timeout,
                )
            except (CommandError, subprocess.TimeoutExpired) as exc:
                errors.append(f"repo {versions.chart_repo}: {str(exc).splitlines()[-1][:200]}")
        if target.is_file():
            return _ref(target, "repo")
        if source == "repo":
            raise UnsafeRender(f"chart {name} {ver} not available from the repo: {errors}")
    target = cache / "module" / f"{name}-{ver}.tgz"
    if not target.is_file():
        if errors:
            report(f"chart repo unreachable ({errors[0]}); packaging the pinned module's chart")
        src_dir = _module_chart_dir(versions)
        work = cache / "module" / "src"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src_dir, work / name)
        for p in (work / name).rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        run(
            [
                helm,
                "package",
                str(work / name),
                "--version",
                ver,
                "--app-version",
                app,
                "-d",
                str(target.parent),
            ],
            env=env,
        )
        shutil.rmtree(work, ignore_errors=True)
    return _ref(target, "module")


def lint_bin_chart(versions: Versions) -> ChartRef | None:
    """The pinned chart as the pytest-desched-lint-bin wheel carries it (checked against the
    pins and its sha256), with its own source (repo or module); None without such a wheel."""
    found = lint_bin.installed()
    path, source = lint_bin.chart(
        found, versions.chart_name, versions.chart_version, versions.chart_app_version
    )
    if path is None or found is None:
        return None
    return _ref(path, source, origin=found.label)


def _ref(tgz: Path, source: str, **origin: Any) -> ChartRef:
    meta = chart_meta(tgz)
    return ChartRef(
        tgz,
        source,
        str(meta["version"]),
        str(meta.get("appVersion", "")),
        sha256_file(tgz),
        **origin,
    )


def obtain_candidate_chart(
    toolchain: Toolchain,
    versions: Versions,
    candidate: Candidate,
    report: Reporter = say,
    repo_timeout: float = 20,
) -> ChartRef:
    """The candidate's chart, never silently another one; cached by its content digest.

    `tree`: the source tree's charts/descheduler, packaged with its own version and
    appVersion unless pinned; a directory likewise; a .tgz as is; `repo:VERSION` from the
    Helm repo, where an unreachable repo is a ToolError (no fallback to the pinned chart).
    """
    assert candidate.chart is not None
    spec = parse_chart_spec(candidate.chart, candidate.kind)
    cache = toolchain.cache_dir / "charts" / "candidate"
    cache.mkdir(parents=True, exist_ok=True)
    helm = str(toolchain.path("helm"))
    env = helm_env(toolchain.cache_dir / "charts")
    if spec.kind == "repo":
        dest = cache / f"repo-{spec.repo_version}"
        target = dest / f"{versions.chart_name}-{spec.repo_version}.tgz"
        if not target.is_file():
            dest.mkdir(parents=True, exist_ok=True)
            cmd = [helm, "pull", versions.chart_name, "--repo", versions.chart_repo]
            try:
                run(
                    [*cmd, "--version", str(spec.repo_version), "-d", str(dest)],
                    env=env,
                    timeout=repo_timeout,
                )
            except (CommandError, subprocess.TimeoutExpired) as exc:
                said = exc.proc.stderr or exc.proc.stdout if isinstance(exc, CommandError) else ""
                last = ((said or str(exc)).strip().splitlines() or ["no answer"])[-1][:300]
                raise ToolError(
                    f"candidate chart {spec.ref}: {versions.chart_name} {spec.repo_version} not "
                    f"available from {versions.chart_repo} ({last}); no other chart is used in "
                    "its place: pass --desched-candidate-chart tree (the source's own chart), a "
                    "chart directory or a packaged .tgz"
                ) from None
        return _ref(
            target, "candidate-repo", origin=versions.chart_repo, content_digest=sha256_file(target)
        )
    if spec.kind == "tgz":
        assert spec.path is not None
        digest = sha256_file(spec.path)
        target = cache / f"tgz-{digest[:16]}" / spec.path.name
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".copy-", dir=target.parent)
            os.close(fd)
            shutil.copyfile(spec.path, tmp)
            Path(tmp).replace(target)
        return _ref(target, "candidate-tgz", origin=str(spec.path), content_digest=digest)
    commit = None
    if spec.kind == "tree":
        src = getattr(toolchain, "candidate", None)
        resolved = (
            toolchain.source_candidate()
            if src is not None and src.kind == "source" and src.source_key == candidate.source_key
            else resolve_source(candidate, toolchain.cache_dir, report)
        )
        assert resolved.source_dir is not None
        chart_dir = resolved.source_dir / "charts" / versions.chart_name
        commit = candidate.commit
        origin = f"{candidate.path}:charts/{versions.chart_name}"
        if not (chart_dir / "Chart.yaml").is_file():
            raise ConfigError(
                f"candidate chart tree: {candidate.path} has no charts/{versions.chart_name}/"
                "Chart.yaml; pass a chart directory or .tgz with --desched-candidate-chart"
            )
    else:
        assert spec.path is not None
        chart_dir, origin = spec.path, str(spec.path)
    content = tree_digest(chart_dir)
    pins = "".join(
        f"-{k}{v}" for k, v in (("v", spec.version), ("a", spec.app_version)) if v is not None
    )
    out_dir = cache / f"{spec.kind}-{content[:16]}{pins}"
    with file_lock(toolchain.cache_dir / "locks" / f"chart-{out_dir.name}.lock"):
        found = sorted(out_dir.glob("*.tgz")) if out_dir.is_dir() else []
        if not found:
            report(f"packaging candidate chart {origin}")
            work = Path(tempfile.mkdtemp(prefix=".work-", dir=cache))  # per thread, too
            name = str(
                (yaml.safe_load((chart_dir / "Chart.yaml").read_text()) or {}).get("name")
                or versions.chart_name
            )
            shutil.copytree(chart_dir, work / name)
            for p in (work / name).rglob("*"):
                p.chmod(0o755 if p.is_dir() else 0o644)
            cmd = [helm, "package", str(work / name), "-d", str(work / "out")]
            if spec.version:
                cmd += ["--version", spec.version]
            if spec.app_version:
                cmd += ["--app-version", spec.app_version]
            try:
                run(cmd, env=env)
                out_dir.mkdir(parents=True, exist_ok=True)
                for tgz in (work / "out").glob("*.tgz"):
                    tgz.replace(out_dir / tgz.name)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            found = sorted(out_dir.glob("*.tgz"))
        if len(found) != 1:
            raise UnsafeRender(f"{out_dir}: expected one packaged chart, found {found}")
    return _ref(
        found[0], f"candidate-{spec.kind}", origin=origin, commit=commit, content_digest=content
    )


def _module_chart_dir(versions: Versions) -> Path:
    res = subprocess.run(
        [
            "go",
            "mod",
            "download",
            "-json",
            f"{versions.descheduler.module}@{versions.descheduler.version}",
        ],
        capture_output=True,
        text=True,
        env=go_env(),
        check=False,
    )
    if res.returncode != 0:
        raise UnsafeRender(
            f"cannot fetch {versions.descheduler.module} for its chart: {res.stderr[-400:]}"
        )
    d = Path(json.loads(res.stdout)["Dir"]) / "charts" / versions.chart_name
    if not (d / "Chart.yaml").is_file():
        raise UnsafeRender(f"{d} has no Chart.yaml")
    return d
