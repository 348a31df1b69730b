"""The runbook's DeschedulerPolicy as a value: validated, hashed and overridden with a paper trail.

Validation happens here, before anything touches a cluster, because descheduler v0.36.0 itself
is lenient in the dangerous places: its policy decoder (pkg/descheduler/scheme, no
``EnableStrict``) silently drops unknown or mis-cased keys outside plugin args, and an invalid
``nodeAffinityType`` is only logged at runtime. A typo would otherwise turn a lab run into a
silent no-op (or worse, a run of a policy nobody wrote).

Canonical form and digests
--------------------------
The chart (charts/descheduler/templates/configmap.yaml) renders the ConfigMap key ``policy.yaml``
as::

    apiVersion: "{{ .Values.deschedulerPolicyAPIVersion }}"
    kind: "DeschedulerPolicy"
    {{ tpl (toYaml .Values.deschedulerPolicy) . | trim | indent 4 }}

so the chart value ``deschedulerPolicy`` must *not* carry apiVersion/kind (they would be
duplicated; Go's YAML decoder keeps one in undefined order), helm re-serialises it with
``toYaml`` (keys sorted, its own quoting), and ``tpl`` evaluates any ``{{`` in it. Byte
comparison is therefore meaningless. The canonical form is the whole document (apiVersion and
kind included) parsed to plain data and dumped as JSON with sorted keys and compact separators
(integral floats folded to ints); :meth:`Policy.digest` and :func:`digest_of_rendered` are the
sha256 of that, so the written policy and the live ConfigMap's ``policy.yaml`` hash equal iff
they mean the same thing. Use :meth:`Policy.chart_values` for the values to hand to helm (in a
values file or ``--set-json``, not ``--set``, which would turn ``"true"`` into a bool).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import PolicyError
from pytest_desched.evidence.record import scrub_secrets
from pytest_desched.tools.resources import manifest_path

__all__ = [
    "API_VERSION",
    "DEFAULT_POLICY_FILE",
    "KIND",
    "Policy",
    "PolicyError",
    "PolicyScope",
    "canonical_json",
    "digest_of_rendered",
    "load_default",
]

DEFAULT_POLICY_FILE = "policy-safe-rebalance.yaml"

# ---------------------------------------------------------------------------------------------
# Known names of descheduler v0.36.0, all from sigs.k8s.io/descheduler@v0.36.0. Re-derive them
# (and only them) when bumping the descheduler.
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


# --------------------------------------------------------------------------------- parsing ---


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys: Go keeps one of them in undefined order."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) or key is None:
            continue  # unhashable/odd keys: the type checks report those
        if key in seen:
            mark = key_node.start_mark
            raise PolicyError(
                f"line {mark.line + 1}: duplicate key {key!r}; keep exactly one",
                loader.name,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,  # type: ignore[arg-type]
)


def _parse(text: str, source: str) -> dict[str, Any]:
    try:
        loader = _StrictLoader(text)
        loader.name = source
        try:
            doc = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise PolicyError(f"YAML syntax error: {exc}; fix the YAML", source) from exc
    if not isinstance(doc, dict):
        raise PolicyError(
            f"document is {type(doc).__name__}, not a mapping; "
            f"a DeschedulerPolicy is a mapping starting with 'apiVersion: {API_VERSION}'",
            source,
        )
    return doc


def _normalize(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def canonical_json(doc: Mapping[str, Any]) -> str:
    """The canonical form hashed by digests: sorted-key compact JSON of the parsed document."""
    return json.dumps(_normalize(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(doc: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def digest_of_rendered(policy_yaml_text: str) -> str:
    """Digest of a live ConfigMap's ``policy.yaml``, comparable with :meth:`Policy.digest`."""
    return _sha256(_parse(policy_yaml_text, "rendered policy.yaml"))


# ------------------------------------------------------------------------------ validation ---


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


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

    def __init__(self) -> None:
        self.problems: list[str] = []

    def err(self, path: str, msg: str) -> None:
        self.problems.append(f"{path or '<root>'}: {msg}")

    def fields(self, path: str, obj: Mapping[str, Any], known: tuple[str, ...], note: str) -> None:
        for key in obj:
            if key not in known:
                self.err(
                    _join(path, str(key)),
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

    def no_templates(self, path: str, value: Any) -> None:
        if isinstance(value, str) and "{{" in value:
            self.err(path, "contains '{{', which the chart's `tpl` would evaluate; remove it")
        elif isinstance(value, dict):
            for k, v in value.items():
                self.no_templates(_join(path, str(k)), k)
                self.no_templates(_join(path, str(k)), v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                named = path.endswith("pluginConfig") and isinstance(v, dict) and v.get("name")
                self.no_templates(f"{path}[{named or i}]", v)

    def no_credentials(self, path: str, value: Any, key: str = "") -> None:
        """Refuse any inline credential: a policy lands in a ConfigMap, helm values and logs.

        The runbook keeps tokens out of values, logs and artifacts; the descheduler's own way
        is a Secret reference (metricsProviders[].prometheus.authToken.secretReference). A
        value counts as a credential when the scrubber would hide it (JWT, `Bearer x`,
        `?access_token=`/`?bearer=` in a URL, user:password@ in a URL, PEM) or when its key
        names one (`token`, `bearerToken`, `password`, ...). The value is never quoted.
        """
        if isinstance(value, dict):
            for k, v in value.items():
                self.no_credentials(_join(path, str(k)), v, str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.no_credentials(f"{path}[{i}]", v, key)
        elif isinstance(value, str) and (
            scrub_secrets(value) != value or scrub_secrets(f"{key}: {value}") != f"{key}: {value}"
        ):
            self.err(
                path,
                "holds an inline credential (value not shown); tokens never go into a policy, "
                "its ConfigMap or helm values: create a Secret and reference it with "
                "metricsProviders[].prometheus.authToken.secretReference {namespace, name}",
            )

    # -- policy ------------------------------------------------------------------------------

    def policy(self, doc: dict[str, Any]) -> None:
        self.fields("", doc, TOP_LEVEL_FIELDS, "v0.36.0 would silently ignore it")
        for key, want in (("apiVersion", API_VERSION), ("kind", KIND)):
            if doc.get(key) != want:
                self.err(key, f"must be {want!r}, got {doc.get(key)!r}")
        for key in UINT_FIELDS:
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
        self.no_templates("", doc)
        self.no_credentials("", doc)

    def metrics_providers(self, providers: Any) -> None:
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
            self.fields(path, prov, METRICS_PROVIDER_FIELDS, "ignored")
            src = prov.get("source")
            if src not in METRICS_SOURCES:
                self.err(f"{path}.source", f"must be one of {', '.join(METRICS_SOURCES)}")
            elif src in sources:
                self.err(f"{path}.source", f"{src!r} configured twice; configure each once")
            sources.append(src)
            if self.mapping(f"{path}.prometheus", prov.get("prometheus")):
                prom = prov["prometheus"]
                self.fields(f"{path}.prometheus", prom, PROMETHEUS_FIELDS, "ignored")
                tok_path = f"{path}.prometheus.authToken"
                if self.mapping(tok_path, prom.get("authToken")):
                    tok = prom["authToken"]
                    self.fields(tok_path, tok, AUTH_TOKEN_FIELDS, "silently ignored by v0.36.0")
                    ref_path = f"{tok_path}.secretReference"
                    if self.mapping(ref_path, tok.get("secretReference")):
                        ref = tok["secretReference"]
                        self.fields(ref_path, ref, SECRET_REFERENCE_FIELDS, "silently ignored")
                        for k in SECRET_REFERENCE_FIELDS:
                            self.string(f"{ref_path}.{k}", ref.get(k))

    def profile(self, path: str, prof: Any, seen: dict[str, int], index: int) -> None:
        if not self.mapping(path, prof, optional=False):
            return
        self.fields(path, prof, PROFILE_FIELDS, "v0.36.0 would silently ignore it")
        name = prof.get("name")
        if not isinstance(name, str) or not name:
            self.err(f"{path}.name", "must be a non-empty string naming the profile")
        elif name in seen:
            self.err(f"{path}.name", f"duplicate profile name {name!r} (profiles[{seen[name]}])")
        else:
            seen[name] = index
        configured = self.plugin_configs(path, prof.get("pluginConfig"))
        self.plugins(f"{path}.plugins", prof.get("plugins"), configured)

    def plugin_configs(self, path: str, configs: Any) -> set[str]:
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
            self.fields(pc_path, pc, PLUGIN_CONFIG_FIELDS, "v0.36.0 would silently ignore it")
            if name not in PLUGIN_EXTENSION_POINTS:
                self.err(
                    f"{pc_path}.name",
                    f"unknown plugin {name!r}{_suggest(str(name), list(PLUGIN_EXTENSION_POINTS))}"
                    f"; v0.36.0 plugins: {', '.join(PLUGIN_EXTENSION_POINTS)}",
                )
                continue
            if name in configured:
                self.err(pc_path, f"{name} configured twice; the descheduler uses only the first")
                continue
            configured.add(name)
            self.args(f"{pc_path}.args", name, pc.get("args"))
        return configured

    def plugins(self, path: str, plugins: Any, configured: set[str]) -> None:
        active = False
        if self.mapping(path, plugins):
            self.fields(
                path, plugins, EXTENSION_POINTS, "v0.36.0 decodes case-sensitively and ignores it"
            )
            for ep in EXTENSION_POINTS:
                pset = plugins.get(ep)
                ep_path = f"{path}.{ep}"
                if not self.mapping(ep_path, pset):
                    continue
                self.fields(ep_path, pset, PLUGIN_SET_FIELDS, "ignored")
                if self.str_list(f"{ep_path}.disabled", pset.get("disabled")):
                    self.err(f"{ep_path}.disabled", "v0.36.0 ignores 'disabled' lists; remove it")
                active |= self.enabled(f"{ep_path}.enabled", ep, pset.get("enabled"), configured)
        if not active:
            self.err(
                path,
                "enables no deschedule or balance plugin, so this profile can never evict; "
                "enable one under plugins.deschedule.enabled or plugins.balance.enabled",
            )

    def enabled(self, path: str, ep: str, value: Any, configured: set[str]) -> bool:
        names = self.str_list(path, value)
        if names and ep in UNUSED_EXTENSION_POINTS:
            self.err(path, f"v0.36.0 never runs the {ep!r} extension point; remove it")
            return False
        active = False
        for i, name in enumerate(names):
            where = f"{path}[{i}]"
            points = PLUGIN_EXTENSION_POINTS.get(name)
            if points is None:
                self.err(
                    where,
                    f"unknown plugin {name!r}{_suggest(name, list(PLUGIN_EXTENSION_POINTS))}; "
                    f"v0.36.0 plugins: {', '.join(PLUGIN_EXTENSION_POINTS)}",
                )
            elif ep not in points:
                self.err(
                    where,
                    f"{name} does not implement the {ep!r} extension point; "
                    f"move it to plugins.{'/'.join(sorted(points))}.enabled",
                )
            elif name != DEFAULT_EVICTOR and name not in configured:
                self.err(
                    where,
                    f"{name} has no pluginConfig entry and v0.36.0 fails to build it; "
                    f"add '- name: {name}' (with its args) to pluginConfig",
                )
            else:
                active |= ep in ("deschedule", "balance")
            if names.count(name) > 1 and names.index(name) == i:
                self.err(path, f"{name} listed more than once; it would run once per entry")
        return active

    # -- plugin args -------------------------------------------------------------------------

    def args(self, path: str, plugin: str, args: Any) -> None:
        if args is None:
            args = {}
        elif not self.mapping(path, args, optional=False):
            return
        known = PLUGIN_ARG_FIELDS[plugin] + ARGS_TYPEMETA
        self.fields(path, args, known, "v0.36.0 refuses to start with it")
        if self.mapping(f"{path}.namespaces", args.get("namespaces")):
            ns = args["namespaces"]
            self.fields(f"{path}.namespaces", ns, NAMESPACES_FIELDS, "refused at startup")
            inc = self.str_list(f"{path}.namespaces.include", ns.get("include"))
            exc = self.str_list(f"{path}.namespaces.exclude", ns.get("exclude"))
            if inc and exc:
                self.err(f"{path}.namespaces", "set only one of include/exclude")
        self.label_selector(f"{path}.labelSelector", args.get("labelSelector"))
        if plugin == DEFAULT_EVICTOR:
            self.evictor_args(path, args)
        elif plugin == "RemovePodsViolatingNodeAffinity":
            types = args.get("nodeAffinityType")
            if not types:
                self.err(
                    f"{path}.nodeAffinityType",
                    f"must be set (v0.36.0 rejects an empty list); use [{NODE_AFFINITY_TYPES[0]}]",
                )
            else:
                self.names(
                    f"{path}.nodeAffinityType", types, NODE_AFFINITY_TYPES, "nodeAffinityType"
                )

    def label_selector(self, path: str, sel: Any) -> None:
        if not self.mapping(path, sel):
            return
        self.fields(path, sel, LABEL_SELECTOR_FIELDS, "refused at startup")
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
            if op not in LABEL_SELECTOR_OPERATORS:
                self.err(
                    f"{epath}.operator", f"must be one of {', '.join(LABEL_SELECTOR_OPERATORS)}"
                )
            elif (op in ("In", "NotIn")) != bool(values):
                self.err(f"{epath}.values", f"{op} needs values iff the operator is In/NotIn")
        if exprs is not None and not isinstance(exprs, list):
            self.err(f"{path}.matchExpressions", "must be a list")

    def evictor_args(self, path: str, args: dict[str, Any]) -> None:
        if "nodeSelector" in args:
            self.string(f"{path}.nodeSelector", args["nodeSelector"])
        self.label_selector(f"{path}.namespaceLabelSelector", args.get("namespaceLabelSelector"))
        for key in ("nodeFit", *DEPRECATED_EVICTOR_FLAGS):
            if key in args:
                self.boolean(f"{path}.{key}", args[key])
        if "minReplicas" in args:
            self.uint(f"{path}.minReplicas", args["minReplicas"], UINT_MAX)
        if "minPodAge" in args:
            self.duration(f"{path}.minPodAge", args["minPodAge"])
        if "noEvictionPolicy" in args and args["noEvictionPolicy"] not in NO_EVICTION_POLICIES:
            self.err(
                f"{path}.noEvictionPolicy",
                f"must be one of {', '.join(NO_EVICTION_POLICIES)}, "
                f"got {args['noEvictionPolicy']!r}",
            )
        pt = args.get("priorityThreshold")
        if self.mapping(f"{path}.priorityThreshold", pt):
            self.fields(f"{path}.priorityThreshold", pt, ("value", "name"), "refused at startup")
            if pt.get("value") is not None and pt.get("name"):
                self.err(f"{path}.priorityThreshold", "set only one of value/name")
            if pt.get("value") is not None:
                self.uint(f"{path}.priorityThreshold.value", pt["value"], SYSTEM_CRITICAL_PRIORITY)
        pp = args.get("podProtections")
        pp_path = f"{path}.podProtections"
        if self.mapping(pp_path, pp):
            self.fields(pp_path, pp, POD_PROTECTIONS_FIELDS, "refused at startup")
            self.names(
                f"{pp_path}.extraEnabled",
                pp.get("extraEnabled"),
                POD_PROTECTIONS_EXTRA,
                "extra pod protection",
            )
            self.names(
                f"{pp_path}.defaultDisabled",
                pp.get("defaultDisabled"),
                POD_PROTECTIONS_DEFAULT,
                "default pod protection",
            )
            if any(args.get(k) is True for k in DEPRECATED_EVICTOR_FLAGS) and (
                pp.get("extraEnabled") or pp.get("defaultDisabled")
            ):
                self.err(pp_path, "cannot be combined with the deprecated evict*/ignore* flags")
            cfg = pp.get("config")
            if self.mapping(f"{pp_path}.config", cfg):
                self.fields(f"{pp_path}.config", cfg, ("PodsWithPVC",), "refused at startup")


# ------------------------------------------------------------------------------- overrides ---

_TOKEN = re.compile(r"\[([^\]]+)\]|([^.\[\]]+)")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_PROFILE_PATH = re.compile(r"profiles\[\d+\]")


def _tokens(path: str) -> list[str]:
    toks: list[str] = []
    pos = 0
    while pos < len(path):
        if toks and path[pos] == "." and pos + 1 < len(path):
            pos += 1
        m = _TOKEN.match(path, pos)
        if not m:
            raise PolicyError(f"override path {path!r}: cannot parse at offset {pos}", "override")
        toks.append(m.group(1) if m.group(1) is not None else m.group(2))
        pos = m.end()
    if not toks:
        raise PolicyError("override path is empty", "override")
    return toks


def _set_path(doc: dict[str, Any], path: str, value: Any) -> tuple[str, Any]:
    """Set (or with ``None`` delete) the addressed value in ``doc``; return (canonical, old)."""
    todo = _tokens(path)
    node: Any = doc
    canon = ""
    while todo:
        tok = todo.pop(0)
        shorthand = tok in PLUGIN_EXTENSION_POINTS and _PROFILE_PATH.fullmatch(canon)
        if shorthand and isinstance(node, dict) and tok not in node:  # <profile>.<Plugin>.<arg>
            todo[:0] = ["pluginConfig", tok, "args"]
            continue
        last = not todo
        if isinstance(node, dict):
            step = f".{tok}" if _PLAIN_KEY.fullmatch(tok) else f"[{tok}]"
            canon = (canon + step).lstrip(".")
            if last:
                old = node.pop(tok, None) if value is None else node.get(tok)
                if value is not None:
                    node[tok] = value
                return canon, old
            if node.get(tok) is None:
                node[tok] = [] if tok in ("profiles", "pluginConfig") else {}
            node = node[tok]
        elif isinstance(node, list):
            idx = _list_index(node, tok, canon)
            by_name = canon.endswith("pluginConfig")
            canon += f"[{node[idx]['name'] if by_name else idx}]"
            if last:
                old = node[idx]
                if value is None:
                    del node[idx]
                else:
                    node[idx] = value
                return canon, old
            node = node[idx]
        else:
            raise PolicyError(f"override path {path!r}: {canon} is a scalar", "override")
    raise AssertionError("unreachable")


def _list_index(items: list[Any], tok: str, canon: str) -> int:
    if tok.isdigit():
        if int(tok) < len(items):
            return int(tok)
        raise PolicyError(f"override path: {canon}[{tok}] is out of range", "override")
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == tok:
            return i
    if canon.endswith("pluginConfig") and tok in PLUGIN_EXTENSION_POINTS:
        items.append({"name": tok, "args": {}})
        return len(items) - 1
    raise PolicyError(f"override path: no entry named {tok!r} in {canon}", "override")


# ---------------------------------------------------------------------------------- policy ---


class Policy:
    """A DeschedulerPolicy document plus the overrides that made it differ from its source.

    Immutable in use: every accessor returns copies and :meth:`override` returns a new Policy,
    so the runbook's original stays intact for the deviation report.
    """

    def __init__(
        self,
        doc: Mapping[str, Any],
        *,
        source: str = "<dict>",
        overrides: list[dict[str, Any]] | None = None,
    ) -> None:
        if not isinstance(doc, Mapping):
            raise PolicyError(
                f"document is {type(doc).__name__}, not a mapping; a DeschedulerPolicy is a "
                f"mapping starting with 'apiVersion: {API_VERSION}'",
                source,
            )
        self._doc: dict[str, Any] = copy.deepcopy(dict(doc))
        self.source = source
        self.overrides: list[dict[str, Any]] = copy.deepcopy(overrides or [])

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        path = Path(path)
        return cls(_parse(path.read_text(encoding="utf-8"), str(path)), source=str(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "<yaml>") -> Policy:
        return cls(_parse(text, source), source=source)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], source: str = "<dict>") -> Policy:
        return cls(doc, source=source)

    @classmethod
    def coerce(cls, value: Policy | Mapping[str, Any] | str | Path) -> Policy:
        """The one way a policy comes in: a Policy, a path to a YAML file, a mapping, YAML text.

        A string names a file when one exists at that path, else it is parsed as YAML text
        (which must be a mapping). Not validated here: callers validate before any change.
        """
        if isinstance(value, Policy):
            return value
        if isinstance(value, Path):
            if not value.is_file():
                raise PolicyError(f"policy file {value} does not exist", str(value))
            return cls.load(value)
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        if isinstance(value, str):
            looks_like_path = "\n" not in value and len(value) < 4096
            if looks_like_path and Path(value).expanduser().is_file():
                return cls.load(Path(value).expanduser())
            if looks_like_path and ":" not in value:
                raise PolicyError(
                    f"{value!r} is neither an existing policy file nor YAML text of a "
                    f"DeschedulerPolicy (a mapping starting with 'apiVersion: {API_VERSION}')",
                    "policy argument",
                )
            return cls.from_yaml(value, source="<yaml text>")
        raise TypeError(
            f"a policy must be a pytest_desched.descheduler.policy.Policy, a path (str or pathlib.Path) to a "
            f"YAML file, a mapping, or YAML text; got {type(value).__name__}"
        )

    # -- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc)

    def to_yaml(self) -> str:
        """Block YAML in the document's own key order (deterministic, not sorted)."""
        return yaml.safe_dump(
            self._doc, sort_keys=False, default_flow_style=False, allow_unicode=True
        )

    def chart_values(self) -> dict[str, Any]:
        """Values for the descheduler chart: it adds apiVersion/kind itself, so strip them."""
        body = {k: v for k, v in self.to_dict().items() if k not in ("apiVersion", "kind")}
        return {
            "deschedulerPolicyAPIVersion": self._doc.get("apiVersion", API_VERSION),
            "deschedulerPolicy": body,
        }

    def digest(self) -> str:
        """sha256 of :func:`canonical_json` of the whole document (see module docstring)."""
        return _sha256(self._doc)

    def matches_rendered(self, policy_yaml_text: str) -> bool:
        """Whether a live ConfigMap's ``policy.yaml`` means exactly this policy."""
        return digest_of_rendered(policy_yaml_text) == self.digest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and canonical_json(self._doc) == canonical_json(other._doc)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n = len(self.overrides)
        return f"Policy(source={self.source!r}, overrides={n}, digest={self.digest()[:12]})"

    # -- validation --------------------------------------------------------------------------

    def validate(self) -> Policy:
        """Raise :class:`PolicyError` listing every problem; return self so calls can chain."""
        checker = _Checker()
        checker.policy(self._doc)
        if checker.problems:
            raise PolicyError(checker.problems, self.source)
        return self

    # -- overrides ---------------------------------------------------------------------------

    def override(self, path: str, value: Any, *, why: str) -> Policy:
        """A new Policy with ``path`` set to ``value`` (``None`` deletes), recorded with ``why``.

        Paths: ``maxNoOfPodsToEvictTotal``; ``profiles.safe-rebalance.DefaultEvictor.minPodAge``
        (profile by name or index, then a plugin name meaning its pluginConfig args); or the
        canonical ``profiles[0].pluginConfig[DefaultEvictor].args.minPodAge``. Use ``[...]`` for
        keys containing dots. No-op changes are not recorded. Call :meth:`validate` afterwards.
        """
        if not why or not why.strip():
            raise ValueError("override needs a non-empty 'why': deviations must be explained")
        doc = self.to_dict()
        canon, old = _set_path(doc, path, copy.deepcopy(value))
        if old == value:
            return Policy(self._doc, source=self.source, overrides=self.overrides)
        record = {"path": canon, "old": copy.deepcopy(old), "new": copy.deepcopy(value), "why": why}
        return Policy(doc, source=self.source, overrides=[*self.overrides, record])

    def with_overrides(self, changes: Mapping[str, Any], *, why: str) -> Policy:
        """Apply several :meth:`override` calls that share one reason, in order."""
        policy = self
        for path, value in changes.items():
            policy = policy.override(path, value, why=why)
        return policy

    def overrides_report(self) -> str:
        """One line per deviation from the source policy, for test reports."""
        if not self.overrides:
            return f"policy {self.source}: unmodified"
        lines = [f"policy {self.source}: {len(self.overrides)} deviation(s)"]
        lines += [
            f"  {o['path']}: {o['old']!r} -> {o['new']!r} ({o['why']})" for o in self.overrides
        ]
        return "\n".join(lines)

    # -- accessors ---------------------------------------------------------------------------

    @property
    def profile_names(self) -> list[str]:
        return [p.get("name") for p in self._doc.get("profiles") or [] if isinstance(p, dict)]

    def _profile(self, profile: str | int | None) -> dict[str, Any]:
        profiles = [p for p in self._doc.get("profiles") or [] if isinstance(p, dict)]
        if profile is None:
            if len(profiles) != 1:
                raise KeyError(
                    f"policy has {len(profiles)} profiles; name one of {self.profile_names}"
                )
            return profiles[0]
        if isinstance(profile, int):
            return profiles[profile]
        for p in profiles:
            if p.get("name") == profile:
                return p
        raise KeyError(f"no profile {profile!r}; profiles: {self.profile_names}")

    def plugin_args(self, name: str, profile: str | int | None = None) -> dict[str, Any]:
        """A copy of a plugin's args; DefaultEvictor without config yields {} like upstream."""
        for pc in self._profile(profile).get("pluginConfig") or []:
            if isinstance(pc, dict) and pc.get("name") == name:
                return copy.deepcopy(pc.get("args") or {})
        if name == DEFAULT_EVICTOR:
            return {}
        raise KeyError(f"plugin {name!r} has no pluginConfig entry in profile {profile!r}")

    def evictor_args(self, profile: str | int | None = None) -> dict[str, Any]:
        return self.plugin_args(DEFAULT_EVICTOR, profile)

    def enabled_plugins(self, profile: str | int | None = None) -> dict[str, list[str]]:
        """Enabled plugins per extension point as v0.36.0 runs them: DefaultEvictor is
        prepended to filter and preevictionfilter when absent (policyconfig.go setDefaultEvictor).
        """
        plugins = self._profile(profile).get("plugins") or {}
        out = {ep: list((plugins.get(ep) or {}).get("enabled") or []) for ep in EXTENSION_POINTS}
        for ep in ("filter", "preevictionfilter"):
            if DEFAULT_EVICTOR not in out[ep]:
                out[ep].insert(0, DEFAULT_EVICTOR)
        return out

    @property
    def event_notification(self) -> bool:
        """evictionFailureEventNotification; false when unset (types.go default)."""
        return bool(self._doc.get("evictionFailureEventNotification", False))

    @property
    def limits(self) -> dict[str, int | None]:
        """Eviction caps per node / namespace / total; None means unlimited."""
        return {
            "node": self._doc.get("maxNoOfPodsToEvictPerNode"),
            "namespace": self._doc.get("maxNoOfPodsToEvictPerNamespace"),
            "total": self._doc.get("maxNoOfPodsToEvictTotal"),
        }


def load_default() -> Policy:
    """The runbook's shipped safe-rebalance policy, validated."""
    return Policy.load(manifest_path(DEFAULT_POLICY_FILE)).validate()


# ---------------------------------------------------------------------------------- scope ---

# Plugins whose args carry `namespaces: {include, exclude}` (pkg/api/types.go Namespaces).
# LowNodeUtilization/HighNodeUtilization only take `evictableNamespaces.exclude`: they cannot
# be held to one namespace, so a scope refuses them.
NAMESPACED_PLUGINS = tuple(n for n, f in PLUGIN_ARG_FIELDS.items() if "namespaces" in f)
EVICTING_POINTS = ("deschedule", "balance")


@dataclass(frozen=True)
class PolicyScope:
    """Where a policy may act on a cluster that is not the plugin's own (provider `existing`).

    `apply` narrows a policy to the lab: every evicting plugin gets `namespaces.include: [lab]`
    and the top-level `nodeSelector` gains the opt-in term, each as a recorded override.
    `problems` is the guard `Release.apply_policy` runs before any non-dry-run upgrade.
    """

    node_selector: str  # one `key=value` term, ANDed with any selector the policy has
    why: str = "existing cluster: rounds act only inside the lab namespace and on opted-in nodes"

    def _evicting(self, doc: Mapping[str, Any]) -> list[tuple[int, str, str]]:
        out = []
        for i, prof in enumerate(doc.get("profiles") or []):
            plugins = (prof.get("plugins") or {}) if isinstance(prof, dict) else {}
            for ep in EVICTING_POINTS:
                for name in (plugins.get(ep) or {}).get("enabled") or []:
                    out.append((i, ep, name))
        return out

    def _selector(self, current: Any) -> str:
        terms = [t.strip() for t in str(current or "").split(",") if t.strip()]
        return ",".join(terms if self.node_selector in terms else [*terms, self.node_selector])

    def apply(self, policy: Policy, namespace: str) -> Policy:
        """The policy limited to `namespace` and the opted-in nodes; PolicyError if impossible."""
        doc = policy.to_dict()
        bad = [
            f"profiles[{i}].plugins.{ep}.enabled: {name} cannot be limited to one namespace "
            f"(v0.36.0 has no include list for it); refused on an existing cluster"
            for i, ep, name in self._evicting(doc)
            if name not in NAMESPACED_PLUGINS
        ]
        if bad:
            raise PolicyError(bad, f"{policy.source} scoped to {namespace}")
        why = f"{self.why} (namespace {namespace}, nodes {self.node_selector})"
        scoped = policy.override("nodeSelector", self._selector(doc.get("nodeSelector")), why=why)
        for i, _, name in self._evicting(doc):
            scoped = scoped.override(
                f"profiles[{i}].{name}.namespaces", {"include": [namespace]}, why=why
            )
        return scoped

    def problems(self, policy: Policy | None) -> list[str]:
        """Why `policy` could act outside a lab on this cluster (empty: it cannot)."""
        if policy is None:
            return [
                "the chart's default policy acts on every namespace and node; on an existing "
                "cluster only a policy scoped to the lab runs outside dry-run (Cluster.scope_policy)"
            ]
        doc = policy.to_dict()
        out = []
        if self._selector(doc.get("nodeSelector")) != str(doc.get("nodeSelector") or ""):
            out.append(f"nodeSelector: must include {self.node_selector!r} (opted-in nodes only)")
        for i, ep, name in self._evicting(doc):
            try:
                include = (policy.plugin_args(name, i).get("namespaces") or {}).get("include")
            except KeyError:
                include = None
            if not include:
                out.append(
                    f"profiles[{i}].plugins.{ep}.enabled: {name} has no namespaces.include "
                    "list; it could evict outside the lab"
                )
        return out
