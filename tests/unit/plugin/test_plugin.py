"""The pytest entry point seen from a user's run: options, markers, header, settings.

pytester runs load the installed plugin (entry point `desched`); none of them requests a
cluster fixture, and the cache dir is checked to stay untouched (no tool is resolved).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_desched.config import OPTIONS as _OPTIONS
from pytest_desched.config import parse_bins
from pytest_desched.errors import ConfigError
from pytest_desched.plugin.options import opt as _opt
from pytest_desched.tools.versions import load_versions

pytest_plugins = ["pytester"]

ENV_NAMES = [env for _, env, _ in _OPTIONS]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No DESCHED_* from the host; a cache dir that must stay empty."""
    for env in ENV_NAMES:
        monkeypatch.delenv(env, raising=False)
    cache = tmp_path / "desched-cache"
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(cache))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    return cache


def test_help_lists_every_option_without_a_cluster(
    pytester: pytest.Pytester, clean_env: Path
) -> None:
    res = pytester.runpytest("--help")
    assert res.ret == 0
    out = " ".join(res.stdout.str().split())  # help text is wrapped
    assert "pytest-desched: descheduler runbook experiments" in out
    for flag, env, _ in _OPTIONS:
        assert flag in out, flag
        assert f"[env {env}]" in out, env
    assert not clean_env.exists()


def test_markers_listed(pytester: pytest.Pytester, clean_env: Path) -> None:
    res = pytester.runpytest("--markers")
    assert res.ret == 0
    res.stdout.fnmatch_lines(
        [
            "@pytest.mark.descheduler_e2e: an end-to-end descheduler experiment*",
            "@pytest.mark.desched_experiment(name, **params): run the registered experiment*",
        ]
    )
    assert not clean_env.exists()


def test_markers_known_under_strict_markers(pytester: pytest.Pytester, clean_env: Path) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.descheduler_e2e
        def test_marked():
            pass

        @pytest.mark.desched_experiment("positive", replicas=3)
        def test_experiment_marker_alone():
            pass
        """
    )
    res = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2)
    assert not clean_env.exists()


def test_unknown_marker_still_rejected_under_strict_markers(pytester: pytest.Pytester) -> None:
    """The control for the test above: --strict-markers is really in force."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.descheduler_e2e_typo
        def test_marked():
            pass
        """
    )
    res = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.stdout.fnmatch_lines(["*'descheduler_e2e_typo' not found in `markers`*"])


def test_report_header_mentions_provider_and_pins(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESCHED_PROVIDER", "embedded")
    pytester.makepyfile("def test_ok():\n    pass\n")
    res = pytester.runpytest("-p", "no:cacheprovider", "--desched-keep=on-failure")
    res.assert_outcomes(passed=1)
    v = load_versions()
    res.stdout.fnmatch_lines(
        [
            "desched: provider=embedded keep=on-failure kubernetes=v1.36.3 (pin)",
            f"desched pins: kubernetes {v.kubernetes.version}, etcd {v.etcd.version}, "
            f"kwok {v.kwok.version}, descheduler {v.descheduler.version}, "
            f"helm {v.helm.version}, kind {v.kind.version}, "
            f"metrics-server {v.metrics_server.version}, prometheus {v.prometheus.version}, "
            f"chart {v.chart_name}-{v.chart_version}, image {v.descheduler_image}",
        ]
    )


def test_bad_desched_bin_message_names_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    res = pytester.runpytest("-p", "no:cacheprovider", "--desched-bin=bogus")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--desched-bin: 'bogus' is not TOOL=PATH*"])


def test_bad_desched_bin_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    res = pytester.runpytest("-p", "no:cacheprovider", "--desched-bin=bogus")
    assert res.ret == pytest.ExitCode.USAGE_ERROR


def test_bad_choice_is_a_usage_error(pytester: pytest.Pytester) -> None:
    res = pytester.runpytest("--desched-keep=sometimes")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--desched-keep*invalid choice: 'sometimes'*"])


def test_settings_fixture_reads_options(pytester: pytest.Pytester, tmp_path: Path) -> None:
    kubectl = tmp_path / "kubectl"
    kubectl.write_text("#!/bin/sh\n")
    kubectl.chmod(0o755)
    pytester.makepyfile(
        f"""
        from pathlib import Path

        def test_settings(desched_settings):
            s = desched_settings
            assert s.provider == "embedded"
            assert s.keep == "always"
            assert s.workers == 4
            assert s.bins == {{"kubectl": Path({str(kubectl)!r})}}
            assert s.namespace == "lab"
            assert s.redact is True
            assert s.descheduler_version == "v0.35.1"
        """
    )
    res = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--desched-provider=embedded",
        "--desched-keep=always",
        "--desched-workers=4",
        f"--desched-bin=kubectl={kubectl}",
        "--desched-namespace=lab",
        "--desched-redact",
        "--desched-descheduler-version=v0.35.1",
    )
    res.assert_outcomes(passed=1)


def test_settings_namespace_unique_per_xdist_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    pytester.makepyfile(
        """
        def test_settings(desched_settings):
            assert desched_settings.namespace == "descheduler-lab-gw2"
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_settings_bad_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_settings(desched_settings):\n    pass\n")
    res = pytester.runpytest("-p", "no:cacheprovider", "--desched-workers=three")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--desched-workers / DESCHED_WORKERS*must be an integer >= 2*"])


# -- _opt: command line, then environment, then default ------------------------------------
def test_opt_environment_fallback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESCHED_KEEP", "always")
    monkeypatch.setenv("DESCHED_REDACT", "yes")
    config = pytester.parseconfig()
    assert _opt(config, "--desched-keep") == "always"
    assert _opt(config, "--desched-redact") is True
    assert _opt(config, "--desched-provider") == "auto"  # default, no env


def test_opt_command_line_wins(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESCHED_KEEP", "always")
    config = pytester.parseconfig("--desched-keep=on-failure")
    assert _opt(config, "--desched-keep") == "on-failure"


def test_opt_store_true_env_false(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESCHED_REDACT", "0")
    assert _opt(pytester.parseconfig(), "--desched-redact") is False


def test_opt_explicit_default_on_command_line_wins(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESCHED_KEEP", "always")
    config = pytester.parseconfig("--desched-keep=never")
    assert _opt(config, "--desched-keep") == "never"


# -- parse_bins -------------------------------------------------------------------------------
@pytest.fixture
def exe(tmp_path: Path) -> Path:
    p = tmp_path / "bin" / "tool"
    p.parent.mkdir()
    p.write_text("#!/bin/sh\n")
    p.chmod(0o755)
    return p


def test_parse_bins(exe: Path) -> None:
    assert parse_bins(None) == {}
    assert parse_bins("") == {}
    assert parse_bins(f"kubectl={exe}, helm={exe},") == {"kubectl": exe, "helm": exe}


def test_parse_bins_expands_user(exe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(exe.parent))
    assert parse_bins("kwokctl=~/tool") == {"kwokctl": exe}


@pytest.mark.parametrize("raw", ["bogus", "nosuchtool=/bin/sh", "=/bin/sh"])
def test_parse_bins_rejects_unknown_entries(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"is not TOOL=PATH with TOOL in \["):
        parse_bins(raw)


def test_parse_bins_rejects_missing_or_non_executable(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("x")
    plain.chmod(0o644)
    for p in (tmp_path / "missing", plain, tmp_path):
        with pytest.raises(ConfigError, match="is not an executable file"):
            parse_bins(f"helm={p}")
    assert os.access(tmp_path, os.X_OK)  # a directory is executable, yet refused
