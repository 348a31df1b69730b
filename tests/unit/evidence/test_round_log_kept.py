"""A failed round's "full log" is named in the evidence folder, not the run's temp folder.

The raw log lies in `<run_dir>/round-logs` ($TMPDIR/desched-.../candidate/round-logs/...
in a canary), removed when the run ends; canary.md and the exit line quoted that path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_desched.errors import RoundFailed
from pytest_desched.evidence import Redactor
from pytest_desched.evidence.writer import EvidenceWriter, keep_log, kept_log


def failed_round(raw: Path) -> RoundFailed:
    return RoundFailed(
        "kube-system", "descheduler-positive", "descheduler-positive-x1", 1,
        ["E1202 unknown plugin"], raw, ["a note"],
    )  # fmt: skip


def test_the_full_log_is_named_in_the_evidence_and_outlives_the_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "desched-abc" / "candidate"
    raw = run_dir / "round-logs" / "descheduler-positive-x1.log"
    raw.parent.mkdir(parents=True)
    raw.write_text("I1202 start on node worker-secret-1\nE1202 unknown plugin\n")
    evidence = EvidenceWriter(
        tmp_path / "art" / "candidate", Redactor(node_names=["worker-secret-1"])
    )

    kept = kept_log(evidence, "positive-affinity-migration[runbook]", failed_round(raw))
    shutil.rmtree(tmp_path / "desched-abc")  # the run's temp folder goes at its end

    assert kept.log_path is not None and kept.log_path.is_relative_to(evidence.root)
    assert f"full log: {kept.log_path}" in str(kept) and str(run_dir) not in str(kept)
    assert "E1202 unknown plugin" in kept.log_path.read_text()
    assert "worker-secret-1" not in kept.log_path.read_text()  # redacted like the records
    assert (kept.exit_code, kept.error_lines, kept.notes) == (
        1,
        ["E1202 unknown plugin"],
        ["a note"],
    )


def test_without_evidence_or_log_the_failure_is_unchanged(tmp_path: Path) -> None:
    raw = tmp_path / "round.log"
    failed = failed_round(raw)
    assert kept_log(EvidenceWriter(tmp_path / "art"), "x", failed) is failed  # no such file
    raw.write_text("log\n")
    assert kept_log(None, "x", failed) is failed


def test_a_round_that_fails_inside_keep_log_names_the_copy(tmp_path: Path) -> None:
    """What Runner.run_round wraps its round in."""
    raw = tmp_path / "tmp" / "round.log"
    raw.parent.mkdir()
    raw.write_text("E1202 unknown plugin\n")
    evidence = EvidenceWriter(tmp_path / "art")
    with pytest.raises(RoundFailed) as err, keep_log(evidence, "positive"):
        raise failed_round(raw)
    assert err.value.log_path == evidence.root / "positive" / "round.log"
    assert f"full log: {evidence.root}" in str(err.value)
