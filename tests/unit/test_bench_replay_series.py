"""bench/replay_series.py: every configuration reaches replay_scale.py as asked."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit import REPO


def _series() -> Any:
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(
        "replay_series", REPO / "bench" / "replay_series.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_client_limits_reach_the_runs_and_targets_use_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _series()
    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        client = "--client-qps" in cmd
        seconds = {
            "restore": 20.0,
            "restore_parts": {},
            "round (Job created -> finished)": 5.0 if client else 14.0,
            "descheduler cycle (its own log)": 3.0 if client else 12.0,
        }
        report = {
            "target_s": 30.0 if client else 44.0,
            "seconds": seconds,
            "machine": {"load_avg_start": [1.0]},
        }
        out.write_text(json.dumps(report))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)  # replay_scale.run_fresh starts the runs
    assert (
        mod.main(["--repeat", "1", "--out-dir", str(tmp_path), "--also-client-limits", "100,200"])
        == 0
    )
    client_runs = [c for c in seen if "--client-qps" in c]
    assert len(seen) == 3 and len(client_runs) == 1
    assert client_runs[0][-4:] == ["--client-qps", "100", "--client-burst", "200"]
    verdict = json.loads((tmp_path / "series.json").read_text())
    assert verdict["restore + one round, 1,000 / 10,000 (median)"] == 44.0  # not the client run's
    assert verdict["with the client limits 100,200"]["descheduler cycle (median)"] == 3.0
