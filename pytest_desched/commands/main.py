"""The `desched` console script: parse, run one subcommand, turn every outcome into an exit code.

Each subcommand is a module of this package (`commands/<name>.py`: its `add_parser` and
`cmd_<name>`); `commands.parser` joins them into the one parser. This module runs what it
parsed: every error is one of errors.py's exit codes and one line, signals unwind the work.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, NoReturn

from pytest_desched import interrupts, scratch
from pytest_desched.artifacts_dir import CLAIMED, release_if_empty
from pytest_desched.commands.parser import parser
from pytest_desched.config import OPTION_ENV, cli_flag, respell
from pytest_desched.errors import (
    EXIT_INFRA,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    ConfigError,
    EvidenceIncomplete,
    PolicyError,
    ProviderError,
    ToolError,
)
from pytest_desched.inputs_safe import check_output
from pytest_desched.log import say
from pytest_desched.redaction import scrub_secrets
from pytest_desched.render import printable


def _error(msg: str) -> None:
    """The one error line: control characters a raw file name carries are shown escaped."""
    say(f"error: {printable(msg)}")


def _spelling(parser: argparse.ArgumentParser | None) -> Any:
    """How this subcommand's errors name a plugin option: the flag it takes, else the env var."""
    have = set(parser._option_string_actions) if parser else set()

    def spell(flag: str) -> str:
        short = cli_flag(flag)
        return short if short in have else OPTION_ENV[flag]

    return spell


def main(argv: list[str] | None = None, *, prog: str = "desched") -> int:
    """Run one subcommand; every outcome is one of errors.py's exit codes and a line, never a
    traceback (unless --debug). SIGINT and SIGTERM unwind the work (its cleanup runs); once
    the work is over (`interrupts.finishing`) a signal no longer interrupts saying so.
    ``prog``: the command's name in its help and usage errors (`kubectl desched`)."""
    interrupts.reset()
    args = parser(prog).parse_args(argv)
    spell = _spelling(getattr(args, "parser", None))
    debug = bool(args.debug or os.environ.get("DESCHED_DEBUG"))
    made_before = scratch.made()
    with interrupts.interrupts_unwind():  # SIGTERM cleans up like Ctrl-C
        try:
            try:
                if getattr(args, "output_file", None):  # before any work: never fail at the end
                    check_output(args.output_file)
                return int(args.func(args))
            finally:  # a signal past here cannot turn the error being said into another
                interrupts.finishing()
                while CLAIMED:  # a run that wrote nothing leaves no empty folder
                    release_if_empty(CLAIMED.pop())
                scratch.remove_all(but=made_before)  # its temporary folders, on every path
        except PolicyError as exc:  # one line: the source, then each problem
            one = f"invalid DeschedulerPolicy ({exc.source}): " + "; ".join(exc.problems)
            _error(respell(one, spell))
            return EXIT_USAGE
        except ConfigError as exc:
            _error(respell(" ".join(str(exc).split()), spell))
            return EXIT_USAGE
        except (ToolError, ProviderError, EvidenceIncomplete) as exc:
            say(f"error: {respell(scrub_secrets(str(exc)), spell)}")  # a URL's user may be a token
            if done := interrupts.cleanup_summary():  # a cluster deleted after it, checked
                say(done)
            return EXIT_INFRA
        except KeyboardInterrupt:
            say(interrupts.exit_message())  # what the cleanups verified, kept or left
            return EXIT_INTERRUPTED
        except Exception as exc:  # no traceback reaches the user unless asked (--debug)
            if debug:
                raise

            if isinstance(exc, OSError) and exc.filename:  # a path the user named: bad input
                _error(f"{scrub_secrets(str(exc.filename))}: {exc.strerror}; check the path")
                return EXIT_USAGE
            first = (str(exc).splitlines() or [""])[0][:300]
            _error(
                f"internal error: {type(exc).__name__}: {scrub_secrets(first)} (a bug in "
                "pytest-desched; rerun with --debug or DESCHED_DEBUG=1 for the traceback, and "
                f"report it; exit {EXIT_INTERNAL})"
            )
            return EXIT_INTERNAL


def _exit_now(rc: int) -> NoReturn:
    """Flush what was said and exit without the interpreter's finalization."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(rc)


def entry(prog: str = "desched") -> None:
    """The `desched` console script: `main`, and after a signal an exit without finalization.

    After a signal the interpreter's own shutdown (collecting every client, pool and cached
    object) took ~1.8 s on a loaded 2-core machine, past the 2 s a SIGTERM is given: it is
    skipped, output flushed first. A signal outside main's work ends the process at once:
    before it with 130, after it with the command's own code, already said (was: -15).
    """
    import signal

    done: list[int] = []

    def outside_the_work(signum: int, frame: object) -> None:
        if not done:
            os.write(2, b"[desched] interrupted; nothing had been started\n")
        os._exit(done[0] if done else EXIT_INTERRUPTED)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, outside_the_work)
    done.append(main(prog=prog))

    if done[0] == EXIT_INTERRUPTED or interrupts.late_signal():
        _exit_now(done[0])
    raise SystemExit(done[0])


def tools_entry() -> None:
    """The `desched-tools` console script: `desched tools` under an old name, with a note."""
    say("note: `desched-tools` is `desched tools`; use that")
    sys.argv[1:1] = ["tools"]
    entry()


def kubectl_entry() -> None:
    """The `kubectl-desched` console script: kubectl runs an executable `kubectl-NAME` on PATH
    as `kubectl NAME`, passing every argument after NAME (its --context and --kubeconfig
    included) through; so `kubectl desched snapshot --context prod` is `desched snapshot
    --context prod`, its help named `kubectl desched`."""
    entry("kubectl desched")


if __name__ == "__main__":
    entry()
