"""A snapshot whose header disagrees with its body is named at load (issue 54): a note the
ledger carries, or a refusal where the replay would mislead (objects the header counted are
missing from the body, so its nodes would look emptier than the cluster's)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.errors import ConfigError
from pytest_desched.replay.capture.format import Snapshot
from pytest_desched.replay.gen.generator import generate


def _doc() -> dict[str, Any]:
    snap = generate(seed=54, nodes=3, pods=8)
    doc = snap.to_doc()
    doc["header"]["source"].update(nodes=len(snap.nodes), pods=len(snap.pods))
    return doc


def test_a_consistent_snapshot_loads_without_a_note() -> None:
    assert Snapshot.from_doc(_doc(), "ok").load_notes == []


def test_a_body_missing_pods_the_header_counted_is_refused() -> None:
    doc = _doc()
    doc["header"]["source"]["pods"] += 5
    with pytest.raises(
        ConfigError, match=r"counts \d+ pods, its body holds \d+: 5 pods are missing"
    ):
        Snapshot.from_doc(doc, "short")


def test_more_pods_than_counted_is_a_note() -> None:
    doc = _doc()
    doc["header"]["source"]["nodes"] -= 1
    (line,) = Snapshot.from_doc(doc, "extra").load_notes
    assert "the header counts 2 nodes, the body holds 3" in line


def test_takenat_in_the_future_is_a_note() -> None:
    doc = _doc()
    doc["header"]["takenAt"] = "2999-01-01T00:00:00Z"
    (line,) = Snapshot.from_doc(doc, "future").load_notes
    assert "takenAt is" in line and "ahead of this machine's clock" in line


def test_a_namespace_referenced_but_missing_is_a_note() -> None:
    doc = _doc()
    doc["objects"]["pods"][0]["metadata"]["namespace"] = "ghost"
    notes = Snapshot.from_doc(doc, "ghost").load_notes
    assert any("not in the snapshot" in n and "ghost (1)" in n for n in notes), notes


def test_the_descheduler_s_own_pod_is_named() -> None:
    doc = _doc()
    pod = copy.deepcopy(doc["objects"]["pods"][0])
    pod["metadata"].update(name="descheduler-7f9", uid="d-uid")
    pod["metadata"]["labels"] = {"app.kubernetes.io/name": "descheduler"}
    doc["objects"]["pods"].append(pod)
    doc["header"]["source"]["pods"] += 1
    notes = Snapshot.from_doc(doc, "own").load_notes
    assert any("1 pod(s) of the descheduler itself" in n for n in notes), notes


def test_a_big_snapshot_s_check_says_how_long_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 54: 32 s of checks on a 100,000-pod snapshot, with no line saying so."""
    from pytest_desched.commands.replay import say_check_cost

    big = tmp_path / "big.json"
    with big.open("wb") as fh:  # sparse: the size is what the line reads
        fh.truncate(147_000_000)
    say_check_cost(big)
    err = capsys.readouterr()
    line = (err.out + err.err).strip()
    assert "147 MB" in line and "about 32 s" in line and "before any cluster" in line, line
    small = tmp_path / "small.json"
    small.write_text("{}")
    say_check_cost(small)
    assert not (lambda c: (c.out + c.err).strip())(capsys.readouterr())
