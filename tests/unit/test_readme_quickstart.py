"""The README's quickstart, run verbatim: the commands that need no cluster, with their shown output.

Each quickstart block follows a `<!-- quickstart -->` comment and is a console transcript:
`$ COMMAND` lines, each followed by the output the README shows. The commands that need no
cluster (`desched --version`, `desched list`, `desched lint`) run here in a temp copy of the
repository's `examples/`; every shown output line must be a line of the real output (a line
with `...` only up to the `...`), and the exit code must be the one the verdict promises.
The cluster commands (run, canary, snapshot, replay) run verbatim, in order, in
tests/e2e/test_readme_quickstart_e2e.py.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.policycheck

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARK = "<!-- quickstart -->"
OFFLINE = ("desched --version", "desched list", "desched lint ")
DESCHED = Path(sys.executable).with_name("desched")


@dataclass(frozen=True)
class Step:
    command: str
    shown: tuple[str, ...]


def quickstart_steps(text: str) -> list[Step]:
    """Every `$ command` of every block marked `<!-- quickstart -->`, with its shown output."""
    steps: list[Step] = []
    for m in re.finditer(re.escape(MARK) + r"\s*\n```console\n(.*?)\n```", text, re.S):
        cmd: str | None = None
        shown: list[str] = []
        for line in m.group(1).splitlines():
            if line.startswith("$ "):
                if cmd is not None:
                    steps.append(Step(cmd, tuple(shown)))
                cmd, shown = line[2:], []
            elif cmd is not None:
                shown.append(line)
        if cmd is not None:
            steps.append(Step(cmd, tuple(shown)))
    return steps


STEPS = quickstart_steps(README.read_text())
OFFLINE_STEPS = [s for s in STEPS if s.command.startswith(OFFLINE)]


def test_the_quickstart_has_its_blocks() -> None:
    """A renamed marker or fence would leave nothing to run: the test would pass vacuously."""
    commands = [s.command.replace('eval "$(', "").split()[1] for s in STEPS]
    for sub in ("--version", "list", "lint", "run", "canary", "snapshot", "replay"):
        assert sub in commands, f"README quickstart lost its `desched {sub}` step: {commands}"
    assert all(s.command.startswith(("desched ", 'eval "$(desched ')) for s in STEPS), STEPS
    assert sum(s.command.startswith("desched lint ") for s in STEPS) >= 2


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temp copy of the README's inputs, so nothing runs in (or writes to) the checkout."""
    wd = tmp_path_factory.mktemp("quickstart")
    shutil.copytree(ROOT / "examples", wd / "examples")
    return wd


def expected_rc(step: Step) -> int:
    """Lint's verdict line says the exit code; the other offline commands succeed."""
    if step.command.startswith("desched lint "):
        return 1 if step.shown[-1].startswith("UNSAFE") else 0
    return 0


@pytest.mark.parametrize("step", OFFLINE_STEPS, ids=[s.command for s in OFFLINE_STEPS])
def test_quickstart_command_runs_as_shown(step: Step, workdir: Path) -> None:
    argv = shlex.split(step.command)
    assert DESCHED.exists(), f"no desched entry point beside {sys.executable}"
    proc = subprocess.run(
        [str(DESCHED), *argv[1:]], cwd=workdir, capture_output=True, text=True, timeout=120
    )
    out = [line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()]
    assert proc.returncode == expected_rc(step), (
        f"`{step.command}` exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    for shown in step.shown:
        if "..." in shown:
            head = shown.split("...")[0].rstrip()
            ok = any(line.startswith(head) for line in out)
        else:
            ok = shown.rstrip() in out
        assert ok, f"`{step.command}`: README shows {shown!r}, not in the output:\n" + "\n".join(
            out
        )
    if step.command.startswith("desched lint "):
        assert out[-1] == step.shown[-1], f"verdict line differs: {out[-1]!r}"
