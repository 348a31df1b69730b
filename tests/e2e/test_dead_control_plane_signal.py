"""SIGTERM after the control plane died: the command still exits at once, and cleans up.

The reason a user interrupts is often that the cluster broke. Here etcd (the API server then
hangs every request) or kube-apiserver (every request is refused) is SIGKILLed mid-round, and
then the command gets SIGTERM. Before the post-signal bound (kube.AFTER_SIGNAL_TIMEOUT_S)
`desched run` took 22.5 s and ended with exit 1 and a MaxRetryError line: its lab teardown
waited on the dead server. Now it must exit 130, say the cluster was deleted (0 processes,
folder removed), and do it within the matrix's bound; `signal_to_exit_s` is recorded.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from pytest_desched.errors import EXIT_INFRA
from pytest_desched.kube import wait_for
from tests.e2e.commands import (
    Cmd,
    assert_nothing_left,
    assert_says_verified,
    interrupt,
    round_running,
    send,
    wait_point,
)
from tests.e2e.inner_run import start_inner
from tests.e2e.test_interrupt import INNER, _embedded_inner_cluster, _live_cmdlines
from tests.e2e.test_signal_matrix import SIGNAL_TO_EXIT_BOUND_S

# serial: the bounds here are wall-clock seconds, measured with no other test of the run
# beside them (tests/concurrency.py; other workers' clusters would stretch them)
pytestmark = [pytest.mark.desched_selftest, pytest.mark.serial]
# From a component's death to the run's exit naming it: a wait checks every 0.5 s, but a
# request already in flight to a dead etcd runs to its read timeout (kube.READ_TIMEOUT_S),
# and the cluster's deletion follows.
DEATH_TO_EXIT_BOUND_S = 20.0
# The components killed here are the embedded cluster's own processes: pinned, so a Docker
# engine that answers (make e2e-kind) does not make `auto` choose kind.
EMBEDDED = ("--provider", "embedded")


def _kill_component(cluster: str, component: str) -> int:
    """SIGKILL the cluster's `component` process (its binary lives in the cluster's folder)."""
    victims = [
        p
        for p in psutil.process_iter(["cmdline"])
        if (cmd := p.info["cmdline"] or [])
        and cluster in cmd[0]
        and os.path.basename(cmd[0]) == component
    ]
    assert victims, f"no {component} process of {cluster}"
    for p in victims:
        p.kill()

    def dead(p: psutil.Process) -> bool:
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    # Dead, not reaped: the run is a subreaper and reaps its components only while it deletes
    # the cluster, so psutil.wait_procs returned after the run's cleanup, and the signal
    # always came too late to test anything but the run's own error path.
    wait_for(
        f"{component} to die",
        lambda: all(dead(p) for p in victims),
        bool,
        timeout=10,
        max_interval=0.01,
    )
    return len(victims)


def _assert_names_the_dead_api_server(cmd: Cmd, name: str, component: str = "") -> None:
    """The run saw the dead API server before any signal: one named error, exit 3, cleaned.

    The error is the liveness check's (the process that died, its log's last lines), or,
    when a request failed before a wait checked, the API server's that stopped answering.
    """
    assert cmd.proc.returncode == EXIT_INFRA, cmd.text()
    errors = [line for line in cmd.err if line.startswith("[desched] error: ")]
    assert len(errors) == 1, cmd.text()
    died = f"[desched] error: embedded cluster {name}: its control plane died: {component}"
    if errors[0].startswith(died):
        assert " exited; the last lines of its log:" in errors[0], cmd.text()
        assert any("Rerun" in line for line in cmd.err), cmd.text()
    else:
        assert not component or component == "kube-apiserver", cmd.text()
        assert errors[0].startswith(
            f"[desched] error: the API server of embedded cluster {name} stopped answering during "
        ), cmd.text()
        assert "Rerun" in errors[0], errors[0]
    assert cmd.err[-1].rstrip("\n") == (
        f"[desched] cleaned up (verified: embedded cluster {name} deleted (0 processes, "
        "folder removed))"
    ), cmd.text()


def _assert_no_transport_trace(cmd: Cmd) -> None:
    text = cmd.text()
    assert "MaxRetryError" not in text and "Traceback" not in text, text
    assert "unexpected" not in text, text


def test_run_names_an_api_server_that_stopped_answering(run_cmd, tmp_path: Path) -> None:
    """No signal: kube-apiserver SIGKILLed mid-round is a named error (exit 3), cleaned up."""
    cmd = run_cmd("run", "positive", *EMBEDDED, "--artifacts", str(tmp_path / "art"))
    wait_point(cmd, "desched run's round", round_running)
    [name] = cmd.clusters()
    _kill_component(name, "kube-apiserver")
    t0 = time.monotonic()
    cmd.wait(timeout=180)
    print(f"kube-apiserver killed -> exit {cmd.proc.returncode} in {time.monotonic() - t0:.2f}s")
    _assert_names_the_dead_api_server(cmd, name)
    assert_nothing_left(cmd)
    _assert_no_transport_trace(cmd)


def test_run_names_etcd_that_died_within_seconds(run_cmd, tmp_path: Path, record_property) -> None:
    """No signal: etcd SIGKILLed mid-round. Every request then hangs to its read timeout, and
    a run waited silently; now the first wait's liveness check names etcd (exit 3)."""
    cmd = run_cmd("run", "positive", *EMBEDDED, "--artifacts", str(tmp_path / "art"))
    wait_point(cmd, "desched run's round", round_running)
    [name] = cmd.clusters()
    _kill_component(name, "etcd")
    t0 = time.monotonic()
    try:
        cmd.proc.wait(timeout=60)  # a silent wait on the dead etcd would run far past this
    finally:
        took = round(time.monotonic() - t0, 2)
        if cmd.proc.poll() is None:
            send(cmd, signal.SIGTERM)
        cmd.wait(timeout=120)
    record_property("etcd_death_to_exit_s", took)
    print(f"etcd killed -> exit {cmd.proc.returncode} in {took}s")
    _assert_names_the_dead_api_server(cmd, name, "etcd")
    assert_nothing_left(cmd)
    _assert_no_transport_trace(cmd)
    assert took < DEATH_TO_EXIT_BOUND_S, cmd.text()


@pytest.mark.parametrize("component", ["etcd", "kube-apiserver"])
def test_run_exits_on_sigterm_after_its_control_plane_died(
    run_cmd,
    tmp_path: Path,
    record_property,
    component: str,
) -> None:
    """SIGTERM just after the kill. With etcd dead every request hangs, so the signal comes
    first (exit 130). With kube-apiserver dead every request is refused at once, and the run
    may see that before the signal: then it ends with the named error (exit 3), and the
    signal either finds it gone or comes during its cleanup (held back: exit 130). Whichever
    came first, that outcome is checked in full, and nothing may be left in either."""
    cmd = run_cmd("run", "positive", *EMBEDDED, "--artifacts", str(tmp_path / "art"))
    wait_point(cmd, "desched run's round", round_running)
    [name] = cmd.clusters()
    _kill_component(name, component)
    took = interrupt(cmd, signal.SIGTERM, record=record_property)
    record_property("outcome", cmd.proc.returncode)
    if component == "kube-apiserver" and cmd.proc.returncode == EXIT_INFRA:
        _assert_names_the_dead_api_server(cmd, name)
    else:
        assert_says_verified(cmd)
        assert took < SIGNAL_TO_EXIT_BOUND_S, cmd.text()
    assert_nothing_left(cmd)
    _assert_no_transport_trace(cmd)


def test_pytest_session_exits_on_sigterm_after_etcd_died(
    tmp_path: Path, desched_toolchain, record_property
) -> None:
    cache = desched_toolchain.cache_dir
    proc = start_inner(tmp_path, INNER, cache, "-q", "--desched-provider=embedded")
    try:
        name, cdir, _ = _embedded_inner_cluster(proc, cache)
        wait_for(
            "a round pod's folder in the inner cluster",
            lambda: any(cdir.glob("desched-pod-*")) or proc.poll() is not None,
            bool,
            timeout=300,
            max_interval=0.02,  # a round's folder lives about a second: 1 s polls missed it
        )
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        _kill_component(name, "etcd")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # CI's cancel: the process alone
        out, _ = proc.communicate(timeout=120)
        took = round(time.monotonic() - t0, 2)
        record_property("signal_to_exit_s", took)
        print(f"pytest session, etcd dead: SIGTERM -> exit in {took}s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, out[-3000:]
    assert f"embedded cluster {name} deleted (0 processes, folder removed)" in out, out[-3000:]
    assert not cdir.exists()
    assert not {pid: c for pid, c in _live_cmdlines().items() if name in c}
    assert took < SIGNAL_TO_EXIT_BOUND_S, out[-3000:]
