"""A session's experiments: each one's context built and checked, run alone or in lanes.

`DeschedSession` takes this as a mixin: `context()` checks every input and builds the
experiment's context (policy held to the lab, scoped to the cluster) before any change;
`run()` runs one experiment, `run_concurrently()` several, in lanes where they pay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.bounds import check_cycles, check_no_loop, cycles_to_run
from pytest_desched.errors import ConfigError
from pytest_desched.session_state import SessionState

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.evidence.views_ahead import ViewsAhead
    from pytest_desched.experiments import Experiment, ExperimentContext, ExperimentResult


def _user_policy_scope() -> Any:
    # heavy: descheduler.policy and its imports, kept out of pytest start-up
    from pytest_desched.descheduler.policy import PolicyScope

    return PolicyScope(
        node_selector=None,
        why="your policy runs held to the lab: its evicting plugins act only in the lab namespace",
        strict=False,
    )


class SessionExperiments(SessionState):
    """The experiment half of DeschedSession (its state: config, cluster, release, evidence)."""

    # Protections this session's release cannot express that its caller accepts running
    # without (release_fields.missing_key -> why): a canary's explanation file says them.
    accepted_missing: Mapping[str, str] = {}

    def release_policy(self, policy: Any, release: Release | None = None) -> Any:
        """`policy` read in the fields of the release that runs it (release_fields), validated
        by that release's own checker; PolicyError names what it cannot express."""
        # heavy: descheduler.policy.release_fields and its imports, kept out of pytest start-up
        from pytest_desched.descheduler.policy.release_fields import policy_for_release

        tc = getattr(release, "toolchain", None)
        if release is not None and tc is not None:
            version = release.policycheck_version or release.descheduler_version
        elif self.config.candidate is None:  # the pin's checker, the one lab_policy asked
            version = None
        else:  # a named release not installed yet (deferred): the session builds its checker
            tc = self.toolchain
            version = tc.wanted_version("policycheck")
        return policy_for_release(policy, version, tc, accepted=self.accepted_missing)

    def need_metrics(self, sources: Sequence[str], why: str) -> None:
        """Start the cluster with `sources` (policies on actual utilization read them); a
        cluster already up without one is an error naming the fix, never a silent run."""
        missing = tuple(s for s in sources if s not in self.metrics_sources)
        if not missing:
            return
        if self._cluster is not None:
            raise ConfigError(
                f"{why} reads actual utilization from {', '.join(missing)}, which this "
                "session's cluster was not started with; run it in a session of its own "
                f"(desched run {why}), or call need_metrics({missing!r}) before the cluster starts"
            )
        if self._provider is not None:  # chosen, not started: it refuses what it cannot start
            self._provider.use_metrics(missing)
        self.metrics_sources = (*self.metrics_sources, *missing)

    def context(
        self,
        variant: str = "runbook",
        namespace: str | None = None,
        replicas: int = 3,
        source: str | None = None,
        target: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        keep_min_pod_age: bool = False,
        policy: Any = None,
        why: str = "caller override",
        release: Release | None = None,
        defer_release: bool = False,
        cycles: int = 1,
        no_loop: bool = False,
        on_record: Callable[[dict[str, Any]], None] | None = None,
    ) -> ExperimentContext:
        """An ExperimentContext, every input checked before anything changes.

        A bad input is a one-line ConfigError (or PolicyError) naming the input and the
        fix. `policy` is anything `Policy.coerce` takes (Policy, path, mapping, YAML text);
        a caller's own policy is filed under its own name, not a built-in variant's.
        `on_record` gets each round's record as it is written. The context is frozen: a
        caller derives its own (a lane's) with `dataclasses.replace`.
        """
        # heavy: descheduler.chart and its imports; descheduler.policy and its imports; experiments: the kubernetes client; lab.inputs: the kubernetes client, kept out of pytest start-up
        from pytest_desched.descheduler.chart import Release as _Release
        from pytest_desched.descheduler.policy import Policy, scope_policy
        from pytest_desched.experiments import VARIANTS, ExperimentContext, lab_policy
        from pytest_desched.lab.inputs import LabInputError, check_lab_inputs

        cycles = check_cycles(cycles)  # K in 1..50, before anything (a namespace) is taken
        if not isinstance(no_loop, bool):
            raise ConfigError(f"no_loop {no_loop!r}: give true or false")

        self._start_views_ahead()  # matplotlib's import (~1 s) while the experiment runs
        # defer_release: the caller derives a context with `prepare_release` (run_concurrently
        # installs the releases while the labs are arranged); nothing reads ctx.release before
        # it ran (Runner.use_release).
        rel = None if defer_release else (release or self.release)
        cluster = self.cluster
        w = cluster.workers
        if namespace is None:
            namespace = self.fresh_namespace()
        try:
            if policy is None and variant not in VARIANTS:
                raise LabInputError(f"unknown policy variant {variant!r}; use one of {VARIANTS}")
            if overrides is not None and not isinstance(overrides, Mapping):
                raise LabInputError(
                    f"overrides must be a mapping of policy path -> value, got "
                    f"{type(overrides).__name__}"
                )
            ns, src, dst, replicas = check_lab_inputs(
                w,
                namespace=namespace,
                source=source or (w[0] if w else None),
                target=target or (w[1] if len(w) > 1 else None),
                replicas=replicas,
                release_namespace=rel.namespace if rel is not None else _Release.namespace,
            )
        except LabInputError as exc:
            raise ConfigError(str(exc)) from None
        user = self.inputs.policy if policy is None else None
        label: str | None
        if user is not None:  # the user's own policy, with the same lab deviations
            pol = lab_policy(variant, keep_min_pod_age, base=user)
            label = f"{variant}@{Path(user.source.split(' (')[0]).name}"
        else:
            pol = lab_policy(variant, keep_min_pod_age) if policy is None else Policy.coerce(policy)
            label = None if policy is None else f"custom-{pol.digest()[:8]}"
        for path, value in (overrides or {}).items():
            pol = pol.override(path, value, why=why)
        pol = scope_policy(cluster, pol, ns)  # existing clusters: the lab only
        if user is not None and cluster.lab_node_selector is None:
            pol = _user_policy_scope().apply(pol, ns)  # a throwaway cluster: the lab namespace
        pol = self.release_policy(pol, rel)  # in the fields this release reads; validated
        return ExperimentContext(
            cluster=cluster,
            release=rel,  # type: ignore[arg-type]  # None only with defer_release
            policy=pol,
            source=src,
            target=dst,
            namespace=ns,
            replicas=replicas,
            log_dir=self.config.run_dir / "round-logs",  # raw; redacted copies go to evidence
            evidence=self.evidence,
            round_timeout=self.config.round_timeout,
            keep_lab=False,
            policy_label=label,
            inputs=self.inputs.evidence(),
            cycles=cycles,
            no_loop=no_loop,
            on_record=on_record,
        )

    def fresh_namespace(self) -> str:
        """A lab namespace no earlier experiment of this session used: the configured name
        first, then `<name>-2`, `-3`... (an earlier lab's may still be terminating: its
        deletion runs in the background, see lab/reaper.py)."""
        base, n = self.config.namespace, 1
        name = base
        while name in self._namespaces_used:
            n += 1
            suffix = f"-{n}"
            name = base[: 63 - len(suffix)].rstrip("-") + suffix
        self._namespaces_used.add(name)
        if self.config.redact and "redactor" in self.info:
            self.info["redactor"].register_namespace(name)
        return name

    def _start_views_ahead(self) -> ViewsAhead | None:
        """The report's background drawer (evidence/views_ahead.py), started once."""
        try:
            # heavy: evidence.views_ahead and its imports, kept out of pytest start-up
            from pytest_desched.evidence.views_ahead import ViewsAhead

            self._views_ahead = self._views_ahead or ViewsAhead()
        except Exception:  # drawn at close() instead, where a failure is said
            return None
        return self._views_ahead

    def _round_written(self, data: dict[str, Any]) -> None:
        """A round record was written (redacted): its charts are drawn now, in the background,
        at its place in the report: the next entry, after its experiment's earlier rounds."""
        index, rounds = self._rounds_written.setdefault(
            str(data.get("experiment")), (len(self.report_entries), [])
        )  # a record rewritten later (a fidelity real half) keeps its first place
        name = str(data.get("round_name"))
        if name not in rounds:
            rounds.append(name)
        ahead = self._start_views_ahead()
        try:
            if ahead is not None:
                ahead.submit_round(index, rounds.index(name), data)
        except Exception:  # drawn at close() instead, where a failure is said
            pass

    def _record_result(self, result: ExperimentResult, name: str) -> None:
        entry = {"name": result.label, "summary": result.summary(), "rounds": list(result.records)}
        self.report_entries.append(entry)  # the HTML report's input, written at close()
        ahead = self._start_views_ahead()  # its charts drawn now, beside the next experiment
        try:
            if ahead is not None:
                ahead.submit(len(self.report_entries) - 1, entry, self.redactor)
        except Exception:  # drawn at close() instead, where a failure is said
            pass
        for k, v in result.timings.items():
            self.timings[f"experiment.{name}[{result.variant}].{k}"] = v

    def lane_release(self, name: str) -> Release:
        """The release of one lane (run_concurrently): installed once, removed at close()."""
        if name == self.config.release:
            return self.release
        if name not in self._lane_releases:
            self._lane_releases[name] = self.new_release(name)
        return self._lane_releases[name]

    def run_concurrently(
        self,
        plan: Sequence[tuple[str | type[Experiment], str | None]],
        on_record: Callable[[dict[str, Any]], None] | None = None,
        mode: str = "auto",
    ) -> list[ExperimentResult]:
        """Run experiments side by side on this cluster, one lane each (experiments/lanes.py).

        Only where lanes pay: `mode="auto"` lets the engine choose lanes or one experiment
        after another from the CPU count and the load (`decide_execution`); "always" and
        "never" force it. The choice and why go to `info["execution"]` and the evidence.

        Each lane has its own namespace, source and target node, pool value and release, and
        its policy is held to its namespace; `check_lanes` refuses any plan where two
        descheduler instances could evict the same pods, before anything changes. Results come
        back in plan order, each with the evidence a lone run writes.
        """
        from concurrent.futures import Future, ThreadPoolExecutor

        # heavy: experiments: the kubernetes client; experiments.lanes: the kubernetes client, kept out of pytest start-up
        from pytest_desched.experiments import lookup, run_experiment
        from pytest_desched.experiments.lanes import (
            check_lanes,
            decide_execution,
            plan_lanes,
            scope_to_lane,
        )

        try:
            classes = [(lookup(e), v) for e, v in plan]
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from None
        execution = decide_execution(len(classes), mode)
        self.info["execution"] = execution
        self.report(f"{len(classes)} experiment(s): {execution['why']}")
        if execution["mode"] == "sequential":
            self.evidence.write_json("session", "execution", execution)
            return [self.run(cls, variant, on_record) for cls, variant in classes]
        cluster = self.cluster
        if cluster.lab_node_selector is not None:
            raise ConfigError(
                f"{cluster.provider} cluster {cluster.name}: experiments run one at a time here "
                "(lanes need nodes and releases of their own); use run() per experiment"
            )
        lanes = plan_lanes(
            len(classes),
            cluster.workers,
            [self.fresh_namespace() for _ in classes],
            self.config.release,
        )
        lanes = [  # lane 0 drives the session's own release
            replace(ln, release=self.config.release) if ln.index == 0 else ln for ln in lanes
        ]
        # Every input checked before the first change (a deferred-release context changes
        # nothing): the lanes' policies, scoped, and the one-executor-per-pod-set rule over them.
        ctxs = []
        for lane, (cls, variant) in zip(lanes, classes, strict=True):
            ctx = self.context(
                variant=variant or cls.default_variant,
                namespace=lane.namespace,
                source=lane.source,
                target=lane.target,
                keep_min_pod_age=cls.keep_min_pod_age,
                defer_release=True,
                on_record=on_record,
            )
            lane_policy = scope_to_lane(ctx.policy, lane).validate()
            ctxs.append(replace(ctx, policy=lane_policy, pool=lane.pool, lane=lane.name))
        check_lanes(lanes, [c.policy for c in ctxs])
        self.evidence.write_json("session", "execution", execution)
        # Every lane's release installs (suspended, dry run) beside the others and the lanes'
        # arrange steps; each lane's policy step waits for its own.
        pool = ThreadPoolExecutor(2 * len(classes), thread_name_prefix="desched-lane")
        installs = {ln.release: pool.submit(self.lane_release, ln.release) for ln in lanes}
        futures: list[Future[ExperimentResult]] = []
        try:
            ctxs = [
                replace(ctx, prepare_release=installs[lane.release].result)
                for lane, ctx in zip(lanes, ctxs, strict=True)
            ]

            def work(i: int) -> ExperimentResult:
                cls, variant = classes[i]
                return run_experiment(cls, ctxs[i], variant or cls.default_variant)

            futures += [pool.submit(work, i) for i in range(len(classes))]
            with self.phase("experiments.concurrent"):
                for f in futures:  # every lane ends (and tears its lab down) before we go on
                    f.exception()
        finally:  # Ctrl-C or an error: nothing new starts; running lanes finish their teardown
            for f in futures:
                f.cancel()
            pool.shutdown(wait=True)
        for install in installs.values():  # a lane whose release failed to install raises here
            install.result()
        results = [f.result() for f in futures]
        for (cls, _), result in zip(classes, results, strict=True):
            self._record_result(result, cls.name)
        return results

    def refusal(self, cls: type[Experiment]) -> str | None:
        """Why this session's provider cannot run experiment `cls` (`Experiment.refusal`);
        None if it can. The cluster is asked only of an experiment that declares a need."""
        return cls.refusal(self.cluster.capabilities) if cls.needs_restarts else None

    def run(
        self,
        experiment: str | type[Experiment],
        variant: str | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        **params: Any,
    ) -> ExperimentResult:
        """Run one experiment (registered name or Experiment class); never raises on failure.

        The result's `outcome` says pass / xfail / fail / error; `raise_for_outcome()` turns
        it into a test failure.
        """
        # heavy: the kubernetes client, kept out of pytest start-up
        from pytest_desched.experiments import lookup, run_experiment

        cls = lookup(experiment)
        self.need_metrics(cls.metrics_sources, cls.name)
        refusal = self.refusal(cls)
        if refusal is not None:  # before its lab: it would be arranged to prove nothing
            raise ConfigError(refusal)
        if params.get("no_loop") is True:  # before the context takes a namespace
            k = cycles_to_run(check_cycles(params.get("cycles", 1)), cls.default_cycles)
            check_no_loop(k, cls.name, "no_loop=True", "cycles")
        variant = variant or cls.default_variant
        if cls.keep_min_pod_age:
            params.setdefault("keep_min_pod_age", True)
        ctx = self.context(variant=variant, on_record=on_record, **params)
        with self.phase(f"experiment.{cls.name}[{ctx.policy_label or variant}]"):
            result = run_experiment(cls, ctx, variant)
        self._record_result(result, cls.name)
        return result
