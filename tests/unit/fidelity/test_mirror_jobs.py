"""The mirror probe's Job form (kind, existing): each run a dry-run Job from the suspended
CronJob, read, then deleted with its pods; the probe's loop over such runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.capabilities import CAPABILITIES, MIRROR_BINARY, MIRROR_JOBS, Capabilities
from pytest_desched.descheduler.logparse import parse_lines
from pytest_desched.errors import RoundError, RoundFailed
from pytest_desched.fidelity import mirror_jobs
from pytest_desched.fidelity.mirror_jobs import JOBS, NAME_ROOM, job_runs, probe_job_name
from pytest_desched.fidelity.mirror_probe import Expect, probe


def _result(k: int) -> Any:
    """A dry-run cycle's parsed log naming the first k of lab/a, lab/b, lab/c."""
    lines = [
        json.dumps({"msg": "Evicted pod in dry run mode", "v": 1, "node": "n1",
                    "pod": {"name": x, "namespace": "lab"}})
        for x in "abc"[:k]
    ]  # fmt: skip
    return parse_lines(lines, "v0.36.0")


class _Jobs:
    """run_round and delete_round_job as the module calls them, recording each call."""

    def __init__(self, outcomes: list[Any]) -> None:
        self.outcomes, self.calls = list(outcomes), []  # type: list[Any], list[tuple[Any, ...]]

    def run_round(self, cluster: Any, release: Any, name: str, log_dir: Path, timeout: float,
                  dry_run: bool = False) -> Any:  # fmt: skip
        self.calls.append(("run", name, timeout, dry_run))
        out = self.outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    def delete(self, cluster: Any, name: str, namespace: str) -> None:
        self.calls.append(("delete", name, namespace))


def _install(monkeypatch: pytest.MonkeyPatch, outcomes: list[Any]) -> _Jobs:
    jobs = _Jobs(outcomes)
    monkeypatch.setattr(mirror_jobs, "run_round", jobs.run_round)
    monkeypatch.setattr(mirror_jobs, "delete_round_job", jobs.delete)
    monkeypatch.setattr(mirror_jobs, "runbook_job_name", lambda c, ns, name: name)
    return jobs


def _rnd(k: int, succeeded: bool = True, timed_out: str | None = None) -> Any:
    return SimpleNamespace(result=_result(k), succeeded=succeeded, timed_out=timed_out)


REL = SimpleNamespace(namespace="kube-system")


def test_each_run_is_a_dry_run_job_deleted_once_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dry run forced on every Job; each deleted before the next exists: a Job that did not
    complete, or did not finish in its time, names nothing."""
    jobs = _install(monkeypatch, [_rnd(2), _rnd(3, succeeded=False), _rnd(3, timed_out="t")])
    run = job_runs(object(), REL, "descheduler-positive-dry", Path("/nowhere"))  # type: ignore[arg-type]
    got = [run(30.0) for _ in range(3)]
    assert got[0] is not None and len(got[0].decisions) == 2
    assert got[1:] == [None, None]
    names = [f"descheduler-positive-dry-probe{n}" for n in (1, 2, 3)]
    assert jobs.calls == [
        c for n in names for c in (("run", n, 30.0, True), ("delete", n, "kube-system"))
    ]


@pytest.mark.parametrize(
    "error",
    [
        RoundError("round Job kube-system/r-probe1 was created with --dry-run=true but its log "
                   "does not say it ran in dry run"),
        RoundFailed("kube-system", "r-probe1", "r-probe1-abcde", 1, ["E policy refused"]),
    ],
    ids=["not-dry-run", "pod-failed"],
)  # fmt: skip
def test_a_job_that_failed_or_did_not_confirm_dry_run_raises_once_deleted(
    monkeypatch: pytest.MonkeyPatch, error: RoundError
) -> None:
    """Neither is a run that named nothing: the round's own error, the Job gone first."""
    jobs = _install(monkeypatch, [error])
    run = job_runs(object(), REL, "r", Path("/nowhere"))  # type: ignore[arg-type]
    with pytest.raises(RoundError, match="r-probe1"):
        run(30.0)
    assert jobs.calls[-1] == ("delete", "r-probe1", "kube-system")


def test_probe_job_names_fit_a_job_name_with_a_collision_suffix() -> None:
    long = "x" * 80
    name = probe_job_name(long, 12)
    assert name.endswith("-probe12") and len(name) + len("-xxxxx-xxxx") <= 63
    assert (
        probe_job_name("a-" + "b" * (NAME_ROOM - 2), 1) == "a-" + "b" * (NAME_ROOM - 2) + "-probe1"
    )
    assert "--" not in probe_job_name("y" * (NAME_ROOM - 1) + "-z", 1)


def test_the_probe_over_job_runs_says_what_ran_and_skips_runs_cut_short() -> None:
    """The same loop as the binary form (mirror_probe.probe): a run cut short (None) is
    not counted; the 3rd counted run names what the real run decided and is taken."""
    seq = iter([_result(1), None, _result(2), _result(3)])
    lab = SimpleNamespace(
        list_namespaced_pod=lambda ns: SimpleNamespace(
            items=[
                SimpleNamespace(
                    metadata=SimpleNamespace(name=x, namespace="lab", deletion_timestamp=None),
                    spec=SimpleNamespace(node_name="n1"),
                    status=SimpleNamespace(conditions=[SimpleNamespace(type="Ready", status="True")]),
                )
                for x in "abc"
            ]
        )
    )  # fmt: skip
    timeouts: list[float] = []

    def run_once(timeout: float) -> Any:
        timeouts.append(timeout)
        return next(seq)

    want = {f"lab/{x}": Expect("n1", True) for x in "abc"}
    p = probe(run_once, JOBS, lab, want, 3, budget=60, run_timeout=45)
    assert p.chosen == 2 and len(p.runs) == 3, p.how
    assert timeouts == [45, 45, 45, 45]
    assert f"3 one-shot dry run(s) {JOBS} named [1, 2, 3] of its 3 pods" in p.how


def test_the_form_is_asked_of_the_capability() -> None:
    """Local binaries: the binary beside the cluster; a kubelet from images: Jobs; neither:
    no probe (a provider row that does neither)."""
    assert CAPABILITIES["embedded"].mirror_probe == MIRROR_BINARY
    assert CAPABILITIES["kind"].mirror_probe == MIRROR_JOBS
    assert CAPABILITIES["existing"].mirror_probe == MIRROR_JOBS
    nothing = Capabilities("x", runs_local_binary=False, loads_images=False, audit_log=False,
                           faults=False, discardable=True)  # fmt: skip
    assert nothing.mirror_probe is None
