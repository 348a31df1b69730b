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
