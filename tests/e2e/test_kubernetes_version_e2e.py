"""The runbook's experiments on a cluster at another Kubernetes than the pin (issue 55).

`desched run --kubernetes v1.37.2` builds kube-apiserver, kube-controller-manager,
kube-scheduler and kubectl at v1.37.2 (cached by version beside the pin's) and runs the
runbook's three experiments there. v1.37 is newer than any minor the pinned descheduler's
README lists, so the run must say so first, and every round record names the version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.run import replay
from pytest_desched.tools.kube_versions import for_snapshot, served_versions
from pytest_desched.tools.release import release_skew
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import load_versions
from tests.commands import DESCHED, child_env, finish, start

pytestmark = pytest.mark.desched_selftest

# The one non-pinned version `make test` builds (its cold cost: docs/kubernetes-versions.md).
OTHER = "v1.37.2"
VARIANT = "pdb-lister-workaround"  # the runbook's policy variant that #1882 does not excuse


def test_the_runbooks_experiments_at_another_kubernetes(
    tmp_path: Path, desched_toolchain: Toolchain
) -> None:
    assert (
        load_versions().kubernetes.version != OTHER and OTHER in served_versions(load_versions())[0]
    )
    (tmp_path / "tmp").mkdir()
    art = tmp_path / "artifacts"
    argv = [
        "run",
        "positive",
        "nodefit",
        "pdb",
        "--variant",
        VARIANT,
        "--provider",
        "embedded",
        "--kubernetes",
        OTHER,
        "--artifacts",
        str(art),
    ]
    proc = start([str(DESCHED), *argv], child_env(tmp_path / "tmp", desched_toolchain.cache_dir))
    out, err = finish(proc, 1800)  # a cold cache builds v1.37.2's control plane first
    said = f"$ desched {' '.join(argv)} -> {proc.returncode}\n{out}\n{err[-4000:]}"
    assert proc.returncode == 0, said
    # Outside the three minors upstream tests v0.36 on (its README: v1.36, v1.35, v1.34).
    warning = next((ln for ln in err.splitlines() if "WARNING: Kubernetes" in ln), "")
    assert f"WARNING: Kubernetes {OTHER} (--desched-kubernetes" in warning, said
    skew = release_skew(None, OTHER)  # the product's own reading of v0.36.0's README
    assert skew["tested"] is False and skew["minors"] == 1, skew
    assert skew["note"] in warning, (skew, warning)
    assert re.search(rf"Ready kwok workers, server {re.escape(OTHER)}\b", err), said
    summary = json.loads((art / "run-summary.json").read_text())
    assert [(s["variant"], s["outcome"]) for s in summary] == [(VARIANT, "pass")] * 3, summary
    assert [s["evictions"] for s in summary] == [1, 0, 0], summary
    records = [
        json.loads(p.read_text())
        for p in art.rglob("descheduler-*.json")
        if "versions" in json.loads(p.read_text())
    ]
    assert records, f"no round record under {art}"
    assert {r["versions"]["kubernetes"] for r in records} == {OTHER}
    built = desched_toolchain.cache_dir / "bin" / "kubernetes" / OTHER
    assert (built / "kube-apiserver").is_file(), f"{OTHER} was not built into {built}"


def test_a_replay_runs_at_its_snapshots_kubernetes(desched_settings: Any, tmp_path: Path) -> None:
    """A 1.37 incident replays on 1.37 by default: the served patch nearest to its own."""
    inc = label_move()
    inc.snapshot.header.setdefault("source", {})["serverVersion"] = "v1.37.0"
    path = inc.snapshot.write(tmp_path / "label-move-1.37.yaml")
    run_dir = tmp_path / "replay"
    run_dir.mkdir()
    said: list[str] = []
    out = replay(
        path,
        # kubernetes=None: the session's own version (make e2e-kind sets DESCHED_KUBERNETES)
        # would override the snapshot's, which is what this test is about.
        config=desched_settings.with_(
            run_dir=run_dir, artifacts=run_dir / "artifacts", provider="embedded", kubernetes=None
        ),
        report=said.append,
    )
    assert out.kubernetes["server"] == OTHER, out.kubernetes
    chosen = for_snapshot(load_versions(), "v1.37.0", None, "--kubernetes")
    assert chosen.version == OTHER and "v1.37.0" in chosen.source
    assert out.kubernetes["source"] == chosen.source
    assert chosen.line() in said
    fates = out.ledger.fates(0)
    evicted = {p for p, w in inc.expected.items() if w["fate"] == "evicted"}
    assert evicted and evicted == {p for p, f in fates.items() if f.fate == "evicted"}, {
        p: str(f) for p, f in fates.items()
    }
    assert f"Kubernetes {OTHER}" in out.markdown()


def test_the_control_plane_upgrade_alone_is_canaried(desched_settings: Any, tmp_path: Path) -> None:
    """The pinned descheduler on v1.36.3 (baseline) against the same on v1.37.2 (candidate):
    the runbook's experiments on both, every change named in the verdict."""
    from pytest_desched.canary.engine import run_canary

    config = desched_settings.with_(
        run_dir=tmp_path,
        artifacts=desched_settings.artifacts / "canary-control-plane",
        provider="embedded",
        kubernetes=None,
        candidate_kubernetes=OTHER,
    )
    said: list[str] = []
    rep = run_canary(config, "pinned", report=said.append, static=False)
    assert rep.baseline.error is None and rep.candidate.error is None, "\n".join(said[-30:])
    assert rep.baseline.skew["kubernetes"] == load_versions().kubernetes.version
    assert rep.candidate.skew["kubernetes"] == OTHER and rep.candidate.skew["tested"] is False
    assert rep.baseline.descheduler_version == rep.candidate.descheduler_version
    outcomes = {o["experiment"]: (o["baseline"], o["candidate"]) for o in rep.outcomes}
    moved = outcomes["positive-affinity-migration[pdb-lister-workaround]"]
    assert moved == ("pass", "pass"), outcomes
    # Same descheduler, same lab: any per-class change is the control plane's, and the verdict
    # names it (a trigger) or there is none.
    changed = [
        (r.experiment, c.kinds)
        for r in rep.rounds
        for c in r.classes
        if c.kinds != ["replacement-seen"]
    ]
    assert rep.ok, (changed, rep.verdict.reasons)
    # Both control planes were read while up, and they differ where each binary says so: the
    # scheduler's written defaults and the API server's default admission plugins.
    pin = load_versions().kubernetes.version
    assert rep.control_plane_gaps == [], rep.control_plane_gaps
    assert (
        rep.baseline.control_plane["kubernetes"],
        rep.candidate.control_plane["kubernetes"],
    ) == (
        pin,
        OTHER,
    )
    areas = {d.area for d in rep.control_plane}
    assert {"scheduler", "admission", "feature-gate"} <= areas, rep.control_plane
    # A change is the control plane's only where its area decides it, with both versions named;
    # a replacement placed differently and evicted again would be one (a trigger otherwise).
    for j in rep.verdict.judged:
        if j.status == "control-plane":
            assert j.by and j.by.startswith(f"Kubernetes {pin} -> {OTHER}: "), j.to_dict()
    assert list(rep.final_verdict.notes) == rep.verdict.control_plane
    saved = json.loads((config.artifacts / "canary.json").read_text())
    assert saved["control_plane"]["attributed"] == rep.verdict.control_plane


def test_a_grid_of_one_release_at_two_kubernetes(
    tmp_path: Path, desched_toolchain: Toolchain
) -> None:
    """`desched matrix pinned --kubernetes PIN --kubernetes OTHER`: both versions reach the
    command (the option is repeatable on matrix), one cluster per cell, each cell's records at
    its own server version, #1882 shown on both cells."""
    pin = load_versions().kubernetes.version
    (tmp_path / "tmp").mkdir()
    art = tmp_path / "artifacts"
    argv = ["matrix", "pinned", "--experiment", "nodefit[runbook]", "--provider", "embedded"]
    argv += ["--kubernetes", pin, "--kubernetes", OTHER, "--artifacts", str(art), "-o", "json"]
    proc = start([str(DESCHED), *argv], child_env(tmp_path / "tmp", desched_toolchain.cache_dir))
    out, err = finish(proc, 1800)
    said = f"$ desched {' '.join(argv)} -> {proc.returncode}\n{out[-3000:]}\n{err[-4000:]}"
    assert proc.returncode == 0, said
    doc = json.loads(out)
    rows = [(r["spec"], r["kubernetes"], r["cells"][0]["outcome"]) for r in doc["releases"]]
    assert rows == [(f"pinned @ {pin}", pin, "xfail"), (f"pinned @ {OTHER}", OTHER, "xfail")]
    assert f"--kubernetes={pin} --kubernetes={OTHER}" in doc["command"]
    line = next(c for c in doc["bug_cells"] if c.startswith("#1882"))
    assert line == (
        f"#1882 shows on 2 row(s): v0.36.0 @ {pin}: negative-nodefit[runbook]; "
        f"v0.36.0 @ {OTHER}: negative-nodefit[runbook]"
    ), doc["bug_cells"]
    for r in doc["releases"]:  # the cell's own cluster, as its round records name it
        records = [
            json.loads(p.read_text()) for p in Path(r["artifacts"]).rglob("descheduler-*.json")
        ]
        kubes = {x["versions"]["kubernetes"] for x in records if "versions" in x}
        assert kubes == {r["kubernetes"]}, (r["spec"], kubes)


# The combined upgrade's starting cluster: built only by `make e2e-kubernetes` (its cold cost
# is a second extra control plane, docs/kubernetes-versions.md), so `make test` skips this.
COMBINED_FROM = "v1.35.4"


def test_the_combined_upgrade_is_canaried(desched_settings: Any, tmp_path: Path) -> None:
    """v0.35.1 with its chart on v1.35.4 (baseline) against the pinned v0.36.0 on the pinned
    v1.36.3 (candidate): the control plane and the descheduler upgraded together. Each track
    names its own cluster and skew; every change is explained, a proven bug fix, or the
    control plane's, where its readings differ."""
    from pytest_desched.canary.engine import run_canary
    from tests.upstream import release_file

    if desched_settings.kubernetes != COMBINED_FROM:
        pytest.skip(f"runs at --desched-kubernetes={COMBINED_FROM} (make e2e-kubernetes)")
    pin = load_versions().kubernetes.version
    config = desched_settings.with_(
        run_dir=tmp_path,
        artifacts=desched_settings.artifacts / "canary-combined-upgrade",
        provider="embedded",
        kubernetes=None,
        baseline_kubernetes=COMBINED_FROM,
        candidate_kubernetes=pin,
    )
    said: list[str] = []
    rep = run_canary(
        config,
        "pinned",
        baseline="version:v0.35.1",
        baseline_chart=str(release_file("chart-0.35.1")),
        report=said.append,
        static=False,
    )
    b, c = rep.baseline, rep.candidate
    assert b.error is None and c.error is None, "\n".join(said[-30:])
    assert (b.descheduler_version, c.descheduler_version) == ("v0.35.1", "v0.36.0")
    # Each release against its own cluster: both inside the minors their READMEs test.
    assert (b.skew["kubernetes"], c.skew["kubernetes"]) == (COMBINED_FROM, pin)
    assert b.skew["tested"] is True and c.skew["tested"] is True, (b.skew, c.skew)
    assert (b.control_plane["kubernetes"], c.control_plane["kubernetes"]) == (COMBINED_FROM, pin)
    assert rep.control_plane_gaps == [] and rep.control_plane, rep.control_plane_gaps
    assert not rep.no_verdict, "\n".join(rep.no_verdict)
    # Every change is named: explained, a bug fix proven, informative, or the control plane's
    # (with both versions); none is left for the descheduler's verdict to fail on.
    for j in rep.verdict.judged:
        if j.status == "control-plane":
            assert j.by and j.by.startswith(f"Kubernetes {COMBINED_FROM} -> {pin}: ")
    assert not rep.regressions, "\n".join(rep.regressions)
    loose = [j.to_dict() for j in rep.verdict.judged if j.status == "unexplained" and not j.trigger]
    assert loose == [], rep.verdict.reasons
    assert list(rep.final_verdict.notes) == rep.verdict.control_plane
