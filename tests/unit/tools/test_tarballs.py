"""Issue 43: a hostile candidate tarball is bad input (exit 2, one line naming the member and
why), refused before anything is unpacked or built; a FIFO given as a tarball never hangs.

Was: `..` members, outward links and devices ended in exit 1 "unexpected" with tarfile's
error names; absolute names and setuid bits were unpacked (the filter stripped them) and
failed the build with exit 3; a FIFO hung `canary --static-only` until killed.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_desched import cli
from pytest_desched.errors import ConfigError
from pytest_desched.tools.tarballs import extract, member_problem

REPO = Path(__file__).resolve().parents[3]
TREE = {"go.mod": b"module sigs.k8s.io/descheduler\n", "cmd/descheduler/main.go": b"package main\n"}


def _member(name: str, **attrs: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    for k, v in attrs.items():
        setattr(info, k, v)
    return info


def make(path: Path, *extra: tarfile.TarInfo) -> Path:
    """A `git archive`-like descheduler tree under d/, plus `extra` members."""
    with tarfile.open(path, "w:gz") as tf:
        for d in ("d", "d/cmd", "d/cmd/descheduler"):
            tf.addfile(_member(d, type=tarfile.DIRTYPE, mode=0o755))
        for rel, data in TREE.items():
            tf.addfile(_member(f"d/{rel}", size=len(data)), io.BytesIO(data))
        for m in extra:
            tf.addfile(m, io.BytesIO(b"x" * m.size) if m.isreg() else None)
    return path


HOSTILE: dict[str, tuple[tarfile.TarInfo, str]] = {
    "dotdot": (_member("d/../../evil", size=1), "'..' path component"),
    "absolute": (_member("/etc/evil", size=1), "an absolute path"),
    "symlink-absolute": (
        _member("d/link", type=tarfile.SYMTYPE, linkname="/etc/passwd"),
        "link to the absolute path '/etc/passwd'",
    ),
    "symlink-outward": (
        _member("d/link", type=tarfile.SYMTYPE, linkname="../../etc/passwd"),
        "outside the tree",
    ),
    "hardlink-outward": (
        _member("d/hl", type=tarfile.LNKTYPE, linkname="../etc/passwd"),
        "outside the tree",
    ),
    "char-device": (
        _member("d/null", type=tarfile.CHRTYPE, devmajor=1, devminor=3),
        "a device or FIFO",
    ),
    "block-device": (_member("d/sda", type=tarfile.BLKTYPE, devmajor=8), "a device or FIFO"),
    "fifo-member": (_member("d/pipe", type=tarfile.FIFOTYPE), "a device or FIFO"),
    "setuid": (_member("d/suid", size=1, mode=0o4755), "a setuid bit (mode 4755)"),
    "setgid": (_member("d/sgid", size=1, mode=0o2755), "a setgid bit"),
    "newline-name": (_member("d/x\n[desched] ok\x1b[2K/../..", size=1), "'..' path component"),
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(cache))
    monkeypatch.delenv("DESCHED_DEBUG", raising=False)
    return cache


@pytest.mark.parametrize("flag", ["--candidate", "--candidate-chart"])
@pytest.mark.parametrize(("member", "words"), list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_tarball_is_exit_2_one_line_before_anything_is_unpacked(
    tmp_path: Path,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    member: tarfile.TarInfo,
    words: str,
) -> None:
    tar = make(tmp_path / "candidate.tar.gz", member)
    if flag == "--candidate":
        args = ["--candidate", f"source:{tar}@v0.37.0-x"]
    else:
        args = ["--candidate", "version:v0.36.0", "--candidate-chart", str(tar)]
    t0 = time.monotonic()
    rc = cli.main(["canary", *args, "--static-only"])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == cli.EXIT_USAGE, err
    assert err.count("\n") == 1 and "Traceback" not in err and "\x1b" not in err, err
    assert "the tarball holds" in err and words in err and "refused before" in err, err
    assert took < 5, f"{took:.1f} s"
    assert not (cache / "src").exists()  # nothing unpacked
    assert not (tmp_path / "etc").exists()


def test_a_safe_tree_with_inward_links_passes_the_check() -> None:
    inward = _member("d/cmd/link", type=tarfile.SYMTYPE, linkname="../go.mod")
    for m in (inward, _member("d/go.mod", size=3), _member("d/bin", mode=0o755)):
        assert member_problem(m) is None, m.name


def test_a_link_chain_the_lexical_check_allows_is_refused_at_extraction(tmp_path: Path) -> None:
    """d/up -> .. is inside the tree; d/up/out -> .. goes through it to outside: only the
    extraction sees the real path, and says it as the same one-line bad input."""
    tar = make(
        tmp_path / "chain.tar.gz",
        _member("d/up", type=tarfile.SYMTYPE, linkname=".."),
        _member("d/up/out", type=tarfile.SYMTYPE, linkname=".."),
    )
    with pytest.raises(ConfigError, match="the tarball holds a member tarfile refuses"):
        extract(tar, tmp_path / "x", "candidate 'source:chain'", "fix it")


@pytest.mark.parametrize(
    "args",
    [
        ["--candidate", "source:{fifo}"],
        ["--candidate", "source:{fifo}@v0.37.0-x"],
        ["--candidate", "version:v0.36.0", "--candidate-chart", "{fifo}"],
    ],
    ids=["source", "source-labelled", "chart"],
)
def test_a_fifo_given_as_a_tarball_is_refused_at_once(tmp_path: Path, args: list[str]) -> None:
    """In a child with a time bound: before the fix the open of the FIFO never returned."""
    fifo = tmp_path / "candidate.tar.gz"
    os.mkfifo(fifo)
    argv = [a.format(fifo=fifo) for a in args]
    env = {**os.environ, "PYTHONPATH": str(REPO), "DESCHED_CACHE_DIR": str(tmp_path / "c")}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest_desched.cli", "canary", *argv, "--static-only"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a FIFO given as a candidate tarball hung the canary")
    assert proc.returncode == cli.EXIT_USAGE, proc.stderr
    assert proc.stderr.count("\n") == 1 and "is a FIFO" in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 10
