"""`--desched-shard K/N`: this pytest run is one of N CI jobs, and a complete run on its own.

Registered only when the option is given. At configure time the shard, its run id and the
durations file are checked (a bad one is a usage error before anything runs); after pytest's
own selection (`-m`, `-k`) the shard keeps its part of the selected tests (evidence/shards.py
splits them) and deselects the rest; at the end it writes `shard.json` into its evidence
folder: which shard of which run it was, the whole selection it was split from, its tests'
outcomes and call durations, its experiments' summaries and where their round records lie.
`desched merge` reads those. A shard left without tests is a usage error (exit 4) unless
`--desched-shard-allow-empty` says N may exceed the tests: then it passes (exit 0, never
pytest's silent 5) and says so.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.artifacts_dir import claim, default_run_dir
from pytest_desched.errors import ConfigError
from pytest_desched.evidence.shards import (
    DURATIONS_FILE,
    FORMAT,
    SHARD_FILE,
    Shard,
    load_durations,
    parse_shard,
    plan_digest,
    split,
)
from pytest_desched.plugin.options import opt, shard_opt
from pytest_desched.plugin.state import state

# Where a CI system says which run a job belongs to; every job of one run sees the same value.
CI_RUN_IDS = ("GITHUB_RUN_ID", "CI_PIPELINE_ID")
_RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_WORSE = ("error", "failed")  # a test's outcome that a later phase may not overwrite


def run_id_of(explicit: str | None, env: dict[str, str] | os._Environ[str]) -> str:
    """The run id the shards share: the option, else the CI's run id; refused if none or odd."""
    rid = explicit or next((env[v] for v in CI_RUN_IDS if env.get(v)), None)
    if rid is None:
        raise ConfigError(
            "--desched-shard needs a run id every shard of the run shares, so `desched merge` "
            "can tell a missing or foreign shard: give --desched-shard-run-id ID (or "
            f"DESCHED_SHARD_RUN_ID); on CI {' or '.join('$' + v for v in CI_RUN_IDS)} is used"
        )
    if not _RUN_ID.fullmatch(rid):
        raise ConfigError(
            f"--desched-shard-run-id {rid!r}: use 1-128 letters, digits, '.', '_' or '-'"
        )
    return rid


def configure(config: pytest.Config) -> None:
    """Check the shard options and register the shard's hooks; nothing when not sharding."""
    spec = shard_opt(config, "--desched-shard")
    if not spec:
        return
    try:
        shard = parse_shard(spec)
        run_id = run_id_of(shard_opt(config, "--desched-shard-run-id"), os.environ)
        given = shard_opt(config, "--desched-shard-durations")
        path = Path(given) if given else config.rootpath / DURATIONS_FILE
        durations = load_durations(path) if given or path.is_file() else {}
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("numprocesses", None):
        raise pytest.UsageError(
            "--desched-shard with pytest-xdist (-n): not supported; a shard is one pytest "
            "process with one cluster: drop -n, or run more shards"
        )
    allow_empty = bool(shard_opt(config, "--desched-shard-allow-empty"))
    source = str(path) if durations else "equal weights (no durations file)"
    plugin = ShardRun(shard, run_id, durations, source, allow_empty)
    config.pluginmanager.register(plugin, "desched-shard")


class ShardRun:
    """The hooks of one shard: select its tests, note their outcomes, write `shard.json`."""

    def __init__(
        self,
        shard: Shard,
        run_id: str,
        durations: dict[str, float],
        source: str,
        allow_empty: bool,
    ) -> None:
        self.shard, self.run_id, self.durations = shard, run_id, durations
        self.source, self.allow_empty = source, allow_empty
        self.plan: list[str] = []
        self.tests: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.call_s: dict[str, float] = {}
        self.started = time.monotonic()
        self.selected = False  # the split was made (collection reached it, not refused)

    @pytest.hookimpl(trylast=True)  # after pytest's own -m/-k deselection
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        self.plan = [it.nodeid for it in items]
        if not self.plan:  # every shard would pass on nothing: a smaller pass, never
            raise pytest.UsageError(
                f"--desched-shard {self.shard}: no tests selected to split; check -m, -k and "
                "the paths given"
            )
        mine = set(split(self.plan, self.shard.n, self.durations)[self.shard.k - 1])
        keep = [it for it in items if it.nodeid in mine]
        self.tests = [it.nodeid for it in keep]
        if not keep and not self.allow_empty:
            raise pytest.UsageError(
                f"--desched-shard {self.shard}: no tests for this shard ({len(self.plan)} "
                f"selected over {self.shard.n} shards); use N <= {len(self.plan)}, or "
                "--desched-shard-allow-empty when a matrix may outgrow the tests"
            )
        dropped = [it for it in items if it.nodeid not in mine]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
        self.selected = True

    def pytest_report_collectionfinish(self, config: pytest.Config) -> str:
        what = f"{len(self.tests)} of {len(self.plan)} selected tests"
        if not self.tests:
            what = f"no tests ({len(self.plan)} selected; allowed by --desched-shard-allow-empty)"
        return f"desched shard {self.shard} of run {self.run_id}: {what}; split by {self.source}"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        xfail = hasattr(report, "wasxfail")
        outcome: str
        if report.when == "call":
            outcome = "xfailed" if xfail and report.skipped else report.outcome
            outcome = "xpassed" if xfail and report.passed else outcome
            self.call_s[report.nodeid] = round(report.duration, 2)
        elif report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "skipped"
        else:
            return
        if self.outcomes.get(report.nodeid) not in _WORSE:
            self.outcomes[report.nodeid] = outcome

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.selected or session.config.option.collectonly:  # nothing ran: no record
            return
        if not self.tests and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = exitstatus = pytest.ExitCode.OK  # allowed, and said
        st = state(session.config)
        if st.artifacts is None:  # no desched fixture ran: the folder is still this shard's
            art = opt(session.config, "--desched-artifacts")
            st.artifacts = Path(art) if art else claim(default_run_dir())
        record = self.record(int(exitstatus), st)
        st.artifacts.mkdir(parents=True, exist_ok=True)
        path = st.artifacts / SHARD_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)

    def record(self, exitstatus: int, st: Any) -> dict[str, Any]:
        """`shard.json`: what `desched merge` checks and joins (evidence/merge.py reads it)."""
        session = st.session
        redact = st.redactor.redact if st.redactor is not None else (lambda x: x)
        experiments = []
        for entry in st.results:
            result = entry.get("result")
            if result is None:
                continue
            rounds: list[str] = []
            for rec in entry["rounds"]:
                where = session.evidence.path_for(rec["experiment"], rec["round_name"])
                rel = str(where.relative_to(st.artifacts)) + ".json"
                if rel not in rounds:
                    rounds.append(rel)
            experiments.append(
                {
                    "nodeid": entry["nodeid"],
                    "name": entry.get("name"),
                    "outcome": entry.get("outcome"),
                    "summary": redact(json.loads(json.dumps(result.summary(), default=str))),
                    "rounds": rounds,
                }
            )
        info = dict(getattr(session, "info", None) or {})
        shown = {k: info[k] for k in ("provider", "chart") if k in info}
        return {
            "format": FORMAT,
            "run_id": self.run_id,
            "shard": self.shard.k,
            "of": self.shard.n,
            "plan": self.plan,
            "plan_digest": plan_digest(self.plan),
            "tests": self.tests,
            "exit_status": exitstatus,
            "empty": not self.tests,
            "outcomes": {t: self.outcomes.get(t, "not run") for t in self.tests},
            "durations": {t: self.call_s[t] for t in self.tests if t in self.call_s},
            "wall_s": round(time.monotonic() - self.started, 1),
            "split_by": self.source,
            "info": redact(json.loads(json.dumps(shown, default=str))),
            "experiments": experiments,
        }
