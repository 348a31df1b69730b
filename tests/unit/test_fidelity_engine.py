"""Dry-run fidelity's pure parts of the engine: scope refusal, the probe's cycle split."""

from __future__ import annotations

import json
from types import SimpleNamespace

from pytest_desched.descheduler.decisions import Fate
from pytest_desched.descheduler.logparse import parse_lines
from pytest_desched.descheduler.policy import Policy
from pytest_desched.fidelity.engine import scope_problems
from pytest_desched.fidelity.mirror_probe import MirrorProbe, named


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
