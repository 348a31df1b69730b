"""The one rule that turns a failure into an expected failure, as a table over real logs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer, PodDecision
from pytest_desched.descheduler.known_bugs import (
    ANY_EXPERIMENT,
    DRY_RUN_MIRROR_MSG,
    EVENT_FLUSH_WINDOW_S,
    REGISTRY,
    ROUND_FINISHED,
    RoundFacts,
    classify,
    proves_1917,
    signatures,
    tolerated,
)
from pytest_desched.descheduler.logparse import parse_log
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "descheduler-v0.36.0"
LAB = "descheduler-lab"


def real(name: str, experiment: str, failed: set[str], **kw) -> RoundFacts:
    log = (DATA / name).read_text()
    decisions = tuple(parse_log(log).in_namespace(LAB))
    defaults = dict(
        experiment=experiment,
        descheduler_version="v0.36.0",
        failed_checks=frozenset(failed),
        decisions=decisions,
        log=log,
        replicas=3,
        pdb_expected_pods=3,
        lab_pods_running=frozenset(d.name for d in decisions),
        ready_nodes=3,
    )
    defaults.update(kw)
    return RoundFacts(**defaults)


POS = "positive-affinity-migration"
POS_LOG = "positive-runbook-bug1882.log"
POS_FAILED = {"one-evicted", "evicted-by-strategy"}

# (case, facts, outcome, bug)
TABLE = [
    ("all checks passed", real(POS_LOG, POS, set()), "pass", None),
    ("1882: every condition holds", real(POS_LOG, POS, POS_FAILED), "xfail", "descheduler#1882"),
    (
        "1882 nodefit",
        real("nodefit-runbook-bug1882.log", "negative-nodefit", {"nodefit-stops-every-pod"}),
        "xfail",
        "descheduler#1882",
    ),
    (
        "1882 pdb",
        real("pdb-runbook-bug1882.log", "negative-pdb", {"refused-429-per-candidate"}),
        "xfail",
        "descheduler#1882",
    ),
    (
        "signature present but the Job also failed",
        real(POS_LOG, POS, {*POS_FAILED, "job-completed"}),
        "fail",
        None,
    ),
    (
        "signature present but a pod stayed Pending",
        real(POS_LOG, POS, {*POS_FAILED, "no-pending"}),
        "fail",
        None,
    ),
    (
        "negative experiment whose UIDs changed",
        real(
            "pdb-runbook-bug1882.log",
            "negative-pdb",
            {"refused-429-per-candidate", "uids-unchanged"},
        ),
        "fail",
        None,
    ),
    (
        "no PDB: filtering is the protection",
        real(POS_LOG, POS, POS_FAILED, pdb_expected_pods=None),
        "fail",
        None,
    ),
    (
        "PDB covers fewer pods than replicas",
        real(POS_LOG, POS, POS_FAILED, pdb_expected_pods=2),
        "fail",
        None,
    ),
    (
        "a release outside the bug's range is never excused",
        real(POS_LOG, POS, POS_FAILED, descheduler_version="v0.33.0"),
        "fail",
        None,
    ),
    (
        "check not explained in this experiment",
        real(POS_LOG, "negative-nodefit", POS_FAILED),
        "fail",
        None,
    ),
    (
        "a lab pod with another failing check",
        real(
            POS_LOG,
            POS,
            POS_FAILED,
            decisions=(
                *real(POS_LOG, POS, set()).decisions[:-1],
                PodDecision(
                    LAB,
                    "x",
                    Fate.FILTERED,
                    Layer.EVICTOR_FILTER,
                    checks=["PodsWithoutPDB", "minPodAge"],
                ),
            ),
        ),
        "fail",
        None,
    ),
    (
        "a running lab pod the log never decided",
        real(
            POS_LOG,
            POS,
            POS_FAILED,
            lab_pods_running=frozenset({"spread-demo-extra"})
            | {d.name for d in real(POS_LOG, POS, set()).decisions},
        ),
        "fail",
        None,
    ),
    (
        "the PDB reflector did start",
        real(
            POS_LOG,
            POS,
            POS_FAILED,
            log=(DATA / POS_LOG).read_text()
            + '{"msg":"Starting reflector","type":"*v1.PodDisruptionBudget"}\n',
        ),
        "fail",
        None,
    ),
    (
        "failure with no decisions at all",
        real(POS_LOG, POS, POS_FAILED, decisions=()),
        "fail",
        None,
    ),
]


@pytest.mark.parametrize(("case", "facts", "outcome", "bug"), TABLE, ids=[t[0] for t in TABLE])
def test_classification_table(case, facts, outcome, bug) -> None:
    c = classify(facts)
    assert c.outcome == outcome, (case, c)
    assert (c.bug.id if c.bug else None) == bug


def test_an_unexplained_failure_shows_the_signature_as_context() -> None:
    c = classify(real(POS_LOG, POS, {*POS_FAILED, "job-completed"}))
    assert c.outcome == "fail"
    assert any(x.startswith("descheduler#1882: ") for x in c.context)


def without_reflector_starts(log: str) -> str:
    """The log as a round would hand it over cut at its start, or run below -v=3."""
    return "".join(ln for ln in log.splitlines(keepends=True) if "cache/reflector.go" not in ln)


@pytest.mark.parametrize("variant", ["positive", "nodefit", "pdb"])
def test_1882_needs_a_log_that_shows_its_informers_start(variant) -> None:
    """An absent PDB reflector proves the lister never started only where the log shows the
    other informers starting: a log without any reflector line (cut, or -v below 3) is an
    absence, and the same decisions then excuse nothing."""
    experiment, log_name, failed = {
        "positive": (POS, POS_LOG, POS_FAILED),
        "nodefit": ("negative-nodefit", "nodefit-runbook-bug1882.log", {"nodefit-stops-every-pod"}),
        "pdb": ("negative-pdb", "pdb-runbook-bug1882.log", {"refused-429-per-candidate"}),
    }[variant]
    whole = real(log_name, experiment, failed)
    assert classify(whole).outcome == "xfail"  # the real round: the proof holds
    cut = replace(whole, log=without_reflector_starts(whole.log))
    assert "Starting reflector" not in cut.log and cut.decisions  # the fates are still there
    assert "descheduler#1882" not in signatures(cut)
    assert classify(cut).outcome == "fail"


def test_an_excused_failure_does_not_list_its_own_bug_as_unexplained_context() -> None:
    """finish() words every context entry "present but does not explain this failure": the
    bug that did explain it is the evidence, never also such an aside."""
    c = classify(real(POS_LOG, POS, POS_FAILED))
    assert c.outcome == "xfail" and c.bug is not None and c.bug.id == "descheduler#1882"
    assert c.evidence.startswith("3 lab pod(s) filtered")
    assert not any(x.startswith("descheduler#1882: ") for x in c.context), c.context


def test_working_rounds_show_no_1882_signature() -> None:
    facts = real("positive-evicted.log", POS, set())
    assert "descheduler#1882" not in signatures(facts)
    facts = real("pdb-429.log", "negative-pdb", {"refused-429-per-candidate"})
    assert classify(facts).outcome == "fail"


# -- descheduler#1917: the dry-run mirror race, identified positively -------------------------


def dry(name: str, failed=frozenset({"round-not-skipped"}), **kw) -> RoundFacts:
    return real(name, "positive-affinity-migration", set(failed), **kw)


def test_1917_skip_with_fewer_nodes_than_the_api_shows() -> None:
    facts = dry("dry-run-skipped-mirror-race.log", lab_pods_running=frozenset({"spread-demo-a"}))
    ev = signatures(facts)["descheduler#1917"]
    assert "found=0" in ev and "3 Ready nodes" in ev
    # evidence for fidelity (fidelity/explain.py), never an experiment's expected failure
    assert classify(facts).outcome == "fail"


def test_1917_not_when_the_cluster_really_has_one_node() -> None:
    facts = dry("dry-run-skipped-mirror-race.log", ready_nodes=0, lab_pods_running=frozenset())
    assert "descheduler#1917" not in signatures(facts)


def test_1917_counts_only_the_nodes_the_policy_selects() -> None:
    # issue 39 case 10: found=1 because the policy's nodeSelector (the existing provider's
    # opt-in term) selects one of 5 Ready nodes; that is no mirror race
    log = '{"ts":1,"msg":"Skipping descheduling cycle: requires >=2 nodes","v":0,"found":1}\n'
    labels = ({"desched.io/lab": "true"},) + ({},) * 4
    facts = dry(
        "dry-run-skipped-mirror-race.log",
        log=log,
        ready_nodes=5,
        node_selector="desched.io/lab=true",
        ready_node_labels=labels,
        lab_pods_running=frozenset(),
    )
    assert "descheduler#1917" not in signatures(facts)
    assert classify(facts).outcome == "fail"
    # three selected Ready nodes, found=1: the signature, naming the selector
    three = replace(facts, ready_node_labels=({"desched.io/lab": "true"},) * 3 + ({},) * 2)
    ev = signatures(three)["descheduler#1917"]
    assert "3 Ready nodes the policy's nodeSelector 'desched.io/lab=true' selects" in ev
    # a selector with the nodes' labels unread proves nothing
    assert "descheduler#1917" not in signatures(replace(facts, ready_node_labels=None))


def test_1917_a_mirror_missing_a_node_is_proven_by_the_nodes_its_plugins_processed() -> None:
    """Flake-rate run, 2026-12-02: no skip, but every plugin processed 2 of the 3 Ready
    workers, so the cycle ran on a partial mirror (the pods on the third were never seen)."""
    facts = dry("dry-run-mirror-missing-a-node.log", decisions=(), lab_pods_on_ready_nodes=3)
    ev = signatures(facts)["descheduler#1917"]
    assert "processed 2 node(s) (0ea0-worker-1, 0ea0-worker-2)" in ev and "3 Ready nodes" in ev
    # the cluster really had two Ready nodes: nothing is missing, no excuse
    assert "descheduler#1917" not in signatures(replace(facts, ready_nodes=2))
    # not in a real (not dry-run) round: no mirror there
    real_log = facts.log.replace(DRY_RUN_MIRROR_MSG, "Building a client")
    assert "descheduler#1917" not in signatures(replace(facts, log=real_log, ready_nodes=3))


def test_1917_a_mirror_without_the_lab_pods_is_proven_by_lownodeutilizations_count() -> None:
    """Same run: all three workers processed, LowNodeUtilization counted 0 pods on them while
    the API server showed the lab's Running pods there."""
    facts = dry("dry-run-mirror-without-lab-pods.log", decisions=(), lab_pods_on_ready_nodes=3)
    ev = signatures(facts)["descheduler#1917"]
    assert "counted 0 pod(s) on all 3 Ready nodes" in ev and "3 lab pods Running" in ev
    for unproven in (
        replace(facts, lab_pods_on_ready_nodes=None),  # the API's count was not read
        replace(facts, lab_pods_on_ready_nodes=0),  # nothing the mirror should have held
        replace(facts, node_selector="x=y", ready_node_labels=({"x": "y"},) * 3),
    ):
        assert "descheduler#1917" not in signatures(unproven), unproven
    # a fourth Ready node no plugin processed is the node clause's proof, not the pods'
    assert "processed 3 node(s)" in signatures(replace(facts, ready_nodes=4))["descheduler#1917"]


def test_every_1917_signature_form_is_a_proof_the_tests_accept() -> None:
    """Issue 54: a fresh machine's fidelity run proved #1917 in its partial-mirror form and a
    test that knew only the older forms failed it. Each form the signature writes is one
    proves_1917 (the tests' one source) accepts; a "not proven" line is not."""
    skip = dry("dry-run-skipped-mirror-race.log", lab_pods_running=frozenset({"spread-demo-a"}))
    nodes = dry("dry-run-mirror-missing-a-node.log", decisions=(), lab_pods_on_ready_nodes=3)
    pods = dry("dry-run-mirror-without-lab-pods.log", decisions=(), lab_pods_on_ready_nodes=3)
    forms = [signatures(f)["descheduler#1917"] for f in (skip, nodes, pods)]
    assert len(set(forms)) == 3, forms
    for ev in forms:
        assert proves_1917(ev), ev
    for unproven in ("descheduler#1917 not proven: no complete dry-run cycle in 30s", ""):
        assert not proves_1917(unproven)


def test_1917_not_on_an_absence_alone() -> None:
    """Issue 27 hole 6: no decision and no lab pod named in the log is also a round whose
    listing was forbidden or where no strategy ran; only the skip clause identifies #1917
    (this xfailed before)."""
    log = '{"ts":1,"msg":"Building a cached client from the cluster for the dry run","v":3}\n'
    forbidden = log + (
        '{"ts":2,"msg":"failed to list pods","err":"pods is forbidden: User '
        '\\"system:serviceaccount:x:descheduler\\" cannot list resource \\"pods\\""}\n'
    )
    for text in (log, forbidden):
        facts = dry(
            "dry-run-candidates.log",
            decisions=(),
            log=text,
            lab_pods_running=frozenset({"spread-demo-a", "spread-demo-b"}),
        )
        c = classify(facts)
        assert c.outcome == "fail" and "descheduler#1917" not in signatures(facts), c


def test_1917_not_when_lab_pods_were_seen_but_not_listed() -> None:
    """The old catch-all (no lab decision) no longer excuses: the log named the pods."""
    facts = dry("dry-run-candidates.log", decisions=())
    assert facts.lab_pods_running and "descheduler#1917" not in signatures(facts)


def test_every_registry_entry_names_experiments_and_checks_that_exist() -> None:
    """An entry naming a removed experiment (#1917's "dry-run") or check excuses nothing and
    says something false: each key must be a registered experiment's title (the name its
    results and RoundFacts carry) whose code makes the check, itself or through a shared
    helper (Experiment.checks: read from the code, not from its module's text)."""
    from pytest_desched.experiments import REGISTRY as EXPERIMENTS
    from pytest_desched.experiments.checks_made import matches
    from pytest_desched.experiments.declared import round_checks

    by_title = {cls.title or cls.name: cls for cls in EXPERIMENTS.values()}
    wrong = []
    for bug in REGISTRY:
        for title, checks in bug.explains.items():
            if title == ANY_EXPERIMENT:  # every experiment: the runner itself makes the check
                if checks != {ROUND_FINISHED} or ROUND_FINISHED not in round_checks():
                    wrong.append(f"{bug.id}: in any experiment only the runner's {ROUND_FINISHED}")
                continue
            if title not in by_title:
                wrong.append(f"{bug.id}: no registered experiment is titled {title!r}")
                continue
            made = by_title[title].checks()
            wrong += [
                f"{bug.id}: {title} makes no check {c!r}"
                for c in sorted(checks)
                if not matches(c, made)
            ]
    assert wrong == []


# -- descheduler#1687: events lost at a one-shot exit, tolerated only with its signature ------

NOTIFY = {"evictionFailureEventNotification": True}


def pdb(**kw) -> RoundFacts:
    base = dict(mounted_policy=NOTIFY, refused_by_api=3, events_delivered=1)
    base.update(kw)
    return real("pdb-429.log", "negative-pdb", set(), **base)


def test_1687_tolerates_events_lost_within_the_flush_window() -> None:
    hit = tolerated("eviction-failed-events", pdb())
    assert hit is not None and hit[0].id == "descheduler#1687"
    assert "events delivered: 1 of 3" in hit[1]


@pytest.mark.parametrize(
    "facts",
    [
        pdb(mounted_policy={}),  # no notification: no event owed, the check fails elsewhere
        pdb(events_delivered=3),  # nothing lost
        pdb(refused_by_api=0),  # no refusal proven by the API server
        pdb(descheduler_version="v0.31.0"),  # before the registry's range
    ],
)
def test_1687_signature_is_precise(facts) -> None:
    assert tolerated("eviction-failed-events", facts) is None


def test_1687_not_when_the_process_lingered_past_the_window() -> None:
    log = (DATA / "pdb-429.log").read_text()
    late = f'{{"ts":{1795963643908.343 + (EVENT_FLUSH_WINDOW_S + 1) * 1000},"msg":"Stopped"}}\n'
    assert tolerated("eviction-failed-events", pdb(log=log + late)) is None


def test_1687_never_makes_an_experiment_xfail() -> None:
    facts = replace(pdb(), failed_checks=frozenset({"eviction-failed-events"}))
    assert classify(facts).outcome == "fail"


def test_a_known_bug_can_be_raised_without_an_experiment_result() -> None:
    """Tests outside the experiment framework (the dry-run race) raise it with evidence only."""
    from pytest_desched.errors import KnownUpstreamBug

    with pytest.raises(KnownUpstreamBug, match="1917") as ei:
        raise KnownUpstreamBug("descheduler#1917: found=0")
    assert ei.value.result is None
