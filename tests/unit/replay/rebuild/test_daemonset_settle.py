"""The restore waits for the DaemonSet controller (replay/rebuild/writes.py wait_daemonsets): its pods on
the runner node and on a skipped pod's node are created after the hold lifts, so without the
wait two reads of the restored cluster could differ (seen in CI: 31 then 32 pods)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_desched.replay.rebuild import writes
from pytest_desched.replay.rebuild.writes import daemonsets_unsettled, wait_daemonsets


def _ds(name: str, gen: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "kube-system", "name": name, "generation": gen},
        "status": status,
    }


@pytest.mark.parametrize(
    ("status", "gen", "settled"),
    [
        ({}, 1, False),  # written by the restore: the controller has not synced it
        (
            {"observedGeneration": 1, "desiredNumberScheduled": 5, "currentNumberScheduled": 4},
            1,
            False,
        ),
        (
            {"observedGeneration": 1, "desiredNumberScheduled": 5, "currentNumberScheduled": 5},
            2,
            False,
        ),
        (
            {"observedGeneration": 2, "desiredNumberScheduled": 5, "currentNumberScheduled": 5},
            2,
            True,
        ),
        (
            {"observedGeneration": 1, "desiredNumberScheduled": 0, "currentNumberScheduled": 0},
            1,
            True,
        ),
    ],
)
def test_settled_is_the_controllers_own_count_at_the_generation(
    status: dict[str, Any], gen: int, settled: bool
) -> None:
    left = daemonsets_unsettled([_ds("agent", gen, **status)])
    assert (left == []) is settled, left


def test_the_wait_lasts_until_the_runner_pod_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [
        [_ds("agent")],
        [_ds("agent", observedGeneration=1, desiredNumberScheduled=5, currentNumberScheduled=4)],
        [_ds("agent", observedGeneration=1, desiredNumberScheduled=5, currentNumberScheduled=5)],
    ]
    reads: list[int] = []

    def list_all(api: Any, path: str) -> list[dict[str, Any]]:
        assert path == "/apis/apps/v1/daemonsets"
        reads.append(1)
        unrestored = _ds("not-restored")  # not the restore's: never waited for
        return [*steps[min(len(reads), len(steps)) - 1], unrestored]

    monkeypatch.setattr(writes.kubeapi, "list_all", list_all)
    assert wait_daemonsets(None, {"kube-system/agent"}, timeout=10) == ""
    assert len(reads) == 3


def test_a_daemonset_that_never_settles_is_a_note_not_a_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stuck = _ds("agent", observedGeneration=1, desiredNumberScheduled=5, currentNumberScheduled=4)
    monkeypatch.setattr(writes.kubeapi, "list_all", lambda api, path: [stuck])
    note = wait_daemonsets(None, {"kube-system/agent"}, timeout=0.3)
    assert "kube-system/agent (4/5 scheduled)" in note and "not settled" in note, note


def test_no_daemonset_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writes.kubeapi, "list_all", lambda *a: pytest.fail("read"))
    assert wait_daemonsets(None, set(), timeout=10) == ""
