"""pytest ini keys for every `--desched-*` option: a project pins them in pyproject.toml.

Precedence is flag > `DESCHED_*` > ini key > default, for the resolved settings the
session gets (`desched_settings`) and for the header line; pytester runs load the
installed plugin and request no cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_desched.config import OPTIONS, ini_key

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for key in list(os.environ):
        if key.startswith("DESCHED_"):
            monkeypatch.delenv(key)
    cache = tmp_path / "desched-cache"
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(cache))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    return cache


SETTINGS_TEST = """
def test_settings(desched_settings):
    s = desched_settings
    print("GOT", s.provider, s.workers, s.keep, s.namespace, s.redact, s.release)
"""


def _got(res: pytest.RunResult) -> list[str]:
    (line,) = [ln for ln in res.outlines if "GOT " in ln]
    return line.split("GOT ", 1)[1].split()


def test_every_option_has_an_ini_key(pytester: pytest.Pytester) -> None:
    res = pytester.runpytest("--help")
    assert res.ret == 0
    out = res.stdout.str()
    for flag, _, _ in OPTIONS:
        key = ini_key(flag)
        assert key.startswith("desched_") and f"{key} (" in out, f"ini key {key} not registered"


def test_pyproject_ini_keys_are_honoured_and_flags_and_env_beat_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> None:
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        desched_provider = "embedded"
        desched_workers = "5"
        desched_keep = "on-failure"
        desched_namespace = "lab-from-ini"
        desched_redact = true
        desched_release = "rel-from-ini"
        """
    )
    pytester.makepyfile(SETTINGS_TEST)
    res = pytester.runpytest("-s", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert _got(res) == ["embedded", "5", "on-failure", "lab-from-ini", "True", "rel-from-ini"]
    res.stdout.fnmatch_lines(["desched: provider=embedded keep=on-failure*"])  # the header too

    monkeypatch.setenv("DESCHED_WORKERS", "4")  # env beats ini
    res = pytester.runpytest(
        "-s", "-p", "no:cacheprovider", "--desched-keep=never", "--desched-namespace=lab-flag"
    )  # flags beat both
    res.assert_outcomes(passed=1)
    assert _got(res) == ["embedded", "4", "never", "lab-flag", "True", "rel-from-ini"]
    assert not clean_env.exists()  # settings only: no tool, no cluster


def test_pytest_ini_is_honoured_and_a_bad_ini_value_names_the_key(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\ndesched_workers = 6\n")
    pytester.makepyfile(SETTINGS_TEST)
    res = pytester.runpytest("-s", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert _got(res)[1] == "6"
    pytester.makeini("[pytest]\ndesched_keep = sometimes\n")
    res = pytester.runpytest("-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*ini key desched_keep='sometimes': choose from*"])


def test_values_ini_key_is_a_list_of_files_relative_to_the_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`desched_values` takes several files (Helm's order), resolved against the ini file's
    folder, so pyproject.toml can name files beside it whatever the working directory."""
    for name in ("base.yaml", "prod.yaml"):
        pytester.path.joinpath(name).write_text("deschedulerPolicy: {}\n")
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        desched_values = ["base.yaml", "prod.yaml"]
        """
    )
    pytester.makepyfile(
        """
        def test_settings(desched_settings):
            print("GOT", *[str(v) for v in desched_settings.values])
        """
    )
    res = pytester.runpytest("-s", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert _got(res) == [str(pytester.path / "base.yaml"), str(pytester.path / "prod.yaml")]
    monkeypatch.setenv("DESCHED_VALUES", str(pytester.path / "prod.yaml"))  # env beats ini
    res = pytester.runpytest("-s", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert _got(res) == [str(pytester.path / "prod.yaml")]
