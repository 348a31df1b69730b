"""Stand-in processes for the tests that find cluster components by their command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_desched.kube import wait_for


def start_sleeper(*args: str, **kw: Any) -> subprocess.Popen[bytes]:
    """A 60 s Python sleeper whose command line carries `args`, returned once it shows them.

    Popen returns once the child's exec has begun; /proc/<pid>/cmdline reads empty until the
    kernel has set up the new argv (seen on a loaded VM). The code under test waits that
    moment out (processes.command_line); a test that reads /proc itself waits for it here.
    """
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *args], **kw)

    def cmdline() -> bytes:
        try:
            return Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        except OSError:
            return b""

    want = "\0".join(args).encode()
    wait_for("the sleeper's command line", cmdline, lambda c: want in c, 10)
    return proc
