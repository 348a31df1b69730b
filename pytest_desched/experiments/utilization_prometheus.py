"""The runbook's rule for actual utilization, on a real Prometheus source (issue 50).

The runbook: "a metrics source that is missing, stale or selected by the wrong labels must
make the policy fail closed or skip the round, never read a node as idle. The Prometheus token
is read through `secretReference`, never in plain text in values or logs."

Every experiment here runs LowNodeUtilization with `metricsUtilization: {source: Prometheus,
prometheus: {query}}` and thresholds on `MetricResource` (the one resource a Prometheus query
yields, v0.36.0 nodeutilization validatePrometheusMetricsUtilization), and the top-level
`metricsProviders: [{source: Prometheus, prometheus: {url, authToken: {secretReference}}}]`.
The embedded cluster's Prometheus (providers/embedded/prometheus.py) scrapes kwok's emulated
kubelets and records `instance:node_cpu:rate:sum`; the URL is its authenticating front, the
token sits in a Secret of the lab namespace, and a Role there lets the descheduler's
ServiceAccount read it (the chart's ClusterRole grants no Secret). The lab is the Kubernetes
Metrics one's: four `hot` pods use 800m CPU each (request 100m) on one 4-CPU node.

* `utilization-prometheus` (positive): the hot node reads ~0.8, the round evicts one pod (the
  per-node cap), the replacement lands elsewhere; the evidence has each node's usage as the
  descheduler logged it, and Prometheus' own answer before the round.
* `prometheus-missing`: Prometheus and its front are down at the round.
* `prometheus-stale`: Prometheus restarted with nothing to scrape and no rule: its
  series exist but their last sample is past the lookback.
* `prometheus-wrong-labels`: the policy's query yields `instance` = the scrape
  address (Prometheus' default), not the node name.
* `prometheus-stale-in-lookback`: Prometheus restarted with nothing to scrape and no rule,
  and the round runs while the last samples are still *inside* the query's lookback (older
  than two rule intervals, younger than the lookback). An instant query answers each series'
  last sample within the lookback stamped with the evaluation time, and v0.36.0 reads only
  `sample.Value` (usageclients.go:266-295, NodeUsageFromPrometheusMetrics): it cannot tell
  the sample's age and classifies every node from samples no longer ingested. It fails open
  (known_bugs `desched:prometheus-stale-in-lookback`); only the checks that cause explains
  are excused.
* `prometheus-stale-in-lookback-guarded`: the same fault, with the query guarding the age
  itself (`... and on(instance) (time() - timestamp(...)) < FRESH_S`): no sample is young
  enough, the node has no entry, the policy fails closed: the intended behaviour.

v0.36.0 fails closed in each other negative case (see descheduler/prometheus_log.py for the lines):
no node is classified, nothing is evicted, UIDs stay, and its error line is the evidence.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pytest_desched.capabilities import PROMETHEUS
from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.lint_rules import runbook_numbers
from pytest_desched.descheduler.prometheus_log import (
    NO_ENTRY,
    QUERY_FAILED,
    prometheus_errors,
    says,
)
from pytest_desched.descheduler.utilization_log import node_usage
from pytest_desched.errors import ConfigError
from pytest_desched.experiments.strategies.base import StrategyExperiment, strategy_policy
from pytest_desched.experiments.utilization import HOT_PODS, HOT_USAGE_M, deploy_hot
from pytest_desched.experiments.utilization_checks import assess_moved_one, assess_nothing_read
from pytest_desched.kube import wait_for

STRATEGY = "LowNodeUtilization"
METRIC = "MetricResource"  # the resource name of a Prometheus query's value (nodeutilization.go)
LOW, TARGET = 20, 50  # percent of a node's CPU, as the query's 0..1 value times 100
SECRET = "prometheus-token"  # in the lab namespace: gone with it
ROLE = "desched-read-prometheus-token"
# The recording rule the policy reads (prometheus.NODE_CPU; not imported: the experiments
# are listed without the provider's modules).
NODE_CPU = "instance:node_cpu:rate:sum"


class PrometheusUtilization(StrategyExperiment):
    """The Prometheus policy, lab and token every experiment here shares; not registered."""

    strategy = STRATEGY
    metrics_sources = (PROMETHEUS,)
    upstream = "test/e2e/e2e_lownodeutilization_test.go (metricsUtilization)"

    # How the descheduler authenticates to Prometheus: "in-cluster" names no `authToken` (the
    # pod's ServiceAccount token, read by v0.36.0 before each cycle, reconcileInClusterSAToken)
    # or "secret" (`authToken.secretReference`: the lab's token in a Secret).
    token_mode: ClassVar[str] = "in-cluster"

    def node_query(self) -> str:
        """The policy's `metricsUtilization.prometheus.query`."""
        return NODE_CPU

    # -- the source ------------------------------------------------------------------------
    @property
    def source(self) -> Any:
        """The cluster's Prometheus (the embedded provider's; an error names the way out)."""
        # optional: the embedded provider's Prometheus, only where these experiments run
        from pytest_desched.providers.embedded.prometheus import PrometheusSource

        workdir = self.ctx.cluster.workdir
        if workdir is None:
            raise ConfigError(
                f"{self.name}: the cluster has no Prometheus of this run's; use "
                "--desched-provider embedded"
            )
        return PrometheusSource.of(workdir)

    # -- the policy ------------------------------------------------------------------------
    def strategy_args(self) -> dict[str, Any]:
        return {
            **self.lab_scope(),
            "thresholds": {METRIC: LOW},
            "targetThresholds": {METRIC: TARGET},
            "metricsUtilization": {
                "source": PROMETHEUS,
                "prometheus": {"query": self.node_query()},
            },
        }

    def policy(self) -> Policy:
        doc = strategy_policy(self.strategy, self.strategy_args(), self.evictor_args()).to_dict()
        prom: dict[str, Any] = {"url": self.source.url}
        if self.token_mode == "secret":
            ref = {"namespace": self.ctx.namespace, "name": SECRET}
            prom["authToken"] = {"secretReference": ref}
        doc["metricsProviders"] = [{"source": PROMETHEUS, "prometheus": prom}]
        doc.update(runbook_numbers().caps)  # per node 1, per namespace 1, total 2
        return Policy.from_dict(doc, source=f"<{self.name} lab policy>")

    # -- the lab ---------------------------------------------------------------------------
    def arrange(self) -> None:
        self.node, self.hot, self.s1 = deploy_hot(self)
        self.served = self.wait_served()
        self.r.result.notes.append(f"Prometheus {NODE_CPU} before the round: {self.served}")

    def wait_served(self, timeout: float = 120) -> dict[str, float]:
        """Until Prometheus' rule serves the declared usage for every worker (the hot node at
        least 90% of its pods' use, the others under 0.2): what the round will read."""
        src, node = self.source, self.node
        used = HOT_PODS * HOT_USAGE_M / 1000 / src.cores * 0.9

        def ok(seen: dict[str, float] | None) -> bool:
            if not seen or any(w not in seen for w in self.workers):
                return False
            return seen[node] >= used and all(seen[w] < 0.2 for w in self.workers if w != node)

        seen = wait_for(
            f"Prometheus to serve {NODE_CPU} with {node} busy and the others idle",
            lambda: src.node_usage(NODE_CPU),
            ok,
            timeout=timeout,
            max_interval=1.0,
        )
        return {k: round(v, 3) for k, v in (seen or {}).items()}

    def grant_token(self) -> None:
        """In "secret" mode: the token's Secret in the lab namespace and a Role that lets the
        descheduler's ServiceAccount read it (its informer lists and watches the namespace's
        Secrets). In "in-cluster" mode the front takes the pod's ServiceAccount token."""
        if self.token_mode != "secret":
            return
        from kubernetes import client

        ns, rel = self.ctx.namespace, self.ctx.release
        cj = self.ctx.cluster.batch.read_namespaced_cron_job(rel.cronjob_name, rel.namespace)
        sa = cj.spec.job_template.spec.template.spec.service_account_name or "default"
        core = self.ctx.cluster.core
        core.create_namespaced_secret(
            ns,
            client.V1Secret(
                metadata=client.V1ObjectMeta(name=SECRET),
                type="Opaque",
                string_data={"prometheusAuthToken": self.source.token()},
            ),
        )
        rbac = client.RbacAuthorizationV1Api(self.ctx.cluster.api_client)
        rbac.create_namespaced_role(
            ns,
            client.V1Role(
                metadata=client.V1ObjectMeta(name=ROLE),
                rules=[
                    client.V1PolicyRule(
                        api_groups=[""], resources=["secrets"], verbs=["get", "list", "watch"]
                    )
                ],
            ),
        )
        rbac.create_namespaced_role_binding(
            ns,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name=ROLE),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="Role", name=ROLE
                ),
                subjects=[
                    client.RbacV1Subject(kind="ServiceAccount", name=sa, namespace=rel.namespace)
                ],
            ),
        )
        self.r.result.notes.append(
            f"token: Secret {ns}/{SECRET} (key prometheusAuthToken), readable by "
            f"{rel.namespace}/{sa} through Role {ns}/{ROLE}"
        )

    def usage_seen(self, view: Any) -> dict[str, dict[str, Any]]:
        """Each node's usage as the round's descheduler logged it, filed with the round."""
        seen = {n: u.to_dict() for n, u in node_usage(view.rnd.logs).items()}
        view.extra["utilization"] = {
            "source": PROMETHEUS,
            "query": self.node_query(),
            "node_usage_logged": seen,
            "node_usage_served_before": self.served,
            "metrics_source_errors": prometheus_errors(view.rnd.logs),
        }
        return seen

    def assess_failed_closed(self, v: Any, marker: str, why: str) -> None:
        """The negative experiments' checks: the descheduler's own line, no node read, no
        eviction, UIDs unchanged, no eviction request at the API server."""
        seen = self.usage_seen(v)  # files the round's usage and errors: read them after
        errors = v.extra["utilization"]["metrics_source_errors"]
        self.r.check(
            "descheduler-says-source-failed",
            f"the descheduler's own log says the Prometheus source failed ({why})",
            says(errors, marker),
            "\n".join(errors[:4]) or "no such line in the round's log",
        )
        assess_nothing_read(
            self, v, seen, "no node was classified (none read as idle without a sample)"
        )


class UtilizationPrometheus(PrometheusUtilization):
    """`hot` uses 80% of one node's CPU (requests 10%): LowNodeUtilization on Prometheus'
    `instance:node_cpu:rate:sum` evicts one pod from it (the per-node cap), and the log shows
    each node's usage."""

    name = "utilization-prometheus"
    title = "utilization-prometheus"

    def act(self) -> None:
        self.grant_token()
        self.v = self.round()

    def assess(self) -> None:
        seen = self.usage_seen(self.v)  # files the round's usage and errors: read them after
        errors = self.v.extra["utilization"]["metrics_source_errors"][:2]
        assess_moved_one(
            self, self.v, seen, METRIC, "Prometheus", (LOW, TARGET), f"; errors {errors}"
        )


class UtilizationPrometheusMissing(PrometheusUtilization):
    """Prometheus (and its front) down at the round: the query fails, the policy fails
    closed, nothing is evicted, and the descheduler's own error line says why."""

    name = "prometheus-missing"
    title = "utilization-prometheus-missing"

    def act(self) -> None:
        self.grant_token()
        src = self.source
        stopped = src.stop()
        try:
            self.gone = src.node_usage(NODE_CPU)  # None: nothing answers
            self.v = self.round()
        finally:
            src.start()
            src.wait_ready()
        self.r.result.notes.append(f"fault: Prometheus and its front killed (pids {stopped})")

    def assess(self) -> None:
        self.r.check(
            "source-missing",
            "Prometheus answered nothing while the round ran",
            self.gone is None,
            f"served {self.gone}",
        )
        self.assess_failed_closed(self.v, QUERY_FAILED, "the query could not be made")


class UtilizationPrometheusStale(PrometheusUtilization):
    """Prometheus ingests nothing any more: its series are there but older than the
    lookback, so the query finds no sample for any node; the policy fails closed."""

    name = "prometheus-stale"
    title = "utilization-prometheus-stale"

    def act(self) -> None:
        # optional: the embedded provider's Prometheus, only where these experiments run
        from pytest_desched.providers.embedded.prometheus import LOOKBACK_S

        self.grant_token()
        src = self.source
        try:
            # Killed (no staleness markers) and started again on the same storage with nothing
            # to scrape and no rule to evaluate: its series only age.
            src.restart_ingesting(False)
            kept = f"last_over_time({NODE_CPU}[10m])"
            self.stale = wait_for(
                f"every node's {NODE_CPU} past the {LOOKBACK_S:.0f}s lookback, its series kept",
                lambda: (src.node_usage(NODE_CPU), src.node_usage(kept)),
                lambda s: s[0] == {} and bool(s[1]) and all(w in s[1] for w in self.workers),
                timeout=LOOKBACK_S * 4,
            )
            self.v = self.round()
        finally:
            src.restart_ingesting(True)

    def assess(self) -> None:
        now, kept = self.stale
        self.r.check(
            "source-stale",
            "the series exist (last_over_time over 10m) but none is within the lookback",
            now == {} and bool(kept),
            f"now {now}; last values {kept}",
        )
        self.assess_failed_closed(self.v, NO_ENTRY, "no sample for a node")


class UtilizationPrometheusWrongLabels(PrometheusUtilization):
    """The policy's query keeps Prometheus' default `instance` (the scrape address), not the
    node name: no sample names a node, and the policy fails closed."""

    name = "prometheus-wrong-labels"
    title = "utilization-prometheus-wrong-labels"

    def node_query(self) -> str:
        """Each node's CPU fraction straight from the scrape: `instance` is kwok's address."""
        return f"rate(node_cpu_usage_seconds_total[10s]) / {self.source.cores:g}"

    def act(self) -> None:
        self.grant_token()
        self.answer = self.source.node_usage(self.node_query())
        self.v = self.round()

    def assess(self) -> None:
        answer = self.answer or {}
        self.r.check(
            "instance-is-not-a-node",
            "the query answers, but no sample's instance is a node name",
            bool(answer) and not set(answer) & set(self.workers),
            f"instances {sorted(answer)}",
        )
        self.assess_failed_closed(self.v, NO_ENTRY, "no sample names the node")


class UtilizationPrometheusSecretToken(UtilizationPrometheus):
    """The positive experiment with the token read through `authToken.secretReference` (the
    runbook's way): the descheduler should read the Secret, ask Prometheus and move one pod."""

    name = "prometheus-secret-token"
    title = "utilization-prometheus-secret-token"
    token_mode = "secret"
    # What v0.36.0's first-cycle race fails: known_bugs "desched:prometheus-secret-first-cycle"
    # (PROM_SECRET_RACE_CHECKS, made by the inherited assess); utilization-prometheus is the
    # variant that shows the intended behaviour (the in-cluster token, read before the cycle).

    # What v0.36.0's first-cycle race fails (known_bugs "desched:prometheus-secret-first-cycle"):
    # "usage-logged-overutilized", "usage-logged-underutilized", "evictions:LowNodeUtilization",
    # "evicted:hot", "replaced:hot"; utilization-prometheus is the variant that shows the
    # intended behaviour (the in-cluster token, read before the cycle).


# The rule's samples count as fresh for this long (its interval is 2 s: providers/embedded/
# prometheus.py); the stale-in-lookback round runs once every node's newest sample is older.
FRESH_S = 4.0
# What the stale-in-lookback round fails when the descheduler reads the old samples (known_bugs
# "desched:prometheus-stale-in-lookback"): "no-node-read-as-idle", "uids-unchanged",
# "no-replacement", "no-eviction-succeeded", "no-eviction-request"; never
# "source-stale-in-lookback", which proves the fault was made.


class UtilizationPrometheusStaleInLookback(PrometheusUtilization):
    """Prometheus ingests nothing any more, and the round runs while its last samples are
    still inside the lookback: the policy should fail closed (a stale source), v0.36.0 reads
    the old samples as the nodes' usage and evicts (an expected failure, its cause proven)."""

    name = "prometheus-stale-in-lookback"
    title = "utilization-prometheus-stale-in-lookback"

    def act(self) -> None:
        # optional: the embedded provider's Prometheus, only where these experiments run
        from pytest_desched.providers.embedded.prometheus import LOOKBACK_S

        self.grant_token()
        src = self.source
        age = f"time() - timestamp({NODE_CPU})"
        try:
            # Killed (no staleness markers) and started again on the same storage with nothing
            # to scrape and no rule: the last samples stay, and age, inside the lookback.
            src.restart_ingesting(False)
            self.ages = wait_for(
                f"every node's newest {NODE_CPU} sample older than {FRESH_S:.0f}s, inside the "
                f"{LOOKBACK_S:.0f}s lookback",
                lambda: src.node_usage(age),
                lambda a: (
                    bool(a)
                    and all(w in a for w in self.workers)
                    and all(FRESH_S < v < LOOKBACK_S for v in a.values())
                ),
                timeout=LOOKBACK_S,
                max_interval=0.5,
            )
            self.read_before = src.node_usage(NODE_CPU)
            self.v = self.round()
        finally:
            src.restart_ingesting(True)
        self.lookback_s = LOOKBACK_S

    def assess(self) -> None:
        raw = self.ages or {}
        ages = {k: round(v, 1) for k, v in raw.items()}  # shown; the check reads the raw ages
        self.r.check(
            "source-stale-in-lookback",
            f"Prometheus ingested nothing; every node's newest sample was older than "
            f"{FRESH_S:.0f}s and inside the {self.lookback_s:.0f}s lookback as the round began, "
            "and the instant query still answered it",
            bool(raw)
            and all(FRESH_S < a < self.lookback_s for a in raw.values())
            and bool(self.read_before)
            and all(w in (self.read_before or {}) for w in self.workers),
            f"ages {ages}; the query answered {self.read_before}",
        )
        self.v.extra.setdefault("notes", []).append(
            f"newest sample ages at the round's start: {ages} s (lookback {self.lookback_s:.0f}s)"
        )
        self.assess_stale(self.v)

    def assess_stale(self, v: Any) -> None:
        """The runbook's rule: a stale source fails closed (no node read, nothing evicted)."""
        assess_nothing_read(
            self,
            v,
            self.usage_seen(v),
            "no node was classified from samples Prometheus no longer ingests",
        )


class UtilizationPrometheusStaleInLookbackGuarded(UtilizationPrometheusStaleInLookback):
    """The same fault with the query guarding its samples' age: none is fresh, no node has
    an entry, the policy fails closed (the intended behaviour, by the query)."""

    name = "prometheus-stale-in-lookback-guarded"
    title = "utilization-prometheus-stale-in-lookback-guarded"

    def node_query(self) -> str:
        return f"{NODE_CPU} and on(instance) (time() - timestamp({NODE_CPU})) < {FRESH_S:g}"

    def assess_stale(self, v: Any) -> None:
        self.assess_failed_closed(v, NO_ENTRY, "no sample young enough for the query's guard")
