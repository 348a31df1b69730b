"""The old home of the `desched` command, kept one release for imports: see `commands/`.

`from pytest_desched.cli import main` (and `python -m pytest_desched.cli`) keep working;
new code imports from `pytest_desched.commands`.
"""

from __future__ import annotations

from pytest_desched.commands.canary import cmd_canary
from pytest_desched.commands.down import cmd_down
from pytest_desched.commands.explain import cmd_explain
from pytest_desched.commands.list import cmd_list
from pytest_desched.commands.main import entry, main, tools_entry
from pytest_desched.commands.parser import parser
from pytest_desched.commands.run import cmd_run
from pytest_desched.commands.tools import cmd_tools
from pytest_desched.commands.up import cmd_up
from pytest_desched.commands.version import cmd_version
from pytest_desched.errors import (
    EXIT_FAILED,
    EXIT_INFRA,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INFRA",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "cmd_canary",
    "cmd_down",
    "cmd_explain",
    "cmd_list",
    "cmd_run",
    "cmd_tools",
    "cmd_up",
    "cmd_version",
    "entry",
    "main",
    "parser",
    "tools_entry",
]

if __name__ == "__main__":
    entry()
