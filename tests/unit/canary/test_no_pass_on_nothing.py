"""Issue 39's canary cases, built from hand-made track results as the reporter did: a canary
passes only on what it measured. Each test failed on the code before its fix."""

from __future__ import annotations

from pytest_desched.canary.compare import diff_rounds, node_roles
from pytest_desched.canary.engine import metric_changes
from pytest_desched.canary.verdict import changes_of, judge
from pytest_desched.descheduler.decisions import cycle_gap
from pytest_desched.experiments import ExperimentResult
from pytest_desched.experiments.results import Check
from tests.unit.canary.test_canary_holes import dec, rec, report_of, track

ROLES_B = node_roles(["a-1", "a-2", "a-3"])
ROLES_C = node_roles(["b-1", "b-2", "b-3"])
SKIP = "Skipping descheduling cycle: requires >=2 nodes (found=1)"


def skipped_round() -> dict:
    return rec([], verdict=f"skipped:{SKIP}")


def result(outcome: str, *records: dict, message: str = "") -> ExperimentResult:
    return ExperimentResult(
        "positive-affinity-migration",
        "runbook",
        outcome,  # type: ignore[arg-type]
        message,
        records=list(records),
    )


# -- case 1: fail -> fail is never "no change" ---------------------------------------------------


def test_both_tracks_failing_the_same_way_on_a_skipped_round_is_no_verdict() -> None:
    why = f"[round-not-skipped] skipped: {SKIP}"
    b = track("baseline", result("fail", skipped_round(), message=why))
    c = track("candidate", result("fail", skipped_round(), message=why))
    rep = report_of(b, c)
    assert rep.broken and not rep.ok  # the CLI and the fixture exit / report 3 on `broken`
    assert rep.headline.startswith("NO VERDICT")
    (reason,) = rep.no_verdict
    assert reason.startswith("positive-affinity-migration[runbook]: not comparable")
    assert "the baseline's experiment ended fail" in reason
    assert f"the baseline's round 0: skipped: {SKIP}" in reason
    assert "candidate: fail" in reason  # what happened on the other track is named too
    md = rep.markdown()
    assert "No change to judge" not in md and "no verdict: positive" in md


def test_a_no_reference_reason_ends_in_the_baselines_words_not_the_candidates() -> None:
    """CI cut this reason to its head and tail, and its tail was the v0.36.0 candidate's
    whole message (#1882's evidence): it read as if the v0.33.0 baseline showed #1882. The
    candidate is named by its outcome and bug; its message stays in its own results."""
    sig = "descheduler#1882: 3 lab pod(s) filtered ... the log starts no PDB reflector"
    base = result(
        "fail",
        rec([dec("web-6d9f7b5c4-x2kq9", "w1", "evicted", "api-server")]),
        message="[watches-complete] pods watch broke: 503",
    )
    base.checks = [Check("watches-complete", "the watches ran", False, "pods watch broke: 503")]
    cand = result("xfail", rec(FILTERED_1882), message=f"known upstream bug: {sig}\n  ({sig})")
    cand.classification = {"outcome": "xfail", "bug": "descheduler#1882"}
    (reason,) = report_of(track("baseline", base), track("candidate", cand)).no_verdict
    assert "the baseline's experiment ended fail: [watches-complete]" in reason
    assert reason.endswith("; candidate: xfail (descheduler#1882)"), reason
    assert "filtered" not in reason and "reflector" not in reason


def test_a_candidate_that_failed_is_named_by_its_failed_checks() -> None:
    base = result("fail", skipped_round(), message=f"[round-not-skipped] skipped: {SKIP}")
    cand = result("fail", rec([]), message="a long message\nover lines")
    cand.checks = [Check("one-evicted", "one evicted", False), Check("no-pending", "ok", True)]
    (reason,) = report_of(track("baseline", base), track("candidate", cand)).no_verdict
    assert reason.endswith("; candidate: fail [one-evicted]"), reason
    assert "a long message" not in reason


def test_a_baseline_round_whose_job_failed_compares_nothing_even_when_it_passed() -> None:
    """A passing outcome does not make a round whose Job exited 1 a reference."""
    bad = rec([], job={"succeeded": False, "exit_code": 1})
    b, c = track("baseline", result("pass", bad)), track("candidate", result("pass", bad))
    (reason,) = report_of(b, c).no_verdict
    assert "round 0: its Job's pod exited 1" in reason


def test_a_candidate_that_skips_where_the_baseline_ran_is_a_regression() -> None:
    ran = rec([dec("web-6d9f7b5c4-x2kq9", "w1", "filtered", "evictor-filter")])
    b = track("baseline", result("pass", ran))
    c = track("candidate", result("fail", skipped_round(), message="skipped"))
    rep = report_of(b, c)
    assert not rep.broken and not rep.ok
    assert rep.regressions == [
        "positive-affinity-migration[runbook] round 0: the candidate completed no descheduling "
        f"cycle (skipped: {SKIP}); the baseline's did"
    ]
    assert "No change to judge" not in rep.markdown()


def test_an_exit_code_that_was_not_measured_is_no_completed_cycle() -> None:
    assert cycle_gap(None, True, None) == "its exit code was not measured"
    assert cycle_gap(None, None, None) == (
        "its exit code was not measured; its Job did not complete"
    )
    assert cycle_gap(None, True, 0) is None


# -- case 5: a failed baseline metric probe leaves the metrics unproven ---------------------------


def test_a_failed_baseline_metric_probe_makes_the_metrics_unproven() -> None:
    b = track("baseline", metric_names=None, metrics_why="WaitTimeout: no scrape in 30 s")
    c = track("candidate", metric_names=[])
    ((ch, _),) = metric_changes(b, c)
    assert (ch.kind, ch.subject, ch.detail) == (
        "metrics-unproven",
        "baseline",
        "WaitTimeout: no scrape in 30 s",
    )
    verdict = judge([(ch, None)], [])
    assert not verdict.ok and "metrics-unproven" in verdict.reasons[0]


# -- case 12: a fix is credited only on the candidate's own evidence -----------------------------

FILTERED_1882 = [
    dec(
        f"spread-demo-6d9f7b5c4-{s}", "a-1", "filtered", "evictor-filter", checks=["PodsWithoutPDB"]
    )
    for s in ("x2kq9", "b7mzp", "qq4rt")
]
BASE_1882 = rec(
    FILTERED_1882,
    known_bugs={"descheduler#1882": "every lab pod filtered [PodsWithoutPDB]"},
    versions={"descheduler": "v0.36.0"},
)


def _judged(base: dict, cand: dict) -> list[tuple[str, str, str | None]]:
    rounds = diff_rounds("positive[runbook]", [base], [cand], ROLES_B, ROLES_C)
    return [(j.change.kind, j.status, j.by) for j in judge(changes_of(rounds), []).judged]


def test_a_candidate_that_listed_nothing_is_not_credited_with_a_fix() -> None:
    listed_nothing = rec([], versions={"descheduler": "v0.37.0"})
    judged = _judged(BASE_1882, listed_nothing)
    assert judged == [("candidate-set-shrank", "unexplained", None)]
    rounds = diff_rounds("positive[runbook]", [BASE_1882], [listed_nothing], ROLES_B, ROLES_C)
    ((ch, _),) = changes_of(rounds)
    assert "not credited to a fix of descheduler#1882: the candidate's round listed no pod" in (
        ch.detail
    )


def test_a_fix_needs_a_baseline_version_the_registry_lists() -> None:
    # v0.33.0 is outside #1882's range (its runs start the PDB reflector)
    unlisted = {**BASE_1882, "versions": {"descheduler": "v0.33.0"}}
    cand = rec([dec("spread-demo-6d9f7b5c4-zzk2w", "b-1", "evicted", "api-server")] * 1)
    statuses = {status for _, status, _ in _judged(unlisted, cand)}
    assert "fixed-bug" not in statuses and "unexplained" in statuses


def test_a_candidate_that_lists_the_pods_without_the_bugs_fates_is_credited() -> None:
    cand = rec(
        [
            dec("spread-demo-6d9f7b5c4-zzk2w", "b-1", "evicted", "api-server"),
            dec("spread-demo-6d9f7b5c4-wx5c8", "b-1", "limited", "eviction-limits"),
            dec("spread-demo-6d9f7b5c4-hh7rt", "b-1", "limited", "eviction-limits"),
        ],
        versions={"descheduler": "v0.37.0"},
    )
    assert _judged(BASE_1882, cand) == [
        ("bug-fixed", "informative", "descheduler#1882"),
        ("continue-evicting", "fixed-bug", "descheduler#1882"),
    ]


def test_the_canary_page_names_a_regression(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """canary.html ignored `regressions`: its answer read 'canary: FAIL, see below' over an
    empty list, beside 'no change between the tracks'."""
    ran = rec([dec("web-6d9f7b5c4-x2kq9", "w1", "filtered", "evictor-filter")])
    b = track("baseline", result("pass", ran))
    c = track("candidate", result("pass", skipped_round()))  # the outcome alone hides it
    html = report_of(b, c).write(tmp_path)["html"].read_text()
    assert "canary: FAIL, 1 regression" in html
    assert "regression: positive-affinity-migration[runbook] round 0: the candidate" in html
