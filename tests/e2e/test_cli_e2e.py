"""The `desched` command on real embedded clusters: `run` matches the plugin, `up`/`down` round-trip.

The command runs as a subprocess of its own, with this session's tool cache (so nothing is
rebuilt) and its temp files under the test's tmp_path. Its clusters are its own, never this
session's; what it leaves behind is checked on disk (cluster dir, owner record) and in
/proc (no process naming the cluster).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.config import DeschedConfig
from pytest_desched.evidence import EvidenceWriter
from pytest_desched.experiments import ExperimentResult
from pytest_desched.kube import node_ready
from pytest_desched.tools.toolchain import Toolchain
from tests.commands import DESCHED, child_env, finish, start
from tests.e2e.test_interrupt import _live_cmdlines

pytestmark = pytest.mark.desched_selftest

EXPERIMENT, VARIANT = "positive", "pdb-lister-workaround"


@dataclass
class Run:
    argv: list[str]
    pid: int
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"$ desched {' '.join(self.argv)} -> {self.code}\n{self.out}\n{self.err[-4000:]}"


def _desched(cache: Path, tmp: Path, *argv: str, timeout: float = 600) -> Run:
    """Run `desched ARGV` with this session's tool cache; no DESCHED_* leaks in from outside.
    Past `timeout`, SIGTERM unwinds it (its own clean-up) first."""
    proc = start([str(DESCHED), *argv], child_env(tmp, cache))
    out, err = finish(proc, timeout)
    return Run(list(argv), proc.pid, proc.returncode, out, err)


def _cluster_dir(cache: Path, name: str) -> Path:
    return cache / "clusters" / "clusters" / name


def _assert_gone(cache: Path, name: str) -> None:
    assert not _cluster_dir(cache, name).exists(), f"cluster dir of {name} left behind"
    assert not (cache / "clusters" / "owners" / f"{name}.json").exists()
    left = {pid: c for pid, c in _live_cmdlines().items() if name in c}
    assert not left, f"processes of cluster {name} left behind: {left}"


def _round_records(artifacts: Path, label: str) -> list[Path]:
    folder = EvidenceWriter(artifacts).path_for(label, "x").parent
    return sorted(folder.glob("descheduler-positive*.json"))


# -- desched run ---------------------------------------------------------------------------
@dataclass
class CliRun:
    run: Run
    artifacts: Path
    cluster: str


@pytest.fixture(scope="module")
def cli_run(
    tmp_path_factory: pytest.TempPathFactory,
    desched_toolchain: Toolchain,
    desched_settings: DeschedConfig,
) -> CliRun:
    d = tmp_path_factory.mktemp("cli-run")
    (d / "tmp").mkdir()
    art = d / "artifacts"
    # No DESCHED_* reaches the command (child_env): the session's Kubernetes, when it names
    # one (make e2e-kind KIND_KUBERNETES=...), is passed as the option, so the CLI's record
    # is compared with the plugin's at the same version.
    kube = ["--kubernetes", desched_settings.kubernetes] if desched_settings.kubernetes else []
    run = _desched(
        desched_toolchain.cache_dir,
        d / "tmp",
        "run",
        EXPERIMENT,
        "--variant",
        VARIANT,
        "--provider",
        "embedded",
        "--artifacts",
        str(art),
        *kube,
    )
    m = re.search(r"starting embedded cluster (\S+)", run.err)
    assert m, f"no cluster was started:\n{run}"
    return CliRun(run, art, m.group(1))


def test_desched_run_passes_and_leaves_no_cluster(
    cli_run: CliRun, desched_toolchain: Toolchain
) -> None:
    run = cli_run.run
    assert run.code == 0, str(run)
    label = f"{EXPERIMENT}[{VARIANT}]"
    lines = [line for line in run.out.splitlines() if line.startswith(label)]
    assert len(lines) == 1, str(run)
    assert re.match(rf"{re.escape(label)}  PASSED  evictions=1/\d+  layer=\S+  ready=", lines[0])
    summary = json.loads((cli_run.artifacts / "run-summary.json").read_text())
    assert [(s["variant"], s["outcome"], s["evictions"]) for s in summary] == [(VARIANT, "pass", 1)]
    _assert_gone(desched_toolchain.cache_dir, cli_run.cluster)


def test_cli_record_has_the_plugins_shape(
    cli_run: CliRun,
    desched_experiment: Callable[..., ExperimentResult],
    desched_settings: DeschedConfig,
) -> None:
    result = desched_experiment(EXPERIMENT, variant=VARIANT)
    # this call's records only: other tests of the session may file theirs in the same folder
    uids = {r["job"]["uid"] for r in result.records}
    pytest_records = [
        p
        for p in _round_records(desched_settings.artifacts, result.label)
        if json.loads(p.read_text())["job"]["uid"] in uids
    ]
    cli_records = _round_records(cli_run.artifacts, result.label)
    assert len(pytest_records) == len(uids) == 1, f"records under {desched_settings.artifacts}"
    assert len(cli_records) == 1, f"round records of the CLI run: {cli_records}\n{cli_run.run}"
    ours: dict[str, Any] = json.loads(cli_records[0].read_text())
    assert ours["provider"] == "embedded"
    for path in pytest_records:
        theirs: dict[str, Any] = json.loads(path.read_text())
        assert set(ours) == set(theirs), (
            f"only in the CLI's record: {sorted(set(ours) - set(theirs))}; "
            f"only in the plugin's: {sorted(set(theirs) - set(ours))}"
        )
        # same engine, same pinned chart and policy: the same facts, from another cluster
        for key in ("versions", "chart", "policy_digest", "policy_overrides"):
            assert ours[key] == theirs[key], key
        assert ours["evictions"] == theirs["evictions"] == 1
        assert ours["job"]["uid"] != theirs["job"]["uid"]


def test_desched_run_parallel_runs_the_three_side_by_side(
    tmp_path: Path, desched_toolchain: Toolchain
) -> None:
    art = tmp_path / "artifacts"
    (tmp_path / "tmp").mkdir()
    run = _desched(
        desched_toolchain.cache_dir,
        tmp_path / "tmp",
        "run",
        "positive",
        "nodefit",
        "pdb",
        "--parallel",
        "--variant",
        VARIANT,
        "--provider",
        "embedded",
        "--artifacts",
        str(art),
    )
    assert run.code == 0, str(run)
    assert "6 Ready kwok workers" in run.err, run.err[-2000:]  # two per lane
    # Lanes only where they pay: the engine's choice and why, said and recorded.
    execution = json.loads((art / "session" / "execution.json").read_text())
    assert execution["mode"] in ("lanes", "sequential") and execution["experiments"] == 3
    assert f"3 experiment(s): {execution['mode']}: {execution['cpus']} CPUs" in run.err
    summary = json.loads((art / "run-summary.json").read_text())
    assert [(s["name"], s["variant"], s["outcome"]) for s in summary] == [
        (title, VARIANT, "pass")
        for title in ("positive-affinity-migration", "negative-nodefit", "negative-pdb")
    ]
    m = re.search(r"starting embedded cluster (\S+)", run.err)
    assert m, str(run)
    _assert_gone(desched_toolchain.cache_dir, m.group(1))


# -- desched up / down ---------------------------------------------------------------------
def test_up_gives_a_kept_cluster_that_down_deletes(
    tmp_path: Path, desched_toolchain: Toolchain
) -> None:
    from kubernetes import client, config

    from pytest_desched.providers.embedded.cluster import delete_cluster
    from pytest_desched.providers.embedded.owners import kept_clusters

    cache = desched_toolchain.cache_dir
    root = cache / "clusters"
    up = _desched(cache, tmp_path, "up", "--provider", "embedded", "--workers", "2")
    m = re.search(r"^# delete: desched down (\S+)$", up.out, re.M)
    name = m.group(1) if m else None
    try:
        assert up.code == 0, str(up)
        assert name, str(up)
        kube = re.search(r"^export KUBECONFIG=(\S+)$", up.out, re.M)
        assert kube, str(up)
        assert "# release descheduler in kube-system: suspended, dry run" in up.out
        assert name in kept_clusters(root)  # kept on purpose: no later run reaps it
        assert _cluster_dir(cache, name).is_dir()

        api = config.new_client_from_config(config_file=kube.group(1))
        try:
            nodes = client.CoreV1Api(api).list_node().items
            assert len([n for n in nodes if node_ready(n)]) == 2
            cjs = (
                client.BatchV1Api(api)
                .list_namespaced_cron_job(
                    "kube-system", label_selector="app.kubernetes.io/instance=descheduler"
                )
                .items
            )
            assert len(cjs) == 1
            assert cjs[0].spec.suspend is True
            args = cjs[0].spec.job_template.spec.template.spec.containers[0].args
            assert "--dry-run=true" in args
        finally:
            api.close()

        listed = _desched(cache, tmp_path, "down", timeout=120)
        assert listed.code == 0 and name in listed.out.split(), str(listed)
        down = _desched(cache, tmp_path, "down", name, timeout=300)
        assert down.code == 0, str(down)
        assert f"deleted embedded cluster {name}" in down.err
        _assert_gone(cache, name)
        assert name not in kept_clusters(root)
    finally:  # a kept cluster is never reaped: never leave one behind
        mine = {name} if name else set()
        for rec in (root / "owners").glob("*.json"):
            try:
                if json.loads(rec.read_text()).get("pid") == up.pid:
                    mine.add(rec.stem)
            except (OSError, ValueError):
                continue
        for n in mine:
            if _cluster_dir(cache, n).exists():
                delete_cluster(desched_toolchain, root, n, lambda _: None)


def test_desched_canary_reports_the_fix_and_exits_by_verdict(
    tmp_path: Path, desched_toolchain: Toolchain
) -> None:
    """`desched canary` against PR 1883: one experiment, exit 0, both reports, no cluster left."""
    from tests.upstream import tarball

    (tmp_path / "tmp").mkdir()
    art = tmp_path / "artifacts"
    argv = ["canary", "--candidate", f"source:{tarball('pr1883')}", "--candidate-chart", "tree"]
    run = _desched(
        desched_toolchain.cache_dir,
        tmp_path / "tmp",
        *argv,
        "--experiment",
        "positive[runbook]",
        "--no-static",
        "--provider",
        "embedded",
        "--artifacts",
        str(art),
    )
    assert run.code == 0, str(run)
    assert "**Verdict: PASS**" in run.out
    assert "the candidate fixes descheduler#1882" in run.out
    report = json.loads((art / "canary.json").read_text())
    assert report["ok"] is True
    assert [(o["baseline"], o["candidate"]) for o in report["outcomes"]] == [("xfail", "pass")]
    clusters = re.findall(r"starting embedded cluster (\S+)", run.err)
    assert len(clusters) == 2, str(run)
    for name in clusters:
        _assert_gone(desched_toolchain.cache_dir, name)
