"""What a pytest run shows: progress lines, failure sections, JUnit properties, the summary.

Everything here reads the engine's ExperimentResult and round records; nothing decides.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from pytest_desched import interrupts
from pytest_desched.errors import ExperimentFailed
from pytest_desched.plugin.state import entry_of, state
from pytest_desched.redaction import scrub_secrets

_TERMINAL_LOCK = threading.Lock()  # capture toggling is not thread-safe either


def terminal_reporter(config: pytest.Config) -> Callable[[str], None]:
    """Progress lines that reach the terminal even while pytest captures output."""
    capman = config.pluginmanager.getplugin("capturemanager")
    tw = config.get_terminal_writer()

    def report(msg: str) -> None:
        # One write under one lock: the bring-up thread and canary tracks report at once, and
        # TerminalWriter.line writes the text and the newline apart (two lines ran together).
        with _TERMINAL_LOCK:
            if capman is None:
                tw.write(f"[desched] {msg}\n", flush=True)
                return
            with capman.global_and_fixture_disabled():
                tw.write(f"[desched] {msg}\n", flush=True)

    return report


def junit_entry(entry: dict[str, Any]) -> dict[str, str]:
    """`desched.*` JUnit properties of one experiment: each round's key figures."""
    # heavy: evidence.summary and its imports, kept out of pytest start-up
    from pytest_desched.evidence.summary import junit_properties

    out: dict[str, str] = {}
    for i, rec in enumerate(entry["rounds"]):
        for k, v in junit_properties(rec):
            out[f"desched.{i}.{k}" if i else f"desched.{k}"] = v
    result = entry.get("result")
    if result is not None:
        out["desched.outcome"] = result.outcome
        if result.classification.get("bug"):
            out["desched.known_bug"] = str(result.classification["bug"])
    return out


def failure_sections(exc: BaseException | None) -> dict[str, str]:
    """The lab's logs, events and pods (and a step's traceback) kept by a failed experiment."""
    if not isinstance(exc, ExperimentFailed) or exc.result is None:
        return {}
    sections = dict(exc.result.artifacts)
    if exc.result.error:
        sections["error"] = exc.result.error
    return sections


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    rep = yield
    entry = entry_of(item)
    if entry is not None and rep.when == "call":
        entry["outcome"] = "xfailed" if hasattr(rep, "wasxfail") and rep.skipped else rep.outcome
    sections = failure_sections(call.excinfo.value if call.excinfo else None)
    if rep.when == "call" and sections:
        red = state(item.config).redactor
        for name, text in sections.items():
            shown = red.redact(text) if red is not None else scrub_secrets(text)
            rep.sections.append((f"desched {name}", shown[-20000:]))
    return rep


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    # heavy: evidence.summary and its imports, kept out of pytest start-up
    from pytest_desched.evidence.summary import summary_line

    st = state(config)
    results, info, art = st.results, st.info, st.artifacts
    if not results and not info and art is None:
        return
    tr = terminalreporter
    red = st.redactor
    show = red.redact if red is not None else (lambda x: x)
    tr.section("pytest-desched")
    if info.get("provider"):
        tr.line(
            show(
                f"cluster {info.get('cluster')} provider={info.get('provider')} "
                f"server={info.get('server')} bring-up={info.get('bring_up_s')}s "
                f"kubeconfig={info.get('kubeconfig')}"
            )
        )
    if info.get("chart"):
        tr.line(f"chart {info['chart']}")
    for entry in results:
        tr.line(show(summary_line({k: v for k, v in entry.items() if k != "result"})))
    for k in ("cleanup", "emergency_stop", "cluster_deleted"):
        if info.get(k):
            tr.line(show(f"{k}: {info[k]}"))
    if info.get("kept"):
        tr.line(info["kept"])
    if art is not None:  # set when a desched fixture resolved it
        tr.line(f"evidence: {art}")
    if info.get("report"):
        tr.line(f"report: {info['report']}")
    elif info.get("report_error"):
        tr.line(f"report: not written ({info['report_error']})")


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """After our SIGINT/SIGTERM, pytest's report of the interrupt shows one frame, not all.

    pytest renders the whole traceback with each frame's source (funcargs=True) even though
    it prints only the last line: through the Kubernetes client's 30,000-line modules that
    took 4 s of a 9 s SIGTERM-to-exit on a loaded machine. The line shown is unchanged
    (`interrupts.py: KeyboardInterrupt: signal 15`); DESCHED_DEBUG=1 keeps every frame.
    """
    if os.environ.get("DESCHED_DEBUG"):
        return
    if interrupts.interrupted() and len(excinfo.traceback) > 1:
        excinfo.traceback = excinfo.traceback[-1:]


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    """Records the exit status; then no passing run on an evidence folder a write failed in
    (a full disk, issue 54): after the session's teardown (its report is written there),
    exit 1 and say why."""
    state(session.config).exitstatus = int(exitstatus)
    out = yield
    ev = getattr(state(session.config).session, "_evidence", None)
    why = getattr(ev, "incomplete", "")
    if ev is not None and why and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        state(session.config).exitstatus = int(session.exitstatus)
        sys.stderr.write(
            f"pytest-desched: evidence folder {ev.root} is incomplete ({why}): no pass rests "
            "on it; exit 1\n"
        )
    return out


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After our SIGINT/SIGTERM, once pytest said everything: exit without finalization.

    The cleanup ran and its verified line, pytest's summary and the junit file are written;
    the interpreter's own shutdown (joining pools, collecting the API clients) then took
    2.6 s of a 4.3 s SIGTERM-to-exit (load 12), past the 2 s a SIGTERM is given. Not under
    xdist (its controller and workers end together), and DESCHED_DEBUG=1 keeps it.
    """
    st = state(config)
    if (
        not interrupts.interrupted()
        or st.exitstatus is None
        or os.environ.get("DESCHED_DEBUG")
        or hasattr(config, "workerinput")
        or config.getoption("numprocesses", None)
    ):
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(st.exitstatus)
