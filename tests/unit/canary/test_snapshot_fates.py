"""`desched canary --snapshot`: the per-pod fate differences of two tracks' round on the same
snapshot, by the comparison core's identity, with each track's reason and the verdict's
explanation, in canary.md, canary.json and canary.html (no cluster: ledgers by hand)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_desched.canary.expectations import load_explanations
from pytest_desched.canary.fates import compare_fates, track_round
from pytest_desched.canary.snapshot import judge_snapshot
from pytest_desched.canary.tracks import TrackResult, run_track
from pytest_desched.config import build_config
from pytest_desched.evidence.explain import fate_reason
from pytest_desched.replay.ledger import (
    NOT_RESTORED,
    SKIPPED,
    Ledger,
    PodFate,
    PodRow,
    RoundFigures,
)

FAMILIES = ["descheduler_build_info"]
SNAP = {"path": "snap.json", "takenAt": "2026-01-15T12:00:00Z", "nodes": 3, "pods": 6}


def _row(pod: str, node: str, owner: str | None, fate: PodFate) -> PodRow:
    return PodRow(pod, node, owner, fates=[fate])


def filtered(check: str) -> PodFate:
    return PodFate("filtered", "evictor-filter", check, checks=[check])


def evicted() -> PodFate:
    by = "RemovePodsViolatingNodeAffinity"
    return PodFate("evicted", "api-server", f"by {by}", strategy=by)


def limited() -> PodFate:
    return PodFate("limited", "eviction-limits", "maxNoOfPodsToEvictPerNode")


def not_picked() -> PodFate:
    return PodFate("not-picked", "policy", "no strategy selected it")


def ledger(candidate: bool) -> Ledger:
    """scratch-a/b: filtered for local storage on the baseline, evicted on the candidate;
    web-a/b: one evicted, one cut by the per-node cap, the other way round on the candidate;
    kv-0 picked by nobody on both; gone-1 not restored on the candidate."""
    scratch = evicted if candidate else (lambda: filtered("PodsWithLocalStorage"))
    rows = [
        _row("data/scratch-a", "node-1", "ReplicaSet/scratch-5d8", scratch()),
        _row("data/scratch-b", "node-1", "ReplicaSet/scratch-5d8", scratch()),
        _row("data/web-a", "node-2", "ReplicaSet/web-7f", limited() if candidate else evicted()),
        _row("data/web-b", "node-2", "ReplicaSet/web-7f", evicted() if candidate else limited()),
        _row("data/kv-0", "node-3", "StatefulSet/kv", not_picked()),
        _row(
            "data/gone-1",
            "node-3",
            None,
            PodFate(NOT_RESTORED, None, "no such node") if candidate else not_picked(),
        ),
        PodRow("data/scratch-zz", "node-2", "ReplicaSet/scratch-5d8", "replacement of x"),
    ]
    return Ledger("replay", "v0.36.0" if candidate else "v0.35.1", rows, [RoundFigures("r1")])


def rounds() -> tuple[Any, Any]:
    b = track_round("baseline", ledger(False), "v0.35.1", policy="snap.json:policy")
    c = track_round("candidate", ledger(True), "v0.36.0", values=["mine.yaml"], policy="mine.yaml")
    return b, c


def test_every_pod_is_compared_by_identity_and_differences_name_their_reasons() -> None:
    fates, compared = compare_fates(*rounds(), SNAP)
    # gone-1 is not restored on the candidate: named, not compared; a replacement is no row
    assert compared == {"data/scratch-a", "data/scratch-b", "data/web-a", "data/web-b", "data/kv-0"}
    assert [(n.what, n.why) for n in fates.not_compared] == [
        ("data/gone-1", "not restored on the candidate track: no such node")
    ]
    assert fates.coverage.line() == "compared 5 of 6 pods"
    # web-a and web-b swapped fates: the same identities up to order, not a difference
    assert fates.up_to_order == 2
    assert [d.pod for d in fates.differ] == ["data/scratch-a", "data/scratch-b"]
    d = fates.differ[0]
    assert (d.baseline, d.candidate) == ("filtered [PodsWithLocalStorage]", "evicted")
    assert d.baseline_why == "checks: PodsWithLocalStorage (evictor-filter)"
    assert d.candidate_why == "by RemovePodsViolatingNodeAffinity (api-server)"
    assert d.pods == "data/ReplicaSet/scratch-5d8@node-1"
    assert fates.same is False and len(fates.identities) == 2
    assert fates.sentences()[0] == (
        "v0.36.0 with mine.yaml would evict 2 pod(s) that v0.35.1 would not: "
        "data/scratch-a, data/scratch-b"
    )
    assert (
        fates.sentences()[1] == "v0.35.1 would evict 0 pod(s) that v0.36.0 with mine.yaml would not"
    )


def _seen(led: Ledger, version: str) -> dict[str, Any]:
    rnd = SimpleNamespace(
        succeeded=True, exit_code=0, result=SimpleNamespace(decisions=[]), logs=""
    )
    return {"result": SimpleNamespace(ledger=led, descheduler=version), "round": rnd}


def _judge(tmp_path: Path, expect: str | None, b_led: Ledger | None = None) -> Any:
    seen = {
        "baseline": _seen(b_led or ledger(False), "v0.35.1"),
        "candidate": _seen(ledger(True), "v0.36.0"),
    }
    inputs = {
        "baseline": SimpleNamespace(policy=SimpleNamespace(source="snap.json:policy")),
        "candidate": SimpleNamespace(policy=SimpleNamespace(source="mine.yaml")),
    }
    sessions = {
        "baseline": SimpleNamespace(inputs=SimpleNamespace(values_paths=())),
        "candidate": SimpleNamespace(inputs=SimpleNamespace(values_paths=(Path("mine.yaml"),))),
    }
    explanations = []
    if expect is not None:
        (tmp_path / "expect.yaml").write_text(expect)
        explanations = load_explanations(tmp_path / "expect.yaml")
    b = TrackResult("baseline", "v0.35.1", metric_names=FAMILIES)
    c = TrackResult("candidate", "v0.36.0", metric_names=FAMILIES)
    snap = SimpleNamespace(header={"takenAt": SNAP["takenAt"]}, nodes=[1, 2, 3], pods=[1] * 6)
    snap.descheduler_version = "v0.35.1"
    return judge_snapshot(b, c, seen, inputs, sessions, explanations, "snap.json", snap)  # type: ignore[arg-type]


EXPECT = """\
changes:
  - experiment: "snapshot*"
    pods: "data/ReplicaSet/scratch-*@*"
    kind: continue-evicting
    reason: "mine.yaml drops the local-storage protection for scratch pods"
    link: https://example.com/change/42
"""


def test_the_lab_triggers_and_explanations_judge_the_snapshots_pods(tmp_path: Path) -> None:
    rep = _judge(tmp_path, None)
    # filtered -> evicted on the same pods is the runbook's continue-evicting trigger
    [j] = rep.verdict.judged
    assert (j.change.kind, j.change.subject, j.status, j.trigger) == (
        "continue-evicting",
        "data/ReplicaSet/scratch-5d8@node-1",
        "unexplained",
        True,
    )
    assert not rep.ok and not rep.broken and rep.headline.startswith("FAIL")
    assert [d.status for d in rep.snapshot.differ] == ["unexplained", "unexplained"]
    explained = _judge(tmp_path, EXPECT)
    assert explained.ok, explained.verdict.reasons
    d = explained.snapshot.differ[0]
    assert (d.kind, d.status) == ("continue-evicting", "explained")
    assert d.explained_by.startswith("mine.yaml drops the local-storage protection")


def test_report_sections_md_json_html(tmp_path: Path) -> None:
    rep = _judge(tmp_path, EXPECT)
    paths = rep.write(tmp_path / "out")
    md = paths["markdown"].read_text()
    assert "## Pod fates on the snapshot" in md and "## Experiments" not in md
    assert "v0.36.0 with mine.yaml would evict 2 pod(s) that v0.35.1 would not" in md
    assert "| data/scratch-a | node-1 | filtered [PodsWithLocalStorage] |" in md
    assert "mine.yaml drops the local-storage protection" in md
    assert "2 pod(s) swapped fates with a sibling" in md
    assert "`data/gone-1`" in md and "compared 5 of 6 pods" in md
    # the classes table lists the changed class only
    assert "| snapshot[snap.json]#0 | data/ReplicaSet/scratch-5d8@node-1 |" in md
    assert "web-7f@node-2 |" not in md
    data = json.loads(paths["json"].read_text())
    assert [d["pod"] for d in data["snapshot"]["differ"]] == ["data/scratch-a", "data/scratch-b"]
    assert data["snapshot"]["same_fates_up_to_order"] is False
    page = paths["html"].read_text()
    assert page.count('data-k="pod-differs"') == 2
    assert 'data-pod="data/scratch-b"' in page
    assert "checks: PodsWithLocalStorage (evictor-filter)" in page
    assert "mine.yaml drops the local-storage protection" in page
    assert 'id="experiments"' not in page


def test_no_verdict_when_the_baselines_round_completed_no_cycle(tmp_path: Path) -> None:
    skipped = Ledger(
        "replay",
        "v0.35.1",
        [PodRow("data/kv-0", "node-3", "StatefulSet/kv", fates=[PodFate(SKIPPED, None, "x")])],
    )
    skipped.rounds = [RoundFigures("r1", skipped="requires >=2 nodes")]
    rep = _judge(tmp_path, None, skipped)
    assert rep.broken and rep.no_verdict
    assert "the baseline is no reference" in rep.no_verdict[0]
    assert "not comparable" in rep.snapshot.coverage.line()


def test_a_track_runs_its_work_on_its_own_session() -> None:
    """The snapshot canary's replay is each track's work, inside the lab canary's track
    machinery (the session closed after it, an error kept as the track's)."""
    closed: list[bool] = []
    session = SimpleNamespace(
        release=SimpleNamespace(
            descheduler_version="v0.36.0", chart=SimpleNamespace(evidence=dict)
        ),
        cluster=SimpleNamespace(
            workers=["w1"],
            capabilities=SimpleNamespace(runs_local_binary=False, local_binary_gap="none here"),
        ),
        config=build_config({"--desched-provider": "embedded"}).with_(artifacts=Path("a")),
        close=lambda: closed.append(True),
        timings={},
        failed=False,
    )
    did: list[str] = []
    out = run_track("baseline", session, (), threading.Event(), work=lambda n, s, o: did.append(n))  # type: ignore[arg-type]
    assert did == ["baseline"] and out.error is None and closed == [True]

    def boom(n: str, s: Any, o: Any) -> None:
        raise RuntimeError("restore: 3 pods not verified")

    out = run_track("candidate", session, (), threading.Event(), work=boom)  # type: ignore[arg-type]
    assert out.error == "RuntimeError: restore: 3 pods not verified"


def test_explains_reason_says_a_ledgers_code_and_checks_once() -> None:
    assert fate_reason({"reason": "429 Too Many Requests", "status_code": 429}) == (
        "HTTP 429 Too Many Requests"
    )
    assert fate_reason({"reason": "a, b", "checks": ["a", "b"]}) == "checks: a, b"
    assert fate_reason({"reason": "TooManyRequests", "status_code": 429}) == (
        "HTTP 429 TooManyRequests"
    )


def _canary(tmp_path: Path, *extra: str, capsys: Any) -> tuple[int, list[str]]:
    from pytest_desched import cli

    art = str(tmp_path / "ev")
    code = cli.main(["canary", "--candidate", "pinned", "--artifacts", art, *extra])
    return code, capsys.readouterr().err.strip().splitlines()


def test_bad_snapshot_input_exits_2_in_one_line_before_any_cluster(
    tmp_path: Path, capsys: Any
) -> None:
    code, err = _canary(tmp_path, "--snapshot", str(tmp_path / "nope.json"), capsys=capsys)
    assert code == 2 and len(err) == 1 and "--snapshot" in err[0] and "nope.json" in err[0], err
    bad = tmp_path / "pod.json"
    bad.write_text(json.dumps({"kind": "Pod", "apiVersion": "v1"}))
    code, err = _canary(tmp_path, "--snapshot", str(bad), capsys=capsys)
    assert code == 2 and len(err) == 1 and "not a ClusterSnapshot" in err[0], err
    code, err = _canary(tmp_path, "--snapshot", str(bad), "--experiment", "positive", capsys=capsys)
    assert code == 2 and "--experiment belong to the lab form" in err[0], err


def test_the_snapshot_is_a_snapshot_file_or_a_recorded_windows_start(tmp_path: Path) -> None:
    import datetime as dt

    from pytest_desched.canary.snapshot import load_start
    from pytest_desched.replay.capture.timeline import Timeline, make_header
    from pytest_desched.replay.gen.generator import generate

    snap = generate(seed=7, nodes=4, pods=20)
    start = dt.datetime(2026, 12, 1, 14, 0, tzinfo=dt.UTC)
    window = Timeline(make_header(start, 600, "test"), snap, []).write(tmp_path / "w.jsonl")
    got, source = load_start(window)
    assert source == f"{window} (the recorded window's start)"
    assert [n["metadata"]["name"] for n in got.nodes] == [n["metadata"]["name"] for n in snap.nodes]
    got, source = load_start(snap.write(tmp_path / "s.json"))
    assert source == str(tmp_path / "s.json") and len(got.pods) == len(snap.pods)
