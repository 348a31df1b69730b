"""The upgrade canary's static comparison: what differs between baseline and candidate before
anything runs. This package's public face; one module a section (difference and tree walk,
protections, values, manifests, policy, result, helm).

The runbook's upgrade section asks for this first: compare `helm show values` and the
rendered manifests of both charts (RBAC widened or narrowed, args, image, CronJob fields,
objects added or removed), the same policy linted under both versions, the plugin and pod
protection defaults, and the metric names each binary serves. Every difference is classified
the runbook's way:

* ``rollback``: a rollback trigger unless explained (RBAC widened, a protection lowered, an
  eviction cap raised, a metric the baseline served gone, the CronJob no longer suspended or
  no longer in dry-run under the runbook's first-install flags);
* ``review``: a behaviour-relevant change to look at (args, image, CronJob fields, objects
  added or removed, RBAC narrowed, chart values);
* ``info``: cosmetic or inert (chart labels, opt-in values that render nothing by default).

Everything but :func:`render_chart` (and :func:`compare_charts` over it) is a pure function
over data. Values and rendered objects may hold a credential: every Difference is scrubbed
when built (:mod:`pytest_desched.redaction`), so none reaches a report.
"""

from pytest_desched.canary.static.difference import (
    AREAS,
    CHANGES,
    CLUSTER_API_VERSIONS,
    SEVERITIES,
    Difference,
)
from pytest_desched.canary.static.helm import chart_label, compare_charts, render_chart
from pytest_desched.canary.static.manifests import compare_manifests
from pytest_desched.canary.static.policy import (
    compare_defaults,
    compare_lint,
    compare_metric_names,
)
from pytest_desched.canary.static.protections import (
    default_protections_from_source,
    effective_protections,
)
from pytest_desched.canary.static.result import StaticComparison
from pytest_desched.canary.static.values import compare_values

__all__ = [
    "AREAS",
    "CHANGES",
    "CLUSTER_API_VERSIONS",
    "SEVERITIES",
    "Difference",
    "StaticComparison",
    "chart_label",
    "compare_charts",
    "compare_defaults",
    "compare_lint",
    "compare_manifests",
    "compare_metric_names",
    "compare_values",
    "default_protections_from_source",
    "effective_protections",
    "render_chart",
]
