"""pytest-xdist (`-n N`): every worker a shard of one run, the controller merges their evidence.

Each xdist worker is its own process with its own session cluster and evidence folder
(`artifacts_dir.default_run_dir` appends the worker id; an explicit `--desched-artifacts DIR`
becomes `DIR-gwK`). So that the run still ends in ONE folder with one report, every worker
records what it ran as a shard does (`shard.json`, plugin/sharding.py: the selection, its
tests' outcomes and call durations, its experiments' round records) without splitting
anything itself (xdist hands out the tests), and tells the controller where its folder is.
After the last worker ended, the controller merges the folders with `desched merge`'s own
code (evidence/merge.py: proven to be one whole run, one report.html, run-summary.json,
junit.xml when the workers wrote one, desched-durations.json) into the run's folder
(`<stamp>-<run id>`, or DIR) and removes the worker folders it copied. A run that did not
run its whole selection (`-x`, Ctrl-C, a crashed worker) keeps the worker folders as they
are and says why nothing was merged.
"""

from __future__ import annotations

import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.artifacts_dir import ROOT_NAME, claim, release_if_empty
from pytest_desched.errors import ConfigError
from pytest_desched.evidence.shards import SHARD_FILE, Shard
from pytest_desched.plugin.options import opt
from pytest_desched.plugin.sharding import ShardRun
from pytest_desched.plugin.state import state

SPLIT_BY = "pytest-xdist (the controller hands out tests)"
WORKER_OUTPUT = "desched_evidence"  # the worker's evidence folder, in xdist's workeroutput


def worker_index(worker_id: str) -> int:
    """`gw3` -> 3 (xdist names its workers gw0, gw1, ...)."""
    digits = worker_id.removeprefix("gw")
    if not digits.isdigit():
        raise pytest.UsageError(f"pytest-xdist worker id {worker_id!r}: expected gw<N>")
    return int(digits)


def configure(config: pytest.Config) -> None:
    """Register the worker's or the controller's half; nothing without xdist's `-n`."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        shard = Shard(worker_index(workerinput["workerid"]) + 1, int(workerinput["workercount"]))
        run_id = str(workerinput["testrunuid"])[:12]
        config.pluginmanager.register(WorkerRun(shard, run_id), "desched-xdist-worker")
    elif config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        if not config.getoption("testrunuid", None):  # known here, so the merged folder has it
            config.option.testrunuid = uuid.uuid4().hex
        config.pluginmanager.register(ControllerMerge(config), "desched-xdist-controller")


class WorkerRun(ShardRun):
    """A shard that selects nothing: its tests are those xdist gave it, noted as they run."""

    def __init__(self, shard: Shard, run_id: str) -> None:
        super().__init__(shard, run_id, {}, SPLIT_BY, allow_empty=True)

    @pytest.hookimpl(trylast=True)  # after xdist named loadgroup tests `id@group`
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        self.plan = [it.nodeid for it in items]
        self.selected = True

    def pytest_report_collectionfinish(self, config: pytest.Config) -> str:
        return ""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup" and report.nodeid not in self.tests:
            self.tests.append(report.nodeid)
        super().pytest_runtest_logreport(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        had_evidence = state(session.config).artifacts is not None  # a desched fixture ran
        super().pytest_sessionfinish(session, exitstatus)
        art = state(session.config).artifacts
        if art is not None:
            out = session.config.workeroutput  # type: ignore[attr-defined]
            out[WORKER_OUTPUT] = str(art)
            out[WORKER_OUTPUT + "_used"] = had_evidence


class ControllerMerge:
    """The controller's half: collect the workers' folders, merge them after the last one."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.folders: list[Path] = []
        self.used = False  # some worker's desched fixture wrote evidence
        self.merged: Path | None = None
        self.note = ""
        self.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")

    def out_dir(self) -> Path:
        art = opt(self.config, "--desched-artifacts")
        if art:
            return Path(art).absolute()
        run_id = str(self.config.getoption("testrunuid"))[:8]
        return (Path.cwd() / ROOT_NAME / f"{self.stamp}-{run_id}").absolute()

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        out = getattr(node, "workeroutput", None) or {}
        if out.get(WORKER_OUTPUT):
            self.folders.append(Path(out[WORKER_OUTPUT]))
            self.used = self.used or bool(out.get(WORKER_OUTPUT + "_used"))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.folders:
            return
        if not self.used:  # only unit tests ran: a shard.json each and nothing else, not kept
            for folder in self.folders:
                (folder / SHARD_FILE).unlink(missing_ok=True)
                release_if_empty(folder)
            return
        # heavy: the merge's report builder (jinja2, matplotlib), only when there is evidence
        from pytest_desched.evidence.merge import merge

        out = self.out_dir()
        try:
            merged = merge(sorted(self.folders), out)
        except ConfigError as exc:
            self.note = f"not merged ({exc}); each worker's folder is kept"
            return
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)
        claim(out)  # `latest` points at the merged run, not at a worker's copy
        self.merged = out
        self.note = f"{len(self.folders)} workers merged into {out}"
        if merged.summary.get("report"):
            self.note += f"; report: {merged.summary['report']}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.note:
            terminalreporter.section("pytest-desched")
            terminalreporter.line(f"evidence: {self.note}")
