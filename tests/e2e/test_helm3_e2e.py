"""Helm 3, still supported: the runbook's positive experiment and the lint of the quickstart
values with `--desched-helm=3` / `desched lint --helm 3`.

The session runs on the pinned default (Helm 4). The experiment runs on a cluster of its own
(`desched_cluster_factory(helm="3")`): its release is installed, upgraded and uninstalled by
helm v3.21.4, and the round record says so. `desched lint --helm 3` gives the quickstart's
values the README's verdicts, and Helm 3 renders them as Helm 4 does. Added time on the loaded
2-core VM: docs/helm.md#helm-3.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.tools.toolchain import Toolchain
from tests.commands import DESCHED, child_env
from tests.e2e.test_canary_e2e import metrics_gap_expect
from tests.unit import REPO

pytestmark = pytest.mark.desched_selftest

QUICKSTART = REPO / "examples" / "quickstart"


def test_positive_experiment_on_helm_3(desched_cluster_factory):
    session = desched_cluster_factory(helm="3")
    assert session.toolchain.wanted_version("helm") == "v3.21.4"
    res = session.run("positive", variant="pdb-lister-workaround")
    assert res.outcome == "pass", res.message
    assert res.evictions == 1 and res.ready_latency_s is not None
    rec = res.records[0]
    assert rec["versions"]["helm"] == "v3.21.4"
    helm = rec["helm"]
    assert (helm["version"], helm["major"], helm["apply"]) == ("v3.21.4", "3", "client-side")
    assert helm["cronjob"]["spec.suspend"] == ["helm (Update)"], helm
    assert helm["configmap"]["data.policy.yaml"] == ["helm (Update)"], helm


@pytest.mark.parametrize(
    ("name", "rc", "rules"),
    [
        ("prod-values.yaml", 0, {"DL019"}),  # the README's quickstart: SAFE, one note
        ("reckless-values.yaml", 1, {"DL009", "DL015", "DL016"}),  # UNSAFE, as in the README
    ],
)
def test_lint_of_the_quickstart_values_on_helm_3(
    name: str, rc: int, rules: set[str], desched_toolchain: Toolchain, tmp_path: Path
) -> None:
    """`desched lint --helm 3`, as the README's quickstart runs it (`--fail-on warning`)."""
    cmd = [str(DESCHED), "lint", "--helm", "3", str(QUICKSTART / name)]
    cmd += ["--fail-on", "warning", "-o", "json"]
    env = child_env(tmp_path, desched_toolchain.cache_dir)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == rc, f"$ {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
    found = {f["rule"] for f in json.loads(res.stdout)["findings"]}
    assert rules <= found, found
    assert "building helm" not in res.stderr  # helm v3.21.4 came from the cache


def test_helm_3_renders_what_helm_4_renders(desched_toolchain: Toolchain) -> None:
    """The lint reads values as the chosen Helm renders them: both give the same policy and
    the same manifests."""
    from pytest_desched.descheduler.chart_source import obtain_chart
    from pytest_desched.descheduler.policy.values import read_values, render_values
    from pytest_desched.proc import helm_env

    cache = desched_toolchain.cache_dir
    tc = {m: Toolchain(cache_dir=cache, helm=m) for m in ("3", "4")}
    chart = obtain_chart(tc["4"], tc["4"].versions, "auto")
    files = [read_values(QUICKSTART / "prod-values.yaml")]
    env = helm_env(cache / "charts")
    r = {m: render_values(files, chart.path, t.path("helm"), env) for m, t in tc.items()}
    assert r["3"].policy_text and r["3"].policy_text == r["4"].policy_text
    assert r["3"].manifests == r["4"].manifests


def test_a_canary_on_helm_3(desched_settings: Any, tmp_path: Path) -> None:
    """The upgrade canary's two tracks, each installed, upgraded and uninstalled by Helm 3:
    the positive experiment on both, the same verdict Helm 4 gives (no change)."""
    from pytest_desched.canary.engine import run_canary

    config = desched_settings.with_(
        run_dir=tmp_path, artifacts=desched_settings.artifacts / "canary-helm3", helm="3"
    )
    said: list[str] = []
    expect = metrics_gap_expect(desched_settings, tmp_path)  # kind: no local metric probe
    rep = run_canary(
        config,
        "pinned",
        expect=expect,
        report=said.append,
        static=False,
        experiments=["positive"],
    )
    assert rep.baseline.error is None and rep.candidate.error is None, "\n".join(said[-30:])
    outcomes = {o["experiment"]: (o["baseline"], o["candidate"]) for o in rep.outcomes}
    assert outcomes["positive-affinity-migration[pdb-lister-workaround]"] == ("pass", "pass")
    for track in (rep.baseline, rep.candidate):
        helms = {r["helm"]["version"] for res in track.results for r in res.records}
        assert helms == {"v3.21.4"}, helms
    assert rep.ok, rep.verdict.reasons
