"""A run with one deliberately failing experiment: complete, redacted evidence and artifacts."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_desched.providers.base import choose_provider
from tests.e2e.inner_run import start_inner

pytestmark = pytest.mark.desched_selftest

INNER = """
import pytest

@pytest.mark.descheduler_e2e
def test_fails_on_purpose(desched_experiment):
    # The runbook policy on v0.36.0 evicts nothing; expecting an eviction fails (not xfail).
    desched_experiment("positive", variant="runbook")

@pytest.mark.descheduler_e2e
@pytest.mark.desched_experiment("pdb", variant="pdb-lister-workaround")
def test_pdb_marker_form(desched_experiment_result):
    assert desched_experiment_result.blocking_layer == "api-server"
"""

ROUND_KEYS = {
    "provider",
    "versions",
    "chart",
    "policy_digest",
    "policy_overrides",
    "job",
    "started_s",
    "ended_s",
    "decisions",
    "counts",
    "evictions",
    "caps",
    "failures",
    "blocking_layers",
    "pdb_before",
    "pdb_after",
    "pdb_min_disruptions_allowed_seen",
    "events",
    "events_by_reason",
    "pending_pods",
    "distribution_before",
    "distribution_after",
    "metrics",
    "verdict",
    "log_path",
}


@pytest.fixture(scope="module")
def inner_run(tmp_path_factory, desched_settings, desched_toolchain):
    d = tmp_path_factory.mktemp("inner")
    art = d / "artifacts"
    proc = start_inner(
        d,
        INNER,
        desched_toolchain.cache_dir,
        "-rA",
        f"--desched-artifacts={art}",
        "--desched-redact",
        f"--junitxml={d / 'junit.xml'}",
        f"--desched-provider={choose_provider(desched_settings.provider)}",  # the session's
    )
    out, _ = proc.communicate(timeout=600)
    proc.output = out  # type: ignore[attr-defined]
    return d, art, proc


def test_failing_experiment_fails_the_run_with_layer_in_summary(inner_run):
    _, _, proc = inner_run
    assert proc.returncode == 1, proc.output[-4000:]
    assert "1 failed, 1 passed" in proc.output
    lines = [ln for ln in proc.output.splitlines() if "layer=" in ln]
    assert any(
        ln.startswith("positive[runbook]") and "FAILED" in ln and "layer=evictor-filter" in ln
        for ln in lines
    ), lines
    assert any(
        ln.startswith("pdb[pdb-lister-workaround]") and "PASSED" in ln and "layer=api-server" in ln
        for ln in lines
    ), lines
    # failure sections attached to the report
    assert (
        "desched round" in proc.output
        and "desched events" in proc.output
        and "desched pods" in proc.output
    )


def test_every_round_has_a_complete_record(inner_run):
    _, art, _ = inner_run
    records = [json.loads(p.read_text()) for p in art.rglob("*.json")]
    rounds = [r for r in records if "round_name" in r]
    assert len(rounds) == 2
    for r in rounds:
        assert set(r) >= ROUND_KEYS, ROUND_KEYS - set(r)
        assert r["job"]["uid"] and r["policy_digest"]
        assert r["caps"] == {"node": 1, "namespace": 1, "total": 2}
        assert Path(r["log_path"]).is_file()
        m = r["metrics"]
        if m["available"]:  # a scrape that already counted the finished loop
            assert (
                m["loops_counted"] >= 1
                and m["pods_evicted_total_success"] == m["log_total_evicted"]
            )
        else:
            assert m["why"]
    pdb = next(r for r in rounds if r["round_name"].startswith("descheduler-negative-pdb"))
    assert any(f.get("status_code") == 429 for f in pdb["failures"])
    assert pdb["pdb_after"]["disruptionsAllowed"] == 0
    # Event delivery is its own figure (a one-shot run can lose events at exit, #1687): either
    # every refusal has its event, or the record names the proven known bug.
    ev = pdb["events_delivered"]
    assert ev["owed"] == 3
    got = len(set(pdb["events_by_reason"].get("EvictionFailed", [])))
    if "outliving" in ev:
        # The one-shot run lost some (#1687), so the long-running proof ran the binary again and
        # its refusals sent their own events before the record read them: it counts those.
        assert ev["delivered"] < ev["owed"] and ev["outliving"] <= got
    else:
        assert ev["delivered"] == got
    assert ev["delivered"] == 3 or "descheduler#1687" in pdb["known_bugs"]
    assert pdb["audit"]["available"] is True
    txt = list(art.rglob("*.txt"))
    assert any("failure-pods" in p.name for p in txt)
    assert any("failure-events" in p.name for p in txt)
    assert any("failure-round" in p.name for p in txt)


def test_redacted_evidence_has_no_node_names_or_namespaces(inner_run):
    d, art, proc = inner_run
    # The real names, from the raw (private, unredacted) round logs in the inner basetemp.
    raw = "".join(p.read_text() for p in (d / "bt").rglob("round-logs/*.log"))
    # Node names as each provider makes them: `ab12-worker-0` (embedded), `<cluster>-worker2`
    # (kind, whose node names carry the cluster's name).
    workers = sorted(set(re.findall(r'"node":\{"name":"([a-z0-9-]+-worker-?\d*)"\}', raw)))
    assert len(workers) >= 2, "no node names found in the raw logs"
    secrets = [*workers, "descheduler-lab", "desched-main-", "desched-kind-main-"]
    assert not any(s in proc.output for s in workers), "node names shown in the terminal"
    files = [p for p in art.rglob("*") if p.is_file()]
    assert files
    for p in files:
        text = p.read_text(errors="replace")
        for s in secrets:
            assert s not in text, f"{s} leaked into {p}"
            assert s not in str(p.relative_to(art)), f"{s} in file name {p}"
        assert "eyJ" not in text, f"token-like value in {p}"
    assert "node-1" in "".join(p.read_text() for p in files if p.suffix == ".json")


def test_junit_carries_key_figures(inner_run):
    d, _, _ = inner_run
    root = ET.parse(d / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props.get("desched.blocking_layer") == "api-server"
    assert props.get("desched.evictions") == "0"
    assert props.get("desched.job_uid")
