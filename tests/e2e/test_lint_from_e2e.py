"""`desched lint --from`: the upgrade v0.35.1 (Go module, chart 0.35.1 as shipped) -> the pinned
v0.36.0, for a values file a user wrote for chart 0.35.1 with a deprecated DefaultEvictor
argument. No cluster: both charts render the values, each release's own policy checker reads
the policy (v0.35.1's is built from the Go module once, ~17 min cold on the loaded VM, then
cached), each release's own metrics/metrics.go is read. About 5 s warm.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.upstream import REPO, pvc_values, release_file

pytestmark = pytest.mark.desched_selftest

OLD_VALUES = """\
# written for chart 0.35.1
deschedulerPolicy:
  maxNoOfPodsToEvictPerNode: 1
  maxNoOfPodsToEvictPerNamespace: 1
  maxNoOfPodsToEvictTotal: 2
  profiles:
    - name: default
      pluginConfig:
        - name: DefaultEvictor
          args:
            evictLocalStoragePods: true
            nodeFit: true
            minPodAge: 10m
        - name: RemovePodsViolatingNodeAffinity
          args:
            nodeAffinityType: [requiredDuringSchedulingIgnoredDuringExecution]
      plugins:
        deschedule:
          enabled: [RemovePodsViolatingNodeAffinity]
"""


def lint(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_desched.cli", "lint", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=3600,  # a cold build of v0.35.1's policy checker
        check=False,
    )


def test_lint_from_v0351_lists_the_migration_findings_with_codes(tmp_path: Path) -> None:
    chart = release_file("chart-0.35.1")
    values = tmp_path / "values.yaml"
    values.write_text(OLD_VALUES)
    base = ["values.yaml", "--from", "version:v0.35.1", "--from-chart", str(chart)]
    res = lint(tmp_path, *base, "-o", "json")
    assert res.returncode == 0, res.stderr  # no error-level finding: SAFE
    doc = json.loads(res.stdout)
    assert (doc["descheduler"], doc["from"]) == ("v0.36.0", "v0.35.1")
    by_rule: dict[str, list[dict]] = {}
    for f in doc["findings"]:
        by_rule.setdefault(f["rule"], []).append(f)
    # the deprecated argument: deprecated by both releases' own checkers, at the user's line
    [kept] = by_rule["DP004"]
    assert kept["path"].endswith("pluginConfig[0].args.evictLocalStoragePods")
    assert (kept["file"], kept["line"]) == ("values.yaml", 11)
    assert [f["line"] for f in by_rule["DL006"]] == [11]
    # chart 0.36.0's new value, the image each chart runs, the metric families v0.35.1
    # already deprecates (its own metrics.go), each from the release's own chart or code
    assert {f["path"] for f in by_rule["DU001"]} == {"values.serviceMonitor.apiVersion"}
    assert by_rule["DO005"][0]["origin"] == "rendered chart"
    assert {f["path"] for f in by_rule["DM004"]} == {
        "descheduler_pods_evicted",
        "descheduler_descheduler_loop_duration_seconds",
        "descheduler_descheduler_strategy_duration_seconds",
    }
    assert not {"DP001", "DP002", "DR001", "DM002"} & by_rule.keys()  # nothing refused or lost
    # SARIF: the same codes, each rule with its docs link; the from-release named
    sarif = json.loads(lint(tmp_path, *base, "-o", "sarif").stdout)
    run = sarif["runs"][0]
    assert run["properties"]["fromRelease"] == "v0.35.1"
    assert {r["ruleId"] for r in run["results"]} == {f["rule"] for f in doc["findings"]}
    # --select keeps the migration rules asked for, in text too
    text = lint(tmp_path, *base, "--select", "DP004,DM004")
    said = set(re.findall(r" (?:error|warning|note) (D[A-Z]\d{3}) ", text.stdout))
    assert said == {"DP004", "DM004"}, text.stdout


# (release tree, the chart it shipped, exit, the error findings): the trees whose descheduler
# and policy checker `make test` already builds (make test-releases; v0.33.0's canary test).
# v0.32.2 and master 7d2b28bf2 were run by hand (docs/lint.md): their checkers are minutes
# cold, which this test would add to the cold CI path for no new code path.
FROM_TREES = [
    ("v0.33.0", "chart-0.33.0", 1, {"rules[persistentvolumeclaims]"}),
    ("v0.35.0", "chart-0.35.0", 1, {"rules[persistentvolumeclaims]"}),
    ("v0.35.1", "chart-0.35.1", 0, set()),
]


@pytest.mark.parametrize(("tree", "chart", "code", "errors"), FROM_TREES, ids=lambda v: str(v))
def test_lint_from_each_release_tree_reads_it_as_its_own_release(
    tmp_path: Path, tree: str, chart: str, code: int, errors: set[str]
) -> None:
    """No @LABEL: the tree is read as its release from its own markers, with the chart it
    shipped; the PVC rule chart 0.36.0 adds is the one error (a wider ClusterRole) for
    charts without it, named as #1839's fix where v0.35.0 needs it."""
    pvc_values(tmp_path)
    argv = ["values.yaml", "--from", f"source:{release_file(tree)}"]
    res = lint(tmp_path, *argv, "--from-chart", str(release_file(chart)), "-o", "json")
    assert res.returncode == code, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["descheduler"], doc["from"]) == ("v0.36.0", tree)
    wrong = [f for f in doc["findings"] if f["severity"] == "error"]
    assert {f["path"].rsplit(" ", 1)[-1] for f in wrong} == errors, wrong
    assert all(f["rule"] == "DR001" for f in wrong)
    if tree == "v0.35.0":
        assert "it is the fix of descheduler#1839" in wrong[0]["message"]
