"""Issue 39's fidelity cases, built from hand-made halves and rounds as the reporter did: a
verdict passes only on what was measured, and a refusal is a PDB's or RBAC's only on proof.
Each test failed on the code before its fix."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from pytest_desched.commands.fidelity import text_of
from pytest_desched.descheduler.decisions import FATE_LAYER, Fate, PodDecision
from pytest_desched.experiments.results import ExperimentResult
from pytest_desched.fidelity.compare import Half, PodRef, compare, fates_of, identity_of
from pytest_desched.fidelity.engine import FidelityOutcome, _judge
from pytest_desched.fidelity.explain import BUG_1917, Budget
from pytest_desched.fidelity.snapshot import judge_snapshot, pod_budgets

SA = "system:serviceaccount:kube-system:descheduler"
SKIP = "Skipping descheduling cycle: requires >=2 nodes (found=1)"
PDB_SAID = (
    'error when evicting pod (ignoring) "web-b0": Cannot evict pod as it would violate the '
    "pod's disruption budget."
)
THROTTLED = 'error when evicting pod (ignoring) "web-b0": the server has received too many requests'


def _pods(ns: str, budgets: tuple[Budget, ...] = ()) -> list[PodRef]:
    return [PodRef(f"{ns}/web-{ns[-1]}0", identity_of(ns, ns, "web", None, "x"), "w0", ns, budgets)]


def _d(pod: PodRef, fate: Fate, code: int | None = None, message: str = "") -> PodDecision:
    ns, name = pod.key.split("/")
    return PodDecision(
        ns, name, fate, FATE_LAYER[fate], pod.node, "S", status_code=code, message=message
    )


def _refused(code: int, message: str, budgets: tuple[Budget, ...] = (), user: str = "") -> Any:
    """One pod: dry run would evict it, the real run's eviction got `code` with `message`."""
    dp, rp = _pods("lab-a"), _pods("lab-b", budgets)
    dry = Half("dry-run", fates_of(dp, [_d(dp[0], Fate.DRY_RUN)], "dry-run"))
    real = Half("real", fates_of(rp, [_d(rp[0], Fate.REFUSED, code, message)], "real"), user=user)
    return compare(dry, real)


# -- case 9: a 429 is a PDB's only when a PDB selecting the pod says so ---------------------------


def test_a_pdb_with_budget_left_does_not_explain_a_429() -> None:
    res = _refused(429, THROTTLED, (Budget("lab-b/web", 5),))
    assert not res.ok
    (row,) = res.unexplained
    assert "a 429 no PDB explains (PDBs selecting the pod: lab-b/web allowed 5" in row.proof


def test_a_pdb_at_zero_or_the_api_servers_answer_explains_a_429() -> None:
    at_zero = _refused(429, THROTTLED, (Budget("lab-b/web", 0),))
    assert (
        at_zero.ok and "lab-b/web selects it and allowed 0 disruption(s)" in at_zero.rows[0].proof
    )
    # budget 1 before the round, spent by an earlier eviction in it: the answer says so
    answered = _refused(429, PDB_SAID, (Budget("lab-b/web", 1),))
    assert answered.ok and answered.rows[0].explained_by == "api-server(pdb-429)"
    # the answer alone, with no PDB selecting the pod: nothing says which budget
    assert not _refused(429, PDB_SAID).ok


def test_the_snapshot_form_reads_only_the_pdbs_that_select_each_pod() -> None:
    """One PDB at zero elsewhere (coredns's) used to explain every 429 of the snapshot."""
    pods = [
        {"metadata": {"namespace": "shop", "name": "web-0", "labels": {"app": "web"}}},
        {"metadata": {"namespace": "kube-system", "name": "coredns-0", "labels": {"k": "dns"}}},
    ]
    pdbs = [
        {
            "metadata": {"namespace": "kube-system", "name": "coredns"},
            "spec": {"selector": {"matchLabels": {"k": "dns"}}},
            "status": {"disruptionsAllowed": 0},
        },
        {
            "metadata": {"namespace": "shop", "name": "other"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 0},
        },
    ]
    budgets = pod_budgets(pods, pdbs)
    assert budgets == {
        "shop/web-0": (),
        "kube-system/coredns-0": (Budget("kube-system/coredns", 0),),
    }
    assert not _refused(429, THROTTLED, budgets["shop/web-0"]).ok


# -- also: a 403 is RBAC only when the answer says so --------------------------------------------


def test_a_403_that_is_not_rbac_is_named_as_such() -> None:
    terminating = 'pods "web-b0" is forbidden: unable to create new content in namespace lab-b'
    (row,) = _refused(403, terminating).unexplained
    assert row.explained_by is None and "a 403 that is not RBAC on pods/eviction" in row.proof
    rbac = f'pods "web-b0" is forbidden: User "{SA}" cannot create resource "pods/eviction"'
    assert _refused(403, rbac, user=SA).ok
    assert not _refused(403, rbac, user="system:serviceaccount:other:someone").ok


# -- case 2: a half that completed no cycle compares nothing --------------------------------------


def _round(skipped: str | None = None, succeeded: bool = True, exit_code: int | None = 0) -> Any:
    return SimpleNamespace(
        result=SimpleNamespace(skipped=skipped), succeeded=succeeded, exit_code=exit_code
    )


def _untouched(mode: str, **kw: Any) -> Half:
    pods = _pods("lab-a" if mode == "dry-run" else "lab-b")
    return Half(mode, fates_of(pods, [], mode), **kw)  # type: ignore[arg-type]


def test_the_snapshot_form_errors_when_neither_half_ran_a_cycle() -> None:
    dry, real = _untouched("dry-run", skipped=SKIP), _untouched("real", skipped=SKIP)
    c = compare(dry, real)
    # the comparison reads Half.skipped: never "0 of 0 real evictions; 0 differences, each
    # explained" (what it said before)
    assert not c.ok and not c.differences
    assert c.line() == (
        f"not comparable: the real half's round completed no descheduling cycle (skipped: {SKIP}); "
        f"the dry-run half's round completed no descheduling cycle (skipped: {SKIP})"
    )
    outcome, message = judge_snapshot(
        c, {"real": (real, _round(SKIP)), "dry-run": (dry, _round(SKIP))}
    )
    assert outcome == "error"
    assert message == (
        f"not comparable: the real half's round completed no descheduling cycle (skipped: {SKIP}); "
        f"the dry-run half's round completed no descheduling cycle (skipped: {SKIP})"
    )


def test_the_snapshot_form_errors_when_both_halves_crash_alike() -> None:
    dry, real = _untouched("dry-run"), _untouched("real")
    crashed = _round(succeeded=False, exit_code=1)
    outcome, message = judge_snapshot(
        compare(dry, real), {"real": (real, crashed), "dry-run": (dry, crashed)}
    )
    assert outcome == "error" and "its Job's pod exited 1" in message


def test_a_dry_run_skip_with_1917_proven_is_compared_not_an_error() -> None:
    dry = _untouched("dry-run", skipped=SKIP, signatures={BUG_1917: "found=0, 3 Ready"})
    real = _untouched("real")
    outcome, _ = judge_snapshot(
        compare(dry, real), {"real": (real, _round()), "dry-run": (dry, _round(SKIP))}
    )
    assert outcome == "pass"
    bare = replace(dry, signatures={})
    outcome, message = judge_snapshot(
        compare(bare, real), {"real": (real, _round()), "dry-run": (bare, _round(SKIP))}
    )
    assert outcome == "error" and message.startswith("not comparable: the dry-run half's")


def _runner(mode: str, outcome: str, rnd: Any) -> Any:
    result = ExperimentResult("positive-affinity-migration", "runbook", outcome)  # type: ignore[arg-type]
    return SimpleNamespace(result=result, facts=None, views=[SimpleNamespace(rnd=rnd)])


def test_the_lab_form_errors_when_a_half_skipped_its_cycle() -> None:
    """Both halves skipped alike: the rows agree (all untouched), and still nothing was run."""
    dry, real = _runner("dry-run", "pass", _round(SKIP)), _runner("real", "fail", _round(SKIP))
    out = FidelityOutcome(
        "fidelity-positive",
        dry.result,
        real.result,
        compare(_untouched("dry-run"), _untouched("real")),
    )
    _judge(out, dry, real)
    assert out.outcome == "error" and out.message.startswith(
        "not comparable: round 0: the real half's round completed no descheduling cycle"
    )
    assert "round 0: the dry-run half's round completed no descheduling cycle" in out.message


def test_the_command_says_not_comparable_never_each_explained() -> None:
    c = compare(_untouched("dry-run"), _untouched("real"))
    o = SimpleNamespace(
        head="fidelity-snapshot[s.yaml]",
        outcome="error",
        comparison=c,
        message="not comparable: the real half's round completed no cycle",
    )
    assert text_of(o) == (
        "fidelity-snapshot[s.yaml]  ERROR  not comparable: the real half's round completed no cycle"
    )
