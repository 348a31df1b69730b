"""A replay's round pods run on its runner node: the placement is a values layer of the
release, handed to helm as `-f` files over the user's own (their nodeSelector dropped, not
merged), never a field nothing reads."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from pytest_desched.descheduler.chart import Release, placement_layers
from pytest_desched.descheduler.chart_source import ChartRef
from pytest_desched.replay.rebuild.plan import RUNNER_LABEL, runner_values
from pytest_desched.tools.versions import load_versions


def test_placement_layers_null_each_key_then_set_it_whole() -> None:
    nulls, layer = placement_layers(runner_values())
    assert yaml.safe_load(nulls) == {"nodeSelector": None, "tolerations": None}
    assert yaml.safe_load(layer) == runner_values()
    assert runner_values()["nodeSelector"] == {RUNNER_LABEL: "true"}


def test_helm_gets_the_placement_after_the_users_values(tmp_path: Path) -> None:
    users = tmp_path / "users.yaml"
    users.write_text("nodeSelector:\n  pool: batch\n")
    seen: list[list[Any]] = []

    def helm(*args: str, **kw: Any) -> Any:  # reads each -f file while helm would
        files = [Path(args[i + 1]) for i, a in enumerate(args) if a == "-f"]
        seen.append([yaml.safe_load(f.read_text()) for f in files])
        return subprocess.CompletedProcess(args, 0, "", "")

    chart = ChartRef(tmp_path / "c.tgz", "module", "0.36.0", "0.36.0", "ab12")
    rel = Release(
        SimpleNamespace(helm=helm),  # type: ignore[arg-type]
        chart,
        load_versions(),
        tmp_path,
        report=lambda _m: None,
        values_files=(users,),
        placement=runner_values(),
    )
    rel.render(dry_run=True, policy=None)
    assert seen == [
        [
            {"nodeSelector": {"pool": "batch"}},
            {"nodeSelector": None, "tolerations": None},
            runner_values(),
        ]
    ]
    assert yaml.safe_load((tmp_path / "values-placement.yaml").read_text()) == runner_values()
    with pytest.raises(AttributeError, match="placement is an input"):
        rel.placement = {}
