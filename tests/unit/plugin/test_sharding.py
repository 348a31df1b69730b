"""`--desched-shard K/N` seen from a user's run: checked at configure, one part of the selected
tests per shard, each shard a complete run with its own `shard.json`, and `desched merge`
over them. The suites here are plain tests (no cluster fixture), so nothing starts a cluster.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.evidence.shards import split
from pytest_desched.plugin.options import SHARD_OPTIONS
from pytest_desched.plugin.sharding import CI_RUN_IDS

pytest_plugins = ["pytester"]

SUITE = """
import pytest

@pytest.mark.parametrize("i", range(5))
def test_step(i):
    assert i != {fail}

@pytest.mark.xfail(strict=True)
def test_known():
    assert False
"""
TESTS = [f"test_suite.py::test_step[{i}]" for i in range(5)] + ["test_suite.py::test_known"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for _, env, _ in SHARD_OPTIONS:
        monkeypatch.delenv(env, raising=False)
    for env in CI_RUN_IDS:
        monkeypatch.delenv(env, raising=False)


def run_shard(pytester: pytest.Pytester, spec: str, *args: str) -> tuple[int, Path, str]:
    """One shard in its own evidence folder: exit code, folder, terminal output."""
    art = pytester.path / f"evidence-{spec.replace('/', '-of-')}"
    res = pytester.runpytest(
        "-p", "no:cacheprovider", f"--desched-shard={spec}", f"--desched-artifacts={art}", *args
    )
    return int(res.ret), art, res.stdout.str() + res.stderr.str()


def shard_record(folder: Path) -> dict:
    return json.loads((folder / "shard.json").read_text())


def test_three_shards_run_every_test_once_and_merge_to_one_verdict(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=-1))
    folders = []
    for k in (1, 2, 3):
        rc, art, out = run_shard(pytester, f"{k}/3", "--desched-shard-run-id=r1")
        assert rc == 0, out
        assert f"desched shard {k}/3 of run r1: 2 of 6 selected tests" in out
        folders.append(art)
    records = [shard_record(f) for f in folders]
    assert [r["tests"] for r in records] == split(TESTS, 3, {})
    assert sorted(t for r in records for t in r["tests"]) == sorted(TESTS)
    assert all(r["plan"] == TESTS and r["run_id"] == "r1" for r in records)
    outcomes = {t: o for r in records for t, o in r["outcomes"].items()}
    assert outcomes == {**dict.fromkeys(TESTS[:5], "passed"), TESTS[5]: "xfailed"}
    assert cli.main(["merge", *map(str, folders), "--out-dir", str(tmp_path / "m")]) == 0
    assert set(json.loads((tmp_path / "m" / "desched-durations.json").read_text())) == set(TESTS)


def test_a_failing_test_fails_its_shard_and_the_merge(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=3))
    runs = [run_shard(pytester, f"{k}/2", "--desched-shard-run-id=r2") for k in (1, 2)]
    assert sorted(rc for rc, _, _ in runs) == [0, 1]
    assert cli.main(["merge", *(str(a) for _, a, _ in runs), "--out-dir", str(tmp_path / "m")]) == 1
    summary = json.loads((tmp_path / "m" / "run-summary.json").read_text())
    assert summary["tests"]["test_suite.py::test_step[3]"]["outcome"] == "failed"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--desched-shard=0/3", "--desched-shard-run-id=r"], "use K/N with 1 <= K <= N"),
        (["--desched-shard=4/3", "--desched-shard-run-id=r"], "use K/N with 1 <= K <= N"),
        (["--desched-shard=2/3"], "needs a run id every shard of the run shares"),
        (["--desched-shard=1/3", "--desched-shard-run-id=a b"], "letters, digits"),
        (
            ["--desched-shard=1/3", "--desched-shard-run-id=r", "--desched-shard-durations=no"],
            "--desched-shard-durations no: cannot read it",
        ),
    ],
)
def test_bad_shard_options_are_usage_errors_before_anything_runs(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=-1))
    res = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert message in res.stderr.str()
    assert "passed" not in res.stdout.str()


def test_the_ci_run_id_is_shared_by_the_shards(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=-1))
    monkeypatch.setenv("GITHUB_RUN_ID", "987654")
    monkeypatch.setenv("DESCHED_SHARD", "2/2")  # the matrix can set the shard by env too
    res = pytester.runpytest("-p", "no:cacheprovider", f"--desched-artifacts={pytester.path / 'e'}")
    assert res.ret == 0
    record = shard_record(pytester.path / "e")
    assert (record["run_id"], record["shard"], record["of"]) == ("987654", 2, 2)


def test_the_recorded_durations_balance_the_split(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=-1))
    durations = {t: 1.0 for t in TESTS} | {TESTS[0]: 5.0}  # one long test: a shard to itself
    (pytester.path / "desched-durations.json").write_text(json.dumps(durations))
    rc, art, out = run_shard(pytester, "1/2", "--desched-shard-run-id=r3")
    assert rc == 0, out
    assert shard_record(art)["tests"] == [TESTS[0]]
    assert "split by" in out and "desched-durations.json" in out


def test_an_empty_shard_is_an_error_unless_allowed_and_never_a_silent_exit_5(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=-1))
    rc, art, out = run_shard(pytester, "7/7", "--desched-shard-run-id=r4")
    assert rc == pytest.ExitCode.USAGE_ERROR
    assert "--desched-shard 7/7: no tests for this shard (6 selected over 7 shards)" in out
    assert not (art / "shard.json").exists()
    rc, art, out = run_shard(
        pytester, "7/7", "--desched-shard-run-id=r4", "--desched-shard-allow-empty"
    )
    assert rc == pytest.ExitCode.OK, out
    assert "desched shard 7/7 of run r4: no tests (6 selected; allowed" in out
    assert shard_record(art)["empty"] is True and shard_record(art)["exit_status"] == 0


def test_nothing_selected_is_refused_even_when_empty_shards_are_allowed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=-1))
    rc, _, out = run_shard(
        pytester, "1/2", "--desched-shard-run-id=r5", "--desched-shard-allow-empty", "-k", "nomatch"
    )
    assert rc == pytest.ExitCode.USAGE_ERROR
    assert "no tests selected to split; check -m, -k" in out


def test_collect_only_leaves_no_shard_record(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE.format(fail=-1))
    rc, art, _ = run_shard(pytester, "1/2", "--desched-shard-run-id=r6", "--collect-only")
    assert rc == 0
    assert not (art / "shard.json").exists()  # a merge must never pass on tests never run
