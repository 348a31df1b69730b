"""Every `desched` command line in the README and docs/ goes through the real parser (issue 40):
a retired flag (`--format`, `--json`, `-o FILE`) or a misspelt one in a doc fails here.

Command lines are fenced-block lines starting `desched ` (in console blocks, the `$ ` lines)
and inline code spans starting `desched `. A synopsis with placeholders (`[...]`, `|`, `<>`,
`...`, an UPPERCASE subcommand) is not a command; a mention of a subcommand without its
required arguments (`desched snapshot`) parses up to that and is accepted.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from pytest_desched import cli
from tests.unit import REPO

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHOWN_AS_TYPOS = {"desched lnt"}  # docs/cli.md shows what a typo gets


def command_lines(text: str) -> list[str]:
    found = []
    for lang, block in re.findall(r"```([a-z]*)\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.strip()
            if lang == "console":
                line = line[2:] if line.startswith("$ ") else ""
            if line.startswith("desched ") and not line.endswith("\\"):
                found.append(re.split(r"\s+#\s", line)[0].strip())
    found += re.findall(r"`(desched [^`\n]+)`", text)
    return [
        c
        for c in found
        if not re.search(r"[\[\]|<>$]|\.\.\.", c)
        and not re.match(r"desched [A-Z]", c)
        and c not in SHOWN_AS_TYPOS
    ]


CASES = [(d.name, c) for d in DOCS for c in command_lines(d.read_text())]


def test_the_docs_have_commands_to_check() -> None:
    assert len(CASES) > 60, len(CASES)


@pytest.mark.parametrize(("doc", "command"), CASES, ids=[f"{d}: {c}" for d, c in CASES])
def test_a_doc_command_parses(doc: str, command: str) -> None:
    err = io.StringIO()
    code: object = 0
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            cli.parser().parse_args(shlex.split(command)[1:])
    except SystemExit as exc:
        code = exc.code
    said = (err.getvalue().strip().splitlines() or [""])[-1]
    if code and "the following arguments are required" not in said:
        pytest.fail(f"{doc}: `{command}`: {said}", pytrace=False)


def test_no_doc_opens_with_a_history_note() -> None:
    """Docs say what is, not where they came from (issue 40: ten opened with "Moved here from
    the README"); history goes to commit messages."""
    stale = [p.name for p in (REPO / "docs").glob("*.md") if "Moved here from" in p.read_text()]
    assert stale == []
