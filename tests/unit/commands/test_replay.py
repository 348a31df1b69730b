"""`desched snapshot` / `desched replay` wiring: bad input refused before anything runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.commands.parser import parser
from pytest_desched.descheduler.inputs import UserInputs, check_user_inputs
from pytest_desched.errors import ConfigError
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.run import check_inputs
from tests.unit import DATA_ROOT

DATA = DATA_ROOT / "descheduler-v0.36.0"


def _parse(*argv: str) -> argparse.Namespace:
    return parser().parse_args(list(argv))


def test_replay_from_a_log_needs_no_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse("replay", "--from-log", str(DATA / "pdb-429.log"), "-o", "json")
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"] == "log"
    assert sum(r["fates"][0]["status_code"] == 429 for r in out["rows"]) == 3


def test_replay_needs_exactly_one_source(tmp_path: Path) -> None:
    args = _parse("replay")
    with pytest.raises(ConfigError, match="exactly one"):
        args.func(args)
    args = _parse("replay", str(tmp_path / "snap.yaml"), "--from-log", str(DATA / "pdb-429.log"))
    with pytest.raises(ConfigError, match="exactly one"):
        args.func(args)


def test_replay_of_a_missing_snapshot_is_bad_input(tmp_path: Path) -> None:
    from pytest_desched.replay.run import check_inputs

    with pytest.raises(ConfigError, match="no such file"):
        check_inputs(tmp_path / "snap.yaml", None, None, 1, None)


def test_replay_rounds_and_log_are_checked_first(tmp_path: Path) -> None:
    from pytest_desched.replay.gen.incidents import label_move
    from pytest_desched.replay.run import check_inputs

    path = label_move().snapshot.write(tmp_path / "snap.yaml")
    with pytest.raises(ConfigError, match="rounds 0: out of range"):
        check_inputs(path, None, None, 0, None)
    with pytest.raises(ConfigError, match="--log"):
        check_inputs(path, None, None, 1, tmp_path / "nope.log")


def test_snapshot_requires_context_and_output() -> None:
    with pytest.raises(SystemExit):
        _parse("snapshot", "-o", "x.yaml")
    args = _parse("snapshot", "--context", "prod")
    with pytest.raises(ConfigError, match="needs --output-file FILE"):
        args.func(args)


def test_snapshot_without_a_kubeconfig_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    args = _parse(
        "snapshot",
        "--context",
        "prod",
        "--exporter",
        "client",
        "--output-file",
        str(tmp_path / "s"),
    )
    with pytest.raises(ConfigError, match="never read implicitly"):
        args.func(args)
    assert not (tmp_path / "s").exists()


# -- the one configuration: the policy announced is the policy applied ----------------------
DEDUP_ONLY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: dedup
  pluginConfig:
  - name: DefaultEvictor
  - name: RemoveDuplicates
  plugins:
    balance:
      enabled:
      - RemoveDuplicates
"""


class _Stop(Exception):
    """Raised by the stand-in engine once it has what the command gave it: no cluster."""


def _announced(policy: Path | None) -> UserInputs:
    """What the replay's session says before the cluster (DeschedSession.inputs): the same
    check of the configuration's policy, its helm render and lint left out (no values)."""
    return check_user_inputs(policy, (), lambda files: None, lambda target, label: None)


@pytest.mark.parametrize("source", ["snapshot", "timeline"])
@pytest.mark.parametrize("given", ["DESCHED_POLICY", "--policy"])
def test_replay_applies_the_policy_it_announces(
    source: str, given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 51): with DESCHED_POLICY set to a RemoveDuplicates-only policy,
    `desched replay SNAPSHOT` announced that policy (the session reads the configuration)
    and applied the snapshot's own node-affinity one: its `--policy` was replay's alone and
    never fell back to DESCHED_POLICY. Now it is the configuration's, on both replay paths."""
    snap = label_move().snapshot.write(tmp_path / "snap.yaml")
    dedup = tmp_path / "dedup.yaml"
    dedup.write_text(DEDUP_ONLY)
    seen: dict[str, Any] = {}

    def engine(*args: Any, **kw: Any) -> Any:
        seen.update(kw)
        raise _Stop

    monkeypatch.setattr("pytest_desched.replay.run.replay", engine)
    monkeypatch.setattr("pytest_desched.replay.timeline.run.replay_timeline", engine)
    monkeypatch.setattr("pytest_desched.replay.timeline.run.check_timeline", lambda *a: None)
    monkeypatch.delenv("DESCHED_POLICY", raising=False)
    argv = ["replay", str(snap)] if source == "snapshot" else ["replay", "--timeline", "t.jsonl"]
    argv += ["--artifacts", str(tmp_path / "art")]
    if given == "DESCHED_POLICY":
        monkeypatch.setenv("DESCHED_POLICY", str(dedup))
    else:
        argv += ["--policy", str(dedup)]
    args = _parse(*argv)
    with pytest.raises(_Stop):
        args.func(args)
    announced = _announced(seen["config"].policy)
    applied = check_inputs(snap, None, seen["policy"], 1, None).policy
    assert announced.describe()[0].startswith("policy: --policy dedup.yaml"), announced.describe()
    assert announced.policy is not None and announced.policy.digest() == applied.digest()
    assert applied.source == str(dedup)
    assert "RemoveDuplicates" in applied.to_yaml()
    assert "RemovePodsViolatingNodeAffinity" not in applied.to_yaml()


def test_replay_without_a_policy_runs_the_snapshot_s_and_announces_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset (no flag, no DESCHED_POLICY), the snapshot's ConfigMap runs, as before, and the
    session announces no policy of the user's."""
    snap = label_move().snapshot.write(tmp_path / "snap.yaml")
    seen: dict[str, Any] = {}

    def engine(*args: Any, **kw: Any) -> Any:
        seen.update(kw)
        raise _Stop

    monkeypatch.setattr("pytest_desched.replay.run.replay", engine)
    monkeypatch.delenv("DESCHED_POLICY", raising=False)
    args = _parse("replay", str(snap), "--artifacts", str(tmp_path / "art"))
    with pytest.raises(_Stop):
        args.func(args)
    assert seen["policy"] is None and seen["config"].policy is None
    applied = check_inputs(snap, None, None, 1, None).policy
    assert "the incident's ConfigMap" in applied.source
