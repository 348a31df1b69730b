"""providers/embedded/bring_up.py: work beside kwokctl, and when the kubeconfig is whole."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_desched.providers.embedded.bring_up import Beside, kubeconfig_written


def test_the_side_runs_at_once_and_its_result_comes_back_at_join() -> None:
    started = threading.Event()

    def work(stop: threading.Event) -> str:
        started.set()
        assert stop.wait(30), "join never told the side the caller was done"
        return "kubelet"

    side = Beside(work, name="t")
    assert started.wait(30)  # running while the caller does its own work
    assert side.join() == "kubelet"


def test_the_sides_error_is_raised_in_the_caller() -> None:
    def work(stop: threading.Event) -> None:
        raise RuntimeError("descheduler binary missing")

    side = Beside(work, name="t")
    with pytest.raises(RuntimeError, match="descheduler binary missing"):
        side.join()


def test_a_kubeconfig_counts_as_written_only_when_whole(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig.yaml"
    assert not kubeconfig_written(path)  # not there yet
    path.write_text("apiVersion: v1\nclusters:\n- cluster: {server: 'https://127")  # half
    assert not kubeconfig_written(path)
    path.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")  # no context yet
    assert not kubeconfig_written(path)
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: kwok-c\n")
    assert kubeconfig_written(path)


def test_abandon_does_not_wait_and_no_gated_step_starts_after_it() -> None:
    """Ctrl-C during kwokctl: the side's imports are not waited for, and it starts no kubelet."""
    from pytest_desched.providers.embedded.bring_up import Stop

    importing, go_on, ended = threading.Event(), threading.Event(), threading.Event()
    started: list[str] = []

    def work(stop: Stop) -> str | None:
        importing.set()
        go_on.wait(30)  # slow work the caller must not wait for
        try:
            return stop.unless_set(lambda: started.append("kubelet") or "kubelet")
        finally:
            ended.set()

    side = Beside(work, name="t")
    assert importing.wait(30)
    side.abandon()  # returns at once although the side is still busy
    assert not ended.is_set()
    go_on.set()
    assert ended.wait(30)
    assert started == []
