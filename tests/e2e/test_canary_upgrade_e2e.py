"""The upgrade users are about to make, canaried: their release as the baseline, v0.36.0 as
the candidate, each track with the chart its release shipped and the user's values.

v0.35.1 is built from the Go module (the proxy serves it; cached by version in
~/.cache/pytest-desched like every build), its chart is the 0.35.1 package from
../shared/upstream (the tag's own charts/ would be another version). The values file is one
a user wrote for chart 0.35.1.

v0.33.0 is built from its release tree in ../shared/upstream (cached by commit), its chart is
the 0.33.0 package; its DefaultEvictor has no podProtections, so its track runs the runbook's
protections as its own booleans (descheduler/policy/release_fields.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.descheduler.known_bugs import BY_ID
from tests.upstream import pvc_values, release_file

pytestmark = pytest.mark.desched_selftest

Canary = Callable[..., Any]

OLD_VALUES = """\
# written for chart 0.35.1: our labels, smaller requests
commonLabels:
  team: platform
resources:
  requests: {cpu: 100m, memory: 64Mi}
  limits: {cpu: 200m, memory: 128Mi}
"""


@pytest.fixture
def embedded_tracks(desched_settings: Any) -> None:
    """A version built here has no image a kind node could pull: its rounds run on the
    embedded provider's stand-in kubelet (kind is refused before any cluster)."""
    from pytest_desched.providers.base import choose_provider

    provider = choose_provider(desched_settings.provider)
    if provider != "embedded":
        pytest.skip(
            f"a locally built baseline's rounds run on the embedded provider, not {provider}"
        )


@pytest.mark.usefixtures("embedded_tracks")
def test_canary_from_v0351_with_its_chart_and_old_values(
    desched_canary: Canary, tmp_path: Path
) -> None:
    chart = release_file("chart-0.35.1")
    values = tmp_path / "values-0.35.yaml"
    values.write_text(OLD_VALUES)
    rep = desched_canary(
        "pinned",
        None,
        baseline="version:v0.35.1",
        baseline_chart=str(chart),
        values=[values],
    )
    b, c = rep.baseline, rep.candidate
    assert b.error is None and c.error is None, rep.verdict.reasons
    # joined: pytest cuts a list in an assert message to its head and tail (CI read the
    # candidate's tail as the baseline's reason); a str message is shown whole
    assert not rep.no_verdict, "\n".join(rep.no_verdict)
    # Each track ran its own release and chart, and says which.
    assert (b.descheduler_version, c.descheduler_version) == ("v0.35.1", "v0.36.0")
    assert (b.chart["version"], b.chart["app_version"]) == ("0.35.1", "0.35.1")
    assert b.chart["source"] == "candidate-tgz" and b.chart["origin"] == str(chart)
    assert c.chart["version"] == "0.36.0"
    assert b.candidate["kind"] == "version" and c.candidate == {}  # the candidate is the pin
    # The skew each release's own README gives against the clusters' v1.36.3.
    assert (b.skew["compiled_for"], b.skew["minors"]) == ("v1.35", 1), b.skew
    md = rep.markdown()
    assert "0.35.1 (appVersion 0.35.1, candidate-tgz" in md and "compiled for v1.35" in md
    # v0.35.1 has #1882 too (the registry says so since this test measured it): the runbook
    # variants xfail on both tracks, and no trigger says the bug is new.
    outcomes = {o["experiment"]: (o["baseline"], o["candidate"]) for o in rep.outcomes}
    assert outcomes["positive-affinity-migration[runbook]"] == ("xfail", "xfail"), outcomes
    new_bugs = [j.change.subject for j in rep.verdict.judged if j.change.kind == "bug-new"]
    assert "descheduler#1882" not in new_bugs, rep.verdict.reasons
    # Every round compared on both tracks, and every change explained or a named trigger.
    compared = {r.experiment for r in rep.rounds if r.baseline and r.candidate}
    assert len(compared) == 6, compared
    loose = [j.to_dict() for j in rep.verdict.judged if j.status == "unexplained" and not j.trigger]
    assert loose == [], rep.verdict.reasons
    assert all(j.change.kind for j in rep.verdict.judged if j.trigger)


# Measured by the test below: v0.33.0 has no #1882 (its runbook rounds evict through
# ignorePodsWithoutPDB), v0.36.0 has it, so the runbook variants go pass -> xfail and the
# workaround variants pass on both.
EXPECTED_033_OUTCOMES = {
    "positive-affinity-migration[runbook]": ("pass", "xfail"),
    "positive-affinity-migration[pdb-lister-workaround]": ("pass", "pass"),
    "negative-nodefit[runbook]": ("pass", "xfail"),
    "negative-nodefit[pdb-lister-workaround]": ("pass", "pass"),
    "negative-pdb[runbook]": ("pass", "xfail"),
    "negative-pdb[pdb-lister-workaround]": ("pass", "pass"),
}

OLD_VALUES_033 = """\
# written for chart 0.33.0
commonLabels:
  team: platform
cmdOptions:
  v: 3
"""


EXPLAIN_033 = """\
changes:
  - experiment: static
    kind: static
    path: "rbac:ClusterRole/descheduler rules[persistentvolumeclaims]"
    reason: "chart 0.34+ reads PVCs for the PodsWithPVC protection (podProtections)"
    link: https://github.com/kubernetes-sigs/descheduler/tree/master/charts/descheduler
  - experiment: static
    kind: static
    path: "policy-translation:baseline:protections[PodsWithResourceClaims]"
    reason: "v0.33.0 has no PodsWithResourceClaims protection (added with podProtections in
      v0.34); we run no pod with a ResourceClaim, so the baseline runs without it"
    link: https://github.com/kubernetes-sigs/descheduler/releases/tag/v0.34.0
  - experiment: "*[runbook]"
    kind: fate-changed
    reason: "descheduler#1882 is in v0.36.0, not v0.33.0: PodsWithoutPDB keeps every pod
      before nodeFit or the PDB's 429 can stop it (bug-new is the trigger)"
    link: https://github.com/kubernetes-sigs/descheduler/issues/1882
  - experiment: "*[runbook]"
    kind: outcome-changed
    reason: "descheduler#1882: the runbook variants xfail on v0.36.0 and pass on v0.33.0"
    link: https://github.com/kubernetes-sigs/descheduler/issues/1882
"""


@pytest.mark.usefixtures("embedded_tracks")
def test_canary_from_v0330_source_tree_reads_the_policy_in_its_own_fields(
    desched_canary: Canary, tmp_path: Path
) -> None:
    """v0.33.0 from its release tree (built offline with -mod=vendor, its policy checker with
    the profile_noctx tag), chart 0.33.0 as shipped (the tag's own charts/ says 0.32.0, so
    `tree` would be refused without a pin), the candidate the pinned v0.36.0.

    v0.33.0's DefaultEvictor has no podProtections (its own checker says so): the baseline
    runs the runbook's protections as its booleans, each change a recorded override, and the
    one it cannot express (PodsWithResourceClaims) is run without only because the
    explanation file accepts it."""
    tree, chart = release_file("v0.33.0"), release_file("chart-0.33.0")
    values, expect = tmp_path / "values-0.33.yaml", tmp_path / "expect.yaml"
    values.write_text(OLD_VALUES_033)
    expect.write_text(EXPLAIN_033)
    rep = desched_canary(
        "pinned",
        None,
        baseline=f"source:{tree}@v0.33.0",
        baseline_chart=str(chart),
        values=[values],
        expect=expect,
    )
    b, c = rep.baseline, rep.candidate
    assert b.error is None and c.error is None, rep.verdict.reasons
    # joined: pytest cuts a list in an assert message to its head and tail (CI read the
    # candidate's tail as the baseline's reason); a str message is shown whole
    assert not rep.no_verdict, "\n".join(rep.no_verdict)
    assert (b.descheduler_version, c.descheduler_version) == ("v0.33.0", "v0.36.0")
    assert b.chart["version"] == "0.33.0" and c.chart["version"] == "0.36.0"
    assert (b.skew["compiled_for"], b.skew["minors"]) == ("v1.33", 3), b.skew
    # -- static: the v0.34 metric renames, the chart's default policy, the policy reading
    found = {d.path: d for d in rep.static.differences}
    renamed = {p: d.message for p, d in found.items() if d.message.startswith("DM001")}
    assert renamed.keys() == {
        "descheduler_pods_evicted",
        "descheduler_descheduler_loop_duration_seconds",
        "descheduler_descheduler_strategy_duration_seconds",
    }, rep.static.markdown()
    assert (
        "successor (same help text): descheduler_pods_evicted_total"
        in (renamed["descheduler_pods_evicted"])
    )
    evictor = "values.deschedulerPolicy.profiles[default].pluginConfig[DefaultEvictor].args."
    assert found[evictor + "evictLocalStoragePods"].change == "removed"
    # chart 0.33's ignorePvcPods/evictLocalStoragePods and chart 0.36's podProtections leave the
    # same protections active: a change to review, never a rollback (static/protections.py),
    # so the explanation file needs no entry for it (one would be reported stale)
    assert found[evictor + "podProtections"].severity == "review"
    assert not [p for p, d in found.items() if p.startswith(evictor) and d.severity == "rollback"]
    reading = {p for p, d in found.items() if d.area == "policy-translation"}
    at = "baseline:runbook:profiles[0].pluginConfig[DefaultEvictor].args."
    assert {at + "ignorePvcPods", at + "ignorePodsWithoutPDB", at + "podProtections"} <= reading
    assert "baseline:protections[PodsWithResourceClaims]" in reading
    assert not any(p.startswith("candidate:") for p in reading)  # v0.36.0 reads it as written
    # -- each baseline round ran the translated policy, said in its evidence
    runbook = b.by_label()["positive-affinity-migration[runbook]"]
    paths = {o["path"].rsplit(".", 1)[-1]: o for o in runbook.overrides}
    assert paths["ignorePodsWithoutPDB"]["new"] is True
    assert "v0.33.0 has no podProtections" in paths["podProtections"]["why"]
    assert not any("podProtections" in o["path"] for o in c.by_label()[runbook.label].overrides)
    md = rep.markdown()
    assert "policy-translation" in md and "v0.33.0 has no podProtections" in md
    # -- which runbook experiments are expected failures on each track, and why
    outcomes = {o["experiment"]: (o["baseline"], o["candidate"]) for o in rep.outcomes}
    bugs = {
        (t.name, r.label): r.classification.get("bug")
        for t in (b, c)
        for r in t.results
        if r.outcome == "xfail"
    }
    assert outcomes == EXPECTED_033_OUTCOMES, outcomes
    assert set(bugs) == {("candidate", k) for k, (_, cand) in outcomes.items() if cand == "xfail"}
    assert set(bugs.values()) == {"descheduler#1882"}, bugs
    # the registry: #1882 is not at v0.33.0 (its rounds start the PDB reflector and evict),
    # #1917 neither (not a dry-run canary, and v0.33.0 counts real nodes before its mirror)
    assert not BY_ID["descheduler#1882"].applies_to("v0.33.0")
    assert not BY_ID["descheduler#1917"].applies_to("v0.33.0")
    assert not any(
        r.known_bugs.keys() & {"descheduler#1882", "descheduler#1917"} for r in b.results
    )
    # -- every change explained or a named trigger: the upgrade brings #1882, and the canary
    # says so with the runbook's rollback triggers (the workaround variants compare clean)
    loose = [j.to_dict() for j in rep.verdict.judged if j.status == "unexplained" and not j.trigger]
    assert loose == [], rep.verdict.reasons
    triggers = {(j.change.kind, j.change.experiment) for j in rep.verdict.unexplained}
    as_written = {k for k in outcomes if k.endswith("[runbook]")}
    assert {e for k, e in triggers if k == "bug-new"} == as_written, rep.verdict.reasons
    assert {k for k, _ in triggers} <= {"bug-new", "candidate-set-grew"}, rep.verdict.reasons
    assert all(e in as_written for _, e in triggers)
    assert not rep.ok and not rep.verdict.stale


def test_a_baseline_that_cannot_express_a_protection_is_refused_before_any_cluster(
    desched_canary: Canary, tmp_path: Path
) -> None:
    """Without the explanation that accepts it, v0.33.0 would silently run without the
    runbook's PodsWithResourceClaims: the canary refuses, naming it (the CLI's exit 2)."""
    tree, chart = release_file("v0.33.0"), release_file("chart-0.33.0")
    with pytest.raises(pytest.UsageError, match="PodsWithResourceClaims"):
        desched_canary(
            "pinned",
            None,
            baseline=f"source:{tree}@v0.33.0",
            baseline_chart=str(chart),
            behaviour=False,
        )


def test_canary_v0350_to_v0351_names_1839_as_a_trigger(
    desched_canary: Canary, tmp_path: Path
) -> None:
    """Both releases from their own trees with no @LABEL (read from their markers), each with
    the chart it shipped, a policy that protects PVC pods; static only (the baseline's chart
    0.35.0 cannot list PVCs: its descheduler would wait at start, #1839). The candidate's
    ClusterRole widens to persistentvolumeclaims: a rollback trigger unless explained, named
    as #1839's fix; explained by its link, the canary passes."""
    tree0, tree1 = release_file("v0.35.0"), release_file("v0.35.1")
    chart0, chart1 = release_file("chart-0.35.0"), release_file("chart-0.35.1")
    values = pvc_values(tmp_path, "values-0.35.yaml")
    rep = desched_canary(
        f"source:{tree1}",
        str(chart1),
        baseline=f"source:{tree0}",
        baseline_chart=str(chart0),
        values=[values],
        behaviour=False,
    )
    b, c = rep.baseline, rep.candidate
    assert (b.descheduler_version, c.descheduler_version) == ("v0.35.0", "v0.35.1")
    assert b.chart["version"] == "0.35.0" and c.chart["version"] == "0.35.1"
    widened = [
        d
        for d in rep.static.differences
        if d.rule == "DR001" and "persistentvolumeclaims" in d.path
    ]
    assert len(widened) == 1, rep.static.markdown()
    assert widened[0].severity == "rollback"
    assert "it is the fix of descheduler#1839" in widened[0].message
    assert "PodsWithPVC" in widened[0].message
    assert not rep.ok  # a trigger, until explained
    expect = tmp_path / "expect.yaml"
    expect.write_text(
        "changes:\n"
        "  - kind: static\n"
        f'    path: "rbac:{widened[0].path}"\n'
        "    reason: chart 0.35.1 grants the PVC list v0.35.x needs (descheduler#1839)\n"
        "    link: https://github.com/kubernetes-sigs/descheduler/issues/1839\n"
    )
    again = desched_canary(
        f"source:{tree1}",
        str(chart1),
        baseline=f"source:{tree0}",
        baseline_chart=str(chart0),
        values=[values],
        expect=expect,
        behaviour=False,
    )
    pvc = [j for j in again.verdict.judged if "persistentvolumeclaims" in j.change.detail]
    assert pvc and all(j.status == "explained" for j in pvc), again.verdict.reasons


# The experiment the behaviour canary of v0.35.0 runs: one round, no eviction on either track
# (the #1882 workaround keeps v0.35.1's PodsWithoutPDB out of the way); the runbook's policy,
# PodsWithPVC among its protections. ROUND_TIMEOUT_1839: how long the baseline's hung round
# runs before it is stopped (the default 120 s proves nothing more; the candidate's round
# took 5.3 s from its Job's creation to its end at load 90-145, 2026-12-07: well under it).
EXPERIMENT_1839 = "nodefit[pdb-lister-workaround]"  # its results' label: LABEL_1839
LABEL_1839 = "negative-nodefit[pdb-lister-workaround]"
ROUND_TIMEOUT_1839 = 20.0


@pytest.mark.usefixtures("embedded_tracks")
def test_canary_v0350_to_v0351_runs_and_names_1839(desched_canary: Canary) -> None:
    """v0.35.0 -> v0.35.1, each from its own tree with the chart it shipped, on the embedded
    cluster, the runbook's policy (PodsWithPVC protected). The baseline's descheduler waits
    for a PersistentVolumeClaim informer chart 0.35.0's ClusterRole cannot list (#1839): its
    round is stopped at the timeout (Job deleted, process ended) and read: an expected
    failure on #1839, deciding layer rbac, the forbidden list in its own log. The candidate
    completes its cycle; the canary names #1839 three ways: the static trigger (chart 0.35.1
    widens the ClusterRole: #1839's fix), the baseline's NO VERDICT reason and a bug-fixed
    change."""
    tree0, tree1 = release_file("v0.35.0"), release_file("v0.35.1")
    chart0, chart1 = release_file("chart-0.35.0"), release_file("chart-0.35.1")
    rep = desched_canary(
        f"source:{tree1}",
        str(chart1),
        baseline=f"source:{tree0}",
        baseline_chart=str(chart0),
        experiments=[EXPERIMENT_1839],
        round_timeout=ROUND_TIMEOUT_1839,
    )
    b, c = rep.baseline, rep.candidate
    assert b.error is None and c.error is None, (b.error, c.error)
    assert (b.descheduler_version, c.descheduler_version) == ("v0.35.0", "v0.35.1")
    assert (b.chart["version"], c.chart["version"]) == ("0.35.0", "0.35.1")
    # -- the baseline: stopped at its timeout, read, explained by #1839 at the RBAC layer
    base = b.by_label()[LABEL_1839]
    assert base.outcome == "xfail", base.message
    assert base.classification["bug"] == "descheduler#1839", base.classification
    assert base.blocking_layer == "rbac" and base.verdict == "stopped-by:rbac"
    assert [ch.id for ch in base.failed] == ["round-finished"], base.message
    assert "persistentvolumeclaims is forbidden" in base.signatures_seen["descheduler#1839"]
    (rnd,) = base.rounds
    assert (
        rnd.timed_out is not None and f"timed out after {ROUND_TIMEOUT_1839:.0f}s" in rnd.timed_out
    ), rnd.timed_out
    assert rnd.duration_s < ROUND_TIMEOUT_1839 + 60, rnd.duration_s  # stopped, not left running
    # its process ended when its pod was deleted (a run is read only after its process exits)
    (run,) = rnd.pod_runs
    assert any(n.startswith("stopped: its pod was deleted") for n in run.notes), run.notes
    # v0.35.0 shuts down cleanly on SIGTERM (exit 0); 137 if it had to be killed
    assert run.exit_code in (0, 128 + 15, 128 + 9), run.exit_code
    assert not rnd.succeeded  # its Job was deleted, never Complete
    assert "persistentvolumeclaims is forbidden" in run.log
    assert '"msg":"Evicted pod"' not in run.log and "Number of evictions" not in run.log
    (record,) = base.records
    assert record["job"]["timed_out"] == rnd.timed_out
    assert record["deciding_layer"] == "rbac", record["deciding_layer"]
    # -- the candidate: chart 0.35.1 grants the list; its cycle completes
    cand = c.by_label()[LABEL_1839]
    assert cand.outcome == "pass", cand.message
    assert "descheduler#1839" not in cand.signatures_seen
    assert all(r.timed_out is None and r.succeeded for r in cand.rounds)
    # -- the canary names #1839: static trigger, the baseline's no-verdict reason, bug-fixed
    widened = [
        d
        for d in rep.static.differences
        if d.rule == "DR001" and "persistentvolumeclaims" in d.path
    ]
    assert len(widened) == 1 and widened[0].severity == "rollback", rep.static.markdown()
    assert "it is the fix of descheduler#1839" in widened[0].message
    triggers = [j for j in rep.verdict.unexplained if "persistentvolumeclaims" in j.change.subject]
    assert triggers, rep.verdict.reasons
    (why,) = rep.no_verdict
    assert why.startswith(LABEL_1839) and "descheduler#1839" in why, why
    assert "deciding layer rbac" in why, why
    fixed = [j.change for j in rep.verdict.judged if j.change.kind == "bug-fixed"]
    assert [f.subject for f in fixed] == ["descheduler#1839"], rep.verdict.reasons
    assert not rep.ok
