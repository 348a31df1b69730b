"""The default evidence folder: one per run under ./desched-artifacts/, never pytest's basetemp.

pytest keeps only its last three basetemps, so evidence written there was gone after three
more runs; these tests run five and read the first one's evidence back.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_desched.artifacts_dir import LATEST, ROOT_NAME, claim, default_run_dir
from pytest_desched.config import OPTIONS

pytest_plugins = ["pytester"]

WRITES_EVIDENCE = """
def test_writes(desched_settings):
    art = desched_settings.artifacts
    art.mkdir(parents=True, exist_ok=True)
    (art / "evidence.txt").write_text("run {n}")
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for _, env, _ in OPTIONS:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "desched-cache"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))


def test_evidence_survives_four_later_runs(pytester: pytest.Pytester) -> None:
    printed = []
    for n in range(5):
        pytester.makepyfile(test_ev=WRITES_EVIDENCE.format(n=n))
        res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        res.assert_outcomes(passed=1)
        line = [x for x in res.outlines if x.startswith("evidence: ")]
        assert line, f"no 'evidence:' line in the summary:\n{res.stdout.str()}"
        printed.append(Path(line[-1].removeprefix("evidence: ")))
    root = pytester.path / ROOT_NAME
    assert len(set(printed)) == 5, printed
    for n, folder in enumerate(printed):
        assert folder.parent == root, folder  # not in pytest's basetemp
        assert (folder / "evidence.txt").read_text() == f"run {n}"
    assert (root / LATEST).resolve() == printed[-1].resolve()
    assert sorted(p.name for p in root.iterdir() if p.name != LATEST) == sorted(
        p.name for p in printed
    )


def test_explicit_artifacts_folder_wins(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_ev=WRITES_EVIDENCE.format(n=0))
    mine = tmp_path / "mine"
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--desched-artifacts={mine}")
    res.assert_outcomes(passed=1)
    assert (mine / "evidence.txt").read_text() == "run 0"
    assert not (pytester.path / ROOT_NAME).exists()
    res.stdout.fnmatch_lines([f"evidence: {mine}"])


def test_name_is_utc_stamp_and_run_id(tmp_path: Path) -> None:
    when = datetime(2026, 12, 1, 9, 30, 5, tzinfo=UTC)
    a = default_run_dir(tmp_path, now=when)
    b = default_run_dir(tmp_path, now=when)
    assert a.parent == tmp_path
    assert a.name.startswith("20261201T093005Z-") and len(a.name) == len("20261201T093005Z-") + 8
    assert a != b  # same second, different run id
    assert not a.exists()  # naming creates nothing; claim() does


def test_xdist_workers_share_the_run_id_and_never_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    when = datetime(2026, 12, 1, 9, 30, 5, tzinfo=UTC)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "abcdef0123456789")
    names = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        names.append(claim(default_run_dir(tmp_path, now=when)).name)
    assert names == ["20261201T093005Z-abcdef01-gw0", "20261201T093005Z-abcdef01-gw1"]
    assert os.readlink(tmp_path / LATEST) == names[-1]  # relative: the folder can be moved


def test_cli_claims_a_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_desched.config import config_from_args

    monkeypatch.chdir(tmp_path)
    config = config_from_args(argparse.Namespace())
    assert config.artifacts.is_dir()
    assert config.artifacts.parent == tmp_path / ROOT_NAME
    assert (tmp_path / ROOT_NAME / LATEST).resolve() == config.artifacts.resolve()


def test_release_if_empty_removes_only_an_empty_folder_and_its_latest(tmp_path: Path) -> None:
    """A run that failed before its first record leaves no empty folder (issue 40)."""
    from pytest_desched.artifacts_dir import release_if_empty

    root = tmp_path / ROOT_NAME
    empty = claim(root / "a")
    assert release_if_empty(empty) is True
    assert not root.exists()  # the folder, `latest` and the root it alone held
    full = claim(root / "b")
    (full / "record.json").write_text("{}")
    assert release_if_empty(full) is False
    assert (root / LATEST).resolve() == full.resolve()
    other = claim(root / "c")
    (root / LATEST).unlink()
    (root / LATEST).symlink_to("b")  # latest points at another run: left alone
    assert release_if_empty(other) is True
    assert (root / LATEST).resolve() == full.resolve()
