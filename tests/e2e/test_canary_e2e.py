"""Upgrade canaries on real clusters: v0.36.0 against the two shared upstream candidates.

Each canary brings up two embedded clusters (baseline and candidate) and runs the runbook's
experiments on both in parallel. What the candidates are (../shared/upstream/README.md):
master 7d2b28bf2 is v0.36.0 plus chart/RBAC/metrics changes and no fix for #1882; PR 1883
(5f6c6d7b0) is the proposed fix for #1882.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.upstream import tarball

pytestmark = pytest.mark.desched_selftest

Canary = Callable[..., Any]


@pytest.fixture
def source_tracks(desched_settings: Any) -> None:
    """The source: candidates' behaviour tracks need the embedded provider: kind and existing
    clusters run round pods from images, and a local build has none (refused before any
    cluster starts; tests/unit/tools/test_candidate.py). Under `make e2e-kind` they are skipped."""
    from pytest_desched.providers.base import choose_provider

    provider = choose_provider(desched_settings.provider)
    if provider != "embedded":
        pytest.skip(f"a source: candidate's rounds run on the embedded provider, not {provider}")


def provider_caps(settings: Any) -> Any:
    """The capabilities of the provider this session runs on (auto resolved)."""
    from pytest_desched.capabilities import capabilities_of
    from pytest_desched.providers.base import choose_provider

    caps = capabilities_of(choose_provider(settings.provider))
    assert caps is not None, settings.provider
    return caps


def metrics_gap_expect(settings: Any, tmp_path: Any) -> Any:
    """An explanations file for exactly `metrics-unproven` where the provider runs round pods
    from images (kind, existing): the metric probe runs the binary locally, so both tracks'
    families are unproven there and the canary fails unless that is explained
    (docs/canary-verdicts.md). None where the probe runs."""
    caps = provider_caps(settings)
    if caps.runs_local_binary:
        return None
    expect = tmp_path / "expect.yaml"
    expect.write_text(
        "changes:\n"
        "  - kind: metrics-unproven\n"
        f"    reason: '{caps.local_binary_gap}: the metric probe runs the binary locally'\n"
    )
    return expect


def _outcomes(rep: Any) -> dict[str, tuple[str, str]]:
    return {o["experiment"]: (o["baseline"], o["candidate"]) for o in rep.outcomes}


def _round(rep: Any, experiment: str) -> Any:
    (rd,) = [r for r in rep.rounds if r.experiment == experiment and r.index == 0]
    return rd


@pytest.mark.usefixtures("source_tracks")
def test_master_candidate_changes_rbac_not_behaviour(desched_canary: Canary) -> None:
    rep = desched_canary(f"source:{tarball('master')}", "tree")
    assert rep.ok, rep.verdict.reasons
    assert rep.baseline.error is None and rep.candidate.error is None
    assert rep.candidate.descheduler_version.endswith("g7d2b28bf2")
    # Same fates for every pod class in every round: master has no fix for #1882. The one
    # allowed difference is a replacement pod listed on one track only (a race, compare.py).
    changed = [
        (r.experiment, c.pods, c.kinds)
        for r in rep.rounds
        for c in r.classes
        if c.kinds != ["replacement-seen"]
    ]
    assert changed == []
    outcomes = _outcomes(rep)
    assert outcomes["positive-affinity-migration[runbook]"] == (
        "xfail",
        "xfail",
    )  # #1882 proven on both
    assert outcomes["positive-affinity-migration[pdb-lister-workaround]"] == ("pass", "pass")
    assert _round(rep, "positive-affinity-migration[runbook]").candidate.known_bugs == [
        "descheduler#1882"
    ]
    moved = _round(rep, "positive-affinity-migration[pdb-lister-workaround]")
    assert (moved.baseline.evictions, moved.candidate.evictions) == (1, 1)
    # Both binaries served the same families after a dry-run cycle (measured, not assumed).
    assert (
        rep.baseline.metric_names
        and "descheduler_loop_duration_seconds" in rep.baseline.metric_names
    )
    assert rep.candidate.metric_names == rep.baseline.metric_names
    # The static diff says what did change: the ClusterRole lost `delete` on pods.
    rbac = [d for d in rep.static.differences if d.area == "rbac"]
    assert [(d.change, d.path) for d in rbac] == [
        ("narrowed", "ClusterRole/descheduler rules[pods]")
    ]


@pytest.mark.usefixtures("source_tracks")
def test_pr1883_candidate_fixes_1882_and_says_so(desched_canary: Canary) -> None:
    rep = desched_canary(f"source:{tarball('pr1883')}", "tree")
    assert rep.ok, rep.verdict.reasons
    outcomes = _outcomes(rep)
    for exp in ("positive-affinity-migration", "negative-nodefit", "negative-pdb"):
        assert outcomes[f"{exp}[runbook]"] == ("xfail", "pass"), outcomes
        assert outcomes[f"{exp}[pdb-lister-workaround]"] == ("pass", "pass"), outcomes
    positive = _round(rep, "positive-affinity-migration[runbook]")
    assert positive.bugs_fixed == ["descheduler#1882"]
    assert (positive.baseline.evictions, positive.candidate.evictions) == (0, 1)
    assert positive.baseline.protected == {"PodsWithoutPDB": 3}
    pdb = _round(rep, "negative-pdb[runbook]")
    assert pdb.candidate.pdb_refusals >= 1 and pdb.candidate.evictions == 0
    judged = {(j.change.experiment, j.change.kind): j for j in rep.verdict.judged}
    assert (
        judged[("positive-affinity-migration[runbook]", "continue-evicting")].status == "fixed-bug"
    )
    assert judged[("positive-affinity-migration[runbook]", "bug-fixed")].by == "descheduler#1882"
    assert "the candidate fixes descheduler#1882" in rep.markdown()


def test_widened_candidate_fails_and_stale_explanation_is_reported(
    desched_canary: Canary, tmp_path: Any
) -> None:
    """The same version with the runbook's one-pod caps raised: more pods go, and it fails."""
    expect = tmp_path / "expect.yaml"
    expect.write_text(
        "changes:\n"
        "  - experiment: 'negative-pdb[*]'\n"
        "    kind: fewer-evictions\n"
        "    reason: 'we expect fewer evictions under PDBs'\n"
    )
    caps = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace")
    rep = desched_canary(
        "version:v0.36.0",
        None,
        expect=expect,
        experiments=["positive[pdb-lister-workaround]"],
        candidate_overrides=dict.fromkeys(caps, 3),
        static=False,
    )
    assert not rep.ok
    moved = _round(rep, "positive-affinity-migration[pdb-lister-workaround]")
    assert moved.baseline.evictions == 1 and moved.baseline.limited >= 1
    # The raised caps let more pods past the eviction limits: the candidate set grows.
    assert moved.candidate.candidates > moved.baseline.candidates
    assert moved.candidate.evictions >= 1
    # Whether a second pod goes depends on the first replacement's Ready before the next
    # eviction call (the PDB allows one disruption at a time): both triggers are the truth.
    triggers = {j.change.kind for j in rep.verdict.unexplained if j.trigger}
    assert "candidate-set-grew" in triggers, rep.verdict.reasons
    assert triggers <= {"candidate-set-grew", "continue-evicting"}, rep.verdict.reasons
    assert [e.reason for e in rep.verdict.stale] == ["we expect fewer evictions under PDBs"]
    assert any(r.startswith("rollback trigger candidate-set-grew") for r in rep.verdict.reasons)
    assert any("stale explanation" in r for r in rep.verdict.reasons)


def test_static_only_canary_starts_no_cluster(
    desched_canary: Canary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI pre-check: charts and policies of both versions, and nothing started."""
    from pytest_desched.providers.embedded.cluster import EmbeddedProvider

    def no_cluster(self: Any) -> None:
        raise AssertionError("a static-only canary started a cluster")

    monkeypatch.setattr(EmbeddedProvider, "start", no_cluster)
    rep = desched_canary(f"source:{tarball('master')}", "tree", behaviour=False)
    assert rep.ok, rep.verdict.reasons
    assert rep.rounds == [] and rep.outcomes == []
    assert rep.baseline.chart["source"] == "module"
    assert rep.candidate.descheduler_version.endswith("g7d2b28bf2")
    assert [(d.area, d.change) for d in rep.static.differences if d.severity != "info"] == [
        ("rbac", "narrowed")
    ]
    assert "static-only canary" in rep.markdown()


def test_aa_pinned_version_against_itself_has_no_trigger_and_no_unexplained_change(
    desched_canary: Canary, desched_settings: Any, tmp_path: Any
) -> None:
    """A/A: v0.36.0 as the candidate against itself. Any trigger or unexplained change here is
    noise the canary would blame on a real upgrade (bench/aa_canary.py runs a series of these).

    A provider that runs round pods from images (kind, existing) cannot run the binary's
    metric probe: both tracks' served families are unproven, which the canary fails on unless
    explained (docs/canary-verdicts.md). The test explains exactly that kind, and checks it
    was the provider's gap on both tracks and nothing else needed explaining."""
    caps = provider_caps(desched_settings)
    expect = metrics_gap_expect(desched_settings, tmp_path)
    rep = desched_canary("version:v0.36.0", None, **({"expect": expect} if expect else {}))
    assert rep.baseline.error is None and rep.candidate.error is None, rep.verdict.reasons
    assert not rep.no_verdict, rep.no_verdict
    triggers = [j for j in rep.verdict.judged if j.trigger]
    assert triggers == [], [j.to_dict() for j in triggers]
    assert rep.verdict.unexplained == [], rep.verdict.reasons
    assert rep.ok, rep.verdict.reasons
    # Something was compared: every runbook experiment has a round on both tracks.
    compared = {r.experiment for r in rep.rounds if r.baseline and r.candidate}
    assert len(compared) == 6, compared
    if caps.runs_local_binary:
        assert rep.candidate.metric_names == rep.baseline.metric_names
        assert rep.baseline.metric_names
        return
    assert (rep.baseline.metric_names, rep.candidate.metric_names) == (None, None)
    assert rep.baseline.metrics_why == rep.candidate.metrics_why == caps.local_binary_gap
    # An intermittent known bug a round showed (#1687: a one-shot round's queued events lost
    # at exit, seen on kind) is informative: neither a trigger nor a change to explain.
    informative = [j for j in rep.verdict.judged if j.status == "informative"]
    assert all(j.change.kind == "bug-intermittent" for j in informative), [
        j.to_dict() for j in informative
    ]
    judged = [j for j in rep.verdict.judged if j.status != "informative"]
    explained = sorted((j.change.kind, j.change.subject, j.status) for j in judged)
    assert explained == [
        ("metrics-unproven", "baseline", "explained"),
        ("metrics-unproven", "candidate", "explained"),
    ], [j.to_dict() for j in rep.verdict.judged]
