"""`run_matrix`: inputs refused before any session exists, rows one after another, each a
canary track of its own, the matrix written. Sessions and tracks are doubles here (the real
ones run in tests/e2e/test_matrix_e2e.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.canary import engine, tracks
from pytest_desched.canary import matrix as m
from pytest_desched.canary.tracks import DEFAULT_EXPERIMENTS, TrackResult
from pytest_desched.config import build_config
from pytest_desched.errors import ConfigError
from pytest_desched.experiments.results import ExperimentResult


def test_pair_charts() -> None:
    pairs = m.pair_charts(
        ["pinned", "version:v0.35.1"], ["version:v0.35.1=/c/chart.tgz@appVersion=0.35.1"]
    )
    assert pairs == [("pinned", None), ("version:v0.35.1", "/c/chart.tgz@appVersion=0.35.1")]


@pytest.mark.parametrize(
    ("releases", "charts", "said"),
    [
        ([], [], "at least one RELEASE"),
        (["pinned", "pinned"], [], "given twice"),
        (["pinned"], ["version:v0.35.1=x.tgz"], r"one of the releases given \(pinned\)"),
        (["pinned"], ["pinned="], "write RELEASE=CHART"),
        (["pinned"], ["pinned=a.tgz", "pinned=b.tgz"], "has two charts"),
    ],
)
def test_pair_charts_refuses(releases: list[str], charts: list[str], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        m.pair_charts(releases, charts)


def test_parse_experiments() -> None:
    # one reading of --experiment: the canary's and the matrix's are the same function
    assert m.parse_experiments is engine.parse_experiments is tracks.parse_experiments
    assert m.parse_experiments(None) == list(DEFAULT_EXPERIMENTS)
    assert m.parse_experiments(["nodefit[runbook]"]) == [("nodefit", "runbook")]
    assert m.parse_experiments(["pdb"]) == [("pdb", "runbook"), ("pdb", "pdb-lister-workaround")]
    # any registered experiment: one with a policy of its own runs on its default variant
    [(name, variant)] = m.parse_experiments(["topology-spread-hard"])
    assert name == "topology-spread-hard" and variant == "pdb-lister-workaround"
    assert m.labels_of([("topology-spread-hard", variant)])[0].endswith("[own-policy]")
    assert m.labels_of([("nodefit", "runbook")]) == ["negative-nodefit[runbook]"]
    for bad, said in (
        (["nope"], "unknown; known:"),
        (["nodefit[xx]"], "variant 'xx'"),
        (["nodefit", "nodefit[runbook]"], "named twice"),
    ):
        with pytest.raises(ConfigError, match=said):
            m.parse_experiments(bad)


def test_row_name_is_a_safe_folder() -> None:
    assert m.row_name(2, "v0.36.0-g7d2b28bf2") == "2-v0.36.0-g7d2b28bf2"
    assert m.row_name(1, "../x y") == "1-..-x-y"


class FakeSession:
    made: list[FakeSession] = []

    def __init__(self, config: Any, report: Any = None) -> None:
        self.config, self.closed, self.touched = config, 0, False
        FakeSession.made.append(self)

    @property
    def inputs(self) -> None:
        self.touched = True

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def doubles(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    FakeSession.made = []
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(m, "DeschedSession", FakeSession)
    monkeypatch.setattr(m, "check_release", lambda rel, role: calls.append(("check", rel.ref)))

    def policies(session: Any, variants: list[str], track: str) -> dict:
        assert session.touched  # after the user's inputs
        calls.append(("policies", (track, tuple(variants))))
        return {}

    monkeypatch.setattr(m, "track_policies", policies)
    monkeypatch.setattr(m, "accept_missing", lambda s, name, ex: setattr(s, "accepted", ex))

    def fake_track(name: str, session: Any, exps: Any, cancel: Any, metrics: bool = True) -> Any:
        assert not metrics and isinstance(cancel, threading.Event) and not cancel.is_set()
        assert all(s.touched for s in FakeSession.made)  # every input read before any track
        calls.append(("track", name))
        version = "v0.35.1" if "v0.35.1" in name else "v0.36.0"
        t = TrackResult(name, descheduler_version=version, artifacts=str(session.config.artifacts))
        t.results = [ExperimentResult("negative-nodefit", v) for _, v in exps]
        session.close()
        return t

    monkeypatch.setattr(m, "run_track", fake_track)
    return calls


def _config(tmp_path: Path, provider: str = "embedded") -> Any:
    return build_config(
        {"--desched-provider": provider, "--desched-artifacts": str(tmp_path / "ev")},
        run_dir=tmp_path / "run",
    )


def test_rows_run_one_after_another_and_the_matrix_is_written(
    tmp_path: Path, doubles: list
) -> None:
    mx = m.run_matrix(
        _config(tmp_path),
        ["version:v0.35.1", "pinned"],
        (),
        experiments=["nodefit"],
        report=lambda s: None,
        command="desched matrix version:v0.35.1 pinned",
    )
    # both releases checked before the first track; tracks in the order given
    variants = ("runbook", "pdb-lister-workaround")
    assert doubles == [
        ("check", "version:v0.35.1"),
        ("check", "pinned"),
        ("policies", ("matrix release 1-v0.35.1", variants)),
        ("policies", ("matrix release 2-v0.36.0", variants)),
        ("track", "1-v0.35.1"),
        ("track", "2-v0.36.0"),
    ]
    # each row its own release, evidence folder and run folder
    cfgs = [s.config for s in FakeSession.made]
    assert [c.candidate for c in cfgs] == ["version:v0.35.1", None]
    assert [c.artifacts.name for c in cfgs] == ["1-v0.35.1", "2-v0.36.0"]
    assert len({c.run_dir for c in cfgs}) == 2
    assert [r.version for r in mx.rows] == ["v0.35.1", "v0.36.0"]
    assert mx.labels == ["negative-nodefit[runbook]", "negative-nodefit[pdb-lister-workaround]"]
    doc = json.loads((tmp_path / "ev" / "matrix.json").read_text())
    assert doc["command"] == "desched matrix version:v0.35.1 pinned" and doc["exit_code"] == 0
    assert (tmp_path / "ev" / "matrix.md").read_text().startswith("# Release matrix")


def test_bad_release_refused_before_any_session(tmp_path: Path, doubles: list) -> None:
    with pytest.raises(ConfigError, match=r"^release 'version:0\.35': "):
        m.run_matrix(_config(tmp_path), ["pinned", "version:0.35"], experiments=["nodefit"])
    assert FakeSession.made == [] and not any(c[0] == "track" for c in doubles)


def test_an_existing_cluster_is_refused(tmp_path: Path, doubles: list) -> None:
    cfg = _config(tmp_path).with_(provider="existing", existing_context="x", allow_existing=True)
    with pytest.raises(ConfigError, match="cluster of its own"):
        m.run_matrix(cfg, ["pinned"], experiments=["nodefit"])
    assert FakeSession.made == []


def test_bad_user_input_closes_every_session_before_any_cluster(
    tmp_path: Path, doubles: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    class BadInputs(FakeSession):
        @property
        def inputs(self) -> None:
            if len(FakeSession.made) == 2:
                raise ConfigError("--desched-values v.yaml: helm refused it")

    monkeypatch.setattr(m, "DeschedSession", BadInputs)
    with pytest.raises(ConfigError, match="helm refused"):
        m.run_matrix(_config(tmp_path), ["pinned", "version:v0.35.1"], experiments=["nodefit"])
    assert [s.closed for s in FakeSession.made] == [1, 1]
    assert not any(c[0] == "track" for c in doubles)


def test_a_policy_a_release_cannot_express_is_refused_before_any_cluster(
    tmp_path: Path, doubles: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(session: Any, variants: list[str], track: str) -> dict:
        if "v0.35.1" in track:
            raise ConfigError(f"canary {track} policy [runbook]: PodsWithResourceClaims")
        return {}

    monkeypatch.setattr(m, "track_policies", refuse)
    with pytest.raises(ConfigError, match=r"1-v0\.35\.1 policy"):
        m.run_matrix(_config(tmp_path), ["version:v0.35.1", "pinned"], experiments=["nodefit"])
    assert [s.closed for s in FakeSession.made] == [1, 1]
    assert not any(c[0] == "track" for c in doubles)


def test_an_interrupt_closes_the_rows_not_reached(
    tmp_path: Path, doubles: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(m, "run_track", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.run_matrix(_config(tmp_path), ["pinned", "version:v0.35.1"], experiments=["nodefit"])
    assert FakeSession.made[1].closed == 1  # the first row's own track closes its session


def test_a_grid_runs_every_release_at_every_kubernetes(tmp_path: Path, doubles: list) -> None:
    mx = m.run_matrix(
        _config(tmp_path),
        ["version:v0.35.1", "pinned"],
        (),
        experiments=["nodefit"],
        report=lambda s: None,
        kubernetes=["v1.35.4", "1.37.2"],
    )
    cfgs = [s.config for s in FakeSession.made]
    assert [(c.candidate, c.kubernetes) for c in cfgs] == [
        ("version:v0.35.1", "v1.35.4"),
        ("version:v0.35.1", "v1.37.2"),
        (None, "v1.35.4"),
        (None, "v1.37.2"),
    ]
    assert [c.artifacts.name for c in cfgs] == [
        "1-v0.35.1-k8s-v1.35.4",
        "2-v0.35.1-k8s-v1.37.2",
        "3-v0.36.0-k8s-v1.35.4",
        "4-v0.36.0-k8s-v1.37.2",
    ]
    assert [r.spec for r in mx.rows] == [
        "version:v0.35.1 @ v1.35.4",
        "version:v0.35.1 @ v1.37.2",
        "pinned @ v1.35.4",
        "pinned @ v1.37.2",
    ]


@pytest.mark.parametrize("kubes", [["v1.31.0"], ["v1.37.2", "1.37.2"]])
def test_a_grid_refuses_a_bad_kubernetes_before_any_session(
    tmp_path: Path, doubles: list, kubes: list[str]
) -> None:
    with pytest.raises(ConfigError, match="--kubernetes"):
        m.run_matrix(_config(tmp_path), ["pinned"], experiments=["nodefit"], kubernetes=kubes)
    assert FakeSession.made == []
