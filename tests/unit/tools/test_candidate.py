"""Canary candidates: spec parsing and its errors, the version label, the commit from a
`git archive` pax header, source trees in the cache, and the toolchain's candidate builds.

Trees and tarballs are small synthetic descheduler trees made in tmp_path; `go` and `helm`
are fake scripts, so every path (extraction, helper copy, build flags, errors) runs for real
without a Go build. The real upstream tarballs are built in tests/e2e/test_candidate_builds.py.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest

from pytest_desched.config import build_config
from pytest_desched.errors import ConfigError, ToolError
from pytest_desched.tools import candidate as cand_mod
from pytest_desched.tools.candidate import (
    Candidate,
    derive_label,
    parse_candidate,
    parse_chart_spec,
    resolve_source,
    source_cache_dir,
    tarball_commit,
)
from pytest_desched.tools.gobuild import copy_helper, missing_packages, tree_go_env
from pytest_desched.tools.groups import POLICYCHECK_SOURCE, candidate_groups
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import load_versions

V = load_versions()
COMMIT = "7d2b28bf2b6a12810317936d909af0270ff38fa3"
OTHER = "5f6c6d7b078e58f33e9d42bc4f4071a7e6e911e1"
VERSION_GO_EMPTY = "package version\n\nvar (\n\tversion string\n\tbuildDate string\n)\n"


def api_files(
    ctx: bool = True, prom: str = "getter", instance_id: bool = True, providers: bool = True
) -> dict[str, str]:
    """Go files defining the framework API the policy checker calls (tools/api_probe.py), in
    one of the shapes releases have had; the default is v0.35's and later."""
    from pytest_desched.tools.api_probe import REQUIRED

    files: dict[str, list[str]] = {}
    for pkg, kind, name in REQUIRED:
        line = {
            "func": f"func {name}() {{}}",
            "type": f"type {name} func()",
            "var": f"var {name} = 1",
        }[kind]
        if name == "NewProfile":
            first = "ctx context.Context, " if ctx else ""
            line = f"func NewProfile({first}config api.DeschedulerProfile, reg R) {{}}"
        files.setdefault(pkg, []).append(line)
    prof = files["pkg/framework/profile"]
    if prom == "getter":
        prof.append(
            "func WithPrometheusClient(prometheusClientGetter func() promapi.Client) Option {}"
        )
    elif prom == "value":
        prof.append("func WithPrometheusClient(prometheusClient promapi.Client) Option {}")
    if instance_id:
        prof.append("func WithProfileInstanceID(profileInstanceID string) Option {}")
    field = "\tMetricsProviders []MetricsProvider\n" if providers else ""
    files["pkg/api"] = [f"type DeschedulerPolicy struct {{\n\tProfiles []P\n{field}}}"]
    return {
        f"{pkg}/api.go": f"package {pkg.rsplit('/', 1)[-1]}\n\n" + "\n".join(lines) + "\n"
        for pkg, lines in files.items()
    }


def tree_files(app_version: str | None = "0.36.0", version_go: str = VERSION_GO_EMPTY) -> dict:
    chart = "apiVersion: v1\nname: descheduler\nversion: 0.36.0\n"
    if app_version is not None:
        chart += f"appVersion: {app_version}\n"
    return {
        "go.mod": "module sigs.k8s.io/descheduler\n\ngo 1.26.0\n",
        "cmd/descheduler/main.go": "package main\nfunc main() {}\n",
        "pkg/version/version.go": version_go,
        "vendor/modules.txt": "# k8s.io/klog/v2 v2.130.1\n",
        "charts/descheduler/Chart.yaml": chart,
        "charts/descheduler/values.yaml": "suspend: false\n",
        **api_files(),
    }


def make_dir(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def make_tarball(
    path: Path, files: dict[str, str], commit: str | None = COMMIT, prefix: str = "descheduler-x"
) -> Path:
    """A tarball laid out like `git archive --prefix=PREFIX/` (pax comment = commit)."""
    headers = {"comment": commit} if commit else {}
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, pax_headers=headers) as tf:
        dirs = sorted({str(Path(r).parent) for r in files} - {"."})
        for d in [prefix, *(f"{prefix}/{x}" for x in dirs)]:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tf.addfile(info)
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{prefix}/{rel}")
            info.size = len(data)
            info.mode = 0o644
            tf.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def tarball(tmp_path: Path) -> Path:
    return make_tarball(tmp_path / "descheduler-master.tar.gz", tree_files())


def fake_binary(path: Path, output: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(0o755)
    return path


# -- parse_candidate: every form ---------------------------------------------------------------
@pytest.mark.parametrize("spec", [None, "", "pinned", "  pinned "])
def test_pinned_is_the_baseline(spec: str | None) -> None:
    c = parse_candidate(spec)
    assert (c.kind, c.version, c.commit, c.chart) == ("pinned", V.descheduler.version, None, None)
    assert c.pinned and c.has_published_image


def test_version_spec_is_a_module_tag() -> None:
    c = parse_candidate("version:v0.37.1")
    assert (c.kind, c.ref, c.version) == ("version", "version:v0.37.1", "v0.37.1")
    assert c.has_published_image and not c.builds_from_source


@pytest.mark.parametrize("bad", ["version:0.37.1", "version:v0.37", "version:latest", "version:"])
def test_version_spec_rejects_non_tags(bad: str) -> None:
    with pytest.raises(
        ConfigError, match=r"is not a Go module tag vX\.Y\.Z; write version:v0\.37\.0"
    ):
        parse_candidate(bad)


@pytest.mark.parametrize("bad", ["v0.37.0", "git:abc", "pinned:x", "sources:/tmp"])
def test_unknown_form_lists_every_form(bad: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_candidate(bad)
    msg = str(ei.value)
    assert bad in msg and "unknown form" in msg
    for form in ("version:vX.Y.Z", "source:PATH[@LABEL]", "binary:PATH", "image:REPO:TAG"):
        assert form in msg


def test_source_tarball_reads_commit_module_and_label(tarball: Path) -> None:
    c = parse_candidate(f"source:{tarball}")
    assert c.kind == "source" and c.builds_from_source and not c.has_published_image
    assert c.commit == COMMIT
    assert c.source_key == COMMIT  # cached by commit
    assert c.version == "v0.36.0-g7d2b28bf2"
    assert c.label_from.startswith("Chart.yaml appVersion + commit; no release markers")
    assert c.module == "sigs.k8s.io/descheduler"
    assert c.path == tarball.resolve()
    assert c.sha256 and len(c.sha256) == 64
    assert c.source_dir is None  # nothing extracted by parsing
    assert not (tarball.parent / "descheduler-x").exists()


def test_label_keeps_the_form_version_tables_read(tarball: Path) -> None:
    """The log table (and every table keyed by minor) reads vMAJOR.MINOR from the label."""
    from pytest_desched.descheduler.logparse import table_for

    label = parse_candidate(f"source:{tarball}").version
    table, note = table_for(label)
    assert (table.version, note) == ("v0.36", None)  # v0.36's own table, no fallback
    assert cand_mod.LABEL.fullmatch(label)
    assert label.split(".")[:2] == ["v0", "36"]


def test_source_user_label_wins(tarball: Path) -> None:
    c = parse_candidate(f"source:{tarball}@v0.37.0-rc.1")
    assert (c.version, c.label_from, c.path) == ("v0.37.0-rc.1", "user label", tarball.resolve())


@pytest.mark.parametrize("label", ["0.37.0", "v0.37", "v0.37.0+build", "latest"])
def test_source_bad_label_names_the_form(tarball: Path, label: str) -> None:
    with pytest.raises(ConfigError, match=r"is not vMAJOR\.MINOR\.PATCH\[-SUFFIX\]"):
        parse_candidate(f"source:{tarball}@{label}")


def test_source_path_with_at_sign_that_exists_is_a_path(tmp_path: Path) -> None:
    t = make_tarball(tmp_path / "desched@work.tar.gz", tree_files())
    assert parse_candidate(f"source:{t}").path == t.resolve()


def test_source_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_candidate(f"source:{tmp_path}/nope.tar.gz")
    assert "nope.tar.gz does not exist" in str(ei.value)
    assert "point source: at a checkout or a .tar.gz" in str(ei.value)


def test_source_empty_path() -> None:
    with pytest.raises(ConfigError, match=r"no path after source:; write source:PATH\[@LABEL\]"):
        parse_candidate("source:")


def test_source_file_that_is_not_a_tarball(tmp_path: Path) -> None:
    f = tmp_path / "descheduler.zip"
    f.write_bytes(b"PK")
    with pytest.raises(ConfigError, match=r"descheduler\.zip is neither a directory nor a"):
        parse_candidate(f"source:{f}")


def test_source_unreadable_tarball(tmp_path: Path) -> None:
    f = tmp_path / "broken.tar.gz"
    f.write_bytes(b"\x1f\x8b\x08 not really gzip")
    with pytest.raises(ConfigError) as ei:
        parse_candidate(f"source:{f}")
    assert "cannot read the tarball" in str(ei.value)
    assert "git archive" in str(ei.value)


@pytest.mark.parametrize(
    ("drop", "what"), [("go.mod", "go.mod"), ("cmd/descheduler/main.go", "cmd/descheduler")]
)
def test_source_that_is_not_a_descheduler_tree(tmp_path: Path, drop: str, what: str) -> None:
    files = tree_files()
    del files[drop]
    t = make_tarball(tmp_path / "other.tar.gz", files)
    with pytest.raises(ConfigError) as ei:
        parse_candidate(f"source:{t}")
    assert f"no {what} at the top of the tree (descheduler-x/)" in str(ei.value)
    assert "not a descheduler source tree" in str(ei.value)


def test_source_label_from_version_go_when_it_has_one(tmp_path: Path) -> None:
    go = 'package version\nvar (\n\tversion string = "v0.37.0"\n)\n'
    t = make_tarball(tmp_path / "t.tar.gz", tree_files(version_go=go))
    c = parse_candidate(f"source:{t}")
    assert (c.version, c.label_from) == ("v0.37.0", "pkg/version/version.go")


def test_source_without_commit_is_keyed_by_sha256(tmp_path: Path) -> None:
    t = make_tarball(tmp_path / "t.tar.gz", tree_files(), commit=None)
    c = parse_candidate(f"source:{t}")
    assert c.commit is None
    assert c.source_key == f"sha256-{c.sha256}"
    assert c.version == f"v0.36.0-d{c.sha256[:9]}"
    assert c.label_from.startswith("Chart.yaml appVersion + content digest; no release markers")


def test_source_without_app_version_asks_for_a_label(tmp_path: Path) -> None:
    t = make_tarball(tmp_path / "t.tar.gz", tree_files(app_version=None))
    with pytest.raises(ConfigError) as ei:
        parse_candidate(f"source:{t}")
    assert "Chart.yaml has no appVersion" in str(ei.value)
    assert "source:PATH@vX.Y.Z-SUFFIX" in str(ei.value)
    assert parse_candidate(f"source:{t}@v0.36.0-mine").version == "v0.36.0-mine"


def test_source_bad_app_version(tmp_path: Path) -> None:
    t = make_tarball(tmp_path / "t.tar.gz", tree_files(app_version="latest"))
    with pytest.raises(ConfigError, match=r"appVersion 'latest' is not X\.Y\.Z"):
        parse_candidate(f"source:{t}")


def test_source_directory_without_git_is_keyed_by_content(tmp_path: Path) -> None:
    d = make_dir(tmp_path / "checkout", tree_files())
    c1 = parse_candidate(f"source:{d}")
    assert c1.commit is None and c1.sha256 is None
    assert c1.source_key and c1.source_key.startswith("sha256-")
    assert c1.version == f"v0.36.0-d{c1.source_key[7:16]}"
    (d / "pkg" / "extra.go").write_text("package pkg\n")
    assert parse_candidate(f"source:{d}").source_key != c1.source_key  # a change is a new build


def test_derive_label_rule() -> None:
    si = cand_mod.SourceInfo("", COMMIT, "m", None, "0.37.0-rc.1", True, True)
    assert derive_label(si, COMMIT) == (
        "v0.37.0-rc.1-g7d2b28bf2",
        "Chart.yaml appVersion + commit; no release markers (kubernetes/ manifests, README "
        "install line)",
    )
    si = cand_mod.SourceInfo("", None, "m", None, "v0.36.0", True, True)
    assert derive_label(si, "sha256-abcdef0123456789")[0] == "v0.36.0-dabcdef012"
    si = cand_mod.SourceInfo("", COMMIT, "m", "not-a-version", "0.36.0", True, True)
    assert derive_label(si, COMMIT)[0] == "v0.36.0-g7d2b28bf2"  # unusable version.go ignored


# -- the commit in a `git archive` pax header -----------------------------------------------------
def test_tarball_commit_from_pax_header(tmp_path: Path) -> None:
    assert tarball_commit(make_tarball(tmp_path / "a.tar.gz", tree_files(), OTHER)) == OTHER
    assert tarball_commit(make_tarball(tmp_path / "b.tar.gz", tree_files(), None)) is None
    t = make_tarball(tmp_path / "c.tar.gz", tree_files(), "not a commit")
    assert tarball_commit(t) is None


# -- binary: and image: ------------------------------------------------------------------------
def test_binary_version_from_its_own_output(tmp_path: Path) -> None:
    b = fake_binary(tmp_path / "descheduler", 'Descheduler version {GitVersion:"v0.37.0-rc.1"}')
    c = parse_candidate(f"binary:{b}")
    assert (c.kind, c.version, c.path) == ("binary", "v0.37.0-rc.1", b)
    assert c.sha256 and not c.has_published_image


def test_binary_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a file; point binary: at a descheduler"):
        parse_candidate(f"binary:{tmp_path}/none")
    f = tmp_path / "plain"
    f.write_text("x")
    with pytest.raises(ConfigError, match=r"is not executable; chmod \+x"):
        parse_candidate(f"binary:{f}")
    silent = fake_binary(tmp_path / "silent", "hello")
    with pytest.raises(ConfigError) as ei:
        parse_candidate(f"binary:{silent}")
    assert "reports no version" in str(ei.value)
    assert "pkg/version.version=vX.Y.Z" in str(ei.value)


def test_image_spec(tmp_path: Path) -> None:
    c = parse_candidate("image:registry.example/desched/descheduler:v0.37.0")
    assert (c.kind, c.version, c.image) == (
        "image",
        "v0.37.0",
        "registry.example/desched/descheduler:v0.37.0",
    )
    assert c.has_published_image


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("image:registry.example/d@sha256:abc", "image digests cannot be set"),
        ("image:registry.example/d", "no tag"),
        ("image:localhost:5000/d", "no tag"),
        ("image:registry.example/d:latest", "is not a descheduler version"),
    ],
)
def test_image_spec_errors(spec: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_candidate(spec)


# -- chart specs --------------------------------------------------------------------------------
def test_chart_specs(tmp_path: Path, tarball: Path) -> None:
    assert parse_chart_spec("tree", "source").kind == "tree"
    s = parse_chart_spec("tree@version=0.36.1-canary,appVersion=0.36.1", "source")
    assert (s.version, s.app_version) == ("0.36.1-canary", "0.36.1")
    assert parse_chart_spec("repo:0.37.0").repo_version == "0.37.0"
    assert parse_chart_spec("repo:v0.37.0").repo_version == "0.37.0"
    d = make_dir(tmp_path / "chart", {"Chart.yaml": "name: descheduler\nversion: 1.0.0\n"})
    assert (parse_chart_spec(str(d)).kind, parse_chart_spec(str(d)).path) == ("dir", d)
    c = parse_candidate(f"source:{tarball}", chart="tree")
    assert c.chart == "tree"


@pytest.mark.parametrize(
    ("chart", "kind", "why"),
    [
        ("tree", "version", "needs a source: candidate"),
        ("repo:latest", None, "is not a chart version X.Y.Z"),
        ("repo:0.37.0@version=1.0.0", None, "a repo chart is used as published, no pins"),
        ("tree@colour=blue", "source", "is not version=X.Y.Z or appVersion=X.Y.Z"),
        ("/nonexistent/chart", None, "does not exist; use tree, repo:VERSION"),
    ],
)
def test_chart_spec_errors(chart: str, kind: str | None, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_chart_spec(chart, kind)


def test_chart_spec_path_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"has no Chart\.yaml; point at charts/descheduler"):
        parse_chart_spec(str(tmp_path / "empty"))
    bad = make_tarball(tmp_path / "x.tgz", {"values.yaml": "a: 1\n"}, prefix="descheduler")
    with pytest.raises(ConfigError, match=r"has no NAME/Chart\.yaml"):
        parse_chart_spec(str(bad))
    good = make_tarball(tmp_path / "d.tgz", {"Chart.yaml": "name: d\n"}, prefix="descheduler")
    assert parse_chart_spec(str(good)).kind == "tgz"
    with pytest.raises(ConfigError, match="pins apply to tree or a chart directory"):
        parse_chart_spec(f"{good}@version=1.0.0")


def test_candidate_chart_is_validated_with_the_candidate() -> None:
    with pytest.raises(ConfigError, match="needs a source: candidate"):
        parse_candidate("version:v0.37.0", chart="tree")
    c = parse_candidate(None, chart="repo:0.37.0")  # the pinned binary with another chart
    assert (c.kind, c.chart) == ("pinned", "repo:0.37.0")


# -- source trees in the cache ----------------------------------------------------------------------
def test_resolve_source_extracts_once_into_the_cache(tmp_path: Path, tarball: Path) -> None:
    cache = tmp_path / "cache"
    c = parse_candidate(f"source:{tarball}")
    said: list[str] = []
    r = resolve_source(c, cache, said.append)
    assert r.source_dir == cache / "src" / f"candidate-{COMMIT}" / "tree"
    assert r.source_dir == source_cache_dir(cache, c) / "tree"
    assert (r.source_dir / "go.mod").is_file()  # the tarball's top folder is stripped
    assert len(said) == 1 and "unpacking" in said[0]
    marker = r.source_dir / "cmd" / "marker"
    marker.write_text("kept")
    again = resolve_source(c, cache, said.append)
    assert again.source_dir == r.source_dir and marker.read_text() == "kept"
    assert len(said) == 1  # cached: not unpacked again
    assert not list(cache.glob("src/*.tmp*"))


def test_resolve_source_copies_a_directory_and_never_writes_to_it(tmp_path: Path) -> None:
    d = make_dir(tmp_path / "checkout", tree_files())
    (d / ".git").mkdir()
    (d / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = sorted(p.relative_to(d).as_posix() for p in d.rglob("*"))
    r = resolve_source(parse_candidate(f"source:{d}"), tmp_path / "cache")
    assert r.source_dir is not None and r.source_dir != d
    assert (r.source_dir / "cmd" / "descheduler" / "main.go").is_file()
    assert not (r.source_dir / ".git").exists()
    assert sorted(p.relative_to(d).as_posix() for p in d.rglob("*")) == before


def test_resolve_source_leaves_other_kinds_alone(tmp_path: Path) -> None:
    c = parse_candidate("version:v0.37.0")
    assert resolve_source(c, tmp_path) is c


# -- the toolchain for a candidate --------------------------------------------------------------
def test_candidate_groups_source_keyed_by_commit_and_helper(tmp_path: Path, tarball: Path) -> None:
    c = parse_candidate(f"source:{tarball}")
    groups, notes = candidate_groups(V, c)
    d, p = groups["descheduler"], groups["policycheck"]
    assert (d.version, d.tree_key, d.packages) == (
        "v0.36.0-g7d2b28bf2",
        COMMIT,
        {"descheduler": "./cmd/descheduler"},
    )
    assert d.ldflags == ("-X sigs.k8s.io/descheduler/pkg/version.version=v0.36.0-g7d2b28bf2",)
    assert p.packages == {"policycheck": "./cmd/desched-policycheck"}
    assert p.source_dir == POLICYCHECK_SOURCE and p.ldflags == d.ldflags
    tc = Toolchain(versions=V, cache_dir=tmp_path, candidate=c)
    assert tc.bin_dir(d) == tmp_path / "bin" / "descheduler" / "v0.36.0-g7d2b28bf2-src7d2b28bf2b6a"
    assert tc.bin_dir(p).name == f"v0.36.0-g7d2b28bf2-src7d2b28bf2b6a-{p.source_digest}"
    assert tc.log_path(d).name == "descheduler-v0.36.0-g7d2b28bf2-src7d2b28bf2b6a.log"
    # every other tool is the baseline's
    base = Toolchain(versions=V, cache_dir=tmp_path)
    for name in ("kubernetes", "etcd", "kwok", "helm", "kind"):
        assert tc.groups[name] == base.groups[name]
    assert notes == {}


def test_other_commit_same_label_is_another_cache_entry(tmp_path: Path) -> None:
    a = parse_candidate(
        f"source:{make_tarball(tmp_path / 'a.tgz', tree_files(), COMMIT)}@v0.36.0-x"
    )
    b = parse_candidate(f"source:{make_tarball(tmp_path / 'b.tgz', tree_files(), OTHER)}@v0.36.0-x")
    ta = Toolchain(versions=V, cache_dir=tmp_path, candidate=a)
    tb = Toolchain(versions=V, cache_dir=tmp_path, candidate=b)
    assert ta.bin_dir(ta.groups["descheduler"]) != tb.bin_dir(tb.groups["descheduler"])


def test_helper_source_change_is_a_new_policycheck_build(tmp_path: Path, tarball: Path) -> None:
    c = parse_candidate(f"source:{tarball}")
    g = candidate_groups(V, c)[0]["policycheck"]
    helper = tmp_path / "helper"
    helper.mkdir()
    (helper / "main.go").write_text("package main\n")
    from dataclasses import replace

    g1 = replace(g, source_dir=helper)
    k1 = g1.key
    (helper / "main.go").write_text("package main\n// changed\n")
    assert replace(g, source_dir=helper).key != k1


def test_candidate_groups_version_binary_image(tmp_path: Path) -> None:
    g, notes = candidate_groups(V, parse_candidate("version:v0.37.0"))
    assert g["descheduler"].version == g["policycheck"].version == "v0.37.0" and not notes
    g, _ = candidate_groups(V, parse_candidate("image:r.example/d:v0.37.0"))
    assert g["descheduler"].version == "v0.37.0"
    same = fake_binary(tmp_path / "a" / "descheduler", 'GitVersion:"v0.36.0"')
    g, notes = candidate_groups(V, parse_candidate(f"binary:{same}"))
    assert g["policycheck"].version == "v0.36.0" and notes == {}
    other = fake_binary(tmp_path / "b" / "descheduler", 'GitVersion:"v0.37.0"')
    cb = parse_candidate(f"binary:{other}")
    g, notes = candidate_groups(V, cb)
    assert (g["descheduler"].version, g["policycheck"].version) == ("v0.37.0", "v0.36.0")
    assert "the policy checks use the baseline's (v0.36.0) rules" in notes["policycheck"]
    tc = Toolchain(versions=V, cache_dir=tmp_path / "c", candidate=cb, use_path=False)
    assert tc.path("descheduler") == other and tc.sources["descheduler"] == "explicit"
    assert tc.notes == notes
    assert tc.wanted_version("policycheck") == "v0.36.0"


def test_candidate_and_descheduler_version_conflict(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="give only the candidate"):
        Toolchain(
            versions=V,
            cache_dir=tmp_path,
            descheduler_version="v0.35.0",
            candidate=parse_candidate("version:v0.37.0"),
        )


def test_candidate_drops_baseline_overrides_of_its_tools(tmp_path: Path, tarball: Path) -> None:
    pinned = fake_binary(tmp_path / "pinned" / "descheduler", 'GitVersion:"v0.36.0"')
    tc = Toolchain(
        versions=V,
        cache_dir=tmp_path,
        overrides={"descheduler": pinned},
        candidate=parse_candidate(f"source:{tarball}"),
    )
    assert "descheduler" not in tc.overrides


# -- building a candidate tree with a fake `go` --------------------------------------------------------
FAKE_GO = r"""
import json, os, re, sys
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_GO_CALLS"], "a") as fh:
    fh.write(json.dumps({"args": args, "cwd": os.getcwd(), "GOFLAGS": os.environ.get("GOFLAGS"),
                         "GOPROXY": os.environ.get("GOPROXY"), "GOWORK": os.environ.get("GOWORK"),
                         "helper": sorted(p.name for p in Path("cmd/desched-policycheck").glob("*"))
                         if Path("cmd/desched-policycheck").is_dir() else None}) + "\n")
if args[:1] == ["version"]:
    print("go version go1.26.8 linux/amd64")
    sys.exit(0)
mode = os.environ.get("FAKE_GO_MODE", "")
if args[:1] == ["build"]:
    if mode == "missing" and "./cmd/desched-policycheck" in args:
        print("cmd/desched-policycheck/main.go:30:2: cannot find module providing package "
              "k8s.io/client-go/kubernetes/fake: import lookup disabled by -mod=vendor")
        print("\t(Go version in go.mod is at least 1.14 and vendor directory exists.)")
        sys.exit(1)
    if mode == "broken":
        print("cmd/desched-policycheck/main.go:99:5: undefined: descheduler.LoadPolicyConfig")
        sys.exit(1)
    label = re.search(r"version\.version=(\S+)", args[args.index("-ldflags") + 1]).group(1)
    out = Path(args[args.index("-o") + 1])
    for pkg in args[args.index("-o") + 2 :]:
        name = pkg.rstrip("/").split("/")[-1]
        (out / name).write_text(f"#!/bin/sh\necho 'version {{GitVersion:\"{label}\"}}'\n")
        (out / name).chmod(0o755)
        print(pkg)
    sys.exit(0)
sys.exit(3)
"""


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "gobin"
    d.mkdir()
    (d / "go").write_text(f"#!{sys.executable}\n{FAKE_GO}")
    (d / "go").chmod(0o755)
    calls = tmp_path / "go-calls.jsonl"
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE_GO_CALLS", str(calls))
    return calls


def _calls(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def test_source_build_in_tree_vendored_offline_with_label(
    tmp_path: Path, tarball: Path, fake_go: Path
) -> None:
    said: list[str] = []
    c = parse_candidate(f"source:{tarball}")
    tc = Toolchain(versions=V, cache_dir=tmp_path / "cache", candidate=c, report=said.append)
    d = tc.path("descheduler")
    p = tc.path("policycheck")
    tree = tmp_path / "cache" / "src" / f"candidate-{COMMIT}" / "tree"
    builds = [x for x in _calls(fake_go) if x["args"][:1] == ["build"]]
    assert len(builds) == 2
    for b in builds:
        assert b["cwd"] == str(tree)  # inside the unpacked tree, never the repo
        assert (b["GOFLAGS"], b["GOPROXY"], b["GOWORK"]) == (
            "-mod=vendor -buildvcs=false",
            "off",
            "off",
        )
        assert "-trimpath" in b["args"]
        assert (
            "-X sigs.k8s.io/descheduler/pkg/version.version=v0.36.0-g7d2b28bf2"
            in b["args"][b["args"].index("-ldflags") + 1]
        )
    assert builds[0]["args"][-1] == "./cmd/descheduler"
    assert builds[1]["args"][-1] == "./cmd/desched-policycheck"
    # the helper was copied in: whatever *.go its folder holds now
    assert builds[1]["helper"] == sorted(f.name for f in POLICYCHECK_SOURCE.glob("*.go"))
    assert d.name == "descheduler" and p.name == "policycheck"
    assert tc.sources == {"descheduler": "built", "policycheck": "built"}
    info = tc.build_info("descheduler")
    assert info["commit"] == COMMIT and info["version"] == "v0.36.0-g7d2b28bf2"
    assert info["source_sha256"] == c.sha256 and info["goproxy"] == "off"
    assert tc.build_info("policycheck")["helper_digest"] == tc.groups["policycheck"].source_digest
    assert any("building descheduler v0.36.0-g7d2b28bf2 from" in m and COMMIT in m for m in said)
    # a second run: cache hit by commit, no go call, no unpacking
    n = len(_calls(fake_go))
    tc2 = Toolchain(versions=V, cache_dir=tmp_path / "cache", candidate=c)
    assert tc2.path("descheduler") == d and tc2.sources["descheduler"] == "cache"
    assert len(_calls(fake_go)) == n


def test_helper_lacking_a_vendored_package_is_named(
    tmp_path: Path, tarball: Path, fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_MODE", "missing")
    tc = Toolchain(
        versions=V, cache_dir=tmp_path / "cache", candidate=parse_candidate(f"source:{tarball}")
    )
    with pytest.raises(ToolError) as ei:
        tc.path("policycheck")
    msg = str(ei.value)
    assert "policy checker (pytest_desched/tools/policycheck) does not compile against" in msg
    assert "vendor/ lacks package(s) k8s.io/client-go/kubernetes/fake" in msg
    assert f"full log: {tc.log_path(tc.groups['policycheck'])}" in msg
    assert not tc.bin_dir(tc.groups["policycheck"]).exists()
    assert not list((tmp_path / "cache" / "bin" / "policycheck").glob("*.tmp*"))


def test_helper_compile_error_is_quoted(
    tmp_path: Path, tarball: Path, fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_MODE", "broken")
    tc = Toolchain(
        versions=V, cache_dir=tmp_path / "cache", candidate=parse_candidate(f"source:{tarball}")
    )
    with pytest.raises(ToolError, match=r"undefined: descheduler\.LoadPolicyConfig; full log"):
        tc.path("policycheck")


def test_missing_packages_reads_go_errors() -> None:
    log = (
        "a.go:1:2: cannot find module providing package k8s.io/x/y: import lookup disabled\n"
        "b.go:1:2: no required module provides package example.com/z; to add it:\n"
        "c.go:1:2: package notstd/q is not in std (/usr/lib/go/src/notstd/q)\n"
        "d.go:1:2: cannot find module providing package k8s.io/x/y: import lookup disabled\n"
    )
    assert missing_packages(log) == ["k8s.io/x/y", "example.com/z", "notstd/q"]
    assert missing_packages("ok\n") == []


def test_tree_go_env(tmp_path: Path) -> None:
    (tmp_path / "vendor").mkdir()  # no modules.txt: not a usable vendor tree
    assert tree_go_env(tmp_path)["GOFLAGS"] == "-mod=readonly -buildvcs=false"
    (tmp_path / "vendor" / "modules.txt").write_text("")
    env = tree_go_env(tmp_path)
    assert (env["GOFLAGS"], env["GOPROXY"], env["GOTOOLCHAIN"]) == (
        "-mod=vendor -buildvcs=false",
        "off",
        "local",
    )


def test_tree_go_env_without_vendor(tmp_path: Path) -> None:
    env = tree_go_env(tmp_path)
    assert env["GOFLAGS"] == "-mod=readonly -buildvcs=false"


def test_copy_helper(tmp_path: Path) -> None:
    src = make_dir(tmp_path / "src", {"main.go": "package main\n", "util.go": "package main\n"})
    (src / "README").write_text("not copied")
    dest = tmp_path / "tree" / "cmd" / "desched-policycheck"
    dest.mkdir(parents=True)
    (dest / "stale.go").write_text("old")
    assert copy_helper(src, dest) == ["main.go", "util.go"]
    assert sorted(p.name for p in dest.iterdir()) == ["main.go", "util.go"]
    with pytest.raises(ToolError, match=r"no \*\.go files"):
        copy_helper(tmp_path / "tree", dest)


# -- config and session -------------------------------------------------------------------------------
def test_config_option_and_env(
    tmp_path: Path, tarball: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = build_config(
        {"--desched-candidate": f"source:{tarball}", "--desched-candidate-chart": "tree"},
        run_dir=tmp_path,
    )
    assert (c.candidate, c.candidate_chart) == (f"source:{tarball}", "tree")
    parsed = c.parsed_candidate()
    assert isinstance(parsed, Candidate) and parsed.chart == "tree"
    assert parsed.version == "v0.36.0-g7d2b28bf2"
    monkeypatch.setenv("DESCHED_CANDIDATE", "version:v0.37.0")
    assert build_config(run_dir=tmp_path).parsed_candidate().version == "v0.37.0"  # type: ignore[union-attr]
    monkeypatch.delenv("DESCHED_CANDIDATE")
    assert build_config(run_dir=tmp_path).parsed_candidate() is None


@pytest.mark.parametrize(
    ("values", "why"),
    [
        (
            {"--desched-candidate": "source:/nope.tar.gz"},
            "--desched-candidate / DESCHED_CANDIDATE:",
        ),
        (
            {"--desched-candidate": "image:r.example/d:v0.37.0", "--desched-provider": "embedded"},
            "the embedded provider runs no images",
        ),
        (
            {"--desched-candidate": "version:v0.37.0", "--desched-descheduler-version": "v0.35.0"},
            "give only --desched-candidate",
        ),
        ({"--desched-candidate-chart": "tree"}, "needs a source: candidate"),
    ],
)
def test_config_refuses_bad_candidates(tmp_path: Path, values: dict, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        build_config(values, run_dir=tmp_path)


@pytest.mark.parametrize("provider", ["kind", "existing"])
def test_config_refuses_local_builds_on_image_providers(
    tmp_path: Path, tarball: Path, provider: str
) -> None:
    with pytest.raises(ConfigError, match="a local build has no published image"):
        build_config(
            {
                "--desched-candidate": f"source:{tarball}",
                "--desched-provider": provider,
                "--desched-existing-context": "x",
            },
            run_dir=tmp_path,
        )


def test_with_keeps_candidate_and_can_drop_it(tmp_path: Path, tarball: Path) -> None:
    c = build_config({"--desched-candidate": f"source:{tarball}"}, run_dir=tmp_path)
    assert c.with_(namespace="lab-2").parsed_candidate() == c.parsed_candidate()
    assert c.with_(candidate=None).parsed_candidate() is None


def test_session_candidate_resolved_and_recorded(tmp_path: Path, tarball: Path) -> None:
    from pytest_desched.session import DeschedSession

    cfg = build_config(
        {"--desched-candidate": f"source:{tarball}", "--desched-cache-dir": str(tmp_path / "c")},
        run_dir=tmp_path,
    )
    s = DeschedSession(cfg, report=lambda m: None)
    cand = s.candidate
    assert (
        cand is not None and cand.source_dir is not None and (cand.source_dir / "go.mod").is_file()
    )
    assert s.info["candidate"]["commit"] == COMMIT
    assert s.info["candidate"]["version"] == "v0.36.0-g7d2b28bf2"
    assert s.toolchain.wanted_version("descheduler") == "v0.36.0-g7d2b28bf2"
    assert s.toolchain_for("v0.36.0").wanted_version("descheduler") == "v0.36.0"  # the baseline
    assert s.toolchain_for(None) is s.toolchain
    assert DeschedSession(build_config(run_dir=tmp_path)).candidate is None


@pytest.mark.parametrize(
    ("spec", "provider", "why"),
    [
        ("image:r.example/d:v0.37.0", "embedded", "the embedded provider runs no images"),
        ("binary", "kind", "a local build has no published image"),
    ],
)
def test_session_checks_the_provider_auto_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, provider: str, why: str
) -> None:
    """`auto` is resolved only when the provider is made: checked there, before bring-up."""
    from pytest_desched import providers
    from pytest_desched.session import DeschedSession

    if spec == "binary":
        b = fake_binary(tmp_path / "descheduler", 'GitVersion:"v0.37.0"')
        spec = f"binary:{b}"

    class Fake:
        name = provider
        started = False

        def start(self) -> None:
            self.started = True

    fake = Fake()
    monkeypatch.setattr(providers, "make_provider", lambda config, tc, report=None: fake)
    s = DeschedSession(build_config({"--desched-candidate": spec}, run_dir=tmp_path))
    with pytest.raises(ConfigError, match=why):
        s.provider  # noqa: B018
    assert not fake.started


# -- the candidate's chart ------------------------------------------------------------------------
FAKE_HELM = r"""
import os, sys, tarfile
from pathlib import Path
import yaml

args = sys.argv[1:]
with open(os.environ["FAKE_HELM_CALLS"], "a") as fh:
    fh.write(" ".join(args) + "\n")
if args[:1] == ["version"]:
    print("v4.3.2+gfake")
elif args[:1] == ["pull"]:
    print('Error: looks like "https://charts.example/" is not a valid chart repository or '
          "cannot be reached: dial tcp: lookup charts.example: no such host", file=sys.stderr)
    sys.exit(1)
elif args[:1] == ["package"]:
    src = Path(args[1])
    meta = yaml.safe_load((src / "Chart.yaml").read_text())
    if "--version" in args:
        meta["version"] = args[args.index("--version") + 1]
    if "--app-version" in args:
        meta["appVersion"] = args[args.index("--app-version") + 1]
    (src / "Chart.yaml").write_text(yaml.safe_dump(meta))
    out = Path(args[args.index("-d") + 1])
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / f"{meta['name']}-{meta['version']}.tgz", "w:gz") as tf:
        tf.add(src, arcname=meta["name"])
else:
    sys.exit(3)
"""


@pytest.fixture
def helm_tc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Toolchain:
    helm = tmp_path / "fakebin" / "helm"
    helm.parent.mkdir()
    helm.write_text(f"#!{sys.executable}\n{FAKE_HELM}")
    helm.chmod(0o755)
    monkeypatch.setenv("FAKE_HELM_CALLS", str(tmp_path / "helm-calls.txt"))
    return Toolchain(
        versions=V, cache_dir=tmp_path / "cache", overrides={"helm": helm}, use_path=False
    )


def _helm_calls(tmp_path: Path) -> list[str]:
    p = tmp_path / "helm-calls.txt"
    return p.read_text().splitlines() if p.is_file() else []


def test_repo_chart_unreachable_is_an_error_never_another_chart(
    tmp_path: Path, helm_tc: Toolchain
) -> None:
    from pytest_desched.descheduler.chart_source import obtain_chart

    cand = parse_candidate("version:v0.37.0", chart="repo:0.37.0")
    with pytest.raises(ToolError) as ei:
        obtain_chart(helm_tc, V, "auto", report=lambda m: None, candidate=cand)
    msg = str(ei.value)
    assert msg.startswith("candidate chart repo:0.37.0: descheduler 0.37.0 not available from")
    assert "no such host" in msg
    assert "no other chart is used in its place" in msg
    assert "--desched-candidate-chart tree" in msg
    assert not list((tmp_path / "cache" / "charts").rglob("*.tgz"))  # nothing packaged instead
    assert [c.split()[0] for c in _helm_calls(tmp_path)] == ["version", "pull"]


def test_tree_chart_keeps_its_versions_and_says_where_it_came_from(
    tmp_path: Path, helm_tc: Toolchain
) -> None:
    from pytest_desched.descheduler.chart_source import obtain_chart

    files = tree_files(app_version="0.36.5")
    t = make_tarball(tmp_path / "src.tar.gz", files)
    cand = parse_candidate(f"source:{t}", chart="tree")
    said: list[str] = []
    ref = obtain_chart(helm_tc, V, "auto", report=said.append, candidate=cand)
    assert (ref.source, ref.version, ref.app_version) == ("candidate-tree", "0.36.0", "0.36.5")
    ev = ref.evidence()
    assert ev["commit"] == COMMIT
    assert ev["origin"] == f"{t.resolve()}:charts/descheduler"
    assert ev["digest"] == f"sha256:{ref.digest}"
    assert ev["content_digest"].startswith("sha256:")
    package = [c for c in _helm_calls(tmp_path) if c.startswith("package")]
    assert len(package) == 1 and "--version" not in package[0]  # the tree's own versions
    # cached by content: a second call packages nothing
    again = obtain_chart(helm_tc, V, "auto", report=said.append, candidate=cand)
    assert again == ref
    assert len([c for c in _helm_calls(tmp_path) if c.startswith("package")]) == 1
    # pins repackage under another key
    pinned = parse_candidate(f"source:{t}", chart="tree@version=0.37.0-canary,appVersion=0.37.0")
    ref2 = obtain_chart(helm_tc, V, "auto", report=said.append, candidate=pinned)
    assert (ref2.version, ref2.app_version) == ("0.37.0-canary", "0.37.0")
    assert ref2.path != ref.path


def test_dir_and_tgz_charts(tmp_path: Path, helm_tc: Toolchain) -> None:
    from pytest_desched.descheduler.chart_source import obtain_chart

    d = make_dir(
        tmp_path / "mychart",
        {"Chart.yaml": "apiVersion: v1\nname: descheduler\nversion: 9.9.9\nappVersion: 9.9.9\n"},
    )
    ref = obtain_chart(
        helm_tc, V, report=lambda m: None, candidate=parse_candidate(None, chart=str(d))
    )
    assert (ref.source, ref.version, ref.origin) == ("candidate-dir", "9.9.9", str(d))
    assert not ref.commit
    tgz = ref.path
    ref2 = obtain_chart(
        helm_tc, V, report=lambda m: None, candidate=parse_candidate(None, chart=str(tgz))
    )
    assert (ref2.source, ref2.version, ref2.origin) == ("candidate-tgz", "9.9.9", str(tgz))
    assert ref2.digest == ref.digest == ref2.content_digest  # the same bytes, copied by digest
    assert ref2.path != tgz and ref2.path.is_file()


def test_no_candidate_chart_keeps_the_baseline_rule(
    tmp_path: Path, helm_tc: Toolchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_desched.descheduler import chart_source as chart_mod

    called: list[str] = []
    monkeypatch.setattr(
        chart_mod, "obtain_candidate_chart", lambda *a, **k: called.append("candidate")
    )
    target = tmp_path / "cache" / "charts" / "module" / "descheduler-0.36.0.tgz"
    target.parent.mkdir(parents=True)
    make_tarball(
        target, {"Chart.yaml": "name: descheduler\nversion: 0.36.0\n"}, prefix="descheduler"
    )
    ref = chart_mod.obtain_chart(helm_tc, V, "module", candidate=parse_candidate("version:v0.37.0"))
    assert ref.source == "module" and called == []


# -- the release of a candidate: image, flags, where it may run ---------------------------------
def _release(tmp_path: Path, provider: str, version: str, **fields: object):
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.descheduler.chart_source import ChartRef
    from pytest_desched.providers.base import Cluster
    from pytest_desched.providers.embedded.kubelet import StandInKubelet

    class NoTools(Cluster):
        def helm(self, *args: str, **kw: object):  # type: ignore[override]
            raise AssertionError(f"helm {args} ran")

    cluster = NoTools(
        name="t",
        provider=provider,
        kubeconfig=Path("/nonexistent"),
        toolchain=None,  # type: ignore[arg-type]
        workers=["w-1", "w-2"],
        job_runner=StandInKubelet() if provider == "embedded" else None,
    )
    chart = ChartRef(tmp_path / "c.tgz", "candidate-tree", "0.36.0", "0.36.0", "0" * 64)
    return Release(
        cluster, chart, V, tmp_path, descheduler_version=version, report=lambda m: None, **fields
    )


def _set_strings(flags: list[str]) -> list[str]:
    return [b for a, b in itertools.pairwise(flags) if a == "--set-string"]


def test_source_candidate_release_runs_its_label_on_embedded_only(tmp_path: Path) -> None:
    label = "v0.36.0-g7d2b28bf2"
    rel = _release(tmp_path, "embedded", label, image_published=False)
    rel.check_version_runs_here()  # the stand-in kubelet runs the built binary
    assert rel.image == f"registry.k8s.io/descheduler/descheduler:{label}"
    assert _set_strings(rel._flags([tmp_path / "v.yaml"], True)) == [f"image.tag={label}"]
    for provider in ("kind", "existing"):
        # the label has a tag's form, but nothing was published under it
        with pytest.raises(ConfigError, match="is a local build and has no published image"):
            _release(tmp_path, provider, label, image_published=False).check_version_runs_here()


def test_image_candidate_release_sets_repository_and_tag(tmp_path: Path) -> None:
    ref = "registry.example:5000/team/descheduler:v0.37.0-fix"
    rel = _release(tmp_path, "kind", "v0.37.0-fix", image_ref=ref, image_published=True)
    rel.check_version_runs_here()
    assert rel.image == ref
    assert _set_strings(rel._flags([tmp_path / "v.yaml"], True)) == [
        "image.repository=registry.example:5000/team/descheduler",
        "image.tag=v0.37.0-fix",
    ]
    with pytest.raises(ConfigError, match="the embedded provider runs no images"):
        _release(tmp_path, "embedded", "v0.37.0-fix", image_ref=ref).check_version_runs_here()


@pytest.mark.parametrize(
    ("release", "shape", "tags"),
    [
        # v0.32: no ctx, no WithPrometheusClient, no instance IDs, no metricsProviders
        ("v0.32.2", {"ctx": False, "prom": "none", "instance_id": False, "providers": False},
         ("profile_noctx", "prom_none", "profile_noid", "policy_noproviders")),
        ("v0.33.0", {"ctx": False, "prom": "value", "instance_id": False},
         ("profile_noctx", "prom_value", "profile_noid")),
        # v0.34.0: ctx, a client (not a getter), no instance IDs: the build failure
        ("v0.34.0", {"prom": "value", "instance_id": False}, ("prom_value", "profile_noid")),
        ("v0.35.0", {}, ()),
    ],
)  # fmt: skip
def test_helper_tags_fit_the_policy_checker_to_the_trees_api(
    tmp_path: Path, release: str, shape: dict, tags: tuple[str, ...]
) -> None:
    """Each variation point is probed in the tree; each tag names one file of the checker."""
    from pytest_desched.tools.api_probe import helper_tags
    from pytest_desched.tools.gobuild import go_build_cmd
    from pytest_desched.tools.groups import Group

    tree = make_dir(tmp_path / release, api_files(**shape))
    assert helper_tags(tree) == tags
    group = Group("policycheck", "m", release, {"policycheck": "./cmd/x"})
    cmd = go_build_cmd(group, tmp_path / "out", helper_tags(tree))
    assert ("-tags" in cmd) is bool(tags)
    names = {p.name for p in POLICYCHECK_SOURCE.glob("*.go")}
    for tag in tags:  # every tag selects a file that says so in its build line
        assert any(f"//go:build {tag}" in (POLICYCHECK_SOURCE / n).read_text() for n in names), tag


def test_a_tree_without_a_stable_entry_point_is_refused_naming_it(tmp_path: Path) -> None:
    from pytest_desched.tools.api_probe import helper_tags

    files = api_files()
    files["pkg/descheduler/api.go"] = "package descheduler\n\nfunc SetupPlugins() {}\n"
    tree = make_dir(tmp_path / "t", files)
    with pytest.raises(ToolError, match=r"defines no func LoadPolicyConfig in pkg/descheduler"):
        helper_tags(tree)
    with pytest.raises(ToolError, match=r"defines no func NewProfile in pkg/framework/profile"):
        helper_tags(tmp_path / "empty")
