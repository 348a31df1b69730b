"""`desched init` (issue 40): a starter test, a values file and the CI workflow from the
installed package, written into the current directory, never over an existing file."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from pytest_desched import cli
from pytest_desched.commands.init import FILES, template
from pytest_desched.plugin.options import MARKERS

ROOT = Path(__file__).resolve().parents[3]


def test_init_writes_the_three_files_then_refuses_to_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["file"] for r in doc["written"]] == list(FILES.values())
    for name, rel in FILES.items():
        assert (tmp_path / rel).read_text() == template(name)
    test = (tmp_path / "tests/e2e/test_descheduler.py").read_text()
    ast.parse(test)  # valid Python
    assert "pytest.mark.descheduler_e2e" in test and "desched_experiment" in test
    assert yaml.safe_load((tmp_path / "descheduler-values.yaml").read_text())["deschedulerPolicy"]
    before = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}

    (tmp_path / "descheduler-values.yaml").write_text("mine: true\n")
    assert cli.main(["init"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "descheduler-values.yaml" in err
    assert "never overwrites" in err
    assert (tmp_path / "descheduler-values.yaml").read_text() == "mine: true\n"
    after = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    assert set(after) == set(before)  # nothing new written either


def test_one_existing_file_blocks_every_write(tmp_path: Path) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github/workflows/descheduler-e2e.yml").write_text("name: mine\n")
    assert cli.main(["init", "--dir", str(tmp_path)]) == 2
    assert not (tmp_path / "descheduler-values.yaml").exists()
    assert not (tmp_path / "tests").exists()


def test_the_starter_uses_only_markers_and_fixtures_the_plugin_has() -> None:
    import pytest_desched.plugin.fixtures as fixtures

    tree = ast.parse(template("test_descheduler.py.tmpl"))
    marks = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
    }
    known = {m.split("(")[0] for m in MARKERS}
    assert marks and marks <= known
    args = {a.arg for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for a in f.args.args}
    assert args and args <= set(fixtures.__all__)


def test_the_templates_ship_in_the_package_and_match_the_examples() -> None:
    """Package data (hatch ships every file under pytest_desched/); the workflow template is
    the recipe in examples/ci, byte for byte (one source, a copy a reader finds)."""
    pkg = ROOT / "pytest_desched" / "templates" / "init"
    assert {p.name for p in pkg.iterdir()} == set(FILES)
    recipe = ROOT / "examples" / "ci" / "descheduler-e2e.yml"
    assert recipe.read_text() == template("descheduler-e2e.yml")
