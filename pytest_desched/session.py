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

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched import interrupts
from pytest_desched.capabilities import CAPABILITIES
from pytest_desched.config import DeschedConfig, build_config, check_kubernetes_on
from pytest_desched.errors import ConfigError
from pytest_desched.interrupts import interrupts_unwind
from pytest_desched.log import Reporter, say
from pytest_desched.proc import helm_env
from pytest_desched.redaction import Redactor
from pytest_desched.session_experiments import SessionExperiments
from pytest_desched.session_lifecycle import SessionLifecycle
from pytest_desched.tools.release import release_skew

if TYPE_CHECKING:
    from pytest_desched.descheduler.chart import Release
    from pytest_desched.descheduler.chart_source import ChartRef
    from pytest_desched.descheduler.inputs import UserInputs
    from pytest_desched.descheduler.policy import Policy
    from pytest_desched.evidence.views_ahead import ViewsAhead
    from pytest_desched.evidence.writer import EvidenceWriter
    from pytest_desched.providers.base import Cluster, Provider
    from pytest_desched.tools.candidate import Candidate
    from pytest_desched.tools.toolchain import Toolchain


__all__ = ["DeschedSession", "interrupts_unwind"]  # interrupts_unwind: the front ends' import


PhaseHook = Callable[[str, float], None]


class DeschedSession(SessionExperiments, SessionLifecycle):
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
        placement: Mapping[str, Any] | None = None,
        provider: Provider | None = None,
        release_namespace: str | None = None,
        inputs: UserInputs | None = None,
    ) -> None:
        self.config = config or build_config()
        # Where every release's round pods run (Release.placement; a replay's runner node).
        self.placement = placement
        self.report = report
        self.on_phase: list[PhaseHook] = list(on_phase or [])
        self.timings: dict[str, float] = {}
        # provider, cluster, server, chart, cleanup... for reports (a front end may share it)
        self.info: dict[str, Any] = info if info is not None else {}
        self.failed = False  # set by a front end: keep=on-failure keeps the cluster
        self._toolchain: Toolchain | None = None
        # A front end's own provider (the host replay's) in place of the configured one.
        self._provider: Provider | None = provider
        # Metrics sources the cluster starts with (need_metrics: the experiments that read them)
        self.metrics_sources: tuple[str, ...] = ()
        self.release_namespace = release_namespace  # None: the chart's kube-system
        self._cluster: Cluster | None = None
        self._release: Release | None = None
        self._evidence: EvidenceWriter | None = None
        self._candidate: Candidate | None = None
        # `inputs`: this config's --policy / --values, already checked by the front end
        # (the host replay reads them before the host): not rendered and linted again.
        self._inputs: UserInputs | None = inputs
        if inputs is not None:
            self.info["inputs"] = inputs.evidence()
        self._lane_releases: dict[str, Release] = {}  # run_concurrently's, by release name
        self._namespaces_used: set[str] = set()  # lab namespaces handed out (fresh_namespace)
        # {name, summary, rounds} per experiment run: what `<artifacts>/report.html` shows
        self.report_entries: list[dict[str, Any]] = []
        self._views_ahead: ViewsAhead | None = None  # their charts, drawn as they come
        # experiment label -> (its entry's index in the report, its rounds' names in order)
        self._rounds_written: dict[str, tuple[int, list[str]]] = {}

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
            # heavy: tools.toolchain and its imports, kept out of pytest start-up
            from pytest_desched.tools.toolchain import Toolchain

            self._toolchain = Toolchain(
                cache_dir=self.config.cache_dir,
                overrides=self.config.bins,
                descheduler_version=self.config.descheduler_version,
                report=self.report,
                candidate=self.config.parsed_candidate(),
                kubernetes_version=self.config.kubernetes,
                helm=self.config.helm,
            )
        return self._toolchain

    def toolchain_for(self, version: str | None) -> Toolchain:
        """The session's toolchain, or one that builds another descheduler version."""
        base = self.toolchain
        if not version or version == base.groups["descheduler"].version:
            return base
        # heavy: tools.toolchain and its imports, kept out of pytest start-up
        from pytest_desched.tools.toolchain import Toolchain

        return Toolchain(
            cache_dir=self.config.cache_dir,
            overrides={k: v for k, v in self.config.bins.items() if k != "descheduler"},
            descheduler_version=version,
            report=self.report,
            kubernetes_version=self.config.kubernetes,
            helm=self.config.helm,
        )

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            # heavy: providers and its imports, kept out of pytest start-up
            from pytest_desched.providers import make_provider

            provider = make_provider(self.config, self.toolchain, self.report)
            self._check_candidate_runs_on(provider.name)  # `auto` is only known now
            check_kubernetes_on(self.config, provider.name)
            if self.metrics_sources:  # refused here by a provider that cannot start one
                provider.use_metrics(self.metrics_sources)
            self._provider = provider
        return self._provider

    def _note_kubernetes(self, server: str) -> None:
        """The cluster's Kubernetes against the release's own README: outside the minors
        upstream tests the release on is allowed, and said first (evidence and output)."""
        kube = self.config.kube_choice()
        if self.config.kubernetes is None and self.candidate is None:
            # the pins go together (versions.yaml): nothing to warn of, and no release tree
            # to fetch (a module download would write under $HOME/go on every run)
            self.info["kubernetes"] = {**kube.evidence(), "server": server}
            return
        skew = release_skew(self.candidate, server or kube.version)
        self.info["kubernetes"] = {**kube.evidence(), "server": server, "skew": skew}
        if kube.prerelease or skew.get("tested") is False:
            self.report(
                f"WARNING: {kube.line()}: descheduler {skew['descheduler']}: {skew['note']}"
            )

    def _check_server_version(self, server: str) -> None:
        """A cluster built at a chosen Kubernetes must report it: the evidence names it."""
        want = self.config.kube_choice()
        if self.config.kubernetes is None or server == want.version:
            return
        raise ConfigError(
            f"--desched-kubernetes {want.version}: the cluster's API server reports {server}; "
            "a kube-apiserver given by --desched-bin or found on PATH must be that version"
        )

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
        # heavy: descheduler.chart_source and its imports, kept out of pytest start-up
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
            # heavy: descheduler.inputs and its imports; descheduler.policy.values and its imports, kept out of pytest start-up
            from pytest_desched.descheduler.inputs import UserInputs, check_user_inputs, lint_input
            from pytest_desched.descheduler.policy.values import render_values

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
                    name = getattr(provider, "cluster_name", "")
                    with interrupts.shielded(f"{provider.name} cluster {name}".strip()):
                        provider.keep = False
                        provider.stop()
                        self._note_teardown(provider, keep=False)
                    raise
            self._cluster = cluster
            cluster.deleted_on_signal = cluster.created and self.config.keep == "never"
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
            self._check_server_version(self.info["server"])
            self._note_kubernetes(self.info["server"])
        return self._cluster

    @property
    def evidence(self) -> EvidenceWriter:
        if self._evidence is None:
            # heavy: evidence.writer and its imports, kept out of pytest start-up
            from pytest_desched.evidence.writer import EvidenceWriter

            self._evidence = EvidenceWriter(self.config.artifacts, self.redactor)
            self._evidence.on_round = self._round_written  # its charts drawn ahead
        return self._evidence

    @property
    def redactor(self) -> Redactor:

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
        # heavy: descheduler.chart and its imports, kept out of pytest start-up
        from pytest_desched.descheduler.chart import Release, check_runs_here

        toolchain = self.toolchain_for(version)
        version = toolchain.groups["descheduler"].version
        # The candidate's chart and image go with the candidate's descheduler only.
        cand = self.candidate if toolchain is self.toolchain else None
        # A candidate other than the pin brings its own image (or says it has none).
        image_ref = cand.image if cand is not None and not cand.pinned else None
        published = cand.has_published_image if cand is not None and not cand.pinned else None
        cluster = self.cluster
        with self.phase("install"):
            chart = self.chart(cand)
            wd = workdir or self.config.run_dir / (
                "release" if name == self.config.release else f"release-{name}"
            )
            wd.mkdir(parents=True, exist_ok=True)
            binary = None
            if cluster.capabilities.runs_local_binary:  # the stand-in kubelet runs this binary
                check_runs_here(  # an image candidate is refused before a build
                    cluster,
                    self.toolchain.versions,
                    version,
                    image_ref,
                    published,
                )
                binary = toolchain.path("descheduler")
            users = self.inputs.values_files  # helm coalesces them; the lab's flags go on top
            rel = Release(
                cluster,
                chart,
                self.toolchain.versions,
                wd,
                name=name,
                report=self.report,
                descheduler_version=version,
                binary=binary,
                image_published=published,
                image_ref=image_ref,
                toolchain=toolchain,  # the policy checker of this descheduler
                policycheck_version=toolchain.wanted_version("policycheck"),
                target_namespace=self.config.namespace,  # the pre-flight's can-i and PDBs
                values_files=self.inputs.values_paths if users else (),
                set_flags=self.inputs.set_flags if users else None,
                placement=self.placement,
                **({"namespace": self.release_namespace} if self.release_namespace else {}),
            )
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
        # heavy: descheduler.policy and its imports, kept out of pytest start-up
        from pytest_desched.descheduler.policy import load_default

        user = self.inputs.policy
        policy = user if user is not None else load_default()
        policy = self.release_policy(policy, self.release)  # in this release's own fields
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
        stop = (  # Helm 4 leaves the field to the stop's manager (docs/helm.md)
            ["# after a stop Helm 4 leaves spec.suspend to kubectl-patch: hand it back before "
             "re-enabling through helm (docs/helm.md#emergency-stop-and-field-ownership)"]
            if self.toolchain.versions.helm_major == "4" else []
        )  # fmt: skip
        return [
            f"export KUBECONFIG={q(str(cluster.kubeconfig))}",
            f"export PATH={':'.join(q(b) for b in bins)}:$PATH  # the pinned kubectl and helm",
            f"# chart: {rel.chart.path} (version {rel.chart.version})",
            f"# real rounds: helm upgrade {rel.name} {q(str(rel.chart.path))} -n {rel.namespace} "
            "--reuse-values --set cmdOptions.dry-run=false",
            f"# one round: kubectl -n {rel.namespace} create job --from=cronjob/"
            f"{rel.cronjob_name} round-1",
            f"# emergency stop: kubectl -n {rel.namespace} patch cronjob {rel.cronjob_name} "
            """-p '{"spec":{"suspend":true}}'""",
            *stop,
        ]

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
