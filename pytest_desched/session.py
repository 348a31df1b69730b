"""DeschedSession: toolchain -> provider -> release -> evidence, as one `with`, no pytest.

The engine every front end uses: the pytest plugin's fixtures, the `desched` command and
the benchmark. Each stage starts on first use (`toolchain`, `cluster`, `release`), so a
caller that needs only binaries builds no cluster. Every stage's duration lands in
`timings` and goes to the `on_phase` hooks: the benchmark reads those instead of patching.
`close()` undoes what the session created, in the runbook's reverse ownership order (lab
namespaces already gone, then the release and its leftovers, then the cluster), on pass,
fail and Ctrl-C alike.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.config import DeschedConfig, build_config
from pytest_desched.errors import ConfigError, ProviderError
from pytest_desched.interrupts import (  # noqa: F401 (re-exported: tests and front ends)
    _sigterm_to_interrupt,
    interrupts_unwind,
)
from pytest_desched.log import Reporter, say

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.descheduler.chart_source import ChartRef
    from pytest_desched.descheduler.inputs import UserInputs
    from pytest_desched.descheduler.policy import Policy
    from pytest_desched.evidence.views_ahead import ViewsAhead
    from pytest_desched.evidence.writer import EvidenceWriter
    from pytest_desched.experiments import Experiment, ExperimentContext, ExperimentResult
    from pytest_desched.providers.base import Cluster, Provider
    from pytest_desched.redaction import Redactor
    from pytest_desched.tools.candidate import Candidate
    from pytest_desched.tools.toolchain import Toolchain


__all__ = ["DeschedSession", "interrupts_unwind"]  # interrupts_unwind: the front ends' import


PhaseHook = Callable[[str, float], None]


def _user_policy_scope() -> Any:
    from pytest_desched.descheduler.policy import PolicyScope

    return PolicyScope(
        node_selector=None,
        why="your policy runs held to the lab: its evicting plugins act only in the lab namespace",
        strict=False,
    )


class DeschedSession:
    """One cluster with the pinned (or chosen) descheduler release installed the runbook's way.

    >>> with DeschedSession(build_config({"--desched-provider": "embedded"})) as s:
    ...     result = s.run("positive", variant="pdb-lister-workaround")
    """

    def __init__(
        self,
        config: DeschedConfig | None = None,
        report: Reporter = say,
        on_phase: list[PhaseHook] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.config = config or build_config()
        self.report = report
        self.on_phase: list[PhaseHook] = list(on_phase or [])
        self.timings: dict[str, float] = {}
        # provider, cluster, server, chart, cleanup... for reports (a front end may share it)
        self.info: dict[str, Any] = info if info is not None else {}
        self.failed = False  # set by a front end: keep=on-failure keeps the cluster
        self._toolchain: Toolchain | None = None
        self._provider: Provider | None = None
        self._cluster: Cluster | None = None
        self._release: Release | None = None
        self._evidence: EvidenceWriter | None = None
        self._candidate: Candidate | None = None
        self._inputs: UserInputs | None = None
        self._lane_releases: dict[str, Release] = {}  # run_concurrently's, by release name
        self._namespaces_used: set[str] = set()  # lab namespaces handed out (fresh_namespace)
        # {name, summary, rounds} per experiment run: what `<artifacts>/report.html` shows
        self.report_entries: list[dict[str, Any]] = []
        self._views_ahead: ViewsAhead | None = None  # their charts, drawn as they come

    # -- phases --------------------------------------------------------------------------
    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a block into `timings[name]` (added up when repeated) and tell the hooks."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            dt = time.monotonic() - t0
            self.timings[name] = round(self.timings.get(name, 0.0) + dt, 3)
            for hook in self.on_phase:
                hook(name, dt)

    # -- stages, each started on first use ------------------------------------------------
    @property
    def candidate(self) -> Candidate | None:
        """The canary's candidate (config `candidate`), resolved; None for a plain pinned run.

        A source candidate comes back with `source_dir`: its tree unpacked into the cache
        (once per commit; the toolchain builds from it). `info["candidate"]` records it.
        """
        if self._candidate is None:
            cand = self.config.parsed_candidate()
            if cand is None:
                return None
            if cand.kind == "source":
                cand = self.toolchain.source_candidate()
            self._candidate = cand
            self.info.setdefault("candidate", cand.to_dict())
        return self._candidate

    @property
    def toolchain(self) -> Toolchain:
        """Every tool of the run; with a candidate, its descheduler and policy checker."""
        if self._toolchain is None:
            from pytest_desched.tools.toolchain import Toolchain

            self._toolchain = Toolchain(
                cache_dir=self.config.cache_dir,
                overrides=self.config.bins,
                descheduler_version=self.config.descheduler_version,
                report=self.report,
                candidate=self.config.parsed_candidate(),
            )
        return self._toolchain

    def toolchain_for(self, version: str | None) -> Toolchain:
        """The session's toolchain, or one that builds another descheduler version."""
        base = self.toolchain
        if not version or version == base.groups["descheduler"].version:
            return base
        from pytest_desched.tools.toolchain import Toolchain

        return Toolchain(
            cache_dir=self.config.cache_dir,
            overrides={k: v for k, v in self.config.bins.items() if k != "descheduler"},
            descheduler_version=version,
            report=self.report,
        )

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            from pytest_desched.providers import make_provider

            provider = make_provider(self.config, self.toolchain)
            self._check_candidate_runs_on(provider.name)  # `auto` is only known now
            self._provider = provider
        return self._provider

    def _check_candidate_runs_on(self, provider: str) -> None:
        """An image needs a kubelet; a local build needs the embedded stand-in kubelet."""
        cand = self.candidate
        if cand is None or cand.pinned:
            return
        why = CAPABILITIES[provider].candidate_refusal(
            f"candidate {cand.ref}", cand.kind == "image", cand.has_published_image
        )
        if why:
            raise ConfigError(why)

    def chart(self, cand: Candidate | None = None) -> ChartRef:
        """The chart a release installs: the pinned one, or the candidate's own."""
        from pytest_desched.descheduler.chart_source import obtain_chart

        return obtain_chart(
            self.toolchain,
            self.toolchain.versions,
            self.config.chart_source,
            report=self.report,
            candidate=cand,
        )

    @property
    def inputs(self) -> UserInputs:
        """The user's --policy / --values, checked before any cluster change (inputs.py).

        helm renders the values with the pinned chart (helm coalesces them, nothing else);
        the policy (the file, else the values' rendered deschedulerPolicy) passes the lint.
        """
        if self._inputs is None:
            from pytest_desched.descheduler.inputs import (
                UserInputs,
                check_user_inputs,
                lint_input,
            )
            from pytest_desched.descheduler.policy.values import render_values
            from pytest_desched.proc import helm_env

            c = self.config
            if c.policy is None and not c.values:
                self._inputs = UserInputs()
                return self._inputs
            tc = self.toolchain
            version = tc.wanted_version("policycheck")

            def render(files: Any) -> Any:  # the chart this session installs (a candidate's)
                chart = self.chart(self.candidate)
                env = helm_env(tc.cache_dir / "charts")
                label = f"{tc.versions.chart_name}-{chart.version}"
                return render_values(files, chart.path, tc.path("helm"), env, chart_label=label)

            with self.phase("inputs"):
                self._inputs = check_user_inputs(
                    c.policy,
                    c.values,
                    render,
                    lambda target, label: lint_input(target, label, version, tc),
                )
            for line in self._inputs.describe():
                self.report(line)
            self.info["inputs"] = self._inputs.evidence()
        return self._inputs

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self.inputs  # noqa: B018 (the user's inputs are refused before any cluster change)
            provider = self.provider
            with self.phase("bring_up"):
                try:
                    cluster = provider.start()
                except BaseException:  # a half-made cluster is deleted, never kept
                    from pytest_desched import interrupts

                    name = getattr(provider, "cluster_name", "")
                    with interrupts.shielded(f"{provider.name} cluster {name}".strip()):
                        provider.keep = False
                        provider.stop()
                        self._note_teardown(provider, keep=False)
                    raise
            self._cluster = cluster
            for k, v in getattr(provider, "timings", {}).items():
                self.timings[f"bring_up.{k}"] = round(v, 3)
            self.info.update(
                provider=cluster.provider,
                cluster=cluster.name,
                kubeconfig=str(cluster.kubeconfig),
                bring_up_s=self.timings["bring_up"],
                server=cluster.server_version(),
                tools={t: str(p) for t, p in self.toolchain.resolved().items()},
            )
        return self._cluster

    @property
    def evidence(self) -> EvidenceWriter:
        if self._evidence is None:
            from pytest_desched.evidence.writer import EvidenceWriter

            self._evidence = EvidenceWriter(self.config.artifacts, self.redactor)
        return self._evidence

    @property
    def redactor(self) -> Redactor:
        from pytest_desched.redaction import Redactor

        if not self.config.redact:
            return Redactor.disabled()
        if "redactor" not in self.info:
            self.info["redactor"] = Redactor(
                node_names=self.cluster.workers,
                namespaces=[self.config.namespace, "kube-system"],
                extra=[self.cluster.name],
            )
        return self.info["redactor"]

    @property
    def release(self) -> Release:
        """The chart at its pinned version, first-installed suspended and in dry run."""
        if self._release is None:
            self._release = self.new_release(self.config.release)
        return self._release

    def new_release(
        self, name: str, version: str | None = None, workdir: Path | None = None
    ) -> Release:
        """Install a release of the chart (first install: suspended, dry run).

        `version` picks another descheduler (a tag or commit, built side by side); on
        kind/existing clusters it runs as that version's image or is refused, never as the pin.
        """
        from pytest_desched.descheduler.chart import Release

        toolchain = self.toolchain_for(version)
        version = toolchain.groups["descheduler"].version
        # The candidate's chart and image go with the candidate's descheduler only.
        cand = self.candidate if toolchain is self.toolchain else None
        cluster = self.cluster
        with self.phase("install"):
            chart = self.chart(cand)
            wd = workdir or self.config.run_dir / (
                "release" if name == self.config.release else f"release-{name}"
            )
            wd.mkdir(parents=True, exist_ok=True)
            rel = Release(
                cluster,
                chart,
                self.toolchain.versions,
                wd,
                name=name,
                report=self.report,
                descheduler_version=version,
            )
            if cand is not None and not cand.pinned:
                rel.image_published = cand.has_published_image
                rel.image_ref = cand.image
            rel.toolchain = toolchain  # the policy checker of this descheduler
            rel.policycheck_version = toolchain.wanted_version("policycheck")
            if cluster.capabilities.runs_local_binary:  # the stand-in kubelet runs this binary
                rel.check_version_runs_here()  # an image candidate is refused before a build
                rel.binary = toolchain.path("descheduler")
            rel.target_namespace = self.config.namespace  # the pre-flight's can-i and PDBs
            if self.inputs.values_files:  # helm coalesces them; the lab's flags go on top
                rel.values_files = self.inputs.values_paths
                rel.set_flags = self.inputs.set_flags
            self.info.setdefault("chart", chart.evidence())
            if cand is not None:
                self._record_candidate(toolchain, rel)
            rel.install_first()
        return rel

    def _record_candidate(self, toolchain: Toolchain, rel: Release) -> None:
        """What ran as the candidate: the spec, the builds (BUILDINFO), the chart, the notes."""
        cand = self.candidate
        assert cand is not None
        if not cand.pinned:  # built now: a helper that cannot build fails before the install
            toolchain.path("policycheck")
        builds = {
            tool: {"path": str(p), "how": toolchain.sources.get(tool), **toolchain.build_info(tool)}
            for tool, p in toolchain.resolved().items()
            if tool in ("descheduler", "policycheck")
        }
        for note in toolchain.notes.values():
            self.report(f"candidate {cand.ref}: {note}")
        self.info["candidate"] = {
            **cand.to_dict(),
            "image": rel.image,
            "chart_spec": cand.chart,
            "chart": rel.chart.evidence(),
            "builds": builds,
            "policycheck_version": rel.policycheck_version,
            "notes": dict(toolchain.notes),
        }
        # beside the release's other evidence: <artifacts>/<release>/candidate.json
        self.evidence.write_json(rel.name, "candidate", self.info["candidate"])

    def install_policy(self) -> tuple[Policy, str]:
        """`desched up`: the user's policy (--policy / --values), else the runbook's, applied
        to the release in dry run (suspend kept); returns it and where it came from."""
        from pytest_desched.descheduler.policy import load_default

        user = self.inputs.policy
        policy = user if user is not None else load_default()
        said = self.inputs.policy_from or "the runbook's safe-rebalance policy (unmodified)"
        with self.phase("install_policy"):
            self.release.apply_policy(policy, dry_run=True)
        return policy, said

    def continue_hints(self) -> list[str]:
        """Shell lines for a kept cluster: the pinned kubectl and helm first on PATH, the
        kubeconfig, and the runbook's next steps with the chart this release came from."""
        import shlex

        rel, cluster = self.release, self.cluster
        bins = dict.fromkeys(str(self.toolchain.path(t).parent) for t in ("kubectl", "helm"))
        q = shlex.quote
        return [
            f"export KUBECONFIG={q(str(cluster.kubeconfig))}",
            f"export PATH={':'.join(q(b) for b in bins)}:$PATH  # the pinned kubectl and helm",
            f"# chart: {rel.chart.path} (version {rel.chart.version})",
            f"# real rounds: helm upgrade {rel.name} {q(str(rel.chart.path))} -n {rel.namespace} "
            "--reuse-values --set cmdOptions.dry-run=false",
            f"# one round: kubectl -n {rel.namespace} create job --from=cronjob/"
            f"{rel.cronjob_name} round-1",
        ]

    # -- experiments -----------------------------------------------------------------------
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
    ) -> ExperimentContext:
        """An ExperimentContext, every input checked before anything changes.

        A bad input is a one-line ConfigError (or PolicyError) naming the input and the
        fix. `policy` is anything `Policy.coerce` takes (Policy, path, mapping, YAML text);
        a caller's own policy is filed under its own name, not a built-in variant's.
        """
        from pytest_desched.descheduler.chart import Release as _Release
        from pytest_desched.descheduler.policy import Policy, scope_policy
        from pytest_desched.experiments import VARIANTS, ExperimentContext, lab_policy
        from pytest_desched.experiments.cycles import check_cycles
        from pytest_desched.lab.inputs import LabInputError, check_lab_inputs

        cycles = check_cycles(cycles)  # K in 1..50, before anything (a namespace) is taken
        if not isinstance(no_loop, bool):
            raise ConfigError(f"no_loop {no_loop!r}: give true or false")

        # defer_release: the caller sets `prepare_release` (run_concurrently installs the
        # releases while the labs are arranged); nothing reads ctx.release before it ran.
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
        pol.validate()
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
            keep_lab=False,
            policy_label=label,
            inputs=self.inputs.evidence(),
            cycles=cycles,
            no_loop=no_loop,
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

    def _record_result(self, result: ExperimentResult, name: str) -> None:
        entry = {"name": result.label, "summary": result.summary(), "rounds": list(result.records)}
        self.report_entries.append(entry)  # the HTML report's input, written at close()
        try:  # its charts drawn now, beside the next experiment (evidence/views_ahead.py)
            from pytest_desched.evidence.views_ahead import ViewsAhead

            self._views_ahead = self._views_ahead or ViewsAhead()
            self._views_ahead.submit(len(self.report_entries) - 1, entry, self.redactor)
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
            )
            ctx.policy = scope_to_lane(ctx.policy, lane).validate()
            ctx.pool, ctx.lane, ctx.on_record = lane.pool, lane.name, on_record
            ctxs.append(ctx)
        check_lanes(lanes, [c.policy for c in ctxs])
        self.evidence.write_json("session", "execution", execution)
        # Every lane's release installs (suspended, dry run) beside the others and the lanes'
        # arrange steps; each lane's policy step waits for its own.
        pool = ThreadPoolExecutor(2 * len(classes), thread_name_prefix="desched-lane")
        installs = {ln.release: pool.submit(self.lane_release, ln.release) for ln in lanes}
        futures: list[Future[ExperimentResult]] = []
        try:
            for lane, ctx in zip(lanes, ctxs, strict=True):
                ctx.prepare_release = installs[lane.release].result

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
        for f in installs.values():  # a lane whose release failed to install raises here
            f.result()
        results = [f.result() for f in futures]
        for (cls, _), result in zip(classes, results, strict=True):
            self._record_result(result, cls.name)
        return results

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
        from pytest_desched.experiments import lookup, run_experiment

        cls = lookup(experiment)
        variant = variant or cls.default_variant
        if cls.keep_min_pod_age:
            params.setdefault("keep_min_pod_age", True)
        ctx = self.context(variant=variant, **params)
        ctx.on_record = on_record
        with self.phase(f"experiment.{cls.name}[{ctx.policy_label or variant}]"):
            result = run_experiment(cls, ctx, variant)
        self._record_result(result, cls.name)
        return result

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def keep(self) -> bool:
        return self.config.keep == "always" or (self.config.keep == "on-failure" and self.failed)

    @property
    def report_path(self) -> Path:
        """Where the run's HTML report goes (written by `close()` once an experiment ran)."""
        from pytest_desched.evidence.report import REPORT_NAME

        return self.config.artifacts / REPORT_NAME

    def write_report(self) -> Path | None:
        """The run's one HTML page, redacted like the records; None when nothing ran.

        A report that cannot be written is said, never raised: teardown must still run.
        """
        if not self.report_entries:
            return None
        from pytest_desched.evidence.report import write_report

        shown = {k: self.info.get(k) for k in ("provider", "server", "chart") if k in self.info}
        ahead, self._views_ahead = self._views_ahead, None
        try:
            with self.phase("report"):
                path = write_report(
                    self.report_path, self.report_entries, self.redactor, shown, ahead
                )
        except Exception as exc:
            self.info["report_error"] = f"{type(exc).__name__}: {exc}"
            self.report(f"could not write the HTML report: {self.info['report_error']}")
            return None
        finally:
            if ahead is not None:
                ahead.close()
        self.info["report"] = str(path)
        return path

    def close(self) -> dict[str, Any]:
        """Remove the release (or, when kept, stop its executor) and the cluster; report what.

        Runs shielded (pytest_desched.interrupts): a second Ctrl-C does not abandon it. After
        a signal, a cluster this session created and does not keep is deleted whole, without
        the release's uninstall and the namespace scan first: deleting it removes them, and
        the command exits within seconds. A cluster is kept only once it came up completely.
        """
        from pytest_desched import interrupts

        provider = self._provider
        what = "the session's cluster"
        if provider is not None:
            name = getattr(provider, "cluster_name", None) or self.info.get("cluster") or ""
            what = f"{getattr(provider, 'name', '')} cluster {name}".strip()
        if interrupts.interrupted() and provider is not None:
            self.report(f"interrupted: cleaning up {what} (a second signal does not stop it)")
        try:
            with interrupts.shielded(what):
                return self._close()
        except KeyboardInterrupt:  # a third signal: the cleanup is abandoned, and said so
            if provider is not None and self._cluster_may_run(provider):
                who = (
                    "the next run's reaper deletes it (its owner is gone)"
                    if provider.capabilities.reaps_leftovers
                    else f"delete it with the {getattr(provider, 'name', '')} provider's own tool"
                )
                interrupts.left_behind.append(f"{what}: cleanup abandoned; {who}")
            raise

    @staticmethod
    def _cluster_may_run(provider: Provider) -> bool:
        return bool(getattr(provider, "_created", True))

    def _close(self) -> dict[str, Any]:
        from pytest_desched import interrupts
        from pytest_desched.descheduler.cleanup import cleanup_release, emergency_stop

        out: dict[str, Any] = {}
        left: list[BaseException] = []
        scan: threading.Thread | None = None
        keep = self.keep and self._cluster is not None  # a half-made cluster is never kept
        # After a signal, a cluster that goes away whole takes its release and labs with it.
        whole = (
            interrupts.interrupted()
            and self._cluster is not None
            and getattr(self._cluster, "created", True)
            and not keep
        )
        reaper = getattr(self._cluster, "namespace_reaper", None)  # None: no cluster yet
        # A cluster deleted whole at the end (the embedded provider's, not kept) takes its
        # lab namespaces with it, and its checked deletion (no process, no folder left) is
        # the cleanup proof: waiting for those namespaces first would prove nothing.
        discarded = not keep and not whole and self._discards_cluster(self._provider, self._cluster)
        if reaper is not None and reaper.pending and (discarded or whole):
            out["namespaces_discarded"] = reaper.pending
        elif reaper is not None and reaper.pending:
            # The final leftover scan on a cluster that stays (kept, kind, existing): every
            # lab namespace deleted in the background is gone (providers/reaper.py); one that is
            # not fails the session, named. It mostly waits on the namespace controller's
            # 5 s delay, so the report and the releases' removal go on meanwhile; the
            # cluster is stopped only after it ended.
            def final_scan() -> None:
                with self.phase("teardown.namespaces"):
                    try:
                        out["namespaces_gone"] = reaper.wait_all()
                    except Exception as exc:
                        out["namespaces_left"] = str(exc)
                        left.append(exc)

            scan = threading.Thread(target=final_scan, name="desched-final-scan", daemon=True)
            scan.start()
        # The HTML report is drawn beside the releases' removal and the cluster's deletion
        # (they mostly wait on helm and kwokctl); it needs the redactor, not the cluster.
        # Interrupted too: the experiments that finished are evidence (none: nothing written).
        report = threading.Thread(target=self.write_report, name="desched-report", daemon=True)
        report.start()
        try:
            releases = [r for r in (self._release, *self._lane_releases.values()) if r]
            releases = [r for r in releases if r.installed]
            if whole and releases:
                out["cleanup"] = "interrupted: the release goes with the cluster, deleted whole"
                releases = []
            with self.phase("teardown.release") if releases else nullcontext():
                for rel in releases:
                    key = "" if rel is self._release else f".{rel.name}"
                    try:
                        if keep:
                            out["emergency_stop" + key] = emergency_stop(self._cluster, rel)
                        else:
                            out["cleanup" + key] = cleanup_release(self._cluster, rel)
                    except Exception as exc:
                        gone = _api_gone(exc)
                        if gone is None or not discarded:  # a kept cluster's release: raised
                            raise
                        # The cluster is deleted whole next (that deletion is the proof);
                        # its release goes with it. Waiting on a dead server proves nothing.
                        out["cleanup" + key] = (
                            f"not uninstalled: the API server is gone ({gone}); the release "
                            "goes with the cluster, deleted next"
                        )
                        self.report(f"{rel.name}: {out['cleanup' + key]}")
        finally:
            if scan is not None:
                scan.join()
            if self._provider is not None:
                self._provider.keep = keep
                with self.phase("teardown.cluster"):
                    self._provider.stop()
                if discarded:
                    self._check_discarded(self._provider, out, left)
                self._note_teardown(self._provider, keep)
                if keep:
                    out["kept"] = self._provider.resume_hint()
            report.join()
        self.info.update(out)
        if left:
            raise left[0]
        return out

    @staticmethod
    def _discards_cluster(provider: Provider | None, cluster: Cluster | None) -> bool:
        """Whether stop() deletes this cluster whole and checks the deletion itself."""
        return (
            provider is not None
            and cluster is not None
            and getattr(cluster, "created", True)
            and bool(getattr(provider, "deletion_is_cleanup_proof", False))
        )

    @staticmethod
    def _check_discarded(
        provider: Provider, out: dict[str, Any], left: list[BaseException]
    ) -> None:
        """The discarded cluster's deletion, as checked by stop(): the session's cleanup proof."""
        verified = getattr(provider, "teardown", None)
        if not isinstance(verified, dict) or verified.get("deleted") is None:
            left.append(ProviderError(f"{provider.name} cluster: its deletion was not checked"))
            return
        out["cluster_deleted"] = verified["text"]
        if verified["left"]:
            left.append(ProviderError(verified["text"]))

    def _note_teardown(self, provider: Provider, keep: bool) -> None:
        """What the exit line after a signal says about this session's cluster."""
        from pytest_desched import interrupts

        name = self.info.get("cluster") or getattr(provider, "cluster_name", "")
        verified = getattr(provider, "teardown", None)  # the embedded provider checks its own
        if verified is not None:
            provider.teardown = None  # type: ignore[attr-defined]  # noted once
        if keep:
            interrupts.kept.append(f"{getattr(provider, 'name', '')} cluster {name}")
        elif isinstance(verified, dict) and verified.get("deleted") is not None:
            if verified["left"]:
                interrupts.left_behind.append(verified["text"])
            elif verified["deleted"]:
                interrupts.cleaned.append(verified["text"])
        elif (
            not hasattr(provider, "teardown")
            and self._cluster is not None
            and getattr(self._cluster, "created", True)
        ):
            interrupts.cleaned.append(f"{getattr(provider, 'name', '')} cluster {name} deleted")

    def __enter__(self) -> DeschedSession:
        try:
            self.release  # noqa: B018 (bring everything up now; failures raise here)
        except BaseException:  # __exit__ will not run: undo what was started, then raise
            self.failed = True
            self.close()
            raise
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            self.failed = True
        self.close()


def _api_gone(exc: BaseException) -> str | None:
    """Why a request failed when the API server itself is down (refused, timed out), or None."""
    from pytest_desched.kube import ApiGone, api_failure

    if isinstance(exc, ApiGone):
        return str(exc)
    why = api_failure(exc)
    return why if why is not None and not why.startswith("HTTP") else None
