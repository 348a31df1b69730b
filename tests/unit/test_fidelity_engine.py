"""Dry-run fidelity's pure parts of the engine: scope refusal, the probe's cycle split."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from pytest_desched.descheduler.decisions import Fate
from pytest_desched.descheduler.logparse import parse_lines
from pytest_desched.descheduler.policy import Policy
from pytest_desched.fidelity.engine import scope_problems
from pytest_desched.fidelity.mirror_probe import (
    NOT_PROBED,
    Expect,
    MirrorProbe,
    lab_state,
    named,
    probe,
)


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


def _fake_descheduler(tmp_path: Path, complete_from: int) -> Path:
    """A one-shot 'descheduler' (sh builtins only: the probe gives it no PATH) that names pod
    lab/a on its first runs and lab/a and lab/b from run `complete_from` on (a lost race)."""
    count = tmp_path / "runs"
    count.write_text("0\n")
    a = _line("Evicted pod in dry run mode", pod={"name": "a", "namespace": "lab"}, node="n1")
    b = _line("Evicted pod in dry run mode", pod={"name": "b", "namespace": "lab"}, node="n2")
    script = tmp_path / "descheduler"
    script.write_text(
        "#!/bin/sh\n"
        f"read n < {count}\nn=$((n+1))\necho $n > {count}\n"
        f"echo '{a}'\n"
        f"if [ \"$n\" -ge {complete_from} ]; then echo '{b}'; fi\n"
    )
    script.chmod(0o755)
    return script


def test_probe_waits_for_the_lab_then_runs_until_a_cycle_is_complete(tmp_path: Path) -> None:
    """Not a fixed count: the 6th run is the first complete one, and it is the one taken; the
    probe read the lab until it had settled (a pod missing at first) before the first run."""
    settled = [_pod("lab", "a", "n1", True), _pod("lab", "b", "n2", True)]
    core = _Core([settled[0]], [settled[0]], settled)
    binary = _fake_descheduler(tmp_path, complete_from=6)
    p = probe(binary, tmp_path / "kc", "policy", "v0.36.0", core, WANT, 2, budget=60)
    assert core.reads >= 3  # it waited for lab/b
    assert p.chosen == 5 and len(p.runs) == 6, p.how
    assert p.settled is not None and named(p.settled, set(WANT)) == 2
    assert "named [1, 1, 1, 1, 1, 2] of its 2 pods; run 6 named the 2" in p.how


def test_probe_gives_up_at_its_time_budget_naming_what_it_saw(tmp_path: Path) -> None:
    core = _Core([_pod("lab", "a", "n1", True), _pod("lab", "b", "n2", True)])
    binary = _fake_descheduler(tmp_path, complete_from=10**6)
    p = probe(binary, tmp_path / "kc", "policy", "v0.36.0", core, WANT, 2, budget=1.5)
    assert p.chosen is None and p.settled is None and p.runs
    assert p.how.startswith("no complete dry-run cycle in 2s: on the settled lab (2 of 2 pods")
    assert "none the 2 the real run decided" in p.how


def test_probe_on_a_lab_that_never_settles_says_what_it_saw(tmp_path: Path) -> None:
    core = _Core([_pod("lab", "a", "n1", True)])
    binary = _fake_descheduler(tmp_path, complete_from=1)
    p = probe(binary, tmp_path / "kc", "p", "v0.36.0", core, WANT, 2, settle_timeout=0.5)
    assert p.chosen is None and p.runs == ()
    assert p.how.startswith(NOT_PROBED) and "missing: lab/b" in p.how
    assert (tmp_path / "runs").read_text() == "0\n"  # no run on an unsettled lab
