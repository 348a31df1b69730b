"""Helm 3, still supported: the runbook's positive experiment and the lint of the quickstart
values with `--desched-helm=3` / `desched lint --helm 3`.

The session runs on the pinned default (Helm 4). The experiment runs on a cluster of its own
(`desched_cluster_factory(helm="3")`): its release is installed, upgraded and uninstalled by
helm v3.21.4, and the round record says so. The lint renders the quickstart's values with
each Helm: the same policy comes out, and the verdicts are the same. Cost on the loaded 2-core
VM: see docs/helm.md#helm-3.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_desched.tools.toolchain import Toolchain
from tests.commands import DESCHED, child_env
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


def _lint(major: str, values: Path, cache: Path, tmp: Path) -> tuple[int, dict]:
    cmd = [str(DESCHED), "lint", "--helm", major, "-f", str(values), "-o", "json"]
    res = subprocess.run(
        cmd, env=child_env(tmp, cache), capture_output=True, text=True, timeout=300, check=False
    )
    assert res.returncode in (0, 1), f"$ {' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
    return res.returncode, json.loads(res.stdout)


@pytest.mark.parametrize("name", ["prod-values.yaml", "reckless-values.yaml"])
def test_lint_of_the_quickstart_values_on_helm_3(
    name: str, desched_toolchain: Toolchain, tmp_path: Path
) -> None:
    Toolchain(cache_dir=desched_toolchain.cache_dir, helm="3").path("helm")  # built, not timed
    got = {
        major: _lint(major, QUICKSTART / name, desched_toolchain.cache_dir, tmp_path)
        for major in ("3", "4")
    }
    rc3, doc3 = got["3"]
    assert rc3 == (0 if name.startswith("prod") else 1), doc3
    rules = {m: sorted((f["rule"], f["path"]) for f in d["findings"]) for m, (_, d) in got.items()}
    assert rules["3"] == rules["4"] and got["3"][0] == got["4"][0], rules
    if rc3:
        assert rules["3"], doc3  # a reckless file is refused for what helm 3 rendered


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
