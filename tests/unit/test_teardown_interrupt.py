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
    """The plugin turns SIGTERM into KeyboardInterrupt, so session finalizers run."""
    marker = tmp_path / "finalized"
    pytester.makepyfile(
        f"""
        import os, signal, pytest

        @pytest.fixture(scope="session")
        def resource():
            yield
            open({str(marker)!r}, "w").write("yes")

        def test_killed(resource):
            os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    assert marker.read_text() == "yes"
