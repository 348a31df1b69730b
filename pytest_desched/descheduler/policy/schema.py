"""The DeschedulerPolicy v1alpha2 schema of each supported descheduler minor, and its checker.

Validation happens before anything touches a cluster because the descheduler itself is lenient
in the dangerous places: v0.36.0's policy decoder (pkg/descheduler/scheme, no ``EnableStrict``)
silently drops unknown or mis-cased keys outside plugin args, and an invalid
``nodeAffinityType`` is only logged at runtime, so a typo would turn a lab run into a silent
no-op (or a run of a policy nobody wrote). This module is the only place that knows the
policy's field names, value sets and rules: a :class:`Schema` holds one descheduler minor's
tables, read from sigs.k8s.io/descheduler at the tag it names (``written_for``), and
:func:`schema_for` maps a descheduler version to it. :meth:`Schema.problems` is the seam: a
later change puts the descheduler's own decoding and validation code behind it and nothing
outside this module changes. Rules that hold for every version (no credentials, no template
markers) are not schema rules; they live in :mod:`.safety`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_desched.descheduler.policy.paths import join_path, problem
from pytest_desched.errors import PolicyError
from pytest_desched.tools.versions import load_versions

__all__ = [
    "API_VERSION",
    "KIND",
    "NAMESPACED_PLUGINS",
    "SCHEMAS",
    "Schema",
    "pinned_schema",
    "schema_for",
]

# ---------------------------------------------------------------------------------------------
# Known names of descheduler v0.36.0, all from sigs.k8s.io/descheduler@v0.36.0. They make up the
# "v0.36" entry of SCHEMAS; a new minor gets its own tables (re-derived, never guessed).
# ---------------------------------------------------------------------------------------------

# pkg/api/v1alpha2/register.go (GroupName "descheduler", GroupVersion "v1alpha2", kind).
API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerPolicy"

# pkg/api/v1alpha2/types.go: DeschedulerPolicy json tags (+ TypeMeta's apiVersion/kind).
TOP_LEVEL_FIELDS = (
    "apiVersion",
    "kind",
    "profiles",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
    "evictionFailureEventNotification",
    "metricsCollector",
    "metricsProviders",
    "gracePeriodSeconds",
)
UINT_FIELDS = (  # *uint in types.go
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
)
# Go's uint is 64 bits on the platforms the descheduler ships for; a larger value does not
# decode and v0.36.0 exits at start-up. gracePeriodSeconds is *int64.
UINT_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1
# pkg/api/v1alpha2/types.go: DeschedulerProfile, PluginConfig, Plugins, PluginSet,
# MetricsProvider, Prometheus, AuthToken, SecretReference json tags. Plugins' tags are all
# lower-case ("preevictionfilter", not "preEvictionFilter") and decoding is case-sensitive.
PROFILE_FIELDS = ("name", "pluginConfig", "plugins")
PLUGIN_CONFIG_FIELDS = ("name", "args")
EXTENSION_POINTS = ("presort", "sort", "deschedule", "balance", "filter", "preevictionfilter")
UNUSED_EXTENSION_POINTS = ("presort", "sort")  # declared, never read by framework/profile
EVICTING_POINTS = ("deschedule", "balance")  # the extension points whose plugins evict
PLUGIN_SET_FIELDS = ("enabled", "disabled")
METRICS_PROVIDER_FIELDS = ("source", "prometheus")
METRICS_SOURCES = ("KubernetesMetrics", "Prometheus")
PROMETHEUS_FIELDS = ("url", "authToken")
AUTH_TOKEN_FIELDS = ("secretReference",)  # types.go AuthToken: a Secret reference, never a token
SECRET_REFERENCE_FIELDS = ("namespace", "name")

# pkg/descheduler/setupplugins.go (RegisterDefaultPlugins) crossed with the interface each
# plugin asserts (`var _ frameworktypes.XPlugin = ...`), mapped to extension points by
# pkg/framework/profile/profile.go registryToExtensionPoints (EvictorPlugin -> both filters).
_DESCHEDULE = frozenset({"deschedule"})
_BALANCE = frozenset({"balance"})
PLUGIN_EXTENSION_POINTS: dict[str, frozenset[str]] = {
    "DefaultEvictor": frozenset({"filter", "preevictionfilter"}),
    "LowNodeUtilization": _BALANCE,
    "HighNodeUtilization": _BALANCE,
    "RemoveDuplicates": _BALANCE,
    "RemovePodsViolatingTopologySpreadConstraint": _BALANCE,
    "PodLifeTime": _DESCHEDULE,
    "RemoveFailedPods": _DESCHEDULE,
    "RemovePodsHavingTooManyRestarts": _DESCHEDULE,
    "RemovePodsViolatingInterPodAntiAffinity": _DESCHEDULE,
    "RemovePodsViolatingNodeAffinity": _DESCHEDULE,
    "RemovePodsViolatingNodeTaints": _DESCHEDULE,
}
DEFAULT_EVICTOR = "DefaultEvictor"

# defaultevictor/types.go: deprecated bools, superseded by podProtections but still decoded.
DEPRECATED_EVICTOR_FLAGS = (
    "evictLocalStoragePods",
    "evictDaemonSetPods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "ignorePodsWithoutPDB",
    "evictFailedBarePods",
)
# pkg/framework/plugins/<plugin>/types.go: <Plugin>Args json tags. Plugin args are decoded
# strictly (pkg/api/v1alpha2/conversion.go uses a codec with EnableStrict).
PLUGIN_ARG_FIELDS: dict[str, tuple[str, ...]] = {
    "DefaultEvictor": (
        "nodeSelector",
        "labelSelector",
        "namespaceLabelSelector",
        "priorityThreshold",
        "nodeFit",
        "minReplicas",
        "minPodAge",
        "noEvictionPolicy",
        "podProtections",
        *DEPRECATED_EVICTOR_FLAGS,
    ),
    "LowNodeUtilization": (
        "useDeviationThresholds",
        "thresholds",
        "targetThresholds",
        "numberOfNodes",
        "metricsUtilization",
        "evictableNamespaces",
        "evictionLimits",
    ),
    "HighNodeUtilization": ("thresholds", "numberOfNodes", "evictionModes", "evictableNamespaces"),
    "PodLifeTime": (
        "namespaces",
        "labelSelector",
        "ownerKinds",
        "maxPodLifeTimeSeconds",
        "states",
        "conditions",
        "exitCodes",
        "includingInitContainers",
        "includingEphemeralContainers",
    ),
    "RemoveDuplicates": ("namespaces", "excludeOwnerKinds"),
    "RemoveFailedPods": (
        "namespaces",
        "labelSelector",
        "excludeOwnerKinds",
        "minPodLifetimeSeconds",
        "reasons",
        "exitCodes",
        "includingInitContainers",
    ),
    "RemovePodsHavingTooManyRestarts": (
        "namespaces",
        "labelSelector",
        "podRestartThreshold",
        "includingInitContainers",
        "states",
    ),
    "RemovePodsViolatingInterPodAntiAffinity": ("namespaces", "labelSelector"),
    "RemovePodsViolatingNodeAffinity": ("namespaces", "labelSelector", "nodeAffinityType"),
    "RemovePodsViolatingNodeTaints": (
        "namespaces",
        "labelSelector",
        "includePreferNoSchedule",
        "excludedTaints",
        "includedTaints",
    ),
    "RemovePodsViolatingTopologySpreadConstraint": (
        "namespaces",
        "labelSelector",
        "constraints",
        "topologyBalanceNodeFit",
    ),
}
ARGS_TYPEMETA = ("apiVersion", "kind")  # every Args struct inlines metav1.TypeMeta

# removepodsviolatingnodeaffinity/node_affinity.go: the `switch nodeAffinity` cases.
NODE_AFFINITY_TYPES = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)
# defaultevictor/types.go: defaultPodProtections / extraPodProtections / NoEvictionPolicy.
POD_PROTECTIONS_DEFAULT = (
    "PodsWithLocalStorage",
    "SystemCriticalPods",
    "FailedBarePods",
    "DaemonSetPods",
)
POD_PROTECTIONS_EXTRA = ("PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims")
POD_PROTECTIONS_FIELDS = ("extraEnabled", "defaultDisabled", "config")
NO_EVICTION_POLICIES = ("Preferred", "Mandatory")
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # pkg/utils/priority.go: max priorityThreshold
# k8s.io/apimachinery metav1.LabelSelector.
LABEL_SELECTOR_FIELDS = ("matchLabels", "matchExpressions")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NAMESPACES_FIELDS = ("include", "exclude")  # pkg/api/types.go Namespaces

# Go's time.ParseDuration grammar (metav1.Duration): "0" or [sign](number unit)+.
_GO_DURATION = re.compile(r"[+-]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)")
# A descheduler release: v<major>.<minor>[.<patch>[-pre|+build]] ("v" optional, as in appVersion).
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+(?:[-+][0-9A-Za-z.+-]+)?)?")


# ---------------------------------------------------------------------------------- schema ---


@dataclass(frozen=True, eq=False)
class Schema:
    """One descheduler minor's DeschedulerPolicy: field names, value sets, limits and checker.

    ``minor`` is the key in :data:`SCHEMAS` (``"v0.36"``); ``written_for`` the exact release
    whose source the tables were read from, named in every message that says what the
    descheduler would do with a field. Besides :meth:`problems`, the model and the scoping use
    the few facts they need from here (plugin names, extension points, DefaultEvictor, which
    plugins take a namespace include list), so no other module hard-codes them.
    """

    minor: str
    written_for: str
    api_version: str
    kind: str
    top_level_fields: tuple[str, ...]
    uint_fields: tuple[str, ...]
    profile_fields: tuple[str, ...]
    plugin_config_fields: tuple[str, ...]
    extension_points: tuple[str, ...]
    unused_extension_points: tuple[str, ...]
    evicting_points: tuple[str, ...]
    plugin_set_fields: tuple[str, ...]
    metrics_provider_fields: tuple[str, ...]
    metrics_sources: tuple[str, ...]
    prometheus_fields: tuple[str, ...]
    auth_token_fields: tuple[str, ...]
    secret_reference_fields: tuple[str, ...]
    plugin_extension_points: Mapping[str, frozenset[str]]
    default_evictor: str
    deprecated_evictor_flags: tuple[str, ...]
    plugin_arg_fields: Mapping[str, tuple[str, ...]]
    args_typemeta: tuple[str, ...]
    node_affinity_types: tuple[str, ...]
    pod_protections_default: tuple[str, ...]
    pod_protections_extra: tuple[str, ...]
    pod_protections_fields: tuple[str, ...]
    no_eviction_policies: tuple[str, ...]
    max_priority_threshold: int
    label_selector_fields: tuple[str, ...]
    label_selector_operators: tuple[str, ...]
    namespaces_fields: tuple[str, ...]

    @property
    def plugins(self) -> tuple[str, ...]:
        """Every plugin name this release registers."""
        return tuple(self.plugin_extension_points)

    @property
    def namespaced_plugins(self) -> tuple[str, ...]:
        """Plugins whose args carry ``namespaces: {include, exclude}`` (pkg/api/types.go).

        LowNodeUtilization/HighNodeUtilization only take ``evictableNamespaces.exclude``: they
        cannot be held to one namespace.
        """
        return tuple(n for n, f in self.plugin_arg_fields.items() if "namespaces" in f)

    def problems(self, doc: Mapping[str, Any]) -> list[str]:
        """Every way ``doc`` breaks this release's schema (``path: issue; fix``), all at once."""
        checker = _Checker(self)
        checker.policy(doc)
        return checker.problems


V0_36 = Schema(
    minor="v0.36",
    written_for="v0.36.0",
    api_version=API_VERSION,
    kind=KIND,
    top_level_fields=TOP_LEVEL_FIELDS,
    uint_fields=UINT_FIELDS,
    profile_fields=PROFILE_FIELDS,
    plugin_config_fields=PLUGIN_CONFIG_FIELDS,
    extension_points=EXTENSION_POINTS,
    unused_extension_points=UNUSED_EXTENSION_POINTS,
    evicting_points=EVICTING_POINTS,
    plugin_set_fields=PLUGIN_SET_FIELDS,
    metrics_provider_fields=METRICS_PROVIDER_FIELDS,
    metrics_sources=METRICS_SOURCES,
    prometheus_fields=PROMETHEUS_FIELDS,
    auth_token_fields=AUTH_TOKEN_FIELDS,
    secret_reference_fields=SECRET_REFERENCE_FIELDS,
    plugin_extension_points=PLUGIN_EXTENSION_POINTS,
    default_evictor=DEFAULT_EVICTOR,
    deprecated_evictor_flags=DEPRECATED_EVICTOR_FLAGS,
    plugin_arg_fields=PLUGIN_ARG_FIELDS,
    args_typemeta=ARGS_TYPEMETA,
    node_affinity_types=NODE_AFFINITY_TYPES,
    pod_protections_default=POD_PROTECTIONS_DEFAULT,
    pod_protections_extra=POD_PROTECTIONS_EXTRA,
    pod_protections_fields=POD_PROTECTIONS_FIELDS,
    no_eviction_policies=NO_EVICTION_POLICIES,
    max_priority_threshold=SYSTEM_CRITICAL_PRIORITY,
    label_selector_fields=LABEL_SELECTOR_FIELDS,
    label_selector_operators=LABEL_SELECTOR_OPERATORS,
    namespaces_fields=NAMESPACES_FIELDS,
)

SCHEMAS: dict[str, Schema] = {V0_36.minor: V0_36}
NAMESPACED_PLUGINS = V0_36.namespaced_plugins


def schema_for(version: str) -> Schema:
    """The schema of descheduler ``version`` (``v0.36.0``, ``v0.36.5``, ``0.36.0``): its minor's.

    Any patch release of a known minor maps to that minor's schema: patch releases are
    bug-fix backports and the policy API (pkg/api, the plugins' Args types) changes in minor
    releases only, an assumption to re-check when the pin moves to a later patch.

    Any other version raises :class:`PolicyError`; there is deliberately no "nearest schema"
    fallback. This check exists because the descheduler silently ignores fields it does not
    know. A different minor can add, rename or drop fields, plugins and pod protections, so
    checking it against another minor's tables would either refuse valid policies or, worse,
    pass a field that release silently ignores: the very no-op this check is here to stop. A
    warning next to a green test run would go unread. Refusing makes a descheduler bump in
    manifests/versions.yaml fail at the first validation, before any cluster change, until
    someone re-derives the tables from the new source and registers them in :data:`SCHEMAS`.
    """
    m = _VERSION.fullmatch(version.strip()) if isinstance(version, str) else None
    if m is None:
        raise PolicyError(
            f"{version!r} is not a descheduler version; expected v<major>.<minor>.<patch> "
            f"such as {V0_36.written_for}",
            "schema_for",
        )
    minor = f"v{int(m.group(1))}.{int(m.group(2))}"
    schema = SCHEMAS.get(minor)
    if schema is None:
        raise PolicyError(
            f"descheduler {version}: no policy schema for {minor}; schemas exist for "
            f"{', '.join(SCHEMAS)} only. Re-derive the tables in "
            f"pytest_desched/descheduler/policy/schema.py from "
            f"sigs.k8s.io/descheduler@{version} and register them in SCHEMAS, or pin a "
            f"supported descheduler in manifests/versions.yaml",
            "schema_for",
        )
    return schema


def pinned_schema() -> Schema:
    """The schema of the pinned descheduler (manifests/versions.yaml), the one the lab runs."""
    return schema_for(load_versions().descheduler.version)


# --------------------------------------------------------------------------------- checker ---


def _suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    by_lower = {c.lower(): c for c in choices}
    hit = by_lower.get(str(word).lower())
    if hit is None:
        close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
        hit = close[0] if close else None
    return f"; did you mean {hit!r}?" if hit else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Checker:
    """Collects every problem at once, so one run shows the whole fix list."""

    def __init__(self, schema: Schema) -> None:
        self.s = schema
        self.problems: list[str] = []

    def err(self, path: str, msg: str) -> None:
        self.problems.append(problem(path, msg))

    def fields(self, path: str, obj: Mapping[str, Any], known: tuple[str, ...], note: str) -> None:
        for key in obj:
            if key not in known:
                self.err(
                    join_path(path, str(key)),
                    f"unknown field {key!r}{_suggest(key, known)} ({note}); "
                    f"known fields: {', '.join(known)}",
                )

    def mapping(self, path: str, value: Any, *, optional: bool = True) -> bool:
        if value is None and optional:
            return False
        if not isinstance(value, dict):
            self.err(path, f"must be a mapping, got {type(value).__name__} {value!r}")
            return False
        return True

    def uint(self, path: str, value: Any, maximum: int | None = None) -> None:
        if not _is_int(value) or value < 0:
            self.err(path, f"must be a non-negative integer, got {value!r}; e.g. {path}: 1")
        elif maximum is not None and value > maximum:
            self.err(path, f"must be <= {maximum}, got {value}")

    def boolean(self, path: str, value: Any) -> None:
        if not isinstance(value, bool):
            self.err(path, f"must be true or false (unquoted), got {value!r}")

    def string(self, path: str, value: Any) -> None:
        if not isinstance(value, str):
            self.err(path, f"must be a string, got {type(value).__name__} {value!r}; quote it")

    def str_list(self, path: str, value: Any) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.err(path, f"must be a list of strings, got {value!r}")
            return []
        return value

    def names(self, path: str, value: Any, allowed: tuple[str, ...], what: str) -> None:
        items = self.str_list(path, value)
        for i, name in enumerate(items):
            if name not in allowed:
                self.err(
                    f"{path}[{i}]",
                    f"{name!r} is not a valid {what}{_suggest(name, allowed)}; "
                    f"allowed: {', '.join(allowed)}",
                )
        dups = sorted({n for n in items if items.count(n) > 1})
        if dups:
            self.err(path, f"duplicate entries {dups}; list each once")

    def duration(self, path: str, value: Any) -> None:
        if not isinstance(value, str) or not _GO_DURATION.fullmatch(value):
            self.err(
                path,
                f"must be a Go duration string such as '10m', '90s' or '1h30m', got {value!r}",
            )
        elif value.startswith("-"):
            self.err(
                path, f"must not be negative, got {value!r}; use '0s' to disable the age check"
            )

    # -- policy ------------------------------------------------------------------------------

    def policy(self, doc: Mapping[str, Any]) -> None:
        s = self.s
        self.fields("", doc, s.top_level_fields, f"{s.written_for} would silently ignore it")
        for key, want in (("apiVersion", s.api_version), ("kind", s.kind)):
            if doc.get(key) != want:
                self.err(key, f"must be {want!r}, got {doc.get(key)!r}")
        for key in s.uint_fields:
            if key in doc:
                self.uint(key, doc[key], UINT_MAX)
        if "gracePeriodSeconds" in doc:
            self.uint("gracePeriodSeconds", doc["gracePeriodSeconds"], INT64_MAX)
        if "evictionFailureEventNotification" in doc:
            self.boolean(
                "evictionFailureEventNotification", doc["evictionFailureEventNotification"]
            )
        if "nodeSelector" in doc:
            self.string("nodeSelector", doc["nodeSelector"])
        if self.mapping("metricsCollector", doc.get("metricsCollector")):
            self.fields("metricsCollector", doc["metricsCollector"], ("enabled",), "ignored")
        self.metrics_providers(doc.get("metricsProviders"))
        profiles = doc.get("profiles")
        if not isinstance(profiles, list) or not profiles:
            self.err("profiles", "must be a non-empty list of profiles; without one nothing runs")
        else:
            seen: dict[str, int] = {}
            for i, prof in enumerate(profiles):
                self.profile(f"profiles[{i}]", prof, seen, i)

    def metrics_providers(self, providers: Any) -> None:
        s = self.s
        if providers is None:
            return
        if not isinstance(providers, list):
            self.err("metricsProviders", f"must be a list, got {providers!r}")
            return
        sources: list[Any] = []
        for i, prov in enumerate(providers):
            path = f"metricsProviders[{i}]"
            if not self.mapping(path, prov, optional=False):
                continue
            self.fields(path, prov, s.metrics_provider_fields, "ignored")
            src = prov.get("source")
            if src not in s.metrics_sources:
                self.err(f"{path}.source", f"must be one of {', '.join(s.metrics_sources)}")
            elif src in sources:
                self.err(f"{path}.source", f"{src!r} configured twice; configure each once")
            sources.append(src)
            if self.mapping(f"{path}.prometheus", prov.get("prometheus")):
                prom = prov["prometheus"]
                self.fields(f"{path}.prometheus", prom, s.prometheus_fields, "ignored")
                tok_path = f"{path}.prometheus.authToken"
                if self.mapping(tok_path, prom.get("authToken")):
                    tok = prom["authToken"]
                    self.fields(
                        tok_path,
                        tok,
                        s.auth_token_fields,
                        f"silently ignored by {s.written_for}",
                    )
                    ref_path = f"{tok_path}.secretReference"
                    if self.mapping(ref_path, tok.get("secretReference")):
                        ref = tok["secretReference"]
                        self.fields(ref_path, ref, s.secret_reference_fields, "silently ignored")
                        for k in s.secret_reference_fields:
                            self.string(f"{ref_path}.{k}", ref.get(k))

    def profile(self, path: str, prof: Any, seen: dict[str, int], index: int) -> None:
        if not self.mapping(path, prof, optional=False):
            return
        note = f"{self.s.written_for} would silently ignore it"
        self.fields(path, prof, self.s.profile_fields, note)
        name = prof.get("name")
        if not isinstance(name, str) or not name:
            self.err(f"{path}.name", "must be a non-empty string naming the profile")
        elif name in seen:
            self.err(f"{path}.name", f"duplicate profile name {name!r} (profiles[{seen[name]}])")
        else:
            seen[name] = index
        configured = self.plugin_configs(path, prof.get("pluginConfig"))
        self.plugins(f"{path}.plugins", prof.get("plugins"), configured)

    def unknown_plugin(self, path: str, name: Any) -> None:
        plugins = self.s.plugins
        self.err(
            path,
            f"unknown plugin {name!r}{_suggest(str(name), plugins)}; "
            f"{self.s.written_for} plugins: {', '.join(plugins)}",
        )

    def plugin_configs(self, path: str, configs: Any) -> set[str]:
        s = self.s
        configured: set[str] = set()
        if configs is None:
            return configured
        if not isinstance(configs, list):
            self.err(f"{path}.pluginConfig", f"must be a list of {{name, args}}, got {configs!r}")
            return configured
        for i, pc in enumerate(configs):
            name = pc.get("name") if isinstance(pc, dict) else None
            ok_name = isinstance(name, str) and name not in configured
            pc_path = f"{path}.pluginConfig[{name if ok_name else i}]"
            if not self.mapping(pc_path, pc, optional=False):
                continue
            note = f"{s.written_for} would silently ignore it"
            self.fields(pc_path, pc, s.plugin_config_fields, note)
            if name not in s.plugin_extension_points:
                self.unknown_plugin(f"{pc_path}.name", name)
                continue
            if name in configured:
                self.err(pc_path, f"{name} configured twice; the descheduler uses only the first")
                continue
            configured.add(name)
            self.args(f"{pc_path}.args", name, pc.get("args"))
        return configured

    def plugins(self, path: str, plugins: Any, configured: set[str]) -> None:
        s = self.s
        active = False
        if self.mapping(path, plugins):
            note = f"{s.written_for} decodes case-sensitively and ignores it"
            self.fields(path, plugins, s.extension_points, note)
            for ep in s.extension_points:
                pset = plugins.get(ep)
                ep_path = f"{path}.{ep}"
                if not self.mapping(ep_path, pset):
                    continue
                self.fields(ep_path, pset, s.plugin_set_fields, "ignored")
                if self.str_list(f"{ep_path}.disabled", pset.get("disabled")):
                    self.err(
                        f"{ep_path}.disabled",
                        f"{s.written_for} ignores 'disabled' lists; remove it",
                    )
                active |= self.enabled(f"{ep_path}.enabled", ep, pset.get("enabled"), configured)
        if not active:
            self.err(
                path,
                "enables no deschedule or balance plugin, so this profile can never evict; "
                "enable one under plugins.deschedule.enabled or plugins.balance.enabled",
            )

    def enabled(self, path: str, ep: str, value: Any, configured: set[str]) -> bool:
        s = self.s
        names = self.str_list(path, value)
        if names and ep in s.unused_extension_points:
            self.err(path, f"{s.written_for} never runs the {ep!r} extension point; remove it")
            return False
        active = False
        for i, name in enumerate(names):
            where = f"{path}[{i}]"
            points = s.plugin_extension_points.get(name)
            if points is None:
                self.unknown_plugin(where, name)
            elif ep not in points:
                self.err(
                    where,
                    f"{name} does not implement the {ep!r} extension point; "
                    f"move it to plugins.{'/'.join(sorted(points))}.enabled",
                )
            elif name != s.default_evictor and name not in configured:
                self.err(
                    where,
                    f"{name} has no pluginConfig entry and {s.written_for} fails to build it; "
                    f"add '- name: {name}' (with its args) to pluginConfig",
                )
            else:
                active |= ep in s.evicting_points
            if names.count(name) > 1 and names.index(name) == i:
                self.err(path, f"{name} listed more than once; it would run once per entry")
        return active

    # -- plugin args -------------------------------------------------------------------------

    def args(self, path: str, plugin: str, args: Any) -> None:
        s = self.s
        if args is None:
            args = {}
        elif not self.mapping(path, args, optional=False):
            return
        known = s.plugin_arg_fields[plugin] + s.args_typemeta
        self.fields(path, args, known, f"{s.written_for} refuses to start with it")
        if self.mapping(f"{path}.namespaces", args.get("namespaces")):
            ns = args["namespaces"]
            self.fields(f"{path}.namespaces", ns, s.namespaces_fields, "refused at startup")
            inc = self.str_list(f"{path}.namespaces.include", ns.get("include"))
            exc = self.str_list(f"{path}.namespaces.exclude", ns.get("exclude"))
            if inc and exc:
                self.err(f"{path}.namespaces", "set only one of include/exclude")
        self.label_selector(f"{path}.labelSelector", args.get("labelSelector"))
        if plugin == s.default_evictor:
            self.evictor_args(path, args)
        elif plugin == "RemovePodsViolatingNodeAffinity":
            types = args.get("nodeAffinityType")
            if not types:
                self.err(
                    f"{path}.nodeAffinityType",
                    f"must be set ({s.written_for} rejects an empty list); "
                    f"use [{s.node_affinity_types[0]}]",
                )
            else:
                self.names(
                    f"{path}.nodeAffinityType", types, s.node_affinity_types, "nodeAffinityType"
                )

    def label_selector(self, path: str, sel: Any) -> None:
        s = self.s
        if not self.mapping(path, sel):
            return
        self.fields(path, sel, s.label_selector_fields, "refused at startup")
        if self.mapping(f"{path}.matchLabels", sel.get("matchLabels")):
            for key, val in sel["matchLabels"].items():
                if not isinstance(val, str):
                    self.err(
                        f"{path}.matchLabels[{key}]",
                        f'label values must be strings, got {val!r}; quote it, e.g. "{val}"',
                    )
        exprs = sel.get("matchExpressions")
        for i, expr in enumerate(exprs if isinstance(exprs, list) else []):
            epath = f"{path}.matchExpressions[{i}]"
            if not self.mapping(epath, expr, optional=False):
                continue
            self.fields(epath, expr, ("key", "operator", "values"), "refused at startup")
            op, values = expr.get("operator"), self.str_list(f"{epath}.values", expr.get("values"))
            if op not in s.label_selector_operators:
                self.err(
                    f"{epath}.operator", f"must be one of {', '.join(s.label_selector_operators)}"
                )
            elif (op in ("In", "NotIn")) != bool(values):
                self.err(f"{epath}.values", f"{op} needs values iff the operator is In/NotIn")
        if exprs is not None and not isinstance(exprs, list):
            self.err(f"{path}.matchExpressions", "must be a list")

    def evictor_args(self, path: str, args: dict[str, Any]) -> None:
        s = self.s
        if "nodeSelector" in args:
            self.string(f"{path}.nodeSelector", args["nodeSelector"])
        self.label_selector(f"{path}.namespaceLabelSelector", args.get("namespaceLabelSelector"))
        for key in ("nodeFit", *s.deprecated_evictor_flags):
            if key in args:
                self.boolean(f"{path}.{key}", args[key])
        if "minReplicas" in args:
            self.uint(f"{path}.minReplicas", args["minReplicas"], UINT_MAX)
        if "minPodAge" in args:
            self.duration(f"{path}.minPodAge", args["minPodAge"])
        if "noEvictionPolicy" in args and args["noEvictionPolicy"] not in s.no_eviction_policies:
            self.err(
                f"{path}.noEvictionPolicy",
                f"must be one of {', '.join(s.no_eviction_policies)}, "
                f"got {args['noEvictionPolicy']!r}",
            )
        pt = args.get("priorityThreshold")
        if self.mapping(f"{path}.priorityThreshold", pt):
            self.fields(f"{path}.priorityThreshold", pt, ("value", "name"), "refused at startup")
            if pt.get("value") is not None and pt.get("name"):
                self.err(f"{path}.priorityThreshold", "set only one of value/name")
            if pt.get("value") is not None:
                self.uint(f"{path}.priorityThreshold.value", pt["value"], s.max_priority_threshold)
        pp = args.get("podProtections")
        pp_path = f"{path}.podProtections"
        if self.mapping(pp_path, pp):
            self.fields(pp_path, pp, s.pod_protections_fields, "refused at startup")
            self.names(
                f"{pp_path}.extraEnabled",
                pp.get("extraEnabled"),
                s.pod_protections_extra,
                "extra pod protection",
            )
            self.names(
                f"{pp_path}.defaultDisabled",
                pp.get("defaultDisabled"),
                s.pod_protections_default,
                "default pod protection",
            )
            if any(args.get(k) is True for k in s.deprecated_evictor_flags) and (
                pp.get("extraEnabled") or pp.get("defaultDisabled")
            ):
                self.err(pp_path, "cannot be combined with the deprecated evict*/ignore* flags")
            cfg = pp.get("config")
            if self.mapping(f"{pp_path}.config", cfg):
                self.fields(f"{pp_path}.config", cfg, ("PodsWithPVC",), "refused at startup")
