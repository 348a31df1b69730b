"""A round that does not finish: stopped at its timeout, then read for a registered cause.

The logs are recorded runs (tests/e2e/test_canary_upgrade_e2e.py
test_canary_v0350_to_v0351_runs_and_names_1839, 2026-12-06): v0.35.0 with chart 0.35.0,
whose ClusterRole cannot list PersistentVolumeClaims (#1839), stopped after 40 s; v0.35.1 with
chart 0.35.1, which lists them and completes its cycle.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.canary.compare import diff_rounds, no_cycle
from pytest_desched.canary.matrix_report import (
    NOT_EXERCISED,
    NOT_SHOWN,
    SHOWN,
    Cell,
    Row,
    judge_bug,
)
from pytest_desched.canary.verdict import changes_of
from pytest_desched.descheduler.known_bugs import (
    BY_ID,
    ROUND_FINISHED,
    RoundFacts,
    classify,
    hang_cause,
    observed,
)
from pytest_desched.providers.embedded.kubelet import Supervisor
from pytest_desched.providers.embedded.pod_run import stop_on_delete
from tests.unit import DATA_ROOT

HUNG = (DATA_ROOT / "descheduler-v0.35.0" / "round-1839-stopped-at-timeout.log").read_text()
SYNCED = (DATA_ROOT / "descheduler-v0.35.1" / "round-nodefit-chart-0.35.1.log").read_text()
BUG = "descheduler#1839"


def facts(
    log: str, failed: set[str], experiment: str = "negative-nodefit", version: str = "v0.35.0"
):
    return RoundFacts(experiment, version, frozenset(failed), log=log)


def test_the_recorded_hang_is_1839_at_the_rbac_layer() -> None:
    cause = hang_cause(facts(HUNG, {ROUND_FINISHED}))
    assert cause is not None
    bug, evidence = cause
    assert bug.id == BUG and bug.stops_at == "rbac"
    # five refused lists in 40 s (client-go's backoff), the first one quoted
    assert "list refused 5 time(s) and that cache never synced" in evidence
    assert (
        "cannot list resource" in evidence
        and "failed to list *v1.PersistentVolumeClaim" in evidence
    )


@pytest.mark.parametrize(
    "log",
    [
        pytest.param(SYNCED, id="chart-0.35.1-lists-them"),
        # refused once (an RBAC cache still warming), then synced: no wait came of it
        pytest.param(
            HUNG + '{"msg":"Caches populated","v":2,"type":"*v1.PersistentVolumeClaim"}\n',
            id="refused-then-synced",
        ),
        pytest.param("", id="no-log"),
    ],
)
def test_no_hang_cause_without_a_refused_list_that_never_synced(log: str) -> None:
    assert hang_cause(facts(log, {ROUND_FINISHED})) is None
    assert BUG not in observed(facts(log, set()))


@pytest.mark.parametrize("experiment", ["negative-nodefit", "negative-pdb", "low-node-utilization"])
def test_a_stopped_round_xfails_on_1839_in_any_experiment(experiment: str) -> None:
    verdict = classify(facts(HUNG, {ROUND_FINISHED}, experiment))
    assert (verdict.outcome, verdict.bug and verdict.bug.id) == ("xfail", BUG)


def test_1839_explains_only_the_unfinished_round() -> None:
    # any other failed check is not the hang's: a failure, with the signature as context
    verdict = classify(facts(HUNG, {ROUND_FINISHED, "one-evicted"}))
    assert verdict.outcome == "fail" and any(c.startswith(BUG) for c in verdict.context)
    # a release outside the range is never excused, whatever its log says
    assert classify(facts(HUNG, {ROUND_FINISHED}, version="v0.33.0")).outcome == "fail"
    # a round that finished but failed a check: no hang to explain
    assert classify(facts(HUNG, {"job-completed"})).outcome == "fail"


def _record(
    timed_out: str | None, bugs: dict[str, str], layer: str, exit_code: int
) -> dict[str, Any]:
    job: dict[str, Any] = {"succeeded": timed_out is None, "exit_code": exit_code}
    if timed_out:
        job["timed_out"] = timed_out
    return {
        "verdict": "stopped-by:rbac" if timed_out else "no-candidates",
        "deciding_layer": layer,
        "job": job,
        "known_bugs": bugs,
        "versions": {"descheduler": "v0.35.0" if timed_out else "v0.35.1"},
        "decisions": [],
    }


def test_a_stopped_round_says_why_it_ran_no_cycle() -> None:
    why = "timed out after 40s waiting for Job kube-system/descheduler-negative-nodefit"
    rec = _record(why, {BUG: "the PVC list refused"}, "rbac", 143)
    said = no_cycle(rec)
    assert said is not None
    assert why in said and "deciding layer rbac" in said and BUG in said
    bare = no_cycle(_record(why, {}, "timed-out", 143))
    assert bare is not None and "no known bug's signature" in bare


def test_a_hang_the_candidate_does_not_show_is_named_as_its_fix() -> None:
    base = _record("timed out after 40s", {BUG: "refused"}, "rbac", 143)
    cand = _record(None, {}, "evictor-prefilter-nodefit", 0)
    rounds = diff_rounds("negative-nodefit[x]", [base], [cand], {}, {})
    changes = changes_of(rounds)
    assert [(c.kind, c.subject, by) for c, by in changes] == [("bug-fixed", BUG, BUG)]
    assert "stopped at its timeout, deciding layer rbac" in changes[0][0].detail


def _row(version: str, chart: str, cell: Cell) -> Row:
    return Row("1-x", f"source:{version}", version=version, chart={"version": chart}, cells=[cell])


def test_the_matrix_reads_a_stopped_round_as_1839_shown() -> None:
    bug = BY_ID[BUG]
    cell = Cell(
        "negative-nodefit[runbook]", "negative-nodefit", "xfail", "rbac", 0, BUG,
        seen={BUG: "refused"}, rounds=1,
    )  # fmt: skip
    finding = judge_bug(bug, _row("v0.35.0", "0.35.0", cell))
    assert (finding.run, finding.agrees) == (SHOWN, True)
    assert cell.shown() == "xfail (#1839) · rbac · 0 evicted"
    # chart 0.35.1 lists PVCs: the registry says v0.35.1 with it has no #1839, and a
    # completed round of a policy protecting PVC pods exercised it without the signature
    trig = {BUG: "podProtections.extraEnabled has PodsWithPVC"}
    clean = Cell("negative-nodefit[runbook]", "negative-nodefit", "pass", "x", 0, triggers=trig)
    clean.rounds = 1
    finding = judge_bug(bug, _row("v0.35.1", "0.35.1", clean))
    assert (finding.run, finding.agrees) == (NOT_SHOWN, True)


def test_a_deleted_pods_process_is_ended(tmp_path: Any) -> None:
    """The stand-in kubelet marks a running pod's stop when the pod is deleted (a round
    stopped at its timeout); run_pod's stopper then ends the process group."""
    sup = Supervisor(SimpleNamespace(), tmp_path, lambda _m: None)  # type: ignore[arg-type]
    stop = sup.stops["uid-1"] = threading.Event()
    pod = SimpleNamespace(
        metadata=SimpleNamespace(
            uid="uid-1", deletion_timestamp="now", labels={}, annotations={},
            owner_references=[SimpleNamespace(kind="Job")], name="p", namespace="ns",
        ),
        spec=SimpleNamespace(node_name="w-1", containers=[SimpleNamespace(image="i")]),
        status=SimpleNamespace(phase="Running"),
    )  # fmt: skip
    assert sup.handle(pod) == "stop" and stop.is_set()
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True, text=True
    )
    notes: list[str] = []
    t = threading.Thread(target=stop_on_delete, args=(proc, stop, notes))
    t.start()
    assert proc.wait(timeout=30) == -15  # SIGTERM, as a kubelet ends a deleted pod's container
    t.join(10)
    assert notes == ["stopped: its pod was deleted (SIGTERM)"]
    # a process that ended on its own is left alone (stop set only to release the thread)
    done = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True, text=True)
    done.wait(timeout=30)
    late: list[str] = []
    stop_on_delete(done, stop, late)
    assert late == []


def test_a_stopped_round_exercises_no_other_bug() -> None:
    """v0.35.0's runbook rounds hang on #1839: they never reach PodsWithoutPDB, so the row says
    #1882 'not exercised' (the 2026-12-06 matrix said 'not shown, registry: yes' before this)."""
    from pytest_desched.experiments.results import ExperimentResult

    res = ExperimentResult("negative-nodefit", "runbook", outcome="xfail", blocking_layer="rbac")
    res.signatures_seen = {BUG: "refused"}
    res.classification = {"bug": BUG}
    policy = {
        "profiles": [
            {
                "name": "p",
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
                "pluginConfig": [
                    {
                        "name": "DefaultEvictor",
                        "args": {"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}},
                    }
                ],
            }
        ]
    }
    res.records.append({"effective_policy": policy, "job": {"timed_out": "timed out after 60s"}})
    cell = Cell.of(res)
    assert cell.rounds == 0 and "descheduler#1882" in cell.triggers
    row = _row("v0.35.0", "0.35.0", cell)
    assert judge_bug(BY_ID["descheduler#1882"], row).run == NOT_EXERCISED
    assert judge_bug(BY_ID[BUG], row).run == SHOWN
    res.records[0]["job"] = {"exit_code": 0}  # a round that ran: it exercised #1882
    assert judge_bug(BY_ID["descheduler#1882"], _row("v0.35.0", "0.35.0", Cell.of(res))).run != (
        NOT_EXERCISED
    )


def test_a_pod_deleted_in_a_watch_gap_is_stopped_at_the_next_list(tmp_path: Any) -> None:
    """A DELETED event lost while the watch was down (or stuck): the next listing lacks the
    pod, so its process is stopped then, not left to its deadline (a long-lived round)."""
    sup = Supervisor(SimpleNamespace(), tmp_path, lambda _m: None)  # type: ignore[arg-type]
    running, ended, listed = threading.Event(), threading.Event(), threading.Event()
    ended.set()  # its run is over: nothing to stop
    sup.stops.update({"gone": running, "done": ended, "still": listed})
    assert sup.gone_since_last_list({"still"}) == ["gone"]
    assert running.is_set() and not listed.is_set()
    assert sup.gone_since_last_list({"still"}) == []  # once
