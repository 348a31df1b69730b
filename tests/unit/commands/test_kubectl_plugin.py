"""`kubectl desched ...` (issue 52): the package installs a `kubectl-desched` executable, which
kubectl runs as its `desched` plugin, passing every argument after the name through."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from pytest_desched.commands import kubectl_entry
from pytest_desched.tools.toolchain import Toolchain
from tests.unit import REPO

SCRIPT = Path(sys.executable).parent / "kubectl-desched"


def _run(cmd: list[str], path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"PATH": path} if path else {})}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_the_entry_point_is_declared_and_installed() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-desched"] == "pytest_desched.commands:kubectl_entry"
    (ep,) = entry_points(group="console_scripts", name="kubectl-desched")
    assert ep.value == scripts["kubectl-desched"] and ep.load() is kubectl_entry
    assert SCRIPT.is_file(), f"{SCRIPT}: not installed (make venv reinstalls the package)"


def test_its_help_is_named_kubectl_desched() -> None:
    shown = _run([str(SCRIPT), "--help"])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: kubectl desched [-h]")
    assert "\n    kubectl desched lint [FILE...]" in shown.stdout
    assert "\n    desched " not in shown.stdout  # every command line renamed
    lint = shown.stdout.split("\n    kubectl desched lint ", 1)[1].splitlines()
    assert lint[1].index("[--select") == len("    kubectl desched lint ")  # still aligned


@pytest.mark.parametrize("command", ["snapshot", "record"])
def test_the_cluster_readers_take_kubectls_context_flags(command: str) -> None:
    """kubectl passes --context and --kubeconfig after the plugin's name through: the
    commands that read a cluster take both, and still never assume a context."""
    shown = _run([str(SCRIPT), command, "--help"])
    assert shown.returncode == 0, shown.stderr
    # snapshot's --context is optional only for --print-rbac (no cluster): checked after parsing
    context = "[--context CONTEXT]" if command == "snapshot" else "--context CONTEXT"
    assert shown.stdout.startswith(f"usage: kubectl desched {command} [-h] {context}")
    assert "--kubeconfig KUBECONFIG" in shown.stdout
    bare = _run([str(SCRIPT), command])
    assert bare.returncode == 2
    assert f"kubectl desched {command}: error: the following arguments are required: --context" in (
        bare.stderr
    )


def test_kubectl_finds_the_plugin_on_path() -> None:
    """The real kubectl (the pinned one, from the tool cache) lists the plugin and runs it."""
    tc = Toolchain()
    if tc.needs_build("kubectl"):
        pytest.skip("the pinned kubectl is not built yet (make tools)")
    kubectl = str(tc.path("kubectl"))
    path = os.pathsep.join([str(SCRIPT.parent), os.environ.get("PATH", "")])
    listed = _run([kubectl, "plugin", "list"], path)
    assert str(SCRIPT) in listed.stdout, listed.stdout + listed.stderr
    shown = _run([kubectl, "desched", "lint", "--help"], path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: kubectl desched lint [-h]")
