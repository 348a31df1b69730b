"""One fate model: each of its types is defined once, in outcome/, and the old names still work.

Issue 51: `PodFate` was defined three times with different fields, `Ledger` and
`RoundFigures` twice, and the fate vocabulary was an enum plus loose strings. A second
definition anywhere in the package fails here, by name, whatever module it sits in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_desched

ROOT = Path(pytest_desched.__file__).resolve().parent
ONE_MODEL = {
    "PodFate": "outcome/ledger.py",
    "PodRow": "outcome/ledger.py",
    "Ledger": "outcome/ledger.py",
    "RoundFigures": "outcome/ledger.py",
    "Fate": "outcome/fates.py",
    "Layer": "outcome/fates.py",
    "Verdict": "outcome/verdict.py",
}


def definitions(root: Path = ROOT) -> dict[str, list[str]]:
    """Class name -> every module (relative path) that defines a class of that name."""
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(path.relative_to(root).as_posix())
    return out


@pytest.mark.parametrize("name", sorted(ONE_MODEL))
def test_each_type_of_the_fate_model_is_defined_once_in_outcome(name: str) -> None:
    assert definitions().get(name) == [ONE_MODEL[name]], (
        f"{name} must be defined once, in pytest_desched/{ONE_MODEL[name]}; import it from there"
    )


def test_the_scan_sees_a_second_definition(tmp_path: Path) -> None:
    """The scan finds a class nested anywhere (a scan that found none would pass the test)."""
    (tmp_path / "a.py").write_text("class PodFate:\n    pass\n")
    (tmp_path / "b.py").write_text("def f():\n    class PodFate:\n        pass\n")
    assert definitions(tmp_path)["PodFate"] == ["a.py", "b.py"]


def test_the_old_import_paths_still_give_the_one_type() -> None:
    """Re-exported for one release: a user's import keeps working and gets the same class."""
    from pytest_desched.canary.compare import RoundFigures as canary_figures
    from pytest_desched.descheduler.decisions import Fate as old_fate
    from pytest_desched.descheduler.decisions import Layer as old_layer
    from pytest_desched.evidence.compare import identity_of as old_identity_of
    from pytest_desched.experiments import Ledger as experiments_ledger
    from pytest_desched.experiments.assertions import PodFate as experiments_fate
    from pytest_desched.fidelity import PodFate as fidelity_fate
    from pytest_desched.outcome import fates, identity, ledger
    from pytest_desched.replay.ledger import Ledger as replay_ledger
    from pytest_desched.replay.ledger import PodFate as replay_fate
    from pytest_desched.replay.ledger import RoundFigures as replay_figures

    assert experiments_fate is replay_fate is fidelity_fate is ledger.PodFate
    assert experiments_ledger is replay_ledger is ledger.Ledger
    assert canary_figures is replay_figures is ledger.RoundFigures
    assert old_fate is fates.Fate and old_layer is fates.Layer
    assert old_identity_of is identity.identity_of
