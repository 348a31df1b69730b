"""Issue 27's canary holes, each reproduced on the project's own functions (each failed on the
code before its fix): a canary gives a verdict only when something was compared, and every
change it cannot explain reaches the verdict with its cause."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.canary.compare import diff_rounds, node_roles
from pytest_desched.canary.engine import (
    candidate_ran_nothing,
    compare_tracks,
    metric_changes,
    no_verdict_reasons,
)
from pytest_desched.canary.report import CanaryReport
from pytest_desched.canary.tracks import TrackResult, run_track, run_tracks
from pytest_desched.canary.verdict import changes_of, judge
from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.config import build_config
from pytest_desched.experiments import ExperimentResult

NS = "descheduler-lab"
B_ROLES = node_roles(["a-1", "a-2", "a-3"])
C_ROLES = node_roles(["b-1", "b-2", "b-3"])
FAMILIES = ["descheduler_build_info", "descheduler_loop_duration_seconds"]
STARTUP_ERROR = (
    "positive-affinity-migration[runbook] did not complete: RoundFailed: round Job "
    "descheduler-lab/r1 failed: pod r1-x exited 1; the descheduler said:\n"
    '  {"msg":"failed to decode policy","err":"strict decoding error: unknown field"}'
)


def dec(name: str, node: str, fate: str, layer: str, **kw: object) -> dict:
    return {"namespace": NS, "name": name, "node": node, "fate": fate, "layer": layer, **kw}


def rec(decisions: list[dict], **kw: object) -> dict:
    """A round record whose cycle completed (as a real one says it), unless `kw` says not."""
    kw.setdefault("job", {"succeeded": True, "exit_code": 0})
    return {"namespace": NS, "decisions": decisions, **kw}


def track(name: str, *results: ExperimentResult, **kw: Any) -> TrackResult:
    kw.setdefault("metric_names", FAMILIES)
    return TrackResult(name, workers=["w1", "w2", "w3"], results=list(results), **kw)


def report_of(b: TrackResult, c: TrackResult) -> CanaryReport:
    rounds, rows, changes = compare_tracks(b, c)
    rep = CanaryReport(b, c, rounds, judge(changes, []), None, rows)
    rep.no_verdict = no_verdict_reasons(b, c)
    rep.regressions = candidate_ran_nothing(b, c)
    return rep


# -- hole 1: zero compared rounds is no verdict, never a pass ------------------------------------


def test_both_tracks_erroring_before_their_first_round_is_no_verdict() -> None:
    def errored() -> ExperimentResult:
        return ExperimentResult("positive-affinity-migration", "runbook", "error", STARTUP_ERROR)

    rep = report_of(track("baseline", errored()), track("candidate", errored()))
    assert not rep.ok and rep.broken  # the CLI exits 3 on `broken`
    assert rep.no_verdict and "zero compared rounds" in rep.no_verdict[0]
    v = rep.final_verdict  # the library call's verdict is the command's exit
    assert (v.outcome, v.exit_code) == ("no-verdict", 3) and "zero compared rounds" in v.reasons[0]
    md = rep.markdown()
    assert "NO VERDICT" in md and "No change to judge" not in md
    assert "strict decoding error" in md  # the reason is named


def test_one_experiment_without_rounds_among_compared_ones_is_no_verdict() -> None:
    r = rec([dec("web-6d9f7b5c4-x2kq9", "w1", "filtered", "evictor-filter")])
    ok = ExperimentResult("negative-nodefit", "runbook", "pass", records=[r])
    empty = ExperimentResult("negative-pdb", "runbook", "error", "lab did not come up")
    rep = report_of(track("baseline", ok, empty), track("candidate", ok, empty))
    assert rep.broken and [r.split(":")[0] for r in rep.no_verdict] == ["negative-pdb[runbook]"]


# -- hole 7: pass -> xfail and xfail -> fail are outcome changes ---------------------------------


@pytest.mark.parametrize(("before", "after"), [("pass", "xfail"), ("xfail", "fail")])
def test_an_outcome_that_got_worse_is_a_change(before: str, after: str) -> None:
    r = rec([dec("web-6d9f7b5c4-x2kq9", "w1", "filtered", "evictor-filter")])
    b = track("baseline", ExperimentResult("e", "v", before, records=[r]))  # type: ignore[arg-type]
    c = track("candidate", ExperimentResult("e", "v", after, "now worse", records=[r]))  # type: ignore[arg-type]
    _, _, changes = compare_tracks(b, c)
    assert [(ch.kind, ch.detail) for ch, _ in changes] == [
        ("outcome-changed", f"{before} -> {after}: now worse")
    ]
    verdict = judge(changes, [])
    assert not verdict.ok and "round -1" not in verdict.reasons[0]


# -- hole 2: a candidate whose metric probe did not complete is a finding ------------------------


def test_an_unproven_candidate_metric_set_needs_an_explanation() -> None:
    b = track("baseline")
    c = track("candidate", metric_names=None, metrics_why="WaitTimeout: no scrape yet")
    ((ch, _),) = metric_changes(b, c)
    assert (ch.kind, ch.detail) == ("metrics-unproven", "WaitTimeout: no scrape yet")
    assert not judge([(ch, None)], []).ok


def test_a_static_only_canary_judges_no_metric_it_never_served() -> None:
    """Static-only runs no binary: its unprobed metrics are a stated gap, not a finding (the
    static-only e2e canary failed on `metrics-unproven` before this)."""
    b, c = track("baseline", metric_names=None), track("candidate", metric_names=None)
    assert [ch.subject for ch, _ in compare_tracks(b, c)[2]] == ["baseline", "candidate"]
    assert compare_tracks(b, c, behaviour=False)[2] == []


# -- hole 11: a track's failure reaches the verdict with its cause, whatever its thread ----------


class _Session:
    """A DeschedSession double: its experiments error at start-up, its teardown 404s."""

    def __init__(self) -> None:
        self.failed = False
        self.timings: dict[str, float] = {}
        # a real configuration's artifacts aside; its Kubernetes is the pin's
        self.config = build_config({"--desched-provider": "embedded"}).with_(
            artifacts=Path("/nonexistent")
        )
        self.release = type(
            "R", (), {"descheduler_version": "v9", "chart": type("Ch", (), {"evidence": dict})()}
        )()
        self.cluster = type(
            "Cl", (), {"workers": ["w1"], "provider": "kind", "capabilities": CAPABILITIES["kind"]}
        )()

    def run(self, exp: str, variant: str) -> ExperimentResult:
        return ExperimentResult(exp, variant, "error", STARTUP_ERROR)

    def close(self) -> None:
        raise RuntimeError("(404) Reason: Not Found: jobs.batch r1 deleting round Job")


def test_a_teardown_404_in_the_candidates_thread_keeps_the_cause() -> None:
    """Before: the 404 escaped the candidate's thread, its six `exited 1` results were lost
    and the canary said exit 3 with no cause. Now: FAIL (exit 1), the descheduler's words
    first, the teardown error said beside them."""
    ok = _Session()
    ok.close = lambda: None  # type: ignore[method-assign]
    ok.run = lambda exp, variant: ExperimentResult(exp, variant, "pass", records=[rec([])])  # type: ignore[method-assign]
    b, c = run_tracks(ok, _Session(), [("positive-affinity-migration", "runbook")])  # type: ignore[arg-type]
    assert c.error is None and c.teardown_error and "404" in c.teardown_error
    assert [r.outcome for r in c.results] == ["error"]
    rep = report_of(b, c)
    assert not rep.broken and not rep.ok  # a verdict: the candidate failed
    assert "the candidate ran no round" in rep.regressions[0]
    assert rep.final_verdict.exit_code == 1 and rep.final_verdict.reasons[0] == rep.regressions[0]
    assert "strict decoding error" in rep.regressions[0]
    assert any("pass -> error" in r and "strict decoding" in r for r in rep.verdict.reasons)
    md = rep.markdown()  # the cause on the first screen: before the tables
    assert "FAIL" in md.splitlines()[2]
    assert md.index("strict decoding error") < md.index("| track")
    assert md.index("404") < md.index("| track")


def test_a_candidate_error_in_its_thread_is_a_track_error_with_its_cause() -> None:
    class Broken(_Session):
        @property
        def release(self) -> Any:
            raise RuntimeError("kube-apiserver did not start: port in use")

        @release.setter
        def release(self, _v: Any) -> None:
            pass

    b, c = run_tracks(_Session(), Broken(), [("e", "v")])  # type: ignore[arg-type]
    assert c.error and "port in use" in c.error
    rep = report_of(b, c)
    assert rep.broken and "port in use" in rep.verdict.reasons[0]


def test_a_teardown_error_is_said_beside_the_tracks_results() -> None:
    out = run_track("candidate", _Session(), [("e", "v")], threading.Event())  # type: ignore[arg-type]
    assert out.error is None and out.teardown_error is not None
    assert out.teardown_error.startswith("RuntimeError: (404)")
    assert [r.outcome for r in out.results] == ["error"]


def test_diff_rounds_helper_still_matches_identical_rounds() -> None:
    r = rec([dec("web-6d9f7b5c4-x2kq9", "a-1", "filtered", "evictor-filter")])
    (rd,) = diff_rounds("e[v]", [r], [r], B_ROLES, B_ROLES)
    assert changes_of([rd]) == [] and C_ROLES


# -- hole 4: an eviction attempt on a replacement is never merely "seen" -------------------------

REPLACEMENT = "web-6d9f7b5c4-f84j5"


def _with_replacement(fate: str, **kw: object) -> dict:
    return rec(
        [
            dec("web-6d9f7b5c4-zzk2w", "b-1", "evicted", "api-server"),
            dec(REPLACEMENT, "b-2", fate, "api-server", **kw),
        ],
        timeline=[{"t_s": 1.5, "what": "replacement-scheduled", "pod": REPLACEMENT}],
    )


@pytest.mark.parametrize(
    ("fate", "kw"),
    [("refused", {"status_code": 429}), ("limited", {}), ("error", {"status_code": 500})],
)
def test_an_eviction_attempt_on_a_replacement_is_a_change(fate: str, kw: dict) -> None:
    base = rec([dec("web-6d9f7b5c4-x2kq9", "a-1", "evicted", "api-server")])
    (rd,) = diff_rounds("e[v]", [base], [_with_replacement(fate, **kw)], B_ROLES, C_ROLES)
    (cls,) = [c for c in rd.classes if c.pods.endswith("(created in round)")]
    assert cls.kinds == ["candidate-set-grew"]
    assert not judge(changes_of([rd]), []).ok


# -- hole 12: refusal codes are compared ----------------------------------------------------------


def test_three_429_becoming_three_403_is_a_change() -> None:
    def refused(code: int, node: str) -> dict:
        return rec(
            [
                dec(f"web-6d9f7b5c4-{s}", node, "refused", "api-server", status_code=code)
                for s in ("x2kq9", "b7mzp", "qq4rt")
            ]
        )

    (rd,) = diff_rounds("pdb[r]", [refused(429, "a-1")], [refused(403, "b-1")], B_ROLES, C_ROLES)
    assert rd.changed
    ((ch, _),) = changes_of([rd])
    assert ch.kind == "fate-changed"
    assert "3 x refused by the API server (429)" in ch.detail
    assert "3 x refused by the API server (403)" in ch.detail


# -- hole 13: every pod class in words, one label, no `{}`, static-only says what it skipped ----


def test_pod_classes_are_said_in_words_with_one_label() -> None:
    stopped = rec(
        [
            dec("web-6d9f7b5c4-x2kq9", "a-1", "refused", "api-server", status_code=429),
            dec("web-6d9f7b5c4-b7mzp", "a-1", "nodefit", "evictor-prefilter-nodefit"),
        ]
    )
    moved = rec([dec("web-6d9f7b5c4-zzk2w", "b-1", "evicted", "api-server")])
    (rd,) = diff_rounds("pdb[r]", [stopped], [moved], B_ROLES, C_ROLES)
    (cls,) = rd.classes
    assert cls.kinds == ["continue-evicting"]  # not also candidate-set-shrank
    assert cls.candidate_words == "1 x evicted"
    assert "1 x stopped by nodeFit" in cls.baseline_words
    # A class a strategy's own fit check kept (nothing listed) on one track: said, not `{}`.
    kept = rec([])
    (rd,) = diff_rounds("nodefit[r]", [stopped], [kept], B_ROLES, C_ROLES)
    assert rd.words[0]["candidate"] == "kept: not a candidate (no strategy listed these pods)"
    b = track("baseline", ExperimentResult("e", "v", "pass", records=[stopped]))
    c = track("candidate", ExperimentResult("e", "v", "pass", records=[kept]))
    md = report_of(b, c).markdown()
    assert "{}" not in md and "kept: not a candidate" in md and "round -1" not in md


def test_a_static_only_report_says_what_it_did_not_compare() -> None:
    from pytest_desched.canary.engine import STATIC_ONLY_GAP

    rep = CanaryReport(TrackResult("baseline"), TrackResult("candidate"), [], judge([], []))
    rep.not_compared = [STATIC_ONLY_GAP]
    md = rep.markdown()
    assert "every compared pod class kept its fates" not in md
    assert "not compared: behaviour" in md


# -- hole 3: explanations name the kind of change they explain -----------------------------------


def _judged_with(entry: dict, change_kind: str, subject: str = "web@worker-1") -> str:
    from pytest_desched.canary.expectations import Change, load_explanations

    ch = Change("pdb[runbook]", 0, change_kind, subject, "detail")
    (j,) = judge([(ch, None)], load_explanations([entry])).judged
    return j.status


def test_an_explanation_explains_only_the_kind_it_names() -> None:
    entry = {"kind": "fewer-evictions", "reason": "PDBs bite harder now"}
    assert _judged_with(entry, "fewer-evictions") == "explained"
    for other in ("track-error", "lost-metric", "bug-new", "outcome-changed", "continue-evicting"):
        assert _judged_with(entry, other, subject="x") == "unexplained", other


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"reason": "the upgrade changes things"}, "`kind` is required"),
        ({"kind": "*", "experiment": "*", "reason": "all"}, "wildcard kind"),
        ({"kind": "continue-evicting", "reason": "fixed upstream"}, "needs `link`"),
        ({"kind": "candidate-set-grew", "reason": "wider", "link": " "}, "needs `link`"),
        ({"kind": "lost-metric", "pods": "web@*", "reason": "r", "link": "l"}, "`pods` narrows"),
        ({"kind": "fate-changed", "metric": "descheduler_x", "reason": "r"}, "`metric` narrows"),
    ],
)
def test_explanations_that_would_explain_more_than_they_say_are_refused(
    entry: dict, message: str
) -> None:
    from pytest_desched.canary.expectations import load_explanations
    from pytest_desched.errors import ConfigError

    with pytest.raises(ConfigError, match=message.replace("*", r"\*")):
        load_explanations([entry])


def test_a_bad_explanation_file_names_its_file_and_line_and_exits_2(tmp_path, capsys) -> None:
    """Refused by the CLI before any session (so before any cluster) starts."""
    from pytest_desched import cli

    f = tmp_path / "expect.yaml"
    f.write_text(
        "changes:\n"
        "  - kind: fewer-evictions\n"
        "    reason: fine\n"
        "  # a reason alone\n"
        "  - reason: 'the new version is better'\n"
    )
    argv = ["canary", "--candidate", "version:v0.36.0", "--expect", str(f)]
    rc = cli.main([*argv, "--artifacts", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_USAGE == 2, err
    assert f"{f}:5: changes[1]: `kind` is required" in err


# -- hole 2: the probe proves a served family set without one metric's name ----------------------


def _scrape_text(loop_name: str, loops: int) -> str:
    return (
        "# TYPE descheduler_build_info gauge\n"
        'descheduler_build_info{GitVersion="v9"} 1\n'
        f"# TYPE {loop_name} histogram\n"
        f"{loop_name}_count {loops}\n"
    )


def test_a_renamed_loop_metric_still_gets_its_family_set_proven() -> None:
    """Before: the probe waited for `descheduler_loop_duration_seconds_count` >= 3, so a
    candidate that renamed it timed out (metrics unknown) instead of showing a lost metric."""
    from pytest_desched.descheduler.metric_probe import SETTLE_S, FamilySettle

    watch = FamilySettle()
    renamed = _scrape_text("descheduler_cycle_seconds", 1)
    assert not watch.see("", 0.0) and "no descheduler_* family" in watch.describe()
    assert not watch.see(renamed, 1.0, logged_loops=3)
    assert watch.see(renamed, 1.0 + SETTLE_S, logged_loops=3)  # its log proves the loops
    assert watch.families == ("descheduler_build_info", "descheduler_cycle_seconds")
    b = track("baseline", metric_names=FAMILIES)
    c = track("candidate", metric_names=list(watch.families))
    assert [ch.subject for ch, _ in metric_changes(b, c)] == ["descheduler_loop_duration_seconds"]


def test_the_probe_waits_past_the_first_loops_and_for_a_settled_set() -> None:
    from pytest_desched.descheduler.metric_probe import FamilySettle

    watch = FamilySettle(settle_s=2)
    loop = "descheduler_loop_duration_seconds"
    assert not watch.see(_scrape_text(loop, 1), 0.0)
    assert not watch.see(_scrape_text(loop, 2), 5.0)  # settled, but fewer than CYCLES loops
    assert watch.see(_scrape_text(loop, 3), 6.0)
    grown = _scrape_text(loop, 4) + "# TYPE descheduler_pods_evicted_total counter\n"
    grown += 'descheduler_pods_evicted_total{result="success"} 1\n'
    assert not watch.see(grown, 7.0)  # the set changed: the window starts again
    assert watch.see(grown, 9.0) and "descheduler_pods_evicted_total" in watch.families


def test_a_set_taken_before_the_first_loop_ended_is_not_proven() -> None:
    """Issue 54: a 1,000-node candidate's first loop outlasted the settle window; its scrape
    served only build_info (histograms without an observation are not served), the set was
    taken, and both duration histograms were called lost (`lost-metric`, a rollback)."""
    from pytest_desched.descheduler.metric_probe import SETTLE_S, FamilySettle, loops_logged

    build_only = '# TYPE descheduler_build_info gauge\ndescheduler_build_info{GitVersion="v9"} 1\n'
    watch = FamilySettle()
    assert not watch.see(build_only, 0.0)
    assert not watch.see(build_only, 2 * SETTLE_S)  # settled, but no loop proven finished
    assert "0 by the log" in watch.describe() and "descheduler_build_info" in watch.describe()
    log = '{"ts":1,"v":1,"msg":"Number of evictions/requests","totalEvicted":0}\n' * 3
    assert loops_logged(log) == 3
    # three loops logged and still no loop family: dropped, proven, and compared as such
    assert watch.see(build_only, 3 * SETTLE_S, loops_logged(log))
    assert watch.families == ("descheduler_build_info",)


# -- hole 5 (the comparison): a candidate that sends no EvictionFailed event is a change ---------


def _pdb_round(delivered: int, bug: bool = False) -> dict:
    r = rec(
        [
            dec(f"web-6d9f7b5c4-{s}", "a-1", "refused", "api-server", status_code=429)
            for s in ("x2kq9", "b7mzp", "qq4rt")
        ],
        events_delivered={"delivered": delivered, "owed": 3},
        versions={"descheduler": "v0.36.0"},
    )
    if bug:
        r["known_bugs"] = {"descheduler#1687": f"events delivered: {delivered} of 3 refusals"}
    return r


def test_a_candidate_sending_no_eviction_failed_event_is_a_change() -> None:
    """Before: events were never compared, and #1687 excused the candidate's 0 of 3."""
    (rd,) = diff_rounds(
        "pdb[r]", [_pdb_round(2, bug=True)], [_pdb_round(0, bug=True)], B_ROLES, B_ROLES
    )
    changes = changes_of([rd])
    assert [ch.kind for ch, _ in changes] == ["events-lost"]
    verdict = judge(changes, [])
    assert not verdict.ok and "delivered 0 of 3" in verdict.reasons[0]
    # One event fewer is #1687's run-to-run race, not a change.
    (rd,) = diff_rounds("pdb[r]", [_pdb_round(2)], [_pdb_round(1, bug=True)], B_ROLES, B_ROLES)
    assert [ch.kind for ch, _ in changes_of([rd])] == ["bug-intermittent"]
    assert rd.candidate is not None and rd.candidate.events == "1/3"


def test_a_probe_that_never_refused_does_not_hide_the_rounds_events() -> None:
    """The long-running probe counts only its own events since issue 54; one that never
    reached its refusals says 0 and must not turn the round's 2 of 3 into `events-lost`."""
    unmeasured = _pdb_round(2, bug=True)
    unmeasured["events_delivered"].update(outliving=0, outliving_how="not measured: ...")
    proven = _pdb_round(2, bug=True)
    proven["events_delivered"].update(outliving=3)
    (rd,) = diff_rounds("pdb[r]", [proven], [unmeasured], B_ROLES, B_ROLES)
    assert "events-lost" not in [ch.kind for ch, _ in changes_of([rd])]
    assert rd.candidate is not None and rd.candidate.events == "2/3"
    assert rd.baseline is not None and rd.baseline.events == "3/3"


def test_the_cli_exits_3_with_the_reason_when_both_tracks_errored(
    tmp_path, capsys, monkeypatch
) -> None:
    """`desched canary` on two tracks whose experiments errored before any round: exit 3."""
    from pytest_desched import cli
    from pytest_desched.canary import engine

    def errored_tracks(b_s: Any, c_s: Any, exps: Any, *a: Any, **k: Any) -> tuple:
        b_s.close()
        c_s.close()
        res = [ExperimentResult(e, v, "error", STARTUP_ERROR) for e, v in exps]
        return track("baseline", *res), track("candidate", *res)

    monkeypatch.setattr(engine, "run_tracks", errored_tracks)
    argv = ["canary", "--candidate", "version:v0.36.0", "--no-static", "--experiment", "pdb"]
    rc = cli.main([*argv, "--artifacts", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "c")])
    out = capsys.readouterr().out
    assert rc == cli.EXIT_INFRA == 3, out
    assert "NO VERDICT" in out and "zero compared rounds" in out
    assert "PASS" not in out.split("\n## ")[0]


# -- hole 5 (the proof): #1687 excuses only a binary that delivers once it outlives refusals -----


def test_1687_does_not_excuse_a_binary_that_sends_none_when_it_keeps_running() -> None:
    """Before: 0 of 3 within the flush window was #1687 whatever the binary does."""
    from dataclasses import replace

    from pytest_desched.descheduler.known_bugs import RoundFacts, tolerated

    log = (
        '{"ts":1000,"msg":"Error evicting pod","pod":"lab/web-a"}\n'
        '{"ts":1000.5,"msg":"Error evicting pod","pod":"lab/web-b"}\n'
    )
    facts = RoundFacts(
        experiment="negative-pdb",
        descheduler_version="v0.36.0",
        failed_checks=frozenset(),
        log=log,
        mounted_policy={"evictionFailureEventNotification": True},
        refused_by_api=3,
        events_delivered=0,
    )
    assert tolerated("eviction-failed-events", facts) is not None  # not measured: as before
    sends_none = replace(facts, events_outliving=0)
    assert tolerated("eviction-failed-events", sends_none) is None
    assert tolerated("eviction-failed-events", replace(facts, events_outliving=3)) is not None


REFUSALS = "".join(
    f'{{"ts":1,"msg":"Error evicting pod","pod":{{"name":"web-{x}","namespace":"lab"}}}}\n'
    for x in "abc"
)


def _fake_descheduler(tmp_path: Path, startup_s: float = 0.0) -> tuple[Path, Path]:
    """A stand-in binary: `startup_s` of start-up, then its three refusals logged, then a
    marker file (its events may arrive from then on), then it keeps running."""
    fake, mark = tmp_path / "descheduler", tmp_path / "refused"
    fake.write_text(
        "#!/bin/sh\n"
        f"/bin/sleep {startup_s}\n"
        f"/usr/bin/printf '%s' '{REFUSALS}'\n"
        f"/usr/bin/touch {mark}\n"
        "exec /bin/sleep 30\n"
    )
    fake.chmod(0o755)
    return fake, mark


def test_the_event_probe_stops_the_process_once_every_event_arrived(tmp_path) -> None:
    from pytest_desched.descheduler.event_probe import delivered_when_outliving

    fake, _ = _fake_descheduler(tmp_path)
    seen = iter([0, 1, 3, 3])
    n, how = delivered_when_outliving(fake, tmp_path / "kc", "x: 1\n", lambda: next(seen), 3)
    assert (n, how) == (3, "3 of 3 delivered by a process that kept running")
    n, how = delivered_when_outliving(fake, tmp_path / "kc", "x: 1\n", lambda: 0, 2, timeout=1)
    assert n == 0 and "0 of 2 delivered" in how and "after every pod's refusal" in how


def test_the_event_probe_times_its_events_from_the_refusals_not_the_start(tmp_path) -> None:
    """Issue 54: at load ~45 the probe's 20 s went on the binary's start-up (its log: one
    line) and a binary that delivers every event was read as one that loses them."""
    from pytest_desched.descheduler.event_probe import delivered_when_outliving

    fake, mark = _fake_descheduler(tmp_path, startup_s=2.5)
    n, how = delivered_when_outliving(
        fake, tmp_path / "kc", "x: 1\n", lambda: 3 if mark.exists() else 0, 3, timeout=2
    )
    assert (n, how) == (3, "3 of 3 delivered by a process that kept running")


def test_the_event_probe_names_a_process_that_never_refused_as_not_measured(tmp_path) -> None:
    from pytest_desched.descheduler.event_probe import delivered_when_outliving

    fake, _ = _fake_descheduler(tmp_path, startup_s=30)
    pods = ["lab/web-a", "lab/web-b", "lab/web-c"]
    n, how = delivered_when_outliving(
        fake, tmp_path / "kc", "x: 1\n", lambda: 0, 3, pods=pods, startup_timeout=1
    )
    assert n == 0 and how.startswith("not measured: timed out after 1s waiting for the ")
    assert "0 refused" in how and "0 log line(s)" in how


def test_a_rounds_events_are_awaited_unless_the_log_proves_them_unsent() -> None:
    """A POST cut at exit may still land (seen: 3 of 3 with `Post ...: context canceled`
    logged); a write the rate limiter never let out cannot."""
    import time

    from pytest_desched.descheduler.event_probe import round_events

    cut = (
        '{"msg":"Unable to write event (may retry after sleeping)","err":"Post '
        '\\"https://127.0.0.1:1/apis/events.k8s.io/v1/namespaces/lab/events\\": context canceled"}\n'
    )
    unsent = (
        '{"msg":"Unable to write event (may retry after sleeping)","err":"client rate limiter '
        'Wait returned an error: context canceled"}\n'
    )
    late = iter([2, 2, 2, 3])
    n, how = round_events(lambda: next(late), 3, REFUSALS + cut, timeout=5)
    assert n == 3 and "after a wait" in how
    started = time.monotonic()
    n, how = round_events(lambda: 2, 3, REFUSALS + unsent, timeout=5)
    assert n == 2 and time.monotonic() - started < 1 and "1 write(s) the log proves never" in how
    n, how = round_events(lambda: 2, 3, REFUSALS + cut, timeout=0.5)
    assert n == 2 and "context canceled" in how and "timed out" in how


def test_a_track_starts_its_cluster_with_the_metrics_sources_its_experiments_read() -> None:
    """The matrix and the canary run the utilization experiments: each track's session is
    asked for their sources before its cluster starts (a plain experiment asks nothing)."""
    asked: list[tuple[tuple[str, ...], str]] = []

    class Asking(_Session):
        def need_metrics(self, sources: tuple[str, ...], why: str) -> None:
            asked.append((tuple(sources), why))

    s = Asking()
    s.close = lambda: None  # type: ignore[method-assign]
    s.run = lambda exp, variant: ExperimentResult(exp, variant, "pass", records=[rec([])])  # type: ignore[method-assign]
    exps = [("positive", "runbook"), ("utilization-stale", "runbook")]
    run_track("baseline", s, exps, threading.Event(), metrics=False)  # type: ignore[arg-type]
    assert asked == [(("KubernetesMetrics",), "utilization-stale")]
