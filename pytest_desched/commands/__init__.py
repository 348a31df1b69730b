"""The `desched` command: one parser (`parser.py`), one module per subcommand.

A subcommand's module holds its flags (`add_parser(sub)`) and its handler (`cmd_<name>`);
the library code it calls stays in its package (canary/, replay/, fidelity/, evidence/, ...).
Every subcommand reads the one configuration (config.py: its options and `DESCHED_*`).
`main.py` runs the parsed subcommand and maps every outcome to an exit code.
"""

from __future__ import annotations

from pytest_desched.commands.main import entry, kubectl_entry, main, tools_entry
from pytest_desched.commands.parser import parser

__all__ = ["entry", "kubectl_entry", "main", "parser", "tools_entry"]
