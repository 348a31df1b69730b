"""The split of one run over N shards: deterministic, balanced by recorded durations, checked."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.evidence.shards import (
    Shard,
    load_durations,
    parse_shard,
    plan_digest,
    read_shard,
    split,
    weights,
)

TESTS = [f"tests/e2e/test_x.py::test_{i}" for i in range(12)]


@pytest.mark.parametrize(
    "text,shard", [("1/1", Shard(1, 1)), ("2/3", Shard(2, 3)), (" 3 / 3", Shard(3, 3))]
)
def test_k_of_n_parses(text: str, shard: Shard) -> None:
    assert parse_shard(text) == shard
    assert str(parse_shard(text)) == f"{shard.k}/{shard.n}"


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "1/0", "a/b", "-1/3", "1/3/4", ""])
def test_a_bad_k_of_n_is_refused_naming_the_flag_and_the_fix(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--desched-shard .*1 <= K <= N"):
        parse_shard(text)


def test_every_test_runs_in_exactly_one_shard_and_keeps_its_order() -> None:
    durations = {t: float(i % 5 + 1) for i, t in enumerate(TESTS)}
    for n in (1, 2, 3, 5, 12, 15):
        shards = split(TESTS, n, durations)
        assert len(shards) == n
        assert sorted(t for s in shards for t in s) == sorted(TESTS)
        for s in shards:  # each shard runs its tests in collection order
            assert s == [t for t in TESTS if t in s]


def test_the_same_inputs_give_the_same_split_wherever_it_runs() -> None:
    durations = {t: random.Random(7).uniform(1, 30) for t in TESTS}
    first = split(TESTS, 3, durations)
    assert split(list(TESTS), 3, dict(reversed(durations.items()))) == first
    equal = split(TESTS, 3, {})  # ties broken by position, not by chance
    assert equal == split(TESTS, 3, {})
    assert [len(s) for s in equal] == [4, 4, 4]


def test_shards_are_balanced_by_the_recorded_durations() -> None:
    # One long test and many short ones: counting tests would put the long one with three
    # others; by seconds it gets a shard of its own.
    tests = ["long", *(f"short{i}" for i in range(6))]
    durations = {"long": 30.0, **{f"short{i}": 10.0 for i in range(6)}}
    shards = split(tests, 3, durations)
    loads = sorted(sum(durations[t] for t in s) for s in shards)
    assert loads == [30.0, 30.0, 30.0]
    assert ["long"] in shards
    # Random weights: LPT stays within 4/3 of the ideal (the total over N, or the longest test).
    rng = random.Random(41)
    for _ in range(50):
        durations = {t: rng.uniform(1, 60) for t in TESTS}
        for n in (2, 3, 4):
            heaviest = max(sum(durations[t] for t in s) for s in split(TESTS, n, durations))
            ideal = max(sum(durations.values()) / n, max(durations.values()))
            assert heaviest <= ideal * 4 / 3 + 1e-9


def test_a_test_without_a_recorded_duration_weighs_the_mean_of_the_others() -> None:
    assert weights(["a", "b", "new"], {"a": 10.0, "b": 20.0}) == [10.0, 20.0, 15.0]
    assert weights(["a", "b"], {}) == [1.0, 1.0]  # no figures at all: equal weights
    assert weights(["a"], {"gone": 99.0}) == [1.0]  # a stale file's other tests do not count


def test_the_plan_digest_changes_with_the_selection() -> None:
    assert plan_digest(TESTS) == plan_digest(list(TESTS))
    assert plan_digest(TESTS) != plan_digest(TESTS[:-1])
    assert plan_digest(TESTS) != plan_digest(list(reversed(TESTS)))


def test_durations_file_is_read_or_refused_with_the_fix(tmp_path: Path) -> None:
    good = tmp_path / "d.json"
    good.write_text(json.dumps({"t1": 3, "t2": 4.5}))
    assert load_durations(good) == {"t1": 3.0, "t2": 4.5}
    for text, why in (("{", "not JSON"), ('{"t": -1}', "seconds"), ('["t"]', "seconds")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=f"--desched-shard-durations {bad}: .*{why}"):
            load_durations(bad)
    with pytest.raises(ConfigError, match=r"cannot read it .*check the path"):
        load_durations(tmp_path / "missing.json")


def test_a_folder_without_a_shard_record_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no shard\.json; not a shard's evidence folder"):
        read_shard(tmp_path)
    (tmp_path / "shard.json").write_text('{"format": 1}')
    with pytest.raises(ConfigError, match="not a shard record of format 1"):
        read_shard(tmp_path)
    with pytest.raises(ConfigError, match="not a folder"):
        read_shard(tmp_path / "nope")
