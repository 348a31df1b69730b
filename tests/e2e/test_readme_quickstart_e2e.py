"""The README's quickstart cluster blocks (run, canary, snapshot, replay), run verbatim.

Every `$ command` of every `<!-- quickstart -->` block that needs a cluster runs, in the
README's order, in one bash (so `eval "$(desched up ...)"` exports what the next commands
use), in a temp copy of `examples/` with `../shared/upstream` beside it as in a checkout. Each
command must exit 0, and each line the README shows must be a line of its output once the
run's own words are set aside (cluster names, UIDs, times, stamps: any word with a digit).
The offline blocks (version, list, lint) run in tests/unit/test_readme_quickstart.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_readme_quickstart import OFFLINE, STEPS, Step
from tests.upstream import tarball

pytestmark = pytest.mark.desched_selftest

ROOT = Path(__file__).resolve().parents[2]
DESCHED = Path(sys.executable).with_name("desched")
CLUSTER_STEPS = [s for s in STEPS if not s.command.startswith(OFFLINE)]
MARK = "@@desched-quickstart"


def shape(line: str) -> str:
    """A line without the run's own words: each word holding a digit becomes `#`."""
    return " ".join("#" if re.search(r"\d", w) else w for w in line.split())


def shown_in(shown: str, out: list[str]) -> bool:
    if "..." in shown:
        head = shape(shown.split("...")[0])
        return any(shape(line).startswith(head) for line in out)
    return shape(shown) in {shape(line) for line in out}


def script(steps: list[Step]) -> str:
    """One bash script: each command's output after a marker line, then its exit code."""
    lines = ["set +e"]
    for i, step in enumerate(steps):
        lines += [f"echo '{MARK} step {i}'", f"{{ {step.command} ; }} 2>&1", f"echo '{MARK} rc' $?"]
    lines.append(f'echo "{MARK} kubeconfig $KUBECONFIG"')
    return "\n".join(lines) + "\n"


def test_the_cluster_blocks_run_verbatim(tmp_path: Path) -> None:
    assert {s.command.replace('eval "$(', "").split()[1] for s in CLUSTER_STEPS} >= {
        "run",
        "canary",
        "up",
        "snapshot",
        "replay",
    }
    work = tmp_path / "checkout"
    shutil.copytree(ROOT / "examples", work / "examples")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "upstream").symlink_to(tarball("master").parent)
    # A reader's shell: none of this session's DESCHED_* settings (`make e2e-kind` sets the
    # version and a Docker engine) but its tool cache; the README's output is the default's.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DESCHED_") or k == "DESCHED_CACHE_DIR"
    }
    env["PATH"] = f"{DESCHED.parent}{os.pathsep}{os.environ['PATH']}"
    env.pop("KUBECONFIG", None)
    env.pop("DOCKER_HOST", None)
    proc = subprocess.run(
        ["bash", "-c", script(CLUSTER_STEPS)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    chunks = proc.stdout.split(f"{MARK} step ")[1:]
    kubeconfig = proc.stdout.rsplit(f"{MARK} kubeconfig ", 1)[-1].strip()
    try:
        assert len(chunks) == len(CLUSTER_STEPS), proc.stdout[-3000:] + proc.stderr[-2000:]
        for step, chunk in zip(CLUSTER_STEPS, chunks, strict=True):
            body, _, rc = chunk.partition(f"{MARK} rc ")
            out = [line.rstrip() for line in body.splitlines()[1:]]
            text = "\n".join(out)
            assert rc.split()[0] == "0", f"`{step.command}` exited {rc.split()[0]}:\n{text}"
            for shown in step.shown:
                assert shown_in(shown, out), f"`{step.command}`: README shows {shown!r}:\n{text}"
    finally:
        if kubeconfig.endswith(".kubeconfig"):  # the `desched up` cluster: deleted, checked
            name = Path(kubeconfig).name.removesuffix(".kubeconfig")
            down = subprocess.run(
                [str(DESCHED), "down", name], env=env, capture_output=True, text=True, timeout=300
            )
            assert down.returncode == 0, down.stderr
