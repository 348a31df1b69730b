"""`desched merge`: N shards' evidence folders as one run, one report, one JUnit, one verdict.

The shard folders are built here as the plugin writes them (shard.json, round records, JUnit),
from two experiments of a real run (tests/unit/data/report/entries.json); no cluster.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from pytest_desched import cli
from pytest_desched.evidence.merge import merge
from pytest_desched.evidence.shards import plan_digest, split
from tests.unit import DATA_ROOT

ENTRIES = json.loads((DATA_ROOT / "report" / "entries.json").read_text())
PLAN = ["t.py::test_pdb", "t.py::test_positive", "t.py::test_plain"]
DURATIONS = {"t.py::test_pdb": 8.0, "t.py::test_positive": 7.0, "t.py::test_plain": 6.0}
EXPERIMENT_OF = {"t.py::test_pdb": ENTRIES[0], "t.py::test_positive": ENTRIES[1]}


def junit(tests: list[str], failed: set[str]) -> str:
    cases = "".join(
        f'<testcase classname="t" name="{t.split("::")[1]}" time="1.0"><properties>'
        f'<property name="desched.report" value="/runner/report.html"/></properties>'
        + ("<failure message='boom'/>" if t in failed else "")
        + "</testcase>"
        for t in tests
    )
    return (
        f'<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="0" '
        f'failures="{len(failed)}" skipped="0" tests="{len(tests)}" time="{len(tests)}.0">'
        f"{cases}</testsuite></testsuites>"
    )


def make_shard(
    root: Path,
    k: int,
    n: int = 3,
    run_id: str = "run-7",
    failed: frozenset[str] = frozenset(),
    plan: list[str] = PLAN,
    tests: list[str] | None = None,
    with_junit: bool = True,
) -> Path:
    """One shard's evidence folder, as plugin/sharding.py leaves it."""
    folder = root / f"s{k}-{run_id}"
    folder.mkdir(parents=True)
    mine = split(plan, n, DURATIONS)[k - 1] if tests is None else tests
    experiments = []
    for t in mine:
        entry = EXPERIMENT_OF.get(t)
        if entry is None:
            continue
        rels = []
        for rec in entry["rounds"]:
            rel = f"{entry['name']}/{rec['round_name']}.json"
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(json.dumps(rec))
            rels.append(rel)
        outcome = "failed" if t in failed else "passed"
        experiments.append(
            {
                "nodeid": t,
                "name": entry["name"],
                "outcome": outcome,
                "summary": entry["summary"],
                "rounds": rels,
            }
        )
    record: dict[str, Any] = {
        "format": 1,
        "run_id": run_id,
        "shard": k,
        "of": n,
        "plan": plan,
        "plan_digest": plan_digest(plan),
        "tests": mine,
        "exit_status": 1 if failed & set(mine) else 0,
        "outcomes": {t: "failed" if t in failed else "passed" for t in mine},
        "durations": {t: DURATIONS[t] for t in mine},
        "wall_s": 30.0 + k,
        "info": {"provider": "embedded"},
        "experiments": experiments,
    }
    (folder / "shard.json").write_text(json.dumps(record))
    if with_junit:
        (folder / "junit.xml").write_text(junit(mine, set(failed) & set(mine)))
    return folder


def shards(root: Path, n: int = 3, **kw: Any) -> list[Path]:
    return [make_shard(root, k, n, **kw) for k in range(1, n + 1)]


def test_three_shards_make_one_run_one_report_one_junit(tmp_path: Path) -> None:
    folders = shards(tmp_path / "in")
    out = tmp_path / "merged"
    assert cli.main(["merge", *map(str, reversed(folders)), "--out-dir", str(out)]) == 0
    summary = json.loads((out / "run-summary.json").read_text())
    assert summary["verdict"] == "passed" and summary["shards"] == 3
    assert list(summary["tests"]) == PLAN  # the unsharded run's order, whatever the order given
    assert {t["shard"] for t in summary["tests"].values()} == {"1/3", "2/3", "3/3"}
    got = {e["label"]: (e["outcome"], e["evictions"]) for e in summary["experiments"]}
    assert got == {e["name"]: (e["summary"]["outcome"], e["summary"]["evictions"]) for e in ENTRIES}
    page = (out / "report.html").read_text()
    assert all(e["name"] in page for e in ENTRIES) and "3 shards of run run-7" in page
    for k, f in enumerate(folders, 1):  # every round record kept with its shard
        copy = out / f"shard-{k}-of-3"
        kept = sorted(p.relative_to(f) for p in f.rglob("*.json"))
        assert sorted(p.relative_to(copy) for p in copy.rglob("*.json")) == kept
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "0"
    props = [
        {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in suite.iter("testcase")
    ]
    assert sorted(p["desched.shard"] for p in props) == ["1/3", "2/3", "3/3"]
    assert {p["desched.report"] for p in props} == {str(out / "report.html")}
    assert json.loads((out / "desched-durations.json").read_text()) == DURATIONS


def test_a_failure_in_any_shard_fails_the_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folders = shards(tmp_path / "in", failed=frozenset({"t.py::test_positive"}))
    out = tmp_path / "merged"
    assert cli.main(["merge", *map(str, folders), "--out-dir", str(out)]) == 1
    text = capsys.readouterr().out
    assert "t.py::test_positive: failed" in text and "FAILED" in text
    summary = json.loads((out / "run-summary.json").read_text())
    assert summary["verdict"] == "failed"
    shard = summary["tests"]["t.py::test_positive"]["shard"]
    assert f"shard {shard} exited 1" in summary["failed"]
    assert ET.parse(out / "junit.xml").getroot().find("testsuite").get("failures") == "1"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "case,why",
    [
        ("missing", r"run run-7: shard 3/3 missing \(have 1/3, 2/3\); a missing shard is not"),
        ("duplicate", r"shard 2/3 given twice: .* and .*; give it once"),
        ("foreign", r"a foreign shard \(run id 'run-8', but .* has 'run-7'\)"),
        ("other N", r"a foreign shard \(shard count N 2"),
        ("other selection", r"a foreign shard \(selection"),
        ("overlap", r"do not cover the selection once \(run twice: \['t.py::test_plain'\]"),
        ("junit", r"only shard\(s\) 1/3, 2/3 have junit.xml; give every shard --junitxml"),
    ],
)
def test_not_one_whole_run_is_bad_input_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, why: str
) -> None:
    root = tmp_path / "in"
    folders = shards(root) if case != "junit" else []
    if case == "missing":
        folders = folders[:2]
    elif case == "duplicate":
        folders.append(folders[1])
    elif case == "foreign":
        folders[2] = make_shard(root, 3, run_id="run-8")
    elif case == "other N":
        folders[2] = make_shard(root, 2, n=2, run_id="run-7x", plan=PLAN)
        folders[2] = _same_run(folders[2])
    elif case == "other selection":
        folders[2] = make_shard(root, 3, run_id="run-9", plan=PLAN[:2])
        folders[2] = _same_run(folders[2])
    elif case == "overlap":
        folders[2] = make_shard(root, 3, run_id="run-10", tests=["t.py::test_plain"])
        folders[1] = make_shard(root, 2, run_id="run-10", tests=["t.py::test_plain"])
        folders[0] = make_shard(root, 1, run_id="run-10", tests=PLAN[:2])
        for f in folders:
            _same_run(f)
    elif case == "junit":
        folders = [make_shard(root, k, with_junit=k < 3) for k in (1, 2, 3)]
    out = tmp_path / "merged"
    assert cli.main(["merge", *map(str, folders), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    assert re.search(why, err), err
    assert not out.exists()


def _same_run(folder: Path) -> Path:
    """Make a shard built under another name claim run-7 (as a foreign shard would)."""
    rec = json.loads((folder / "shard.json").read_text())
    rec["run_id"] = "run-7"
    (folder / "shard.json").write_text(json.dumps(rec))
    return folder


def test_the_output_folder_is_new_or_empty_and_apart_from_the_shards(tmp_path: Path) -> None:
    folders = shards(tmp_path / "in")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("someone's")
    assert cli.main(["merge", *map(str, folders), "--out-dir", str(busy)]) == 2
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    assert cli.main(["merge", *map(str, folders), "--out-dir", str(folders[0] / "m")]) == 2
    assert not (folders[0] / "m").exists()


def test_shards_that_wrote_no_junit_merge_without_one(tmp_path: Path) -> None:
    m = merge(shards(tmp_path / "in", with_junit=False), tmp_path / "merged")
    assert m.ok and m.summary["junit"] is None
    assert not (tmp_path / "merged" / "junit.xml").exists()


def test_the_sharded_ci_recipe_feeds_the_merge_what_it_reads() -> None:
    """examples/ci/descheduler-e2e-sharded.yml: each shard's JUnit inside its evidence folder
    (where the merge looks for it), N from the matrix, and a merge command `desched` takes."""
    import yaml

    from tests.unit import REPO

    recipe = yaml.safe_load((REPO / "examples/ci/descheduler-e2e-sharded.yml").read_text())
    shard_run = next(
        s["run"] for s in recipe["jobs"]["e2e"]["steps"] if "--desched-shard" in s.get("run", "")
    )
    art = re.search(r"--desched-artifacts (.+?) --", shard_run)[1]  # type: ignore[index]
    assert f"--junitxml {art}/junit.xml" in shard_run
    assert "--desched-shard ${{ matrix.shard }}/${{ strategy.job-total }}" in shard_run
    merge_run = next(
        s["run"] for s in recipe["jobs"]["merge"]["steps"] if "merge" in s.get("run", "")
    )
    args = cli.parser().parse_args(merge_run.split(">>")[0].split()[1:])
    assert (args.command, args.shards, args.out_dir) == ("merge", ["shards/*"], "desched-merged")
    assert recipe["jobs"]["merge"]["needs"] == "e2e" and recipe["jobs"]["merge"]["if"] == "always()"
