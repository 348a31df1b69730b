"""Process helpers: run a command, kube tools only with an explicit kubeconfig, free ports.

Ground floor: imports nothing of pytest_desched above errors and redaction, so every floor
(tools, providers, descheduler, canary) starts its children through the same rule.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
from pathlib import Path

from pytest_desched.errors import CommandError, ImplicitKubeconfig

# Tools that read a kubeconfig: `run` starts them only with an explicit one (see `run`).
KUBE_TOOLS = frozenset({"kubectl", "helm", "kwokctl", "kind"})


def helm_env(home: Path) -> dict[str, str]:
    """The environment with helm's and kubectl's caches under `home`, never the user's.

    KUBECONFIG is the empty /dev/null until a Cluster sets its own: helm commands that need
    no cluster (pull, package, show) then read no kubeconfig at all.
    """
    env = dict(os.environ)
    for k in ("CACHE", "CONFIG", "DATA"):
        env[f"HELM_{k}_HOME"] = str(home / f"helm-{k.lower()}")
    env["KUBECONFIG"] = os.devnull
    env["KUBECACHEDIR"] = str(home / "kube-cache")  # kubectl/helm discovery, not ~/.kube/cache
    return env


def require_explicit_kubeconfig(cmd: list[str], env: dict[str, str] | None) -> None:
    """Refuse to start kubectl/helm/kwokctl/kind unless the kubeconfig is explicit.

    Explicit means `--kubeconfig` on the command line, or a non-empty KUBECONFIG in the
    environment the caller built (env=None inherits the user's and does not count).
    """
    if Path(cmd[0]).name not in KUBE_TOOLS:
        return
    if any(a == "--kubeconfig" or a.startswith("--kubeconfig=") for a in cmd[1:]):
        return
    if env is not None and env.get("KUBECONFIG"):
        return
    raise ImplicitKubeconfig(
        f"refusing to run `{Path(cmd[0]).name} {' '.join(cmd[1:3])}` without an explicit "
        "kubeconfig: pass env with KUBECONFIG (os.devnull when no cluster is needed) or "
        "--kubeconfig, so ~/.kube/config is never read or written"
    )


def run(
    cmd: list[str],
    env: dict[str, str] | None = None,
    check: bool = True,
    input: str | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """subprocess.run with text I/O and an error that carries the command's own stderr.

    Kube tools must get an explicit kubeconfig (`require_explicit_kubeconfig`). The child
    runs in a session of its own, so a terminal's Ctrl-C reaches only this process: it
    decides (pytest_desched.interrupts), and a cleanup's `helm uninstall` or `kwokctl
    delete` is not killed halfway by the Ctrl-C that started it (on KeyboardInterrupt,
    subprocess.run kills the child it waits for).
    """
    require_explicit_kubeconfig(cmd, env)
    me = threading.get_ident()
    with subprocess.Popen(
        cmd,
        env=env,
        stdin=subprocess.PIPE if input is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,
    ) as child:
        _CHILDREN[me] = child
        try:
            out, err = child.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
        except BaseException:  # Ctrl-C, or a stopped worker thread: the child goes too
            child.kill()
            raise
        finally:
            _CHILDREN.pop(me, None)
    proc = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    if check and proc.returncode != 0:
        raise CommandError(cmd, proc)
    return proc


# The child each thread waits on in `run`: a worker thread stopped on a signal
# (interrupts.WorkerStop) gets its exception only once it runs Python again, so its child is
# killed too (a candidate's `helm install` held the canary's exit 3.3 s).
_CHILDREN: dict[int, subprocess.Popen[str]] = {}


def kill_child_of(thread_ident: int) -> bool:
    """Kill the command `thread_ident` waits on in `run`, if any; whether there was one."""
    child = _CHILDREN.get(thread_ident)
    if child is None:
        return False
    with contextlib.suppress(OSError):
        child.kill()
    return True


def free_port() -> int:
    """A loopback port free right now (a round's or a probe's metrics port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
