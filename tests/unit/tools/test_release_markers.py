"""A source tree's release label from its own markers (tools/release_markers.py).

Each case is a small tarball laid out like `git archive --prefix=...` carrying exactly the
markers the real upstream trees in ../shared/upstream carry (read with `tar xzf -O`): the
image tag of kubernetes/ manifests, the README's install example, docs/user-guide.md's newest
image row, charts/descheduler's appVersion and the top directory's name. The label goes
through parse_candidate, so the whole read (tarball, markers, order) runs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.tools.candidate import parse_candidate
from pytest_desched.tools.release import parse_release
from pytest_desched.tools.release_markers import ReleaseMarkers, release_from_markers
from tests.unit.tools.test_candidate import COMMIT, make_dir, make_tarball, tree_files
from tests.upstream import upstream_dir

IMAGE = "registry.k8s.io/descheduler/descheduler"


def release_tree(
    manifests: str | None, readme: str | None, guide: str | None, chart: str | None
) -> dict[str, str]:
    files = tree_files(app_version=chart)
    if manifests is not None:
        for kind in ("job", "cronjob", "deployment"):
            files[f"kubernetes/{kind}/{kind}.yaml"] = f"    image: {IMAGE}:{manifests}\n"
        files["kubernetes/base/rbac.yaml"] = "kind: ClusterRole\n"
    if readme is not None:
        files["README.md"] = f"Run the image (e.g.\n`{IMAGE}:{readme}`), follow the docs\n"
    if guide is not None:
        files["docs/user-guide.md"] = f"{guide}             | {IMAGE}:{guide} | AMD64 |\n"
    return files


# (top directory, manifests, README, user guide, chart appVersion) as in each upstream tree.
TREES = {
    "v0.32.2": ("descheduler-v0.32.2", "v0.32.1", "v0.31.0", "v0.32.1", "0.32.1"),
    "v0.33.0": ("descheduler-v0.33.0", "v0.33.0", "v0.33.0", "v0.33.0", "0.32.0"),
    "v0.35.0": ("descheduler-v0.35.0", "v0.35.0", "v0.35.0", "v0.35.0", "0.34.0"),
    "v0.35.1": ("descheduler-v0.35.1", "v0.35.0", "v0.35.0", "v0.35.0", "0.35.0"),
}


@pytest.mark.parametrize("release", sorted(TREES))
def test_each_release_tree_is_read_as_its_own_release(tmp_path: Path, release: str) -> None:
    prefix, *markers = TREES[release]
    tgz = make_tarball(tmp_path / f"{prefix}.tar.gz", release_tree(*markers), prefix=prefix)
    c = parse_candidate(f"source:{tgz}")
    assert c.version == release
    assert "Chart.yaml" not in c.label_from  # never the (previous) chart
    if markers[0] == release:
        assert c.label_from.startswith(f"kubernetes/ manifests' image tag {release}")
    else:  # a patch release: its manifests still name the release it patches
        assert c.label_from.startswith(f"top directory {prefix}/")
        assert f"says {markers[0]}" in c.label_from


# master 7d2b28bf2 (a snapshot, no tag): every marker names v0.36.0, its top directory a commit
MASTER = ("descheduler-7d2b28bf2", "v0.36.0", "v0.36.0", "v0.36.0", "0.36.0")


@pytest.mark.parametrize("release", [*sorted(TREES), "master"])
def test_the_markers_above_are_the_real_trees(release: str) -> None:
    """The cases are the real trees' markers, read by the product's own reader from
    ../shared/upstream (a tree there that changed would otherwise leave these cases stale)."""
    from pytest_desched.tools.source_tree import source_info
    from tests.upstream import release_file, tarball

    path = tarball("master") if release == "master" else release_file(release)
    prefix, manifests, readme, guide, chart = MASTER if release == "master" else TREES[release]
    m = source_info(path).markers
    assert (m.top_dir, m.manifests, m.readme, m.user_guide, m.chart_app_version) == (
        prefix,
        (manifests,),
        readme,
        guide,
        chart,
    )


def test_master_snapshot_gets_a_build_label_and_says_why(tmp_path: Path) -> None:
    prefix, *markers = MASTER
    tgz = make_tarball(tmp_path / "master.tar.gz", release_tree(*markers), prefix=prefix)
    c = parse_candidate(f"source:{tgz}")
    assert c.version == "v0.36.0-g7d2b28bf2"
    assert "already bumped to 0.36.0: a build past that release" in c.label_from


def test_release_tag_without_a_prefix_is_read_from_its_manifests(tmp_path: Path) -> None:
    files = release_tree("v0.35.0", "v0.35.0", "v0.35.0", "0.34.0")
    tgz = make_tarball(tmp_path / "x.tar.gz", files, prefix="checkout")
    c = parse_candidate(f"source:{tgz}")
    assert (c.version, c.label_from) == (
        "v0.35.0",
        "kubernetes/ manifests' image tag v0.35.0 (charts/descheduler holds the previous "
        "chart, 0.34.0)",
    )


def test_tree_without_markers_keeps_todays_build_label(tmp_path: Path) -> None:
    tgz = make_tarball(tmp_path / "bare.tar.gz", tree_files(app_version="0.36.0"))
    c = parse_candidate(f"source:{tgz}")
    assert c.version == "v0.36.0-g7d2b28bf2"
    assert c.label_from.startswith("Chart.yaml appVersion + commit; no release markers")


@pytest.mark.parametrize(
    ("prefix", "markers", "said"),
    [
        # the user guide's newest image is bumped with the manifests: a mismatch is a conflict
        ("checkout", ("v0.35.0", "v0.35.0", "v0.34.0", "0.34.0"), "docs/user-guide.md"),
        # a prefix naming another minor than the content
        ("descheduler-v0.36.0", ("v0.35.0", "v0.35.0", "v0.35.0", "0.34.0"), "top directory"),
        # a prefix naming an older patch than the manifests
        ("descheduler-v0.35.0", ("v0.35.1", "v0.35.1", "v0.35.1", "0.35.0"), "top directory"),
        # a prefix naming the release a bumped chart says the tree is already past
        ("descheduler-v0.36.0", ("v0.36.0", "v0.36.0", "v0.36.0", "0.36.0"), "already bumped"),
    ],
)
def test_disagreeing_markers_give_a_build_label_and_say_so(
    tmp_path: Path, prefix: str, markers: tuple[str, str, str, str], said: str
) -> None:
    tgz = make_tarball(tmp_path / "x.tar.gz", release_tree(*markers), prefix=prefix)
    c = parse_candidate(f"source:{tgz}")
    assert c.version == f"v{markers[3]}-g{COMMIT[:9]}"
    assert "markers disagree" in c.label_from and said in c.label_from


def test_manifests_naming_two_releases_disagree() -> None:
    m = ReleaseMarkers(manifests=("v0.34.0", "v0.35.0"), chart_app_version="0.34.0")
    assert release_from_markers(m) == (
        None,
        "markers disagree: kubernetes/ manifests name v0.34.0, v0.35.0",
    )


def test_readme_alone_names_the_release_of_a_tree_without_manifests() -> None:
    m = ReleaseMarkers(readme="v0.31.0", chart_app_version="0.30.1")
    assert release_from_markers(m)[0] == "v0.31.0"


def test_user_label_wins_over_the_markers(tmp_path: Path) -> None:
    prefix, *markers = TREES["v0.35.0"]
    tgz = make_tarball(tmp_path / "x.tar.gz", release_tree(*markers), prefix=prefix)
    c = parse_candidate(f"source:{tgz}@v0.35.0-mine")
    assert (c.version, c.label_from) == ("v0.35.0-mine", "user label")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_checkout_tag_wins_over_its_content(tmp_path: Path) -> None:
    tree = make_dir(tmp_path / "src", release_tree("v0.35.0", "v0.35.0", "v0.35.0", "0.35.0"))
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # fmt: skip
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"], ["tag", "v0.35.1"]):
        subprocess.run(["git", "-C", str(tree), *cmd], check=True, env=env)
    c = parse_candidate(f"source:{tree}")
    assert (c.version, c.label_from) == ("v0.35.1", "git tag v0.35.1 at the checkout's HEAD")


def test_chart_check_compares_the_chart_with_the_trees_own_label(tmp_path: Path) -> None:
    """v0.35.0's tree with the chart it shipped passes; with its own charts/ (0.34.0, the
    previous chart) it is refused, naming the label read from the markers."""
    prefix, *markers = TREES["v0.35.0"]
    tgz = make_tarball(tmp_path / f"{prefix}.tar.gz", release_tree(*markers), prefix=prefix)
    shipped = make_dir(
        tmp_path / "chart",
        {"Chart.yaml": "apiVersion: v2\nname: descheduler\nversion: 0.35.0\nappVersion: 0.35.0\n"},
    )
    assert parse_release(f"source:{tgz}", str(shipped), role="baseline").version == "v0.35.0"
    with pytest.raises(ConfigError, match=r"says appVersion 0\.34\.0, not 0\.35\.0"):
        parse_release(f"source:{tgz}", "tree", role="baseline")


# The real trees and the chart each release shipped (../shared/upstream, its README):
# what `desched lint --from` and `desched canary --baseline` read first (parse_release).
REAL = {
    "descheduler-v0.32.2-a6e0ebff1.tar.gz": ("v0.32.2", "descheduler-chart-0.32.2.tgz"),
    "descheduler-v0.33.0-045fbb6a0.tar.gz": ("v0.33.0", "descheduler-chart-0.33.0.tgz"),
    "descheduler-v0.35.0-b49fd27d1.tar.gz": ("v0.35.0", "descheduler-chart-0.35.0.tgz"),
    "descheduler-v0.35.1-2908b4308.tar.gz": ("v0.35.1", "descheduler-chart-0.35.1.tgz"),
    "descheduler-master-7d2b28bf2.tar.gz": ("v0.36.0-g7d2b28bf2", "tree"),
    "descheduler-pr1883-5f6c6d7b0.tar.gz": ("v0.36.0-g5f6c6d7b0", "tree"),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_trees_read_as_their_release_with_the_chart_they_shipped(name: str) -> None:
    """No @LABEL: the label from the tree's own markers, and the chart check against it
    (as `lint --from TREE --from-chart CHART` and the canary's --baseline do)."""
    label, chart = REAL[name]
    up = upstream_dir()
    chart_spec = chart if chart == "tree" else str(up / chart)
    rel = parse_release(f"source:{up / name}", chart_spec, role="--from")
    assert rel.version == label, rel.label_from
    assert rel.label_from  # the report names where it came from
