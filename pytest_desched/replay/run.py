"""`Replay` (and `replay()`, its function form): a snapshot on a fresh embedded cluster, the
incident's policy and version, N real rounds, and the per-pod fate ledger (compared with the
incident's own log when given). A timeline, a host replay, the snapshot canary's tracks and
snapshot fidelity's halves are `Replay`s with their own hooks.

Every input is checked before the cluster exists: the snapshot (format, restorability), the
rounds, the policy (the descheduler's own policy check, as `Release.apply_policy` would),
the incident log. Then one `DeschedSession` (cleanup on pass, fail and Ctrl-C): the release is
first installed the runbook's way, its round pods pinned to the replay's runner node, the
policy applied with dry-run *off* (the cluster is a throwaway copy, so evictions and PDB
429s are real), the snapshot restored right before the first round (so ages are the
snapshot's at the round), and each round run as a Job from the suspended CronJob.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.bounds import CLIENT_FLAGS
from pytest_desched.capabilities import KUBERNETES_METRICS, capabilities_of
from pytest_desched.config import build_config
from pytest_desched.errors import ConfigError, EvidenceIncomplete, RoundError
from pytest_desched.log import Reporter, say
from pytest_desched.outcome.fates import Fate, Layer
from pytest_desched.outcome.verdict import Verdict
from pytest_desched.replay.aftermath import aftermath
from pytest_desched.replay.capture.format import Snapshot, key, utc
from pytest_desched.replay.inputs import ReplayInputs, check_inputs
from pytest_desched.replay.ledger import (
    GONE,
    NOT_RESTORED,
    Ledger,
    PodFate,
    figures,
    node_cuts,
    round_fates,
    total_cut,
    undecided,
)
from pytest_desched.replay.log_compare import compare_with_log
from pytest_desched.replay.objects import collection_path
from pytest_desched.replay.rebuild.plan import AGES, RUNNER_NODE, runner_values
from pytest_desched.replay.repeat import replay_verdict
from pytest_desched.replay.rows import (
    BORN_NOTE,
    Moment,
    born_rows,
    decided_nodes,
    in_scope,
    left_out,
    snapshot_rows,
)
from pytest_desched.tools.kube_versions import KubeChoice, for_snapshot
from pytest_desched.tools.versions import load_versions

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig

BeforeRound = Callable[[int, Any], dict[str, Any]]  # (round, cluster) -> the round's extra
# (round, Round, fates) -> the round's extra; may set fields of the fates (a timeline's moments)
AfterRound = Callable[[int, Any, dict[str, Any]], dict[str, Any]]
Finish = Callable[[], dict[str, Any]]  # after the last round, before teardown -> result.timeline


@dataclass
class ReplayResult:
    """What a replay did and found; `ledger` is the per-pod answer."""

    snapshot: dict[str, Any]
    descheduler: str
    policy: dict[str, Any]
    ledger: Ledger
    restore: dict[str, Any] = field(default_factory=dict)
    restored_pods: list[str] = field(default_factory=list)  # namespace/name of each
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    chart: dict[str, Any] = field(default_factory=dict)  # the release's chart (evidence())
    timeline: dict[str, Any] = field(default_factory=dict)  # a timeline replay's own facts
    client: dict[str, Any] = field(default_factory=dict)  # --client-qps/--client-burst given
    host: dict[str, Any] = field(default_factory=dict)  # a host replay's plan and teardown
    # the cluster's Kubernetes: chosen how (the snapshot's minor, or named), server, skew
    kubernetes: dict[str, Any] = field(default_factory=dict)

    @property
    def final_verdict(self) -> Verdict:
        """This replay's verdict, the one `desched replay` exits with (repeat.replay_verdict)."""
        return replay_verdict([self])

    def to_dict(self) -> dict[str, Any]:
        # the ledger by its own to_dict only: asdict's recursion through it took seconds
        d = asdict(replace(self, ledger=Ledger(self.ledger.source)))
        d["ledger"] = self.ledger.to_dict()
        return d

    def markdown(self) -> str:
        head = [
            "# Replay",
            "",
            f"- snapshot: {self.snapshot.get('path')} taken {self.snapshot.get('takenAt')} "
            f"({self.snapshot.get('nodes')} nodes, {self.snapshot.get('pods')} pods)",
            f"- descheduler: {self.descheduler}; policy {self.policy.get('source')} "
            f"(digest {str(self.policy.get('digest'))[:12]})",
        ]
        if self.kubernetes:
            k = self.kubernetes
            head.append(f"- Kubernetes {k.get('server') or k.get('version')} ({k.get('source')})")
        if self.restore:
            r = self.restore
            head.append(
                f"- restore: {r.get('counts', {}).get('pods')} pods via {r.get('method')}, ages "
                f"{r.get('ages')} (shift {r.get('shift_s')} s), verified: "
                f"{(r.get('verified') or {}).get('ok')}, {sum((r.get('timings') or {}).values()):.1f} s"
            )
            head += [f"- deviation: {d}" for d in r.get("deviations") or []]
        if self.timeline:
            t = self.timeline
            applied = ", ".join(f"{k} {v}" for k, v in sorted(t["applied_changes"].items()))
            head.append(
                f"- timeline: {t['timeline']}, window {t['window_s']:g} s from "
                f"{t['window_start']} at {t['speed']:g}x; {t['changes']} changes "
                f"({applied or 'none reached'}); rounds at t={t['rounds_at'][:20]} s "
                f"(every {t['every_s']:g} s: {t['every_from']})"
            )
            # what the replay could not keep (timeline/run.TimelineDriver.finish): each failure fails it
            head += [f"- **{f}**" for f in t.get("failures") or []]
            head += [f"- {t['speed_check']['why']}"] if t.get("speed_check", {}).get("why") else []
            head += [
                f"- eviction of `{e['pod']}` in round {e['round']} at t={e['at_s']} s"
                for e in t["evictions"][:50]
            ]
        head += [f"- {n}" for n in self.notes]
        return "\n".join(head) + "\n\n" + self.ledger.to_markdown()


# -- the replay ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayOptions:
    """How to replay a snapshot: every choice of `replay()` but where and the hooks.

    `descheduler`: a release tag (default: the snapshot's descheduler, else the pin) or a
    candidate spec (`source:PATH`, `binary:PATH`, `version:vX.Y.Z`); `policy`: anything
    `Policy.coerce` takes (default: the snapshot's); `log`: the incident's JSON log to
    compare round 1 with. `dry_run=True` runs the rounds in dry run (the dry-run half of
    `desched fidelity snapshot.yaml`). `client` ({"qps": Q, "burst": B}, either or both)
    sets the descheduler's API client limits in place of its own defaults: a replay option,
    recorded in the result and the ledger. `max_rounds` replaces the K rule of `--cycles`
    for `rounds` (a timeline's rounds come from its window); `source` names a Snapshot given
    already loaded.
    """

    descheduler: str | None = None
    policy: Any = None
    rounds: int = 1
    log: str | Path | None = None
    ages: str = "shift"
    method: str = "auto"
    round_timeout: float = 300
    restore_timeout: float = 300
    max_rounds: int | None = None
    source: str | None = None
    dry_run: bool = False
    client: Mapping[str, Any] | None = None
    assume_usage: str | None = None  # `--assume-usage requests` (rebuild/usage.py)


class Replay:
    """One replay of a snapshot: its inputs, its cluster, its rounds and the ledger.

    The hooks are methods a use overrides: `before_round` (a timeline's changes, a canary's
    node facts), `after_round` (eviction moments, a fidelity probe), `finish` (a timeline's
    own facts), `moment` (a window's clock, when `windowed`) and `restore` (a host replays
    through the API without a runner node). `run()` replays on a fresh embedded cluster;
    `run_on(session, inputs)` on a session already made (the snapshot canary's tracks);
    `play` and `write` are its two halves (a host replay adds its facts between them).
    """

    windowed = False  # True: `moment` places a pod born during the replay in the window

    def __init__(
        self,
        snapshot: str | Path | Snapshot,
        options: ReplayOptions | None = None,
        config: DeschedConfig | None = None,
        report: Reporter = say,
    ) -> None:
        self.snapshot = snapshot
        self.options = options or ReplayOptions()
        self.config = config
        self.report = report

    # -- hooks ---------------------------------------------------------------------------
    def before_round(self, i: int, cluster: Any) -> dict[str, Any]:
        """Runs before round i; what it returns joins that round's `extra`."""
        return {}

    def after_round(self, i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        """Runs after round i; may set fields of `fates`; its answer joins the round's extra."""
        return {}

    def finish(self) -> dict[str, Any]:
        """After the last round, before the cluster goes; the answer is `result.timeline`."""
        return {}

    def moment(self, wall: float) -> float | None:
        """Window seconds at epoch `wall` (read only when `windowed`)."""
        return None

    def restore(self, cluster: Any, snap: Snapshot, **kw: Any) -> Any:
        """The snapshot onto the replay's cluster (`rebuild.restore.restore`)."""
        # heavy: the kubernetes client, kept out of this module's import
        from pytest_desched.replay.rebuild.restore import restore

        return restore(cluster, snap, **kw)

    # -- steps ---------------------------------------------------------------------------
    def check(self, **kw: Any) -> ReplayInputs:
        """The inputs, checked before any cluster (`check_inputs`; `kw` its own options)."""
        o = self.options
        client = dict(o.client) if o.client is not None else None
        return check_inputs(
            self.snapshot,
            o.descheduler,
            o.policy,
            o.rounds,
            o.log,
            o.max_rounds,
            o.source,
            client,
            assume_usage=o.assume_usage,
            **kw,
        )

    def run(self) -> ReplayResult:
        """Check, then replay on a fresh embedded cluster (one `DeschedSession`)."""
        t0 = time.monotonic()
        if self.options.ages not in AGES:
            raise ConfigError(f"ages={self.options.ages!r}: use one of {AGES}")
        config = self.config or build_config({"--desched-provider": "embedded"})
        caps = capabilities_of(config.provider)  # None: auto, which replay resolves to embedded
        if caps is not None and not caps.restores_etcd:
            raise ConfigError(
                f"replay restores onto a fresh embedded cluster; provider {config.provider!r} "
                "is not one (use --provider embedded)"
            )
        inputs = None
        if self.options.policy is None and (config.values or config.policy):
            inputs = announced_inputs(config, self.report)
            if inputs.policy is not None:  # the session says it runs it, so it does
                self.options = replace(self.options, policy=inputs.policy)
        inp = self.check()
        changes: dict[str, Any] = {"provider": "embedded"}
        kube = snapshot_kubernetes(inp.snap, config.kubernetes)
        changes["kubernetes"] = None if kube.pinned else kube.version
        self.report(kube.line())
        if inp.candidate:
            changes["candidate"] = inp.candidate
        elif inp.version:
            changes["descheduler_version"] = inp.version
        config = config.with_(**changes)
        timings: dict[str, float] = {"inputs": round(time.monotonic() - t0, 3)}
        # heavy: its imports, kept out of `desched replay`'s input checks
        from pytest_desched.session import DeschedSession

        # Round pods on the runner node and nowhere else: a chart values layer of every release.
        session = DeschedSession(
            config, report=self.report, placement=runner_values(), inputs=inputs
        )
        if inp.serves_usage:  # metrics-server on the replay cluster (rebuild/usage.py)
            session.need_metrics(usage_sources(inp), "replay")
        with session:
            result = self.run_on(session, inp)
            result.timings = {**timings, **result.timings}
            result.kubernetes = {**(session.info.get("kubernetes") or kube.evidence())}
            result.kubernetes["source"] = kube.source
        result.timings["total"] = round(time.monotonic() - t0, 3)
        return result

    def run_on(self, session: Any, inp: ReplayInputs) -> ReplayResult:
        """The replay on a session already made (placement `runner_values()`, embedded): the
        policy, the restore, the rounds, the ledger, its files."""
        result = self.play(session, inp)
        result.timings = {**session.timings, **result.timings}
        self.write(session, result)
        return result

    def play(self, session: Any, inp: ReplayInputs) -> ReplayResult:
        """The policy, the restore, the rounds and the ledger on `session`; no files."""
        return _play(self, session, inp)

    def write(self, session: Any, result: ReplayResult) -> None:
        """The result JSON and the Markdown ledger under <artifacts>/replay/ (redacted per
        config); a failure to write is a note on the result, never lost silently."""
        # heavy: its imports, kept out of `desched replay`'s input checks
        from pytest_desched.evidence.report import write_replay_report

        try:
            ev = session.evidence
            data = result.to_dict()  # once: ~10 s a call at 10,000 pods x 15 rounds (issue 42)
            j = ev.write_json("replay", "replay", data, capped=False)  # its fates, every one
            m = ev.write_text("replay", "ledger.md", result.markdown())

            # Beside the JSON, from the same data and redacted by the same rule.
            try:
                h = write_replay_report(j.with_name("replay.html"), data, session.redactor)
            except OSError as exc:  # a full disk: the folder is incomplete, as for the others
                raise ev.mark_incomplete(j.with_name("replay.html"), exc) from exc
            result.artifacts = {"json": str(j), "markdown": str(m), "html": str(h)}
        except EvidenceIncomplete:  # never a result that rests on half its evidence (issue 54)
            raise
        except Exception as exc:  # the result is still returned; say why there is no file
            result.notes.append(f"artifacts not written: {type(exc).__name__}: {exc}")


class _Hooked(Replay):
    """`replay()`'s hook functions as the methods they stand for."""

    def __init__(
        self,
        *args: Any,
        before_round: BeforeRound | None,
        after_round: AfterRound | None,
        finish: Finish | None,
        moment: Moment | None,
        **kw: Any,
    ) -> None:
        super().__init__(*args, **kw)
        self._before, self._after, self._finish, self._moment = (
            before_round,
            after_round,
            finish,
            moment,
        )
        self.windowed = moment is not None

    def before_round(self, i: int, cluster: Any) -> dict[str, Any]:
        return self._before(i, cluster) if self._before else {}

    def after_round(self, i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        return self._after(i, rnd, fates) if self._after else {}

    def finish(self) -> dict[str, Any]:
        return self._finish() if self._finish else {}

    def moment(self, wall: float) -> float | None:
        return self._moment(wall) if self._moment else None


def snapshot_kubernetes(snap: Snapshot, requested: str | None) -> KubeChoice:
    """The Kubernetes a replay runs at: the one named, else the nearest served patch of the
    minor the snapshot's cluster ran (its scheduler and admission), else a refusal (exit 2)."""
    source = snap.header.get("source") or {}
    return for_snapshot(
        load_versions(), source.get("serverVersion"), requested, "--kubernetes / DESCHED_KUBERNETES"
    )


def announced_inputs(config: DeschedConfig, report: Reporter = say) -> Any:
    """The inputs a session on `config` announces: its --policy file, else its --values'
    deschedulerPolicy as helm renders it (`.policy`; None: neither sets one), linted as every
    session's inputs are, with no cluster. A replay runs that policy in place of the
    snapshot's (or where the snapshot holds none), checked like any policy (`check_inputs`)
    before any cluster, and hands these inputs to its session, which installs with them."""
    # heavy: session and its imports, kept out of the input checks until values are given
    from pytest_desched.session import DeschedSession

    return DeschedSession(config, report=report).inputs


def replay(
    snapshot_path: str | Path | Snapshot,
    descheduler: str | None = None,
    policy: Any = None,
    rounds: int = 1,
    log: str | Path | None = None,
    config: DeschedConfig | None = None,
    report: Reporter = say,
    ages: str = "shift",
    method: str = "auto",
    round_timeout: float = 300,
    restore_timeout: float = 300,
    before_round: BeforeRound | None = None,
    max_rounds: int | None = None,
    source: str | None = None,
    after_round: AfterRound | None = None,
    finish: Finish | None = None,
    dry_run: bool = False,
    client: dict[str, Any] | None = None,
    moment: Moment | None = None,
    assume_usage: str | None = None,
) -> ReplayResult:
    """Replay a snapshot; see the module docstring and `ReplayOptions`. Usable without pytest.

    The function form of `Replay(...).run()`, kept for its callers: `before_round(i,
    cluster)`, `after_round(i, round, fates)`, `finish()` and `moment(wall)` are the
    `Replay` methods of the same names.
    """
    options = ReplayOptions(
        descheduler=descheduler,
        policy=policy,
        rounds=rounds,
        log=log,
        ages=ages,
        method=method,
        round_timeout=round_timeout,
        restore_timeout=restore_timeout,
        max_rounds=max_rounds,
        source=source,
        dry_run=dry_run,
        client=client,
        assume_usage=assume_usage,
    )
    return _Hooked(
        snapshot_path,
        options,
        config,
        report,
        before_round=before_round,
        after_round=after_round,
        finish=finish,
        moment=moment,
    ).run()


def _play(r: Replay, session: Any, inp: ReplayInputs) -> ReplayResult:
    # heavy: replay.kubeapi: the kubernetes client, kept out of this module's import
    # heavy: its imports, kept out of `desched replay`'s input checks
    from pytest_desched.descheduler.rounds import run_round, runbook_job_name
    from pytest_desched.replay import kubeapi

    o, report = r.options, r.report
    moment = r.moment if r.windowed else None
    cluster, release = session.cluster, session.release
    timings: dict[str, float] = {}
    if inp.client:  # the user's replay option, never a silent change: recorded below
        release.add_cmd_options({CLIENT_FLAGS[k]: v for k, v in inp.client.items()})
    if (inp.metrics_sources or inp.assume_usage) and not cluster.metrics_sources:
        # a session made elsewhere (a snapshot canary's track, a host) without the source
        raise ConfigError(
            "the replay's policy reads actual utilization (or usage is assumed) but its "
            "cluster runs no metrics source; start the session with need_metrics"
        )
    with session.phase("replay.apply_policy"):
        release.apply_policy(inp.policy, dry_run=o.dry_run)
    with session.phase("replay.restore"):
        restored = r.restore(
            cluster,
            inp.snap,
            ages=o.ages,
            method=o.method,
            timeout=o.restore_timeout,
            report=report,
            # usage served, waited for only when the policy reads it (~25 s: two scrapes)
            **({"assume_usage": inp.assume_usage} if inp.assume_usage else {}),
            **({} if inp.metrics_sources else {"wait_usage": False}),
        )
    version = release.descheduler_version
    rows = snapshot_rows(inp.snap, restored)
    ledger = Ledger(
        "replay",
        version,
        list(rows.values()),
        notes=[
            client_note(inp.client),
            *([restored.usage["note"]] if getattr(restored, "usage", None) else []),
            *inp.snap.load_notes,
        ],
    )
    owner_uid = {pod: facts.get("ownerUid") for pod, facts in restored.expected.items()}
    round_results = []
    for i in range(1, inp.rounds + 1):
        hook_extra = r.before_round(i, cluster)
        seen = kubeapi.list_all(cluster.api_client, collection_path("Pod"))
        known = {p["metadata"]["uid"] for p in seen}
        name = runbook_job_name(cluster, release.namespace, f"descheduler-replay-{i}")
        with session.phase(f"replay.round{i}"):
            rnd = run_round(
                cluster, release, name, session.config.run_dir / "round-logs", o.round_timeout
            )
        round_results.append(rnd)
        if rnd.result.lines == 0:
            raise RoundError(
                f"round {name}: the descheduler's log is empty (Job {rnd.conditions}, "
                f"{len(rnd.pod_runs)} pod runs); no fate can be read from it"
            )
        kept_log = session.evidence.write_log("replay", name, rnd.logs)  # every round's log
        fates = round_fates(rnd.result, rnd.logs)
        decided = decided_nodes(rnd.result, fates)
        every_decided = dict(decided)  # before the scope: the ledger names what it leaves out
        own = f"{rnd.namespace}/{rnd.name}-"  # the round's own pod
        # the runner node's pods listed again: a DaemonSet pod the controller put there after
        # the list above is replay machinery too, whatever the log says of it
        runner = kubeapi.list_all(
            cluster.api_client,
            collection_path("Pod"),
            [("fieldSelector", f"spec.nodeName={RUNNER_NODE}")],
        )
        known_rows = {r.pod: r for r in ledger.rows}
        listed, decided = in_scope([*seen, *runner], decided, inp.scope)
        born = born_rows(listed, decided, known_rows, i, moment, own)
        ledger.rows += born
        on_runner = [key(p) for p in runner]
        gap = left_out(i, every_decided, (r.pod for r in ledger.rows), own, inp.scope, on_runner)
        if gap:
            ledger.notes.append(gap)
        if born and moment and BORN_NOTE not in ledger.notes:
            ledger.notes.append(BORN_NOTE)
        evicted = [p for p, f in fates.items() if f.fate == Fate.EVICTED.value]
        hook_extra = {**hook_extra, **r.after_round(i, rnd, fates)}
        with session.phase(f"replay.round{i}.aftermath"):
            new_rows, after, new_owners = aftermath(cluster, owner_uid, evicted, known, report)
        cuts = (total_cut(rnd.result), node_cuts(rnd.result))  # once: each scans every decision
        for row in ledger.rows:
            if len(row.fates) >= i:  # a not-restored pod's entry for round 1
                continue
            prior = row.fates[-1] if row.fates else None
            if prior is not None and prior.fate == NOT_RESTORED:
                row.fates.append(prior)
                continue
            if prior is not None and prior.fate in (Fate.EVICTED.value, GONE):
                row.fates.append(PodFate(GONE, None, "evicted in an earlier round"))
                continue
            f = fates.get(row.pod) or undecided(rnd.result, row.node, cuts=cuts)
            if f.fate == Fate.EVICTED.value:
                f.replacement = after.get(row.pod, "none")
                if f.replacement == "missing":
                    f.layer, f.detail = Layer.CONTROLLER, f"{f.detail}; no replacement appeared"
                elif f.replacement == "pending":
                    f.layer, f.detail = (
                        Layer.SCHEDULER,
                        f"{f.detail}; the replacement stayed Pending",
                    )
            row.fates.append(f)
        for row in new_rows:  # replacements: decided from the next round on
            row.fates = [PodFate(Fate.NEW, None, f"created after round {i}") for _ in range(i)]
            ledger.rows.append(row)
        owner_uid.update(new_owners)
        fig = figures(
            name, rnd.result, rnd.logs, duration_s=round(rnd.duration_s, 3), caps=inp.policy.limits
        )
        fig.audit_by_code = _audit_codes(rnd)
        fig.extra = {
            "job": rnd.name,
            "log": str(kept_log),
            "succeeded": rnd.succeeded,
            "exit_code": rnd.exit_code,
            "age_drift_s": _drift(restored),
            **hook_extra,
        }
        ledger.rounds.append(fig)
    timeline = r.finish()
    ledger.rows.sort(key=lambda r: r.pod)
    notes = [
        f"ages: {restored.ages} (every timestamp moved by {restored.shift_s} s), written at "
        f"{restored.written_at}; ages at a round are the snapshot's plus that round's age_drift_s",
    ]
    if inp.incident_log is not None:
        ledger.comparison = compare_with_log(
            inp.incident_log,
            inp.incident_version,
            inp.snap,
            restored,
            round_results[0],
            rows,
            version,
        )
    return ReplayResult(
        snapshot={
            "path": str(inp.path),
            "takenAt": inp.snap.header.get("takenAt"),
            "nodes": len(inp.snap.nodes),
            "pods": len(inp.snap.pods),
            "redacted": inp.snap.header.get("redacted"),
            "incident_descheduler": inp.snap.descheduler,
        },
        descheduler=version,
        policy={
            "source": inp.policy.source,
            "digest": inp.policy.digest(),
            "limits": inp.policy.limits,
        },
        ledger=ledger,
        restore=restored.to_dict(),
        restored_pods=sorted(restored.expected),
        timings=timings,
        notes=notes,
        chart=release.chart.evidence(),
        timeline=timeline,
        client={**inp.client, "flags": {CLIENT_FLAGS[k]: v for k, v in inp.client.items()}}
        if inp.client
        else {},
    )


def usage_sources(inp: ReplayInputs) -> tuple[str, ...]:
    """The sources the replay cluster starts with: the policy's, and Kubernetes Metrics for
    recorded or assumed usage (served through metrics.k8s.io)."""
    return tuple(dict.fromkeys((*inp.metrics_sources, KUBERNETES_METRICS)))


def client_note(client: dict[str, Any]) -> str:
    """The ledger's line on the descheduler's API client limits: the user's, or its own."""
    if not client:
        return "descheduler API client: its own limits (no --client-qps/--client-burst)"
    given = ", ".join(f"--{CLIENT_FLAGS[k]}={v}" for k, v in client.items())
    return f"descheduler API client: {given} (replay option --client-qps/--client-burst)"


def _drift(restored: Any) -> float | None:

    t = utc(restored.written_at)
    if t is None:
        return None
    import datetime as dt

    return round((dt.datetime.now(dt.UTC) - t).total_seconds(), 1)


def _audit_codes(rnd: Any) -> dict[str, int] | None:
    if rnd.audit_requests is None:
        return None
    codes: dict[str, int] = {}
    for r in rnd.audit_requests:
        if r.is_eviction:
            codes[str(r.code)] = codes.get(str(r.code), 0) + 1
    return codes
