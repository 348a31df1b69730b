"""The first `desched lint` says, on its first line and before any build, what it builds (only
helm and the policy checker), how long it takes and why; a warm cache says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched.cli import main as cli_main
from pytest_desched.descheduler.policy.lint_first_use import COLD_BUILD_MINUTES, first_use_line
from pytest_desched.tools.toolchain import Toolchain


def test_cold_cache_names_both_tools_the_time_and_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    tc = Toolchain(cache_dir=tmp_path / "cache")
    line = first_use_line(tc, values=True)
    assert line is not None
    assert f"helm {tc.wanted_version('helm')} and the policy checker" in line
    assert f"about {COLD_BUILD_MINUTES} min" in line and str(tmp_path / "cache") in line
    policy_only = first_use_line(tc, values=False)
    assert policy_only is not None and "helm" not in policy_only.split(":")[1]


def test_nothing_to_build_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tc = Toolchain(cache_dir=tmp_path)
    monkeypatch.setattr(tc, "needs_build", lambda tool: tool == "policycheck")
    assert "building the policy checker" in (first_use_line(tc, values=True) or "")
    monkeypatch.setattr(tc, "needs_build", lambda tool: False)
    assert first_use_line(tc, values=True) is None


def test_cli_says_it_first_then_builds_only_lint_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Go and a cold cache: the announcement is the first line, then helm's build fails
    (exit 3); kwok and the kube binaries are never asked for."""
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    values = tmp_path / "values.yaml"
    values.write_text("deschedulerPolicy:\n  maxNoOfPodsToEvictPerNode: 1\n")
    cache = tmp_path / "cache"
    assert cli_main(["lint", "-f", str(values), "--cache-dir", str(cache)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[desched] first lint: building helm"), err
    assert "no `go` on PATH" in err[-1]
    assert not (cache / "bin").exists() or {p.name for p in (cache / "bin").iterdir()} <= {
        "helm",
        "policycheck",
    }


def test_helm_is_announced_only_for_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DeschedulerPolicy needs no helm: the line names the policy checker alone."""
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n")
    assert cli_main(["lint", str(policy), "--cache-dir", str(tmp_path / "cache")]) == 3
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("[desched] first lint: building the policy checker v"), first
    assert "helm v" not in first


def test_docs_give_the_figure_the_message_gives() -> None:
    """One figure: the message's minutes are the ones docs/lint.md measured and README cites."""
    root = Path(__file__).resolve().parents[3]
    assert f"about {COLD_BUILD_MINUTES} min" in (root / "docs" / "lint.md").read_text()
    assert f"about {COLD_BUILD_MINUTES} min" in (root / "README.md").read_text()
