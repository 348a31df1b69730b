"""`desched completion bash|zsh|fish`: scripts generated from the parser, so every subcommand
(including ones added later) is completed; the bash one is run in a real bash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_desched.cli import main, parser


def subcommands() -> list[str]:
    sub = parser()._subparsers
    assert sub is not None
    return sorted(next(a for a in sub._group_actions).choices)  # type: ignore[arg-type]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_script_mentions_every_subcommand(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    names = subcommands()
    assert {"lint", "run", "completion", "init"} <= set(names)
    missing = [n for n in names if n not in script]
    assert not missing, f"{shell} completion lacks {missing}"


def test_unknown_shell_is_refused_with_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["completion", "bsh"])
    assert exc.value.code == 2 and "did you mean 'bash'" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_a_subcommand_and_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["completion", "bash"])
    script = tmp_path / "desched.bash"
    script.write_text(capsys.readouterr().out)
    probe = (
        f"source {script}; COMP_WORDS=(desched li); COMP_CWORD=1; _shtab_desched desched li "
        'desched; echo "${COMPREPLY[@]}"; COMP_WORDS=(desched lint --list-r); COMP_CWORD=2; '
        '_shtab_desched desched --list-r lint; echo "${COMPREPLY[@]}"'
    )
    res = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert res.stdout.splitlines() == ["list lint", "--list-rules"], res.stderr
