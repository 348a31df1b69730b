"""Dry-run fidelity's pure parts of the engine: scope refusal, the probe's cycle split."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_desched.descheduler.decisions import Fate
from pytest_desched.descheduler.logparse import parse_lines
from pytest_desched.descheduler.policy import Policy
from pytest_desched.fidelity.engine import FidelityOutcome, _carry_to_real, scope_problems
from pytest_desched.fidelity.mirror_probe import (
    LOCAL,
    NOT_PROBED,
    Expect,
    MirrorProbe,
    binary_runs,
    lab_state,
    named,
    probe,
)


def _probe_binary(binary: Path, kc: Path, policy: str, *args: Any, **kw: Any) -> MirrorProbe:
    """The embedded form: the local binary's one-shot runs, probed."""
    with binary_runs(binary, kc, policy, "v0.36.0") as run_once:
        return probe(run_once, LOCAL, *args, **kw)


def _runner(ns: str, include: list[str]) -> SimpleNamespace:
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {}},
                    {
                        "name": "RemovePodsViolatingNodeAffinity",
                        "args": {
                            "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"],
                            "namespaces": {"include": include},
                        },
                    },
                ],
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
            }
        ],
    }
    return SimpleNamespace(ctx=SimpleNamespace(namespace=ns, policy=Policy.from_dict(doc)))


def test_each_half_scoped_to_its_own_lab_is_one_policy() -> None:
    assert scope_problems(_runner("lab", ["lab"]), _runner("lab-2", ["lab-2"])) == []


def test_a_policy_naming_one_lab_differs_in_scope() -> None:
    """A user policy that names the first lab's namespace: the real half would act elsewhere."""
    problems = scope_problems(_runner("lab", ["lab"]), _runner("lab-2", ["lab"]))
    assert problems == [
        "profiles[0].pluginConfig[1].args.namespaces.include[0]: dry run '<lab>', real 'lab'"
    ]


def _line(msg: str, **kv: object) -> str:
    return json.dumps({"ts": 1.0, "msg": msg, "v": 1, **kv}, separators=(",", ":"))


def test_named_counts_the_lab_pods_a_run_decides_about() -> None:
    pod = {"name": "a", "namespace": "lab"}
    other = {"name": "z", "namespace": "elsewhere"}
    lines = [
        _line("Resetting pod evictor counters"),
        _line("Evicted pod in dry run mode", pod=pod, strategy="S", node="n1"),
        _line("Evicted pod in dry run mode", pod=other, strategy="S", node="n1"),
        _line("Number of evictions/requests", totalEvicted=2, evictionRequests=0),
    ]
    run = parse_lines(lines, "v0.36.0")
    assert ("lab/a", Fate.DRY_RUN) in [(d.key, d.fate) for d in run.decisions]
    assert named(run, {"lab/a", "lab/b"}) == 1
    probe = MirrorProbe((parse_lines([], "v0.36.0"), run), 1, "2 runs")
    assert probe.settled is run
    assert MirrorProbe((), None, "none").settled is None


def test_in_scope_reads_every_evicting_plugins_namespaces() -> None:
    from pytest_desched.fidelity.snapshot import in_scope

    pods = [
        {"metadata": {"namespace": ns, "name": f"p-{ns}"}} for ns in ("lab", "shop", "kube-system")
    ]
    only_lab = _runner("x", ["lab"]).ctx.policy
    assert in_scope(pods, only_lab) == ["lab/p-lab"]
    assert in_scope(pods, _runner("x", ["elsewhere"]).ctx.policy) == []


def test_the_command_refuses_bad_input_before_any_cluster(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pytest_desched.cli import main

    assert main(["fidelity", "--experiment", "nope"]) == 2
    assert "unknown fidelity experiment 'nope'" in capsys.readouterr().err
    snap = tmp_path / "s.yaml"
    assert main(["fidelity", str(snap), "--experiment", "positive"]) == 2
    assert "takes no --experiment" in capsys.readouterr().err


# -- the mirror probe: it waits for the lab, then runs until a cycle is complete or time is up
def _pod(ns: str, name: str, node: str | None, ready: bool, deleting: bool = False) -> object:
    cond = [SimpleNamespace(type="Ready", status="True" if ready else "False")]
    return SimpleNamespace(
        metadata=SimpleNamespace(
            name=name, namespace=ns, deletion_timestamp="now" if deleting else None
        ),
        spec=SimpleNamespace(node_name=node),
        status=SimpleNamespace(conditions=cond),
    )


class _Core:
    """list_namespaced_pod over a list of states, one per read (the last one repeats)."""

    def __init__(self, *states: list[object]) -> None:
        self.states, self.reads = list(states), 0

    def list_namespaced_pod(self, ns: str) -> SimpleNamespace:
        state = self.states[min(self.reads, len(self.states) - 1)]
        self.reads += 1
        return SimpleNamespace(items=[p for p in state if p.metadata.namespace == ns])  # type: ignore[attr-defined]


WANT = {"lab/a": Expect("n1", True), "lab/b": Expect("n2", True)}
LAB3 = {f"lab/{x}": Expect("n1", True) for x in "abc"}


def test_lab_state_names_missing_moved_and_unready_pods() -> None:
    ok, seen = lab_state(_Core([_pod("lab", "a", "n1", True), _pod("lab", "b", "n2", True)]), WANT)
    assert ok and seen.startswith("2 of 2 pods present, 2 on their node, 2 as Ready")
    ok, seen = lab_state(_Core([_pod("lab", "a", "n3", True)]), WANT)
    assert not ok
    assert "1 of 2 pods present, 0 on their node" in seen
    assert "missing: lab/b" in seen and "elsewhere: lab/a on n3 (want n1)" in seen
    ok, seen = lab_state(_Core([_pod("lab", "a", "n1", False), _pod("lab", "b", "n2", True)]), WANT)
    assert not ok and "not Ready: lab/a" in seen
    ok, _ = lab_state(
        _Core([_pod("lab", "a", "n1", True), _pod("lab", "b", "n2", True, True)]), WANT
    )
    assert not ok  # a pod being deleted is not there


def _fake_descheduler(tmp_path: Path, seq: list[int]) -> Path:
    """A one-shot 'descheduler' (sh builtins only: the probe gives it no PATH) whose n-th run
    names the first seq[n-1] of pods lab/a, lab/b, lab/c (the last count repeats): each run
    loses #1917's race by as much as the test says."""
    count = tmp_path / "runs"
    count.write_text("0\n")
    lines = [
        _line("Evicted pod in dry run mode", pod={"name": x, "namespace": "lab"}, node="n1")
        for x in "abc"
    ]
    cases = "".join(f"  {i}) k={k};;\n" for i, k in enumerate(seq, 1))
    script = tmp_path / "descheduler"
    script.write_text(
        "#!/bin/sh\n"
        f"read n < {count}\nn=$((n+1))\necho $n > {count}\n"
        f"case $n in\n{cases}  *) k={seq[-1]};;\nesac\n"
        + "".join(f"if [ $k -ge {i} ]; then echo '{ln}'; fi\n" for i, ln in enumerate(lines, 1))
    )
    script.chmod(0o755)
    return script


def _settled_lab() -> _Core:
    return _Core([_pod("lab", x, "n1", True) for x in "abc"])


def test_probe_waits_for_the_lab_then_runs_until_a_cycle_is_complete(tmp_path: Path) -> None:
    """Not a fixed count: the 6th run is the first to name the 3 pods, and it is the one
    taken; the probe read the lab until it had settled (a pod missing at first)."""
    first = [_pod("lab", x, "n1", True) for x in "ab"]
    core = _Core(first, first, [_pod("lab", x, "n1", True) for x in "abc"])
    binary = _fake_descheduler(tmp_path, [1, 0, 2, 1, 0, 3])
    p = _probe_binary(binary, tmp_path / "kc", "policy", core, LAB3, 3, budget=60)
    assert core.reads >= 3  # it waited for lab/c
    assert p.chosen == 5 and len(p.runs) == 6, p.how
    assert p.settled is not None and named(p.settled, set(LAB3)) == 3
    assert "named [1, 0, 2, 1, 0, 3] of its 3 pods; run 6 named the 3" in p.how


def test_probe_takes_the_answer_three_runs_agree_on(tmp_path: Path) -> None:
    """A complete dry run may name fewer pods than the real run decided (at a PDB with 0
    disruptions its cap stops the node's walk): 3 runs naming the most any named end it."""
    binary = _fake_descheduler(tmp_path, [2, 0, 2, 1, 2, 3])
    p = _probe_binary(binary, tmp_path / "kc", "p", _settled_lab(), LAB3, 3, budget=60)
    assert len(p.runs) == 5 and p.chosen == 0, p.how
    assert "named [2, 0, 2, 1, 2] of its 3 pods; 3 runs named 2, the most any named" in p.how


def test_probe_gives_up_at_its_time_budget_naming_what_it_saw(tmp_path: Path) -> None:
    """Every run skipped (named nothing): no answer to take, until the time is up."""
    binary = _fake_descheduler(tmp_path, [0])
    p = _probe_binary(binary, tmp_path / "kc", "p", _settled_lab(), LAB3, 3, budget=1.5)
    assert p.chosen is None and p.settled is None and len(p.runs) > 3
    assert p.how.startswith("no complete dry-run cycle in 2s: on the settled lab (3 of 3 pods")
    assert "none the 3 the real run decided, and no count named by 3 runs" in p.how


def test_probe_on_a_lab_that_never_settles_says_what_it_saw(tmp_path: Path) -> None:
    core = _Core([_pod("lab", "a", "n1", True)])
    binary = _fake_descheduler(tmp_path, [2])
    p = _probe_binary(binary, tmp_path / "kc", "p", core, WANT, 2, settle_timeout=0.5)
    assert p.chosen is None and p.runs == ()
    assert p.how.startswith(NOT_PROBED) and "missing: lab/b" in p.how
    assert (tmp_path / "runs").read_text() == "0\n"  # no run on an unsettled lab


def test_where_the_probe_cannot_run_the_verdict_says_so() -> None:
    """A provider that neither runs local binaries nor has a kubelet run images (and the
    embedded one with no binary for the release): no probe, and the words that go into the
    verdict (and the dry-run half's notes) name the provider and why."""
    from pytest_desched.capabilities import CAPABILITIES, Capabilities
    from pytest_desched.fidelity.engine import _settled

    neither = Capabilities(
        "other", runs_local_binary=False, loads_images=False, audit_log=False, faults=False,
        discardable=True,
    )  # fmt: skip
    for caps in (neither, CAPABILITIES["embedded"]):
        notes: list[str] = []
        dry = SimpleNamespace(
            ctx=SimpleNamespace(
                release=SimpleNamespace(binary=None),
                cluster=SimpleNamespace(capabilities=caps),
            ),
            views=[object()],
            result=SimpleNamespace(notes=notes),
        )
        fates, how = _settled(dry, 1)  # type: ignore[arg-type]
        assert fates is None
        assert how.startswith(f"{NOT_PROBED}: the {caps.provider} provider runs round pods from")
        assert notes == [how]


def test_on_kind_the_probe_runs_the_rounds_job_again(monkeypatch: Any) -> None:
    """kind/existing (a kubelet runs round pods from images): the probe's runs are Jobs from
    the release's suspended CronJob (mirror_jobs.job_runs), named after the round, their logs
    in the run's log folder; the settled cycle becomes the dry lab's fates."""
    from pytest_desched.capabilities import CAPABILITIES
    from pytest_desched.fidelity import engine

    asked: list[tuple[Any, ...]] = []
    runs = iter([1, 3])

    def job_runs(cluster: Any, release: Any, round_name: str, log_dir: Path) -> Any:
        asked.append((release.namespace, round_name, log_dir))
        return lambda timeout: parse_lines(
            [
                _line("Evicted pod in dry run mode", pod={"name": x, "namespace": "lab"}, node="n1")
                for x in "abc"[: next(runs)]
            ],
            "v0.36.0",
        )

    monkeypatch.setattr(engine, "job_runs", job_runs)
    live = [
        SimpleNamespace(key=f"lab/{x}", node="n1", ready=True, namespace="lab", workload="app",
                        owner=None, name=x)
        for x in "abc"
    ]  # fmt: skip
    snap = SimpleNamespace(uids={"u1", "u2", "u3"}, live=live)
    notes: list[str] = []
    dry = SimpleNamespace(
        ctx=SimpleNamespace(
            release=SimpleNamespace(binary=None, namespace="kube-system"),
            cluster=SimpleNamespace(capabilities=CAPABILITIES["kind"], core=_settled_lab()),
            log_dir=Path("/logs"),
            namespace="lab",
            descheduler_version="v0.36.0",
        ),
        views=[SimpleNamespace(before=snap, rnd=SimpleNamespace(name="descheduler-positive-dry"))],
        lab=SimpleNamespace(snapshot=lambda: snap),
        result=SimpleNamespace(notes=notes),
    )
    fates, how = engine._settled(dry, 3)  # type: ignore[arg-type]
    assert asked == [("kube-system", "descheduler-positive-dry", Path("/logs"))]
    assert fates is not None and [f.fate for f in fates] == [Fate.EVICTED] * 3
    assert "2 one-shot dry run(s) of the same image and mounted policy (Jobs from the " in how
    assert "run 2 named the 3 the real run decided" in how and notes[-1].endswith(how)


def test_the_real_half_gets_amended_copies_never_a_changed_record() -> None:
    """A built record is never changed (issue 30 item 4): the real half's records, built
    before the dry-run half ran, are replaced by copies carrying the comparison and written
    again; the dicts handed out at build time (on_record, the report) stay as they were."""
    fid = {"summary": "1 of 1 predicted", "half": "dry-run", "other": "exp[runbook]"}
    built = {"experiment": "exp[runbook]", "round_name": "r1", "fidelity": None}
    handed_out = dict(built)
    written: list[dict] = []
    real = SimpleNamespace(
        result=SimpleNamespace(records=[built], notes=[], label="exp[runbook]"),
        ctx=SimpleNamespace(evidence=SimpleNamespace(write_round=written.append)),
    )
    dry = SimpleNamespace(
        result=SimpleNamespace(
            records=[{"round_name": "r1-dry", "fidelity": fid}], label="exp[runbook-dry-run]"
        ),
        ctx=SimpleNamespace(evidence=None),
    )
    out = FidelityOutcome("fidelity-exp", dry.result, real.result, None)  # type: ignore[arg-type]
    _carry_to_real(out, dry, real)  # type: ignore[arg-type]
    amended = real.result.records[0]
    assert amended is not built and built == handed_out  # the built one: untouched
    assert list(amended) == list(built)  # same keys, same order
    assert amended["fidelity"] == {**fid, "half": "real", "other": "exp[runbook-dry-run]"}
    assert written == [amended] and dry.result.records[0]["fidelity"] is fid


def test_a_twin_probe_before_the_real_round_takes_the_run_that_named_most(
    tmp_path: Path,
) -> None:
    """Before the real round its count is not known: at most `max_runs` runs, the most taken."""
    binary = _fake_descheduler(tmp_path, [1, 2, 3])
    p = _probe_binary(binary, tmp_path / "kc", "p", _settled_lab(), LAB3, None, max_runs=2)
    assert len(p.runs) == 2 and p.chosen == 1, p.how
    assert "before the real round, 2 one-shot dry run(s)" in p.how and "run 2 taken" in p.how


def test_a_twin_probe_whose_runs_named_nothing_settles_nothing(tmp_path: Path) -> None:
    binary = _fake_descheduler(tmp_path, [0])
    p = _probe_binary(binary, tmp_path / "kc", "p", _settled_lab(), LAB3, None, max_runs=2)
    assert p.settled is None and len(p.runs) == 2 and "named [0, 0]" in p.how


def test_each_real_round_is_preceded_by_its_dry_run_twin(monkeypatch: Any) -> None:
    """The twin runs first, on the state the real round then gets (TwinRunner.run_round)."""
    from pytest_desched.experiments.framework import Runner
    from pytest_desched.fidelity.engine import TwinRunner

    order: list[str] = []
    runner = TwinRunner.__new__(TwinRunner)
    runner.result = SimpleNamespace(timings={})
    runner.twin = SimpleNamespace(twin_round=lambda name: order.append(f"dry:{name}"))
    monkeypatch.setattr(Runner, "run_round", lambda self, name: order.append(f"real:{name}"))
    runner.run_round("descheduler-positive")
    assert order == ["dry:descheduler-positive", "real:descheduler-positive"]
    assert "dry_twin" in runner.result.timings
