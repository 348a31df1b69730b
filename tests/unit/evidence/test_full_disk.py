"""A full disk while evidence is written (issue 54): a named error, the folder marked
INCOMPLETE, no half file left, and no replay result that rests on the missing evidence."""

from __future__ import annotations

import errno
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.errors import EvidenceIncomplete
from pytest_desched.evidence import EvidenceWriter
from pytest_desched.evidence.writer import INCOMPLETE_MARKER

pytest_plugins = ["pytester"]
REAL_WRITE_TEXT = Path.write_text


def _enospc_on(suffix: str) -> Any:
    """Path.write_text that fails as a full disk does for files ending in `suffix`."""

    def write_text(self: Path, data: str, *args: Any, **kw: Any) -> int:
        if self.name.endswith(suffix):
            REAL_WRITE_TEXT(self, data[: len(data) // 2], *args, **kw)  # a half write, then
            raise OSError(errno.ENOSPC, "No space left on device")
        return REAL_WRITE_TEXT(self, data, *args, **kw)

    return write_text


def test_enospc_is_named_and_marks_the_folder_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = EvidenceWriter(tmp_path / "art")
    ev.write_json("exp", "before", {"ok": True})  # written whole before the disk filled
    monkeypatch.setattr(Path, "write_text", _enospc_on(".json.tmp"))
    with pytest.raises(EvidenceIncomplete) as err:
        ev.write_json("exp", "round-1", {"fates": ["x"] * 100})
    msg = str(err.value)
    assert "incomplete" in msg and "exp/round-1.json" in msg, msg
    assert "No space left on device (ENOSPC)" in msg and "--artifacts" in msg, msg
    marker = tmp_path / "art" / INCOMPLETE_MARKER
    assert marker.is_file() and "round-1.json" in marker.read_text()
    assert ev.incomplete
    left = sorted(p.name for p in (tmp_path / "art" / "exp").iterdir())
    assert left == ["before.json"], left  # no half file, no .tmp


def test_a_replay_never_returns_a_result_on_partial_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay.write said "artifacts not written" in a note and returned the result: exit 0
    on a replay whose ledger was never written."""
    from pytest_desched.replay import run as engine

    ev = EvidenceWriter(tmp_path / "art")
    session = SimpleNamespace(evidence=ev, redactor=ev.redactor)
    result = SimpleNamespace(
        to_dict=lambda: {"rows": []}, markdown=lambda: "# ledger\n", artifacts={}, notes=[]
    )
    monkeypatch.setattr(Path, "write_text", _enospc_on("ledger.md.tmp"))
    with pytest.raises(EvidenceIncomplete, match=r"replay/ledger\.md"):
        engine.Replay.write(object.__new__(engine.Replay), session, result)
    assert (tmp_path / "art" / INCOMPLETE_MARKER).is_file()
    assert not result.artifacts


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only); skipped with the reason when mounting is not permitted."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount(8) on this machine")
    run = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): {run.stderr}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_real_full_tmpfs(small_tmpfs: Path) -> None:
    ev = EvidenceWriter(small_tmpfs)
    ev.write_json("exp", "small", {"ok": True})
    with pytest.raises(EvidenceIncomplete, match=r"No space left on device \(ENOSPC\)"):
        ev.write_json("exp", "big", {"fates": ["f" * 64] * 4000}, capped=False)  # ~280 KB
    assert (small_tmpfs / INCOMPLETE_MARKER).is_file()
    assert sorted(p.name for p in (small_tmpfs / "exp").iterdir()) == ["small.json"]


def test_a_pytest_run_on_an_incomplete_folder_does_not_pass(pytester: pytest.Pytester) -> None:
    """Every test passed, but a write of the session's evidence failed after them (its report
    at teardown, say): the run exits 1 and says why, never 0."""
    pytester.makepyfile(
        """
        import pytest
        from pytest_desched.evidence import EvidenceWriter
        from pytest_desched.plugin.state import state

        @pytest.fixture(scope="session")
        def fake_session(request, tmp_path_factory):
            ev = EvidenceWriter(tmp_path_factory.mktemp("art"))
            state(request.config).session = type("S", (), {"_evidence": ev})()
            yield
            ev.mark_incomplete(ev.root / "report.html", OSError(28, "No space left on device"))

        def test_passes(fake_session):
            assert True
        """
    )
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.TESTS_FAILED, res.stdout.str()
    assert "is incomplete (writing report.html failed: No space left on device (ENOSPC))" in (
        res.stderr.str()
    )
