"""An incident's descheduler JSON log, read as replay's input: bounded and checked whole.

`desched replay --log/--from-log` and the engine's input check read the log the same way, so
the reader is library code here, not in the command that parses the flags.
"""

from __future__ import annotations

from pathlib import Path

from pytest_desched.errors import ConfigError, InputError
from pytest_desched.inputs_safe import json_lines, read_text
from pytest_desched.replay.schema import first_problem


def read_log(path: str | Path, flag: str) -> str:
    """A descheduler JSON log, bounded (size, UTF-8, line depth); refused when it has none."""

    text = read_text(path, kind="bulk", what=f"{flag} log")
    lines = [(i, doc) for i, doc in json_lines(text, f"{path}") if "msg" in doc]
    for i, doc in lines:  # a line of the wrong types is no descheduler log: refused, not skipped
        found = first_problem("log line", doc)
        if found is not None:
            raise InputError(
                f"{flag} {path}",
                f"line {i}",
                f"{' '.join(filter(None, found))}: not a descheduler JSON log line",
                "give the log of a descheduler run with --logging-format=json",
            )
    if not lines:
        raise ConfigError(
            f'{flag} {path}: no descheduler JSON log line (an object with "msg"); give the '
            "log of a descheduler run with --logging-format=json"
        )
    return text
