"""K is refused outside 1..50 before anything changes; `desched explain` reads what runs leave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.bounds import check_cycles, check_no_loop, cycles_to_run
from pytest_desched.errors import ConfigError
from pytest_desched.evidence.explain import explain, load, to_text

RS = "lab/ReplicaSet/spread-demo-1"


@pytest.mark.parametrize("bad", [0, -1, 51, "x", None, True, 2.5])
def test_cycles_out_of_range_or_not_a_number_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"give K in 1\.\.50") as info:
        check_cycles(bad)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("good", [1, 5, 50, "7"])
def test_cycles_in_range(good: object) -> None:
    assert check_cycles(good) == int(good)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", ["0", "51", "many"])
def test_desched_run_refuses_bad_cycles_with_exit_2_and_one_line(
    k: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli.main(["run", "--cycles", k, "--artifacts", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cycles" in err[0] and "1..50" in err[0], err
    assert not (tmp_path / "a").exists()  # nothing was made


def pod(name: str, node: str) -> dict[str, object]:
    return {"key": f"lab/{name}", "uid": f"u-{name}", "node": node, "owner_ref": RS}


def fate(name: str, node: str, f: str, layer: str, **kw: object) -> dict[str, object]:
    return {"pod": f"lab/{name}", "node": node, "fate": f, "layer": layer, **kw}


CYCLES = {
    "experiment": "positive-affinity-migration[pdb-lister-workaround]",
    "cycles": [
        {
            "cycle": 1,
            "round": "descheduler-positive",
            "fates": [
                fate(
                    "a", "w1", "evicted", "api-server", strategy="RemovePodsViolatingNodeAffinity"
                ),
                fate("b", "w1", "limited", "eviction-limits", reason="maximum per namespace"),
            ],
            "pods_before": [pod("a", "w1"), pod("b", "w1")],
            "evicted": [pod("a", "w1")],
            "arrived": [pod("x", "w2")],
        },
        {
            "cycle": 2,
            "round": "descheduler-positive-c2",
            "fates": [fate("x", "w2", "nodefit", "evictor-prefilter-nodefit", reason="no fit")],
            "pods_before": [pod("b", "w1"), pod("x", "w2")],
            "evicted": [],
            "arrived": [],
        },
    ],
    "loops": {"silent": True, "summary": "no eviction loop in 2 cycle(s)"},
}


def test_explain_shows_each_cycle_with_layer_strategy_and_reason(tmp_path: Path) -> None:
    f = tmp_path / "cycles.json"
    f.write_text(json.dumps(CYCLES))
    a = explain("a", load(f))
    assert [(r["cycle"], r["fate"], r.get("layer")) for r in a["cycles"]] == [
        (1, "evicted", "api-server"),
        (2, "gone", None),
    ]
    assert a["cycles"][0]["reason"] == "replaced by lab/x on w2"
    assert a["owner"] == RS
    b = explain("lab/b", load(tmp_path))  # the evidence folder: its cycles.json
    assert [(r["fate"], r["layer"]) for r in b["cycles"]] == [
        ("limited", "eviction-limits"),
        ("not-picked", "policy"),
    ]
    x = explain("x", load(f))
    assert [r["fate"] for r in x["cycles"]] == ["absent", "nodefit"]
    assert x["cycles"][0]["reason"] == "created during this cycle on w2"
    text = to_text(a).splitlines()
    assert text[0].startswith("pod lab/a (owner lab/ReplicaSet/spread-demo-1)")
    assert text[-1] == "loop detector: no eviction loop in 2 cycle(s)"
    assert len(text) <= 24  # one screen


def test_explain_reads_a_plain_round_record_and_a_replay_ledger(tmp_path: Path) -> None:
    rec = tmp_path / "r.json"
    rec.write_text(
        json.dumps(
            {
                "experiment": "e",
                "round_name": "r1",
                "decisions": [
                    {
                        "namespace": "lab",
                        "name": "a",
                        "fate": "refused",
                        "layer": "api-server",
                        "status_code": 429,
                        "reason": "TooManyRequests",
                        "checks": [],
                    }
                ],
            }
        )
    )
    [row] = explain("a", load(rec))["cycles"]
    assert (row["fate"], row["layer"], row["reason"]) == (
        "refused",
        "api-server",
        "HTTP 429 TooManyRequests",
    )
    led = tmp_path / "ledger.json"
    led.write_text(
        json.dumps(
            {
                "source": "log",
                "rounds": [{"name": "r1"}, {"name": "r2"}],
                "rows": [
                    {
                        "pod": "lab/a",
                        "node": "w1",
                        "fates": [
                            {
                                "fate": "filtered",
                                "layer": "evictor-filter",
                                "checks": ["minPodAge"],
                            },
                            {"fate": "evicted", "layer": "api-server", "strategy": "PodLifeTime"},
                        ],
                    }
                ],
            }
        )
    )
    rows = explain("a", load(led))["cycles"]
    assert [(r["cycle"], r["fate"]) for r in rows] == [(1, "filtered"), (2, "evicted")]
    assert rows[0]["reason"] == "checks: minPodAge"


def test_explain_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "cycles.json"
    f.write_text(json.dumps(CYCLES))
    assert cli.main(["explain", "nope", "--record", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'nope'" in err[0] and "lab/a" in err[0], err
    (tmp_path / "bad.json").write_text("{not json")
    assert cli.main(["explain", "a", "--record", str(tmp_path / "bad.json")]) == 2
    assert cli.main(["explain", "a", "--record", str(tmp_path / "missing.json")]) == 2


def test_a_replay_ledger_over_rounds_feeds_the_loop_detector(tmp_path: Path) -> None:
    from pytest_desched.evidence.loops import cycles_from_ledger, detect

    def row(pod: str, node: str, *fates: str) -> dict[str, object]:
        return {
            "pod": f"lab/{pod}",
            "node": node,
            "owner": "ReplicaSet/web-1",
            "fates": [{"fate": f, "layer": None} for f in fates],
        }

    ledger = {
        "source": "replay",
        "rounds": [{"name": "r1"}, {"name": "r2"}],
        "rows": [
            row("a", "w1", "evicted", "gone"),
            row("b", "w1", "new", "evicted"),  # a's replacement, back on w1, evicted in round 2
            row("c", "w1", "new", "new"),  # b's replacement, on w1 again
            row("d", "w2", "not-picked", "not-picked"),
        ],
    }
    [loop] = detect(cycles_from_ledger(ledger)).loops
    assert (loop.owner, loop.kind, loop.cycles, loop.nodes) == (
        "lab/ReplicaSet/web-1",
        "bounce",
        [1, 2],
        ["w1"],
    )
    ledger["rows"][2]["node"] = "w2"  # the second replacement moved on: one bounce only
    assert detect(cycles_from_ledger(ledger)).silent
    f = tmp_path / "replay.json"
    f.write_text(json.dumps({"ledger": ledger}))
    text = to_text(explain("b", load(f))).splitlines()
    assert text[-1].startswith("no eviction loop in 2 cycle(s)", len("loop detector: ")), text


@pytest.mark.parametrize("k", ["0", "51", "many"])
def test_desched_replay_refuses_bad_rounds_by_the_cycles_rule(
    k: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--rounds K follows --cycles' 1..50 (one bound, bounds.py): exit 2, one line, before
    the snapshot is even read (it does not exist) and before any cluster or folder."""
    art = tmp_path / "a"
    code = cli.main(["replay", str(tmp_path / "none.yaml"), "--rounds", k, "--artifacts", str(art)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--rounds" in err[0] and "1..50" in err[0], err
    assert not art.exists()


def test_replay_rounds_bound_is_the_cycles_bound(tmp_path: Path) -> None:
    """check_inputs takes K up to 50 (was 20) and refuses 51 with the same words as --cycles."""
    from pytest_desched.replay.gen.incidents import label_move
    from pytest_desched.replay.run import check_inputs

    path = label_move().snapshot.write(tmp_path / "snap.yaml")
    assert check_inputs(path, None, None, 50, None).rounds == 50
    with pytest.raises(ConfigError, match=r"rounds 51: out of range; give K in 1\.\.50"):
        check_inputs(path, None, None, 51, None)


def test_desched_run_refuses_no_loop_without_two_cycles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # --cycles defaults to 1 and `positive` runs one cycle: "no loop" could not be seen
    assert cli.main(["run", "positive", "--no-loop", "--artifacts", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--no-loop with 1 cycle(s) of positive" in err[0], err
    assert "--cycles >= 2" in err[0]
    assert not (tmp_path / "a").exists()  # nothing was made


@pytest.mark.parametrize(("requested", "default", "k"), [(1, 1, 1), (1, 6, 6), (3, 6, 3)])
def test_no_loop_counts_the_cycles_the_experiment_will_run(
    requested: int, default: int, k: int
) -> None:
    assert cycles_to_run(requested, default) == k
    if k >= 2:  # preferred-1707-unfit runs 6 cycles by default: --no-loop alone is enough
        check_no_loop(k, "x")
    else:
        with pytest.raises(ConfigError, match="give --cycles >= 2"):
            check_no_loop(k, "x")


SKIP = "Skipping descheduling cycle: requires >=2 nodes (found=1)"


def test_explain_labels_a_skipped_cycle_skipped_with_why(tmp_path: Path) -> None:
    # cycle 2 was skipped whole: no strategy weighed b, so "not-picked, layer policy" is false
    run = json.loads(json.dumps(CYCLES))
    run["cycles"][1] |= {"skipped": SKIP, "fates": []}
    f = tmp_path / "cycles.json"
    f.write_text(json.dumps(run))
    rows = explain("b", load(f))["cycles"]
    assert [(r["fate"], r["layer"]) for r in rows] == [
        ("limited", "eviction-limits"),
        ("skipped", "-"),
    ]
    assert rows[1]["reason"] == f"the descheduler skipped this cycle: {SKIP}"
    assert rows[1]["node"] == "w1"
    led = tmp_path / "ledger.json"
    led.write_text(
        json.dumps(
            {
                "rounds": [{"name": "r1"}, {"name": "r2", "skipped": SKIP}],
                "rows": [
                    {
                        "pod": "lab/a",
                        "node": "w1",
                        "fates": [
                            {"fate": "not-picked", "layer": "policy"},
                            {"fate": "not-picked"},
                        ],
                    }
                ],
            }
        )
    )
    assert [r["fate"] for r in explain("a", load(led))["cycles"]] == ["not-picked", "skipped"]


def test_explain_a_skipped_round_record_names_the_skip(tmp_path: Path) -> None:
    rec = tmp_path / "r.json"
    rec.write_text(json.dumps({"round_name": "r1", "verdict": f"skipped:{SKIP}", "decisions": []}))
    assert load(rec)["cycles"][0]["skipped"] == SKIP
    with pytest.raises(ConfigError, match=r"skipped, no pod weighed: cycle 1: Skipping"):
        explain("a", load(rec))


def test_explain_does_not_call_a_pod_not_picked_in_a_cycle_that_crashed(tmp_path: Path) -> None:
    run = json.loads(json.dumps(CYCLES))
    run["cycles"][1] |= {"exit_code": 2, "fates": []}
    f = tmp_path / "cycles.json"
    f.write_text(json.dumps(run))
    row = explain("b", load(f))["cycles"][1]
    assert (row["fate"], row["layer"]) == ("unknown", "-")
    assert row["reason"].startswith("the cycle's descheduler exited with code 2")
