"""A cluster upgrade canaried: changes the Kubernetes version explains are the control plane's.

The readings are parsed from the binaries' own output forms (kube-apiserver --help lines as
v1.36.3 and v1.37.2 print them, a written KubeSchedulerConfiguration); the attribution is
checked on the canary's own diff, judge and report, with the tracks' Kubernetes the same
(nothing attributed: the verdict fails) and different (named, with both versions).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pytest_desched.canary.compare import PodClassDiff
from pytest_desched.canary.control_plane import (
    KubeDifference,
    admission_defaults,
    attribute,
    attribute_outcome,
    differences,
    flatten,
    gate_defaults,
    scheduler_defaults,
)
from pytest_desched.canary.engine import compare_tracks, control_plane_attribution
from pytest_desched.canary.report import CanaryReport
from pytest_desched.canary.verdict import judge
from pytest_desched.experiments import ExperimentResult
from tests.unit.canary.test_canary_holes import dec, rec, track

V36, V37 = "v1.36.3", "v1.37.2"
HELP_36 = """\
      --enable-admission-plugins strings             admission plugins that should be enabled in addition to default enabled ones (NamespaceLifecycle, LimitRanger, ServiceAccount, PodGroupWorkloadExists, JobValidation, ResourceQuota). Comma-delimited list of admission plugins: AlwaysAdmit, AlwaysDeny.
      --feature-gates colonSeparatedMultimapStringString
                                                           kube:AllowUnsafeMalformedObjectDeletion=true|false (ALPHA - default=false)
                                                           kube:ClusterTrustBundle=true|false (BETA - default=false)
"""
HELP_37 = """\
      --enable-admission-plugins strings             admission plugins that should be enabled in addition to default enabled ones (NamespaceLifecycle, LimitRanger, ServiceAccount, ResourceQuota). Comma-delimited list of admission plugins: AlwaysAdmit, AlwaysDeny.
      --feature-gates colonSeparatedMultimapStringString
                                                           kube:AllowUnsafeMalformedObjectDeletion=true|false (BETA - default=true)
"""
SCHED_36 = """\
apiVersion: kubescheduler.config.k8s.io/v1
leaderElection: {leaderElect: true}
percentageOfNodesToScore: 0
profiles:
- plugins:
    score:
      enabled:
      - {name: NodeUnschedulable, weight: 0}
      - {name: TaintToleration, weight: 3}
  schedulerName: default-scheduler
"""
SCHED_37 = """\
apiVersion: kubescheduler.config.k8s.io/v1
leaderElection: {leaderElect: false}
percentageOfNodesToScore: 0
profiles:
- plugins:
    podGroupPostFilter: {}
    score:
      enabled:
      - {name: TaintToleration, weight: 3}
      - {name: NodeUnschedulable, weight: 0}
  schedulerName: default-scheduler
"""


def profile(kube: str, help_text: str, sched: str, apis: list[str]) -> dict[str, Any]:
    return {
        "kubernetes": kube,
        "admission": admission_defaults(help_text),
        "gates": gate_defaults(help_text),
        "scheduler": scheduler_defaults(sched),
        "apis": apis,
    }


APIS = ["v1", "policy/v1", "events.k8s.io/v1", "apps/v1"]
P36 = profile(V36, HELP_36, SCHED_36, [*APIS, "resource.k8s.io/v1beta1"])
P37 = profile(V37, HELP_37, SCHED_37, APIS)


def test_the_binaries_help_and_written_config_are_read() -> None:
    assert admission_defaults(HELP_36) == [
        "NamespaceLifecycle",
        "LimitRanger",
        "ServiceAccount",
        "PodGroupWorkloadExists",
        "JobValidation",
        "ResourceQuota",
    ]
    assert gate_defaults(HELP_36) == {
        "AllowUnsafeMalformedObjectDeletion": "ALPHA false",
        "ClusterTrustBundle": "BETA false",
    }
    assert admission_defaults("no such line") == [] and gate_defaults("") == {}


def test_a_reordered_plugin_list_is_no_difference_an_added_stanza_is() -> None:
    flat = flatten({"score": [{"name": "A", "weight": 1}, {"name": "B", "weight": 0}]})
    assert flat == flatten({"score": [{"name": "B", "weight": 0}, {"name": "A", "weight": 1}]})
    assert flat == {"score[A].weight": "1", "score[B].weight": "0"}
    # leader election decides no placement: not compared
    sched = [d for d in differences(P36, P37) if d.area == "scheduler"]
    assert sched == [
        KubeDifference("scheduler", "profiles[0].plugins.podGroupPostFilter", "absent", "{}")
    ]


def test_every_area_that_differs_is_listed_and_only_the_releases_api_groups() -> None:
    got = {(d.area, d.subject, d.baseline, d.candidate) for d in differences(P36, P37)}
    assert ("admission", "JobValidation", "enabled", "absent") in got
    assert ("admission", "PodGroupWorkloadExists", "enabled", "absent") in got
    assert ("feature-gate", "ClusterTrustBundle", "BETA false", "absent") in got
    assert ("feature-gate", "AllowUnsafeMalformedObjectDeletion", "ALPHA false", "BETA true") in got
    # resource.k8s.io is not a group the release's ClusterRole names: no API difference
    assert not [g for g in got if g[0] == "api"]
    p37 = {**P37, "apis": ["v1", "policy/v1beta1", "apps/v1"]}
    api = {(d.subject, d.baseline, d.candidate) for d in differences(P36, p37) if d.area == "api"}
    assert api == {
        ("policy/v1", "enabled", "absent"),
        ("policy/v1beta1", "absent", "enabled"),
        ("events.k8s.io/v1", "enabled", "absent"),
    }
    # an area one track could not read is no difference
    assert not [d for d in differences({**P36, "scheduler": {}}, P37) if d.area == "scheduler"]
    assert differences(P36, P36) == []


def diff(pods: str, b: dict[str, int], c: dict[str, int], kind: str) -> PodClassDiff:
    return PodClassDiff(pods, b, c, [kind])


SCHED = [KubeDifference("scheduler", "profiles[0].plugins.podGroupPostFilter", "absent", "{}")]
ADM = [KubeDifference("admission", "JobValidation", "enabled", "absent")]
API = [KubeDifference("api", "policy/v1", "enabled", "absent")]


def test_a_replacements_placement_is_the_schedulers_when_its_defaults_differ() -> None:
    moved = diff(
        "spread-demo@worker-2 (created in round)", {}, {"evicted/api": 1}, "candidate-set-grew"
    )
    why = attribute(moved, SCHED, (V36, V37))
    assert why is not None and why.startswith(f"Kubernetes {V36} -> {V37}: the scheduler")
    assert "podGroupPostFilter" in why
    assert attribute(moved, ADM + API, (V36, V37)) is None  # nothing the scheduler decides
    # The pods that existed before the round are the descheduler's to pick, whatever differs.
    kept = diff(
        "spread-demo@worker-1", {"evicted/api": 1}, {"limited/limits": 1}, "fewer-evictions"
    )
    assert attribute(kept, SCHED + ADM + API, (V36, V37)) is None


def test_a_refusals_code_is_admissions_or_the_served_apis() -> None:
    forbidden = diff(
        "spread-demo@worker-1", {"refused(429)/api": 1}, {"refused(403)/api": 1}, "fate-changed"
    )
    assert "admission differs" in str(attribute(forbidden, ADM, (V36, V37)))
    assert attribute(forbidden, SCHED + API, (V36, V37)) is None
    gone = diff(
        "spread-demo@worker-1", {"refused(429)/api": 1}, {"error(404)/api": 1}, "fate-changed"
    )
    assert "served differently" in str(attribute(gone, API, (V36, V37)))
    assert attribute(gone, ADM, (V36, V37)) is None
    same = diff("spread-demo@worker-1", {"refused(429)/api": 2}, {"refused(429)/api": 1}, "x")
    assert attribute(same, SCHED + ADM + API, (V36, V37)) is None


def tracks(b_kube: str, c_kube: str) -> tuple[Any, Any]:
    """The candidate's cluster placed the round's replacement where its descheduler evicted
    it again (a trigger: the candidate set grew); the baseline's replacement was never listed."""

    def res(*records: dict) -> ExperimentResult:
        return ExperimentResult(
            "positive-affinity-migration", "runbook", "pass", records=[*records]
        )

    timeline_b = [{"what": "replacement-scheduled", "pod": "spread-demo-7d4f9c8b6-r1aaa"}]
    timeline_c = [{"what": "replacement-scheduled", "pod": "spread-demo-7d4f9c8b6-r2bbb"}]
    b = rec([dec("spread-demo-7d4f9c8b6-aaaaa", "w1", "evicted", "api")], timeline=timeline_b)
    c = rec(
        [
            dec("spread-demo-7d4f9c8b6-aaaaa", "w1", "evicted", "api"),
            dec("spread-demo-7d4f9c8b6-r2bbb", "w2", "evicted", "api"),
        ],
        timeline=timeline_c,
    )
    bt, ct = track("baseline", res(b)), track("candidate", res(c))
    bt.control_plane = {**P36, "kubernetes": b_kube}
    ct.control_plane = {**P37, "kubernetes": c_kube}
    return bt, ct


def canary(b_kube: str, c_kube: str) -> CanaryReport:
    b, c = tracks(b_kube, c_kube)
    rounds, rows, changes = compare_tracks(b, c)
    diffs, gaps, attributed = control_plane_attribution(b, c, rounds)
    rep = CanaryReport(b, c, rounds, judge(changes, [], attributed), None, rows)
    rep.control_plane, rep.control_plane_gaps = diffs, gaps
    return rep


def test_the_same_kubernetes_on_both_tracks_attributes_nothing() -> None:
    rep = canary(V36, V36)
    assert not rep.ok and rep.control_plane == []
    assert [j.status for j in rep.verdict.judged] == ["unexplained"]
    assert rep.verdict.judged[0].trigger and "candidate-set-grew" in rep.verdict.reasons[0]


def test_the_control_planes_change_is_named_and_not_counted_against_the_descheduler() -> None:
    rep = canary(V36, V37)
    [j] = rep.verdict.judged
    assert (j.change.kind, j.status, j.trigger) == ("candidate-set-grew", "control-plane", True)
    assert j.change.subject == "spread-demo@worker-2 (created in round)"
    assert rep.ok and rep.verdict.reasons == []
    v = rep.final_verdict  # the one Verdict: a pass, its notes naming the control plane
    assert (v.outcome, v.exit_code) == ("pass", 0)
    assert len(v.notes) == 1 and f"Kubernetes {V36} -> {V37}" in v.notes[0]
    assert v.to_dict()["notes"] == list(v.notes)
    rep.baseline.skew, rep.candidate.skew = {"kubernetes": V36}, {"kubernetes": V37}
    md = rep.markdown()
    assert md.startswith(f"# Upgrade canary:  on Kubernetes {V36} ->  on Kubernetes {V37}\n")
    assert "the control plane's, not the descheduler's: candidate-set-grew" in md
    assert "## Control plane (the tracks' Kubernetes differ)" in md
    assert "- admission JobValidation: enabled -> absent" in md
    assert "feature-gate defaults: 2 differ" in md
    data = rep.to_dict()["control_plane"]
    assert data["attributed"] == list(v.notes)
    assert {
        "area": "admission",
        "subject": "JobValidation",
        "baseline": "enabled",
        "candidate": "absent",
    } in data["differences"]


def test_readings_one_track_could_not_take_are_said_and_attribute_nothing() -> None:
    b, c = tracks(V36, V37)
    c.control_plane = {"why": "not read: kubectl api-versions timed out"}
    rounds, _, _ = compare_tracks(b, c)
    diffs, gaps, attributed = control_plane_attribution(b, c, rounds)
    assert (diffs, attributed) == ([], {})
    assert gaps == ["candidate: not read: kubectl api-versions timed out"]
    assert Counter(k[2] for k in attributed) == Counter()


def test_a_worse_outcome_is_the_schedulers_only_when_it_failed_placement_checks_alone() -> None:
    why = attribute_outcome(["replacement-on-target"], SCHED, (V36, V37))
    assert why is not None and "the scheduler decides replacement-on-target" in why
    assert attribute_outcome(["replacement-on-target", "no-pending"], SCHED, (V36, V37))
    # a check of what the descheduler did is its own, beside a placement one or not
    assert attribute_outcome(["replacement-on-target", "one-evicted"], SCHED, (V36, V37)) is None
    assert attribute_outcome(["no-pending"], ADM + API, (V36, V37)) is None
    assert attribute_outcome([], SCHED, (V36, V37)) is None


def test_an_outcome_made_worse_by_placement_is_attributed_through_the_engine() -> None:
    from pytest_desched.experiments.results import Check

    b, c = tracks(V36, V37)
    [r] = c.results
    r.outcome = "fail"
    r.checks = [Check("replacement-on-target", "the replacement landed on the target", False)]
    rounds, _, changes = compare_tracks(b, c)
    _, _, attributed = control_plane_attribution(b, c, rounds)
    verdict = judge(changes, [], attributed)
    outcome = [j for j in verdict.judged if j.change.kind == "outcome-changed"]
    assert [(j.status, j.change.subject) for j in outcome] == [("control-plane", r.label)]
    assert verdict.ok
    r.checks.append(Check("one-evicted", "exactly one pod evicted", False))
    rounds, _, changes = compare_tracks(b, c)
    _, _, attributed = control_plane_attribution(b, c, rounds)
    verdict = judge(changes, [], attributed)
    assert not verdict.ok and "outcome-changed" in verdict.reasons[0]


# The first combined CLI run (v0.35.1 on 1.36.3 against v0.36.0 on 1.37.2) came back PASS with
# no control-plane section and no word why: its tracks held no readings and no `why` (neither
# timed a control-plane-readings phase). Tracks on different Kubernetes now always get the
# section, with the readings or, by name, why a track has none.
def quiet_tracks(b_kube: str, c_kube: str) -> tuple[Any, Any]:
    b, c = tracks(b_kube, c_kube)
    b.skew, c.skew = {"kubernetes": b_kube}, {"kubernetes": c_kube}
    return b, c


def report_with(b: Any, c: Any) -> CanaryReport:
    rounds, rows, changes = compare_tracks(b, c)
    diffs, gaps, attributed = control_plane_attribution(b, c, rounds)
    rep = CanaryReport(b, c, rounds, judge(changes, [], attributed), None, rows)
    rep.control_plane, rep.control_plane_gaps = diffs, gaps
    return rep


def test_tracks_on_different_kubernetes_without_readings_say_why_in_the_report() -> None:
    b, c = quiet_tracks(V36, V37)
    b.control_plane, c.control_plane = {}, {}  # never read: the first combined run's shape
    rep = report_with(b, c)
    want = [
        "baseline: no control-plane readings were taken while its cluster was up",
        "candidate: no control-plane readings were taken while its cluster was up",
    ]
    assert rep.control_plane_gaps == want and rep.control_plane == []
    # nothing is attributed without readings: the candidate's grown set stays unexplained
    assert [j.status for j in rep.verdict.judged] == ["unexplained"] and not rep.ok
    md = rep.markdown()
    assert "## Control plane (the tracks' Kubernetes differ)" in md
    assert f"- not read: {want[0]}" in md and f"- not read: {want[1]}" in md
    assert rep.to_dict()["control_plane"]["gaps"] == want
    # a track that failed before its readings names its error
    c.error = "RuntimeError: the API server stopped answering"
    assert report_with(b, c).control_plane_gaps[1] == (
        "candidate: no control-plane readings: the track failed first: "
        "RuntimeError: the API server stopped answering"
    )


def test_a_report_built_without_the_attribution_still_says_the_readings_are_missing() -> None:
    b, c = quiet_tracks(V36, V37)
    b.control_plane = {}
    rep = CanaryReport(b, c, [], judge([], []))  # no control_plane_attribution call at all
    said, gaps = rep.control_plane_said()
    assert said and gaps == [
        "baseline: no control-plane readings were taken while its cluster was up"
    ]
    assert rep.to_dict()["control_plane"]["gaps"] == gaps


def test_readings_on_both_tracks_that_do_not_differ_are_said_as_such() -> None:
    b, c = quiet_tracks(V36, V37)
    c.control_plane = {**P36, "kubernetes": V37}  # the same readings, another version
    rep = report_with(b, c)
    assert (rep.control_plane, rep.control_plane_gaps) == ([], [])
    md = rep.markdown()
    assert "## Control plane (the tracks' Kubernetes differ)" in md
    assert "- read on both tracks: no reading differs" in md
    assert rep.to_dict()["control_plane"] == {"differences": [], "gaps": [], "attributed": []}


def test_the_same_kubernetes_without_readings_has_no_control_plane_section() -> None:
    b, c = quiet_tracks(V36, V36)
    b.control_plane, c.control_plane = {}, {}
    rep = report_with(b, c)
    assert rep.control_plane_gaps == [] and "## Control plane" not in rep.markdown()
    assert "control_plane" not in rep.to_dict()


class _Proc:
    def __init__(self, rc: int, out: str = "", err: str = "") -> None:
        self.returncode, self.stdout, self.stderr = rc, out, err


def _session(api_rc: int, server: Any = V37) -> Any:
    from contextlib import nullcontext
    from types import SimpleNamespace

    def server_version() -> str:
        if isinstance(server, Exception):
            raise server
        return str(server)

    cluster = SimpleNamespace(
        server_version=server_version,
        capabilities=SimpleNamespace(chooses_kubernetes=False),
        kubectl=lambda *a, **k: _Proc(api_rc, "v1\npolicy/v1\n", "the server is gone\n"),
    )
    toolchain = SimpleNamespace(where=lambda tool: (None, "build"))
    return SimpleNamespace(cluster=cluster, toolchain=toolchain, phase=lambda name: nullcontext())


def test_a_discovery_that_fails_is_said_beside_the_other_gaps() -> None:
    from pytest_desched.canary.control_plane import read_profile

    ok = read_profile(_session(0))
    assert ok["apis"] == ["policy/v1", "v1"] and "kubectl" not in ok["why"]
    bad = read_profile(_session(1))
    assert "apis" not in bad
    assert bad["why"] == (
        "the cluster's control-plane binaries are not local: defaults not read; "
        "kubectl api-versions exited 1: the server is gone"
    )


def test_any_error_reading_a_control_plane_is_the_readings_gap_never_the_tracks() -> None:
    from pytest_desched.canary.tracks import TrackResult, read_control_plane

    out = TrackResult("candidate")
    read_control_plane(_session(0, ValueError("no gitVersion in /version")), out)
    assert out.control_plane == {"why": "not read: ValueError: no gitVersion in /version"}
    assert out.error is None
    assert out.readings_gap() == "candidate: not read: ValueError: no gitVersion in /version"
