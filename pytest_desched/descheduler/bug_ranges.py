"""The version ranges of the known-bug registry (known_bugs.REGISTRY), with their proofs.

A range is `[since, fixed_in)` by semver, so a release nobody ran here (v0.34.0) is judged by
where it falls, and a build (`v0.36.0-g7d2b28bf2`: a master snapshot, a pull request) is
placed by its base release. Each end says how it is known: a run, or the file and line in the
release's own tree (the trees of ../shared/upstream; paths are inside each tree).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CHART_1839",
    "RANGE_1687",
    "RANGE_1839",
    "RANGE_1840",
    "RANGE_1882",
    "RANGE_1917",
    "RANGE_LONG_LIVED_STALE",
    "RANGE_PROM_SECRET_RACE",
    "RANGE_PROM_STALE_LOOKBACK",
    "RANGE_STALE_IDLE",
    "VersionRange",
    "release_key",
]

_XYZ = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def release_key(version: str) -> tuple[int, int, int] | None:
    """`v0.36.0-g7d2b28bf2` -> (0, 36, 0): the base release a label names; None if none."""
    m = _XYZ.match(version.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


@dataclass(frozen=True)
class VersionRange:
    """The releases a bug is in: `since` <= release < `fixed_in` (None: no fixed release).

    `version in range` is true for a plain release inside it; a build with a suffix
    (`v0.36.0-g7d2b28bf2`) is placed by its base by `holds`, and is never `in` it (it may
    carry the fix: only its own signature can tell).
    """

    since: str
    fixed_in: str | None
    since_proof: str  # a run, or FILE:LINE in the release's tree
    fixed_proof: str = ""

    def holds(self, version: str) -> bool:
        """The version's base release lies inside the range."""
        key, lo = release_key(version), release_key(self.since)
        if key is None or lo is None or key < lo:
            return False
        hi = release_key(self.fixed_in) if self.fixed_in else None
        return hi is None or key < hi

    def __contains__(self, version: object) -> bool:
        return (
            isinstance(version, str)
            and _XYZ.fullmatch(version.strip()) is not None
            and self.holds(version)
        )

    def __str__(self) -> str:
        end = f"fixed in {self.fixed_in}" if self.fixed_in else "no fixed release"
        return f"{self.since} on, {end}"


# Each range's ends, with how they are known. Runs: tests/e2e/test_canary_upgrade_e2e.py and
# docs/matrix.md. Code: the trees in ../shared/upstream (paths inside each tree).
RANGE_1882 = VersionRange(
    since="v0.35.0",
    fixed_in=None,
    since_proof=(
        "code: v0.35.0's pkg/descheduler/descheduler.go:420-422 registers the "
        "PodDisruptionBudget informer only in dry run (newDefaultKubeClientSandbox, "
        "kubeclientsandbox.go:104), while DefaultEvictor's PodsWithoutPDB reads its lister "
        "lazily (pkg/framework/plugins/defaultevictor/defaultevictor.go:353); v0.33.0's "
        "descheduler.go:160-166 registers it up front for every run (ir.Uses), and v0.33.0's "
        "runs start its reflector. v0.34.0 is not here: placed after v0.33.0 and not inside. "
        "Runs: v0.35.1, v0.36.0"
    ),
    fixed_proof="pull request 1883 (proposed; its tree registers it at descheduler.go:133)",
)
RANGE_1917 = VersionRange(
    since="v0.35.0",
    fixed_in=None,
    since_proof=(
        "code: v0.35.0's pkg/descheduler/descheduler.go:444-448 starts and syncs the dry-run "
        "mirror's factory before the real one (the file is byte-identical to master "
        "7d2b28bf2's, where runs show it); v0.33.0 counts the real nodes before it builds the "
        "mirror (descheduler.go:357-388). Runs: v0.36.0"
    ),
    fixed_proof="pull request 1922 (proposed)",
)
RANGE_1687 = VersionRange(
    since="v0.32.2",
    fixed_in=None,
    since_proof=(
        "code: RunDeschedulerStrategies defers eventBroadcaster.Shutdown() and returns right "
        "after the one-shot cycle: v0.32.2's pkg/descheduler/descheduler.go:436 (the oldest "
        "tree here; older releases not read), v0.33.0's :600, v0.35.0's :521. Runs: v0.33.0 "
        "(intermittent), v0.35.1, v0.36.0"
    ),
    fixed_proof="none upstream (closed without a fix)",
)
RANGE_1840 = VersionRange(
    since="v0.35.0",
    fixed_in="v0.36.0",
    since_proof=(
        "code: v0.35.0 builds every profile in newDescheduler (pkg/descheduler/descheduler.go:"
        "202) before runFnc reconciles the in-cluster Prometheus token (:488), and "
        "LowNodeUtilization's New fails on the nil client (pkg/framework/plugins/"
        "nodeutilization/lownodeutilization.go:373); v0.33.0 builds profiles per cycle "
        "(descheduler.go:417), after it. v0.35.1 has the same code (lownodeutilization.go:373, "
        "no resetUsageClient): the 1.35 cherry-pick (#1866) is in no release tag. Runs "
        "(2026-12-06, utilization-prometheus: a Prometheus policy without authToken, the "
        "in-cluster token as in #1840's report): v0.35.1 (`desched run ... --descheduler "
        "v0.35.1`) and v0.35.0 (`--desched-candidate source:` its tree b49fd27d1): each "
        "round pod exited 1 before any cycle, 'unable to build LowNodeUtilization plugin: "
        'unable to initialize "LowNodeUtilization" plugin: prometheus client not '
        "initialized'"
    ),
    fixed_proof=(
        "pull request 1862: master 7d2b28bf2's lownodeutilization.go:135 resetUsageClient "
        "reads the client at each extension point. Run: v0.36.0, the same experiment "
        "(tests/e2e/test_prometheus_e2e.py) reads Prometheus and evicts one pod; its "
        "secretReference path has another bug (RANGE_PROM_SECRET_RACE)"
    ),
)
RANGE_PROM_SECRET_RACE = VersionRange(
    since="v0.36.0",
    fixed_in=None,
    since_proof=(
        "run: prometheus-secret-token (title utilization-prometheus-secret-token) on v0.36.0 (tests/e2e/test_prometheus_e2e.py, "
        "2026-12-06): the one-shot cycle began (descheduler.go:235 'Resetting pod evictor "
        "counters') before 'Starting authentication secret reconciler' (prom_client_controller"
        ".go:172), and its balance point failed with 'prometheus client not initialized'. Code: "
        "v0.36.0 pkg/descheduler/descheduler.go:474-476 starts runAuthenticationSecretReconciler "
        "in a goroutine and runFnc runs the cycle at once; master 7d2b28bf2 the same. Before "
        "v0.36.0, #1840 stops the process at start instead"
    ),
)
RANGE_1839 = VersionRange(
    since="v0.35.0",
    fixed_in=None,  # the descheduler keeps listing PVCs; the fix is the chart's (CHART_1839)
    since_proof=(
        "code: v0.35.0's pkg/descheduler/descheduler.go:128 registers the "
        "PersistentVolumeClaim informer for every run; v0.33.0 has no PVC informer"
    ),
)
CHART_1839 = VersionRange(
    since="0.35.0",
    fixed_in="0.35.1",
    since_proof=(
        "chart 0.35.0's templates/clusterrole.yaml has no persistentvolumeclaims rule "
        "(../shared/upstream/descheduler-chart-0.35.0.tgz); the v0.35.0 tree's own "
        "kubernetes/base/rbac.yaml has it"
    ),
    fixed_proof="chart 0.35.1's templates/clusterrole.yaml:39-41 grants get, watch, list",
)


# Not an upstream issue (none is filed): what the utilization-stale experiment proves.
RANGE_STALE_IDLE = VersionRange(
    since="v0.32.2",
    fixed_in=None,
    since_proof=(
        "code: the metrics collector copies NodeMetrics' Usage and never reads its Timestamp "
        "or Window: v0.36.0's pkg/descheduler/metricscollector/metricscollector.go:129-149, "
        "v0.35.1's :129-150, v0.33.0's :127-148, v0.32.2's :126-147 (the oldest tree here). "
        "Runs: v0.36.0 (utilization-stale)"
    ),
)


# Not an upstream issue (none is filed): what the utilization-long-lived-missing experiment
# proves. Since the collector exists (its oldest tree here keeps a failed node's value too).
RANGE_LONG_LIVED_STALE = VersionRange(
    since="v0.32.2",
    fixed_in=None,
    since_proof=(
        "code: a failed NodeMetrics fetch is skipped and the node's previous value kept, "
        '"duplicate the previous value": v0.36.0 and v0.35.1 pkg/descheduler/metricscollector/'
        "metricscollector.go:131-133 (the same file), v0.33.0 :129-131, v0.32.2 :128-130; the "
        "collector is started once per process (descheduler.go bootstrapDescheduler), so a "
        "long-lived process keeps it across cycles. Runs: v0.36.0 and v0.35.1 "
        "(utilization-long-lived-missing, utilization-long-lived-absent)"
    ),
)


# Not an upstream issue (none is filed): what prometheus-stale-in-lookback proves.
RANGE_PROM_STALE_LOOKBACK = VersionRange(
    since="v0.33.0",
    fixed_in=None,
    since_proof=(
        "code: NodeUsageFromPrometheusMetrics makes an instant query at time.Now() and keeps "
        "only sample.Value (an instant vector's sample carries the evaluation time, not its "
        "own): v0.36.0 pkg/framework/plugins/nodeutilization/usageclients.go:266-295, v0.35.1 "
        "the same lines, v0.33.0 :266-294; v0.32.2 has no Prometheus source. Runs: v0.36.0 "
        "(prometheus-stale-in-lookback, tests/e2e/test_prometheus_e2e.py); v0.35.x stop at "
        "start on #1840 before any query"
    ),
)
