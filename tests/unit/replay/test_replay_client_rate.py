"""`desched replay --client-qps/--client-burst` (issue 29): the replayed descheduler's API client
limits, only when asked, checked before anything starts, passed as its own flags, recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.bounds import check_client_rate
from pytest_desched.descheduler.chart import LAB_CMD_OPTIONS, Release
from pytest_desched.descheduler.chart_source import ChartRef
from pytest_desched.errors import ConfigError
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.run import check_inputs, client_note
from pytest_desched.tools.versions import load_versions


@pytest.mark.parametrize(
    ("qps", "burst", "want"),
    [
        (None, None, {}),
        ("50", "100", {"qps": 50, "burst": 100}),
        (2.5, "5", {"qps": 2.5, "burst": 5}),
        (None, 7, {"burst": 7}),
        ("10000", "100000", {"qps": 10000, "burst": 100000}),
    ],
)
def test_client_rate_as_given(qps: object, burst: object, want: dict) -> None:
    assert check_client_rate(qps, burst) == want


@pytest.mark.parametrize(
    ("qps", "burst", "named"),
    [
        ("0", None, "--client-qps"),
        ("-5", None, "--client-qps"),
        ("nan", None, "--client-qps"),
        ("inf", None, "--client-qps"),
        ("10001", None, "--client-qps"),
        ("fast", None, "--client-qps"),
        (True, None, "--client-qps"),
        # v0.36.0 exits at start: "burst is required to be greater than 0 when RateLimiter
        # is not set and QPS is set to greater than 0" (a real round, 2026-12-02)
        ("50", None, "--client-qps"),
        (None, "0", "--client-burst"),
        (None, "1.5", "--client-burst"),
        (None, "100001", "--client-burst"),
        (None, True, "--client-burst"),
    ],
)
def test_client_rate_refused(qps: object, burst: object, named: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{named} ") as ei:
        check_client_rate(qps, burst)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize(
    "bad", [["--client-qps", "0"], ["--client-burst", "ten"], ["--client-qps", "-1"]]
)
def test_desched_replay_refuses_a_bad_client_rate_before_anything(
    bad: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Exit 2 and one line naming the option, before the snapshot is read (it does not exist)
    and before any cluster or folder."""
    art = tmp_path / "a"
    code = cli.main(["replay", str(tmp_path / "none.yaml"), *bad, "--artifacts", str(art)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and bad[0] in err[0], err
    assert not art.exists()


def test_client_rate_needs_a_replay_on_a_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "incident.log"
    log.write_text("")
    code = cli.main(
        ["replay", "--from-log", str(log), "--client-qps", "50", "--client-burst", "100"]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--from-log" in err[0] and "--client-qps" in err[0], err


def test_check_inputs_carries_the_client_rate(tmp_path: Path) -> None:
    """replay() used without the CLI checks it too (the same rule)."""
    path = label_move().snapshot.write(tmp_path / "snap.yaml")
    assert check_inputs(path, None, None, 1, None).client == {}
    got = check_inputs(path, None, None, 1, None, client={"qps": "50", "burst": 100})
    assert got.client == {"qps": 50, "burst": 100}
    with pytest.raises(ConfigError, match="--client-burst 0"):
        check_inputs(path, None, None, 1, None, client={"burst": 0})


def test_the_release_passes_the_client_flags_over_the_labs(tmp_path: Path) -> None:
    chart = ChartRef(tmp_path / "chart.tgz", "module", "0.36.0", "0.36.0", "0" * 64)
    rel = Release(None, chart, load_versions(), tmp_path, report=lambda _: None)  # type: ignore[arg-type]
    before = rel._flags([], dry_run=False)
    rel.add_cmd_options({"client-connection-qps": 50, "client-connection-burst": 100})
    after = rel._flags([], dry_run=False)
    lab = [f"cmdOptions.{k}={v}" for k, v in LAB_CMD_OPTIONS.items()]
    assert all(s in before and s in after for s in lab)
    added = [a for a in after if a not in before]
    assert added == [
        "cmdOptions.client-connection-qps=50",
        "cmdOptions.client-connection-burst=100",
    ]
    assert after[after.index(added[0]) - 1] == "--set"


def test_the_ledger_says_whose_limits_the_descheduler_ran_with() -> None:
    assert "its own limits" in client_note({})
    note = client_note({"qps": 50, "burst": 100})
    assert "--client-connection-qps=50" in note and "--client-connection-burst=100" in note
    assert "replay option" in note
