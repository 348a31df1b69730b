"""The embedded cluster's `kwokctl create` line (providers/embedded/bring_up.py)."""

from __future__ import annotations

from pathlib import Path

from pytest_desched.providers.embedded.bring_up import kwokctl_create_args


def test_the_controller_manager_and_scheduler_run_without_leader_election() -> None:
    """Was: both elected themselves; on a starved machine (load 30) a lease renewal missed
    its 5 s deadline and both exited with "leaderelection lost", killing a 100,000-pod run."""
    bins = {
        k: Path(f"/bin/{k}")
        for k in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "etcd")
    }
    args = kwokctl_create_args("c", bins, 60, "kwok.x-k8s.io/node", Path("/c/ports.yaml"))
    extra = [args[i + 1] for i, a in enumerate(args) if a == "--extra-args"]
    assert "kube-controller-manager=leader-elect=false" in extra
    assert "kube-scheduler=leader-elect=false" in extra
    assert args[-2:] == ["--wait", "60s"]
