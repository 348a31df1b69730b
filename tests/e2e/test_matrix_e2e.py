"""`desched matrix` over two releases, each on a cluster of its own: the registry's #1882 is
proven from the runs, and the same runs prove a registry that leaves a release out wrong.

The smallest set that shows a registry-proven bug: one experiment (nodefit, the runbook's
policy, which enables PodsWithoutPDB) on v0.35.1 (Go module build, its chart 0.35.1 from
../shared/upstream) and the pinned v0.36.0. Both have #1882: every lab pod is filtered by
exactly PodsWithoutPDB, so the round is stopped by the evictor's filter, not by nodeFit, and
the experiment xfails on the bug. The command runs as a user runs it (the console script,
this session's tool cache), rows one after another.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.canary.matrix_report import SHOWN, Matrix
from pytest_desched.descheduler.bug_ranges import VersionRange
from pytest_desched.descheduler.known_bugs import REGISTRY
from pytest_desched.tools.toolchain import Toolchain
from tests.e2e.test_cli_e2e import _assert_gone, _desched
from tests.upstream import release_file

pytestmark = pytest.mark.desched_selftest

BUG = "descheduler#1882"


@pytest.fixture
def embedded_only(desched_settings: Any) -> None:
    """A release built here has no image a kind node could pull: embedded clusters only."""
    from pytest_desched.providers.base import choose_provider

    provider = choose_provider(desched_settings.provider)
    if provider != "embedded":
        pytest.skip(
            f"a locally built release's rounds run on the embedded provider, not {provider}"
        )


@pytest.mark.usefixtures("embedded_only")
def test_matrix_proves_1882_on_two_releases(desched_toolchain: Toolchain, tmp_path: Path) -> None:
    chart = release_file("chart-0.35.1")
    art, tmp = tmp_path / "ev", tmp_path / "tmp"
    tmp.mkdir()
    run = _desched(
        desched_toolchain.cache_dir,
        tmp,
        "matrix",
        "version:v0.35.1",
        "pinned",
        "--chart",
        f"version:v0.35.1={chart}",
        "--experiment",
        "nodefit[runbook]",
        "--provider",
        "embedded",
        "--artifacts",
        str(art),
        "-o",
        "json",
        timeout=1800,
    )
    assert run.code == 0, str(run)
    doc = json.loads(run.out)
    rows = doc["releases"]
    assert [r["version"] for r in rows] == ["v0.35.1", "v0.36.0"], str(run)
    assert [r["chart"]["version"] for r in rows] == ["0.35.1", "0.36.0"]
    for row in rows:
        [cell] = row["cells"]
        assert (cell["label"], cell["outcome"], cell["bug"]) == (
            "negative-nodefit[runbook]",
            "xfail",
            BUG,
        ), row
        # #1882's fates: the evictor's filter stopped every pod, not nodeFit; none evicted
        assert (cell["layer"], cell["evictions"]) == ("evictor-filter", 0), cell
        assert BUG in cell["seen"] and BUG in cell["triggers"]
        found = {b["bug"]: b for b in row["bugs"]}
        assert (found[BUG]["run"], found[BUG]["agrees"]) == (SHOWN, True), found[BUG]
        assert Path(row["artifacts"]).is_dir() and Path(row["artifacts"]).parent == art
    both = "shown on v0.35.1, v0.36.0, on every release that exercised it (oldest run: v0.35.1)"
    assert any(p.startswith(BUG) and both in p for p in doc["proofs"]), doc["proofs"]
    assert doc["exit_code"] == 0 and not doc["disagreements"] and not doc["unexplained"]
    md = (art / "matrix.md").read_text()
    assert "#1882 proven" in md and "desched matrix version:v0.35.1 pinned" in md
    # Each row's cluster was its own, started one after the other, and is gone.
    clusters = re.findall(r"starting embedded cluster (\S+)", run.err)
    assert len(set(clusters)) == 2, run.err[-3000:]
    for name in clusters:
        _assert_gone(desched_toolchain.cache_dir, name)
    # The same runs, judged against a registry that says v0.35.1 does not have #1882: the
    # matrix proves the registry wrong (exit 1) instead of trusting it.
    lean = tuple(
        replace(b, affected=VersionRange("v0.36.0", None, "test: only v0.36.0 on"))
        if b.id == BUG
        else b
        for b in REGISTRY
    )
    judged = Matrix.from_dict(json.loads((art / "matrix.json").read_text()), lean)
    assert judged.exit_code == 1
    assert any(d.startswith(f"version:v0.35.1: {BUG}: the run shows") for d in judged.disagreements)
