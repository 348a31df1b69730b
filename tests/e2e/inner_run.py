"""Start a nested pytest run of the plugin (its own session, cluster and cleanup)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def start_inner(
    workdir: Path, test_source: str, cache_dir: Path, *args: str, **env_extra: str
) -> subprocess.Popen[str]:
    """Write test_inner.py into `workdir` and start pytest on it in its own process group
    (`env_extra`: more environment, e.g. its TMPDIR)."""
    (workdir / "test_inner.py").write_text(test_source)
    env = dict(os.environ, DESCHED_CACHE_DIR=str(cache_dir), DESCHED_KEEP="never", **env_extra)
    env.pop("PYTEST_XDIST_WORKER", None)
    if "--desched-provider=existing" in args:
        # An existing cluster's Kubernetes is what it is (the option is refused there);
        # `make e2e-kind` sets it for the nested runs that bring up a cluster of their own.
        env.pop("DESCHED_KUBERNETES", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "test_inner.py",
        "-p",
        "no:cacheprovider",
        "--basetemp",
        str(workdir / "bt"),
        *args,
    ]
    return subprocess.Popen(
        cmd,
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # A background job (nohup, `cmd &` in a script) inherits SIGINT ignored, and Python
        # then keeps ignoring it: the inner run must see Ctrl-C as a terminal user's run does.
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
