"""Dry-run fidelity on the embedded cluster: each built-in case run in dry run and for real.

Every difference must be explained by a proven hidden layer or by #1917's proof (the mirror
probe); the asserts read the pods' fates and the records, never the English. `desched
fidelity` itself runs once as a subprocess (the command's line, table and exit code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.descheduler.known_bugs import proves_1917
from pytest_desched.errors import ConfigError
from pytest_desched.fidelity.compare import BUG_1917
from pytest_desched.fidelity.engine import CHECK_ID, run_fidelity
from tests.e2e.test_cli_e2e import _desched

pytestmark = pytest.mark.desched_selftest


def _fidelity(session: Any, case: str) -> Any:
    from pytest_desched.fidelity.cases import BY_NAME

    c = BY_NAME[case]
    out = run_fidelity(session, c.experiment, c.variant, name=f"fidelity-{case}")
    assert out.outcome == "pass", f"{out.message}\n{out.summary()}"
    comp = out.comparison
    assert comp is not None and comp.ok
    for row in comp.differences:  # each explained, and #1917 only with the probe's proof
        assert row.explained_by, row
        if row.explained_by.startswith(BUG_1917):
            assert proves_1917(row.proof), row
    rec = out.dry.records[-1]  # the dry-run half's round record carries the comparison
    assert rec["fidelity"]["summary"] == comp.line() or len(out.dry.records) > 1
    real = out.real.records[-1]  # ... and so does the real half's, on disk too
    assert real["fidelity"]["half"] == "real" and rec["fidelity"]["half"] == "dry-run"
    assert real["fidelity"]["rows"] == rec["fidelity"]["rows"]
    assert real["fidelity"]["other"] == out.dry.label
    written = _round_file(session, out.real.label, real["round_name"])
    assert json.loads(written.read_text())["fidelity"]["summary"] == real["fidelity"]["summary"]
    assert "dry-run fidelity (real half): " in written.with_suffix(".txt").read_text()
    check = next(c for c in out.dry.checks if c.id == CHECK_ID)
    assert check.ok, check
    return out


def _round_file(session: Any, label: str, round_name: str) -> Path:
    """The round record's JSON as the evidence writer placed it."""
    base = session.evidence.path_for(label, round_name)
    return base.with_name(base.name + ".json")


def _reals(out: Any) -> list[str]:
    return sorted(r.real.shown() for r in out.comparison.rows if r.real)


def test_fidelity_positive(desched_session):
    """The runbook's positive experiment: dry run predicts the one real eviction (or #1917)."""
    out = _fidelity(desched_session, "positive")
    assert out.comparison.real_evictions == 1 and out.real.evictions == 1
    if not out.comparison.differences:
        assert out.comparison.predicted == 1


def test_fidelity_reruns_the_dry_half_on_a_lab_of_its_own_when_the_twin_falls_short(
    desched_session, monkeypatch
):
    """The fallback: when the twins' comparison does not hold (forced here; #1917 does it at
    random), the dry-run half runs again on its own lab, with dry run forced on the real
    half's release (the runbook policy names no namespace: no second release), and the
    verdict stands on it."""
    from pytest_desched.fidelity import engine

    monkeypatch.setattr(engine, "_conclude_twin", lambda *a: False)
    out = _fidelity(desched_session, "positive")
    assert out.dry.notes and "fell short of the real round" in out.dry.notes[0]
    real_ns = {r["namespace"] for r in out.real.records}
    dry_ns = {r["namespace"] for r in out.dry.records}
    assert real_ns and dry_ns and real_ns.isdisjoint(dry_ns), (real_ns, dry_ns)
    assert not any(n.endswith(engine.DRY_RELEASE_SUFFIX) for n in desched_session._lane_releases)
    assert out.dry.rounds and all(r.result.dry_run for r in out.dry.rounds)


def test_fidelity_pdb_at_zero_disruptions_is_the_429(desched_session):
    """descheduler#1805: dry run says evict, the real run gets 429 for every candidate."""
    out = _fidelity(desched_session, "pdb-zero")
    assert _reals(out) == ["refused(429)"] * 3
    assert out.comparison.real_evictions == 0
    layers = [r.explained_by or "" for r in out.comparison.differences]
    assert any(x.endswith("api-server(pdb-429)") for x in layers), layers
    assert out.comparison.dry_evictions >= 1 or any(x.startswith(BUG_1917) for x in layers)


def test_fidelity_topology_spread(desched_session):
    """RemovePodsViolatingTopologySpreadConstraint at v0.36.0: its dry run predicts the two
    real evictions once its mirror is complete; a Job cycle that starts on an incomplete one
    falls short, and only the mirror probe's proof (#1917) may explain that."""
    out = _fidelity(desched_session, "topology-spread")
    assert out.comparison.real_evictions == 2
    shortfall = out.comparison.real_evictions - out.comparison.predicted
    bugs = {r.explained_by for r in out.comparison.differences}
    assert (shortfall == 0) == (not bugs), bugs
    assert bugs <= {BUG_1917}, bugs


def test_the_mirror_probe_runs_in_the_form_this_provider_allows(desched_session, monkeypatch):
    """#1917's proof, forced on each twin's lab (on its own it runs only when the race was
    lost): its one-shot runs are the local binary (embedded) or the round's own Job again
    from the suspended CronJob (kind, existing), each a complete dry-run cycle (the twin's
    lab is settled, nothing changed it); every probe Job is gone with its pods, its log kept
    beside the round logs, and the CronJob still suspended."""
    from pytest_desched.capabilities import MIRROR_BINARY, MIRROR_JOBS
    from pytest_desched.descheduler.logparse import parse_log
    from pytest_desched.fidelity import engine
    from pytest_desched.fidelity.mirror_jobs import JOBS
    from pytest_desched.fidelity.mirror_probe import LOCAL

    probed: list[tuple[Any, str]] = []
    twin_round = engine.DryTwin.twin_round

    def always_probed(self: Any, name: str) -> Any:
        view = twin_round(self, name)
        i = len(self.views) - 1
        if i not in self.settled:
            self.settled[i] = engine._settled(self, None, max_runs=engine.TWIN_PROBE_RUNS)
        probed.append((view, self.settled[i][1]))
        return view

    monkeypatch.setattr(engine.DryTwin, "twin_round", always_probed)
    out = _fidelity(desched_session, "positive")
    form = desched_session.cluster.capabilities.mirror_probe
    assert form in (MIRROR_BINARY, MIRROR_JOBS)
    what = JOBS if form == MIRROR_JOBS else LOCAL
    assert probed, "no twin round ran"
    for _, how in probed:
        assert f"{engine.TWIN_PROBE_RUNS} one-shot dry run(s) {what} named" in how, how
    rel = desched_session.release
    assert rel.live_cronjob().spec.suspend is True
    if form == MIRROR_JOBS:
        c = desched_session.cluster
        jobs = [j.metadata.name for j in c.batch.list_namespaced_job(rel.namespace).items]
        pods = [p.metadata.name for p in c.core.list_namespaced_pod(rel.namespace).items]
        assert not [n for n in jobs + pods if "-probe" in n], (jobs, pods)
        logs = sorted((desched_session.config.run_dir / "round-logs").glob("*-probe*.log"))
        assert len(logs) >= engine.TWIN_PROBE_RUNS * len(probed), logs
        assert all(parse_log(x.read_text(), rel.descheduler_version).dry_run for x in logs)
    assert out.comparison is not None and out.comparison.real_evictions == 1


def test_fidelity_refuses_halves_of_different_scope(desched_session):
    """A policy naming one lab's namespace cannot run both halves: refused, nothing changed."""
    policy = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictTotal": 2,
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {"nodeFit": True}},
                    {
                        "name": "RemovePodsViolatingNodeAffinity",
                        "args": {
                            "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"],
                            "namespaces": {"include": ["fidelity-real"]},
                        },
                    },
                ],
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
            }
        ],
    }
    core = desched_session.cluster.core

    def namespaces() -> dict[str, str]:
        return {n.metadata.name: n.status.phase for n in core.list_namespace().items}

    before = namespaces()
    with pytest.raises(ConfigError, match="differs in scope"):
        run_fidelity(
            desched_session,
            "positive",
            policy=policy,
            namespaces=("fidelity-real", "fidelity-dry"),
        )
    after = namespaces()
    # Nothing created, nothing deleted. An earlier test's lab namespace may still be
    # Terminating and vanish meanwhile: that is its teardown, not this refusal.
    assert set(after) <= set(before), f"created: {sorted(set(after) - set(before))}"
    active = {n for n, phase in before.items() if phase == "Active"}
    assert active <= set(after), f"deleted: {sorted(active - set(after))}"


def test_desched_fidelity_command(desched_toolchain, desched_settings, tmp_path):
    """`desched fidelity`: the runbook's nodeFit and PDB negatives, the line, table, exit 0.
    On the embedded provider, as test_cli_e2e's `desched run` (with `auto`, a Docker engine
    that answers means kind); no DESCHED_* reaches the command (child_env), so the session's
    Kubernetes is passed as the option (under make e2e-kind, the suite's version). The
    fidelity paths on kind are the in-process tests above, on the session's cluster."""
    kube = ["--kubernetes", desched_settings.kubernetes] if desched_settings.kubernetes else []
    run = _desched(
        desched_toolchain.cache_dir,
        tmp_path,
        "fidelity",
        "--experiment",
        "nodefit",
        "--experiment",
        "pdb",
        "--artifacts",
        str(tmp_path / "art"),
        "--provider",
        "embedded",
        *kube,
    )
    assert run.code == 0, run
    lines = run.out.splitlines()
    heads = [ln for ln in lines if ln.startswith("fidelity-")]
    assert [h.split()[:2] for h in heads] == [
        ["fidelity-nodefit[pdb-lister-workaround]", "PASSED"],
        ["fidelity-pdb[runbook]", "PASSED"],
    ], run
    assert all(
        "differences, each explained" in h or "difference, each explained" in h for h in heads
    )
    assert "EXPLAINED BY" in run.out
    assert (tmp_path / "art" / "fidelity-summary.json").is_file()
    html = (tmp_path / "art" / "report.html").read_text()
    assert "dry-run predicted" in html
    # either half's section carries the verdict: 2 cases x (real, dry-run)
    assert html.count('data-k="fidelity-summary"') == 4, html.count('data-k="fidelity-summary"')
    bad = _desched(desched_toolchain.cache_dir, tmp_path, "fidelity", "--experiment", "nope")
    assert bad.code == 2 and "unknown fidelity experiment 'nope'" in bad.err, bad
    assert "Traceback" not in bad.err


def test_desched_fidelity_snapshot(desched_toolchain, tmp_path):
    """A replay snapshot restored twice (real, then dry run): #1805's 429 among the rows, every
    difference explained; a policy that reaches no pod of it is refused before any cluster."""
    from pytest_desched.replay.gen.incidents import pdb_drain

    snap = pdb_drain().snapshot.write(tmp_path / "pdb-drain.yaml")
    art = tmp_path / "snap"
    run = _desched(
        desched_toolchain.cache_dir, tmp_path, "fidelity", str(snap), "--artifacts", str(art)
    )
    assert run.code == 0, run
    data = json.loads((art / "fidelity.json").read_text())
    rows = data["comparison"]["rows"]
    assert any(r["real"] == "refused(429)" for r in rows), rows
    assert all(r["explained_by"] for r in rows if r["differs"]), rows
    for r in rows:  # #1917 only proven: one of its proof forms (the registry's list)
        if (r["explained_by"] or "").startswith(BUG_1917):
            assert proves_1917(r["proof"]), r
    print("mirror probe:", data["comparison"]["mirror_probe"])
    assert (art / "real" / "replay" / "replay.json").is_file()
    assert (art / "dry-run" / "replay" / "replay.json").is_file()
    policy = tmp_path / "elsewhere.yaml"
    policy.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n"
        "  pluginConfig:\n  - name: DefaultEvictor\n    args: {}\n"
        "  - name: RemovePodsViolatingNodeTaints\n    args:\n"
        "      namespaces: {include: [no-such-namespace]}\n"
        "  plugins:\n    deschedule: {enabled: [RemovePodsViolatingNodeTaints]}\n"
    )
    bad = _desched(
        desched_toolchain.cache_dir, tmp_path, "fidelity", str(snap), "--policy", str(policy)
    )
    assert bad.code == 2 and "no pod of the snapshot is in the policy's scope" in bad.err, bad
    assert "embedded cluster" not in bad.err  # refused before any cluster
