"""Teardown runs when bring-up or a run is interrupted (Ctrl-C, SIGTERM)."""

from __future__ import annotations

import pytest

from pytest_desched.providers.base import Provider

pytest_plugins = ["pytester"]


class _Recorder(Provider):
    name = "fake"

    def __init__(self, fail_with: type[BaseException] | None = None) -> None:
        self.fail_with = fail_with
        self.calls: list[str] = []

    def start(self):
        self.calls.append("start")
        if self.fail_with:
            raise self.fail_with()
        return "cluster"

    def stop(self) -> None:
        self.calls.append("stop")


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, RuntimeError])
def test_interrupted_bring_up_still_stops(exc):
    p = _Recorder(exc)
    with pytest.raises(exc), p:
        pass
    assert p.calls == ["start", "stop"]


def test_interrupt_inside_the_block_stops():
    p = _Recorder()
    with pytest.raises(KeyboardInterrupt), p as cluster:
        assert cluster == "cluster"
        raise KeyboardInterrupt
    assert p.calls == ["start", "stop"]


def test_sigterm_unwinds_session_fixtures(pytester: pytest.Pytester, tmp_path):
    """Once a desched fixture is in use, SIGTERM becomes KeyboardInterrupt: finalizers run."""
    marker = tmp_path / "finalized"
    pytester.makepyfile(
        f"""
        import os, signal, pytest

        @pytest.fixture(scope="session")
        def resource(desched_settings):
            yield
            open({str(marker)!r}, "w").write("yes")

        def test_killed(resource):
            os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    assert marker.read_text() == "yes"


def test_sigterm_left_alone_without_desched_fixtures(pytester: pytest.Pytester, tmp_path):
    """A session of the venv that uses no desched fixture keeps the default SIGTERM action."""
    marker = tmp_path / "finalized"
    pytester.makepyfile(
        f"""
        import os, signal, pytest

        @pytest.fixture(scope="session")
        def resource():
            yield
            open({str(marker)!r}, "w").write("yes")

        def test_default_handler(resource):
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
            os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == -15  # killed by the signal, as without the plugin
    assert not marker.exists()


def test_sigterm_handler_restored_after_session(pytester: pytest.Pytester):
    """In-process: the handler is the plugin's only while desched_settings lives."""
    import signal

    from pytest_desched.interrupts import sigterm_to_interrupt

    def mine(signum, frame):  # pragma: no cover - never called
        raise AssertionError

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        pytester.makepyfile(
            """
            import signal
            from pytest_desched.interrupts import sigterm_to_interrupt

            def test_plain():
                assert signal.getsignal(signal.SIGTERM).__name__ == "mine"

            def test_with_settings(desched_settings):
                assert signal.getsignal(signal.SIGTERM) is sigterm_to_interrupt
            """
        )
        pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
        assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.getsignal(signal.SIGTERM) is not sigterm_to_interrupt
    finally:
        signal.signal(signal.SIGTERM, previous)
