"""The one `desched` logger and its progress reporter: every line is written whole.

Ground floor (imports only `redaction`: every line said goes through `scrub_secrets`, so a
token a tool echoes back in its error text never reaches the terminal). Progress used to be printed by ten copies of
`print(..., file=sys.stderr)`, which writes the text and the newline as two calls: two canary
tracks' threads then interleaved into one line ("[baseline] starting ...[candidate] starting
...") and a reader keyed on lines missed one. Here a line goes out in one `write` under the
handler's re-entrant lock (re-entrant because the signal handler reports too, and it may run
while the main thread is inside a write).

The handler looks `sys.stderr` up at each record, so pytest's capture (which swaps the stream)
and a front end that redirects it see every line. The logger does not propagate: a user's
root handlers and pytest's log capture do not print progress a second time.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from pytest_desched.redaction import scrub_secrets

LOGGER_NAME = "desched"
Reporter = Callable[[str], None]  # the one type of a progress callback


if TYPE_CHECKING:
    _StderrHandler = logging.StreamHandler[TextIO]
else:
    _StderrHandler = logging.StreamHandler


class _CurrentStderr(_StderrHandler):
    """A StreamHandler on whatever `sys.stderr` is now (pytest capture swaps it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


class _Tagged(logging.Formatter):
    """`[tag] message`; the tag defaults to `desched` and may be set per record."""

    def format(self, record: logging.LogRecord) -> str:
        return f"[{getattr(record, 'tag', LOGGER_NAME)}] {scrub_secrets(record.getMessage())}"


def _logger() -> logging.Logger:
    log = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(h, _CurrentStderr) for h in log.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(_Tagged())
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


LOG = _logger()


def say(msg: str, tag: str = LOGGER_NAME) -> None:
    """One progress line, `[tag] msg`, on stderr as a single write (safe across threads)."""
    LOG.info(msg, extra={"tag": tag})


def tagged(tag: str) -> Reporter:
    """A reporter that says every line with `tag` (e.g. `desched canary`, `kind-node`)."""
    return lambda msg: say(msg, tag)
