"""Which shape of the descheduler's framework API a source tree has, read from the tree.

The policy checker (tools/policycheck) is compiled inside each candidate's tree against that
release's own packages. Releases change the calls it makes (NewProfile gained a context in
v0.34, WithPrometheusClient came in v0.33 taking a client and took a getter from v0.35,
WithProfileInstanceID came in v0.35, DeschedulerPolicy.MetricsProviders in v0.33). Rather than
a table of releases met so far, each variation point is probed here by looking for the symbol's
definition in the tree's non-test Go files, and picks one build tag's file in the checker; the
entry points every release has (LoadPolicyConfig, WithClientSet, NewPodEvictor, ...) are
called the same way everywhere. A tree that lacks one of those is refused before any build,
naming the symbol and the package it was looked for in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pytest_desched.errors import ToolError

__all__ = ["REQUIRED", "ApiShape", "helper_tags", "probe_tree"]

PROFILE = "pkg/framework/profile"

# (package dir, symbol kind, name): what every shape of the checker calls unchanged.
REQUIRED: tuple[tuple[str, str, str], ...] = (
    (PROFILE, "func", "NewProfile"),
    (PROFILE, "type", "Option"),
    (PROFILE, "func", "WithClientSet"),
    (PROFILE, "func", "WithSharedInformerFactory"),
    (PROFILE, "func", "WithPodEvictor"),
    (PROFILE, "func", "WithMetricsCollector"),
    ("pkg/descheduler", "func", "LoadPolicyConfig"),
    ("pkg/descheduler", "func", "SetupPlugins"),
    ("pkg/descheduler/evictions", "func", "NewPodEvictor"),
    ("pkg/descheduler/evictions", "func", "NewOptions"),
    ("pkg/descheduler/metricscollector", "func", "NewMetricsCollector"),
    ("pkg/framework/pluginregistry", "var", "PluginRegistry"),
    ("pkg/features", "var", "DefaultMutableFeatureGate"),
    ("pkg/api/v1alpha2", "type", "DeschedulerPolicy"),
)


@dataclass(frozen=True)
class ApiShape:
    """The variation points of the tree's API the checker adapts to (see the module doc)."""

    profile_ctx: bool  # NewProfile(ctx, ...)
    prom: str  # WithPrometheusClient takes "getter" | "value" | "none" (absent)
    instance_id: bool  # WithProfileInstanceID defined
    metrics_providers: bool  # api.DeschedulerPolicy has MetricsProviders

    @property
    def tags(self) -> tuple[str, ...]:
        """The checker's build tags for this shape (each names one file of tools/policycheck)."""
        out: list[str] = []
        if not self.profile_ctx:
            out.append("profile_noctx")
        if self.prom != "getter":
            out.append(f"prom_{self.prom}")
        if not self.instance_id:
            out.append("profile_noid")
        if not self.metrics_providers:
            out.append("policy_noproviders")
        return tuple(out)


def _package_source(tree: Path, pkg: str) -> str:
    """The package's non-test Go source, concatenated ("" when the directory is missing)."""
    d = tree / pkg
    if not d.is_dir():
        return ""
    return "\n".join(
        f.read_text(errors="replace")
        for f in sorted(d.glob("*.go"))
        if not f.name.endswith("_test.go")
    )


def _defines(src: str, kind: str, name: str) -> bool:
    if kind == "func":
        pat = rf"^func {name}\s*[\[(]"
    elif kind == "type":
        pat = rf"^(?:type\s+{name}\b|\s+{name}\s+(?:func|struct|interface|\*?[A-Za-z])\b)"
    else:  # var: a top-level var, alone or in a var block
        pat = rf"^(?:var\s+{name}\b|\s+{name}\s*(?:=|[A-Za-z*]))"
    return re.search(pat, src, re.MULTILINE) is not None


def _func_params(src: str, name: str) -> str | None:
    m = re.search(rf"^func {name}\(([^)]*)\)", src, re.MULTILINE)
    return m.group(1) if m else None


def probe_tree(tree: Path) -> ApiShape:
    """The tree's API shape; ToolError naming the first required symbol it lacks."""
    sources: dict[str, str] = {}

    def src(pkg: str) -> str:
        if pkg not in sources:
            sources[pkg] = _package_source(tree, pkg)
        return sources[pkg]

    for pkg, kind, name in REQUIRED:
        if not _defines(src(pkg), kind, name):
            raise ToolError(
                f"the project's policy checker cannot serve the tree at {tree}: it defines no "
                f"{kind} {name} in {pkg} (the checker calls {pkg.rsplit('/', 1)[-1]}.{name}, "
                "which every descheduler release from v0.30 on has); lint with the baseline's "
                "rules or name a descheduler tree"
            )
    new_profile = _func_params(src(PROFILE), "NewProfile") or ""
    prom_params = _func_params(src(PROFILE), "WithPrometheusClient")
    if prom_params is None:
        prom = "none"
    elif re.search(r"\bfunc\s*\(", prom_params):  # a getter: `func() promapi.Client`
        prom = "getter"
    else:
        prom = "value"
    policy = re.search(
        r"^type DeschedulerPolicy struct \{(.*?)^\}", src("pkg/api"), re.MULTILINE | re.DOTALL
    )
    return ApiShape(
        profile_ctx="context.Context" in new_profile.split(",")[0],
        prom=prom,
        instance_id=_defines(src(PROFILE), "func", "WithProfileInstanceID"),
        metrics_providers=bool(
            policy and re.search(r"^\s+MetricsProviders\s", policy.group(1), re.MULTILINE)
        ),
    )


def helper_tags(tree: Path) -> tuple[str, ...]:
    """Build tags that fit the policy checker to the tree's API (see the module doc)."""
    return probe_tree(tree).tags
