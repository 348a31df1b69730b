"""A release (tools/release.py): the canary's baseline read like its candidate, its chart's
appVersion, a version the Go proxy does not serve, and the skew from the release's README.

No Go build and no network: `go mod download` is replaced where a test needs its answer; the
trees and charts are small synthetic ones (tests/unit/tools/test_candidate.py's helpers).
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.errors import ConfigError, ToolError
from pytest_desched.tools import release as release_mod
from pytest_desched.tools.release import (
    chart_app_version,
    check_release,
    module_dir,
    parse_release,
    release_skew,
    skew_from_readme,
)
from tests.unit.tools.test_candidate import make_dir, make_tarball, tree_files

MATRIX = (
    "## Compatibility Matrix\n\n| Descheduler | Supported Kubernetes Version |\n"
    "|-------------|------------------------------|\n"
    "| v0.35       | v1.35                        |\n"
    "| v0.34       | v1.34                        |\n"
    "| v0.33       | v1.33                        |\n"
)


def chart_tgz(path: Path, version: str, app_version: str) -> Path:
    """A `helm package`-shaped .tgz: descheduler/Chart.yaml at depth one."""
    data = f"apiVersion: v2\nname: descheduler\nversion: {version}\nappVersion: {app_version}\n"
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo("descheduler/Chart.yaml")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data.encode()))
    return path


def go_answers(monkeypatch: pytest.MonkeyPatch, doc: dict, rc: int = 1, stderr: str = "") -> None:
    def fake(module: str, version: str) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(["go"], rc, json.dumps(doc), stderr)

    monkeypatch.setattr(release_mod, "_go_mod_download", fake)


# -- bad baseline input: one line, naming the baseline, before anything is built ---------------
def test_unknown_version_is_bad_input_naming_the_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    go_answers(
        monkeypatch,
        {
            "Error": "reading https://proxy/@v/v0.99.0.info: 403 Forbidden\n\tserver response: "
            "This module version is not available."
        },
    )
    rel = parse_release("version:v0.99.0", None, "baseline")
    with pytest.raises(ConfigError) as ei:
        check_release(rel, "baseline")
    msg = str(ei.value)
    assert msg.startswith("baseline 'version:v0.99.0': ") and "\n" not in msg
    assert "not served by the Go module proxy" in msg and "source:PATH" in msg


def test_an_unreachable_proxy_is_not_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    go_answers(monkeypatch, {"Error": "dial tcp: lookup proxy.golang.org: no such host"})
    with pytest.raises(ToolError, match="no such host"):
        module_dir("sigs.k8s.io/descheduler", "v0.35.1", "baseline")


def test_a_served_version_gives_its_module_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    go_answers(monkeypatch, {"Dir": "/mod/descheduler@v0.35.1"}, rc=0)
    assert module_dir("sigs.k8s.io/descheduler", "v0.35.1") == Path("/mod/descheduler@v0.35.1")


def test_a_tarball_that_is_not_a_descheduler_tree_names_the_baseline(tmp_path: Path) -> None:
    files = {k: v for k, v in tree_files().items() if not k.startswith("cmd/")}
    bad = make_tarball(tmp_path / "other.tar.gz", files)
    with pytest.raises(ConfigError) as ei:
        parse_release(f"source:{bad}", None, "baseline")
    assert str(ei.value).startswith(f"baseline 'source:{bad}': ")
    assert "not a descheduler source tree" in str(ei.value)


def test_a_chart_whose_app_version_disagrees_is_refused_without_a_pin(tmp_path: Path) -> None:
    old = chart_tgz(tmp_path / "descheduler-0.33.0.tgz", "0.33.0", "0.33.0")
    with pytest.raises(ConfigError) as ei:
        parse_release("version:v0.35.1", str(old), "baseline")
    msg = str(ei.value)
    assert msg.startswith("baseline 'version:v0.35.1': ") and "appVersion 0.33.0, not 0.35.1" in msg
    # the chart that release shipped is taken
    ok = chart_tgz(tmp_path / "descheduler-0.35.1.tgz", "0.35.1", "0.35.1")
    assert parse_release("version:v0.35.1", str(ok), "baseline").chart == str(ok)


def test_a_release_tags_own_previous_chart_needs_an_explicit_pin(tmp_path: Path) -> None:
    """v0.33.0's tree holds chart 0.32.0: `tree` is refused, `tree@appVersion=0.33.0` taken."""
    files = tree_files(app_version="0.32.0")
    tgz = make_tarball(tmp_path / "descheduler-v0.33.0.tar.gz", files)
    spec = f"source:{tgz}@v0.33.0"
    with pytest.raises(ConfigError, match=r"appVersion 0\.32\.0, not 0\.33\.0.*tree@appVersion="):
        parse_release(spec, "tree", "baseline")
    rel = parse_release(spec, "tree@appVersion=0.33.0", "baseline")
    assert rel.version == "v0.33.0" and chart_app_version(rel) == "0.33.0"


def test_a_chart_directory_and_a_commit_label_compare_by_release(tmp_path: Path) -> None:
    """A label `v0.36.0-g<commit>` is release 0.36.0: its tree's chart 0.36.0 matches."""
    tgz = make_tarball(tmp_path / "master.tar.gz", tree_files(app_version="0.36.0"))
    assert parse_release(f"source:{tgz}", "tree").version.startswith("v0.36.0-g")
    d = make_dir(tmp_path / "chart", {"Chart.yaml": "name: descheduler\nversion: 1.0.0\n"})
    assert chart_app_version(parse_release("pinned", str(d))) is None  # nothing to compare


def test_cli_bad_baseline_exits_2_with_one_line_before_any_cluster(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from pytest_desched.providers.embedded.cluster import EmbeddedProvider

    def no_cluster(self: object) -> None:
        raise AssertionError("a cluster was started for a bad baseline")

    monkeypatch.setattr(EmbeddedProvider, "start", no_cluster)
    go_answers(monkeypatch, {"Error": "404 Not Found: unknown revision v0.99.0"})
    argv = ["canary", "--candidate", "pinned", "--provider", "embedded"]
    code = cli.main([*argv, "--baseline", "version:v0.99.0", "--artifacts", str(tmp_path / "a")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("[desched] error: baseline 'version:v0.99.0'")
    old = chart_tgz(tmp_path / "c.tgz", "0.33.0", "0.33.0")
    code = cli.main([*argv, "--baseline-chart", str(old), "--artifacts", str(tmp_path / "b")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--baseline" in err[0] and "0.33.0" in err[0], err


# -- skew: from the release's own README, never a refusal ---------------------------------------
@pytest.mark.parametrize(
    ("version", "compiled", "minors", "outside"),
    [("v0.35.1", "v1.35", 1, True), ("v0.33.0", "v1.33", 3, True)],
)
def test_skew_from_the_compatibility_matrix(
    version: str, compiled: str, minors: int, outside: bool
) -> None:
    got = skew_from_readme(MATRIX, version, "v1.36.3")
    assert (got["compiled_for"], got["minors"]) == (compiled, minors)
    assert ("outside the three minors" in got["note"]) is outside
    assert got["kubernetes"] == "v1.36.3"


def test_skew_same_minor_and_older_cluster() -> None:
    assert skew_from_readme(MATRIX, "v0.35.0", "v1.35.2")["minors"] == 0
    older = skew_from_readme(MATRIX, "v0.35.0", "v1.33.0")
    assert older["minors"] == -2 and "2 minor(s) older" in older["note"]
    assert "outside" not in older["note"]


def test_skew_unknown_without_a_row_or_a_readme() -> None:
    assert skew_from_readme(MATRIX, "v0.36.0", "v1.36.3")["note"].startswith("unknown: its README")
    assert skew_from_readme(None, "v0.36.0", "v1.36.3")["note"] == "unknown: no README"


def test_release_skew_reads_a_source_trees_readme(tmp_path: Path) -> None:
    tree = make_dir(tmp_path / "tree", {"README.md": MATRIX})
    rel = parse_release(f"source:{make_tarball(tmp_path / 's.tar.gz', tree_files())}@v0.34.2")
    rel = replace(rel, source_dir=tree)  # as resolve_source leaves it
    assert release_skew(rel, "v1.36.3")["compiled_for"] == "v1.34"
    assert release_skew(replace(rel, kind="binary", source_dir=None), "v1.36.3")["note"] == (
        "unknown: no README"
    )


def test_a_released_versions_readme_is_read_from_its_module_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skew of a version (or the pin) at another Kubernetes: its README comes from the
    tool cache after the first read, so a run neither needs the module proxy nor writes the
    user's Go module cache ($HOME/go) each time."""
    from pytest_desched.tools import release

    tree = tmp_path / "mod"
    tree.mkdir()
    (tree / "README.md").write_text(MATRIX + "| v0.36       | v1.36                        |\n")
    reads: list[object] = []

    def release_tree(rel: object) -> Path:
        reads.append(rel)
        return tree

    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(release, "release_tree", release_tree)
    first = release_skew(None, "v1.37.2")
    (tree / "README.md").unlink()  # the module gone: the cache answers
    assert release_skew(None, "v1.37.2") == first and len(reads) == 1
    assert first["compiled_for"] == "v1.36" and first["minors"] == 1
    assert [p.name for p in (tmp_path / "cache" / "texts").iterdir()] == [
        "descheduler-v0.36.0-README.md"
    ]
