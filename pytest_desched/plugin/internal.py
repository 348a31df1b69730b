"""A crash inside pytest-desched ends the pytest run with errors.EXIT_INTERNAL (70), as in desched.

pytest exits 1 for any failed test, so a bug in the plugin looked like an experiment that
failed (and like lint's UNSAFE). An exception counts as internal when it came out of this
package's code and is none of its deliberate outcomes: not a DeschedError (a named failure),
not an assertion, not a pytest outcome (fail, skip) or usage error. The run then exits 70
and the summary names the test and the exception. Under xdist the workers see the crash but
the controller's exit code stays pytest's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_desched.errors import EXIT_INTERNAL, DeschedError

_PACKAGE = Path(__file__).resolve().parent.parent  # pytest_desched/
_CRASHES = pytest.StashKey[list[str]]()


def internal_error(excinfo: pytest.ExceptionInfo[BaseException]) -> str | None:
    """`Type: first line` when the exception is a bug in pytest-desched, else None."""
    exc = excinfo.value
    deliberate = (DeschedError, AssertionError, pytest.UsageError)
    if not isinstance(exc, Exception) or isinstance(exc, deliberate):
        return None
    tb = exc.__traceback__
    ours = False
    while tb is not None:  # a frame of this package on the way: our code let it through
        ours |= Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE)
        tb = tb.tb_next
    if not ours:
        return None
    first = (str(exc).splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {first}"


def pytest_exception_interact(node: Any, call: pytest.CallInfo[Any], report: Any) -> None:
    if call.excinfo is not None and (what := internal_error(call.excinfo)):
        node.config.stash.setdefault(_CRASHES, []).append(f"{node.nodeid}: {what}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.stash.get(_CRASHES, None) and exitstatus == pytest.ExitCode.TESTS_FAILED:
        session.exitstatus = EXIT_INTERNAL


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    crashes = config.stash.get(_CRASHES, None)
    if not crashes:
        return
    tr = terminalreporter
    tr.section("pytest-desched: internal error", red=True)
    for line in crashes:
        tr.line(f"{line}")
    tr.line(
        f"a bug in pytest-desched, not an experiment's verdict: exit {EXIT_INTERNAL} "
        "(docs/cli.md#exit-codes); please report it with the traceback above"
    )
