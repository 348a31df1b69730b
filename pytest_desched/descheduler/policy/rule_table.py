"""Every rule code `desched lint` and the canary's static stage report: one table.

The DL rules judge one policy under one release. The migration rules (DM metrics, DU chart
values, DR RBAC, DO other rendered objects, DP the policy as each release reads it, DD the
policy after each release's defaulting) name a difference between two releases: the canary's
static stage classifies each difference under one of them, and ``desched lint --from``
reports the same differences as findings. Both take the code and the severity from here, so
the two can never disagree; the canary's words for a severity (rollback / review / info) are
the lint's (error / warning / note) under :data:`CANARY_SEVERITY`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_desched import docs_link

__all__ = [
    "CANARY_SEVERITY",
    "DOCS_URL",
    "MIGRATION_FAMILIES",
    "RULES",
    "Rule",
    "Severity",
    "canary_severity",
    "rule_link",
]

Severity = Literal["error", "warning", "note"]
# A migration rule's severity as the canary says it: an error is a rollback trigger unless
# explained, a warning a change to review, a note information.
CANARY_SEVERITY: dict[str, str] = {"error": "rollback", "warning": "review", "note": "info"}


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str
    fix: str = ""  # migration rules: what to do about such a difference (DL rules say it per hit)


_DL = (
    Rule("DL000", "unreadable-input", "error", "the file is not a policy, values or ConfigMap"),
    Rule("DL001", "rejected-by-descheduler", "error", "the descheduler refuses the policy"),
    Rule("DL002", "dropped-field", "error", "a field the descheduler silently ignores"),
    Rule("DL003", "duplicate-field", "error", "a key given twice; one is silently kept"),
    Rule("DL004", "inline-credential", "error", "a credential written into the policy"),
    Rule("DL005", "template-marker", "error", "a '{{' the chart's tpl would evaluate"),
    Rule("DL006", "deprecated-evictor-boolean", "warning", "a deprecated DefaultEvictor flag"),
    Rule("DL007", "nothing-enabled", "warning", "no plugin evicts: the run does nothing"),
    Rule("DL008", "protections-lowered", "warning", "default pod protections disabled"),
    Rule("DL009", "no-eviction-cap", "warning", "a per-node, per-namespace or total cap unset"),
    Rule("DL010", "event-notification-off", "warning", "failed evictions leave no event"),
    Rule("DL011", "min-pod-age-missing", "warning", "new pods can be evicted at once"),
    Rule("DL012", "known-bug", "warning", "the policy triggers a known bug of this version"),
    Rule("DL013", "needs-live-cluster", "note", "accepted; only a live cluster can check it"),
    Rule("DL014", "no-scope", "warning", "an evicting strategy with no namespace/label scope"),
    Rule("DL015", "node-fit-off", "warning", "pods evicted with nowhere else to run"),
    Rule("DL016", "short-pod-lifetime", "warning", "PodLifeTime evicts pods younger than it"),
    Rule("DL017", "min-pod-age-short", "warning", "minPodAge below the runbook's"),
    Rule("DL018", "safety-flag-off", "error", "values turn suspend or dry-run off"),
    Rule("DL019", "will-run", "note", "what the chart renders from the values will run"),
    Rule("DL020", "ignore-without-reason", "warning", "an inline ignore with no reason"),
    Rule("DL021", "unknown-values-key", "warning", "a top-level values key the chart never reads"),
    Rule("DL022", "metrics-source-unconfigured", "error", "metrics read from a source not set"),
    Rule("DL023", "prometheus-token-in-plain-text", "error", "a Prometheus token in plain text"),
    Rule("DL024", "deprecated-metrics-collector", "warning", "metricsCollector is deprecated"),
    Rule("DL025", "query-without-instance", "warning", "a query whose result names no node"),
    Rule("DL026", "metrics-forms-combined", "error", "old and new metrics forms together"),
    Rule("DL027", "metrics-migration-half-done", "warning", "one level on the old metrics form"),
    Rule("DL028", "metrics-providers-unknown", "error", "metricsProviders on a release before it"),
    Rule("DL029", "metrics-rbac-missing", "error", "the chart grants no metrics.k8s.io read"),
    Rule("DL030", "token-secret-unreadable", "warning", "the chart cannot read the token Secret"),
)

_REVIEW = "review it before the upgrade; explain it in the canary's --expect if intended"
_ALERTS = "move alerts, dashboards and recording rules to the successor"

# (family prefix, what it compares): docs/lint.md has one section a family.
MIGRATION_FAMILIES = {
    "DM": "metric families each release's own metrics/metrics.go declares",
    "DU": "chart values: `helm show values` of both charts",
    "DR": "RBAC: the rendered roles and bindings",
    "DO": "other rendered objects: CronJob, containers, image, arguments",
    "DP": "the policy as each release's own policy checker reads it",
    "DD": "the policy after each release's own defaulting",
}

_MIGRATION = (
    # metrics
    Rule("DM001", "metric-deprecated", "warning", "a metric family deprecated in the target", _ALERTS),
    Rule("DM002", "metric-removed", "error", "a metric family the target no longer has", _ALERTS),
    Rule("DM003", "metric-added", "note", "a metric family new in the target", "nothing; use it if it helps"),
    Rule("DM004", "metric-deprecated-kept", "note", "a metric family both releases declare deprecated", _ALERTS),
    # chart values
    Rule("DU001", "values-key-added", "warning", "a new chart value with a non-empty default", "check what it renders; set it in your values to keep the old render"),
    Rule("DU002", "values-key-added-inert", "note", "a new opt-in chart value (renders nothing by default)", "nothing unless you want it"),
    Rule("DU003", "values-key-removed", "warning", "a chart value the target chart no longer reads: helm ignores it silently", "drop it from your values, or move it to the target chart's key"),
    Rule("DU004", "values-default-changed", "warning", "a chart default changed", "set the old value in your values if you rely on it"),
    Rule("DU005", "values-default-changed-inert", "note", "one empty chart default for another", "nothing"),
    Rule("DU006", "values-protection-lowered", "error", "the target chart's default policy lowers a protection or raises a cap", "set the protection or cap explicitly in your values"),
    Rule("DU007", "values-key-set-removed", "warning", "your values set a key the target chart no longer reads: it does nothing", "move the setting to the target chart's key, or drop it"),
    Rule("DU008", "values-key-renamed", "warning", "a chart value renamed (the same parent, the same default or a close name)", "set the new key in your values instead of the old one"),
    # RBAC
    Rule("DR001", "rbac-widened", "error", "a role grants more than the from-release's", _REVIEW),
    Rule("DR002", "rbac-narrowed", "warning", "a role grants less than the from-release's (fails closed)", _REVIEW),
    Rule("DR003", "rbac-binding-widened", "error", "a binding binds more identities", _REVIEW),
    Rule("DR004", "rbac-binding-narrowed", "warning", "a binding binds fewer identities", _REVIEW),
    Rule("DR005", "rbac-role-ref-changed", "error", "a binding refers to another role", _REVIEW),
    Rule("DR006", "rbac-object-added", "error", "the target creates a new role or binding", _REVIEW),
    Rule("DR007", "rbac-object-removed", "warning", "the target no longer creates a role or binding", _REVIEW),
    Rule("DR008", "rbac-field-changed", "warning", "another field of a role or binding changed", _REVIEW),
    Rule("DR009", "rbac-release-needs", "error", "a chart's role lacks what its release lists at start (a known chart bug)", "install the chart that grants it, or grant the rule to the descheduler's role"),
    # other rendered objects
    Rule("DO001", "object-added", "warning", "the target renders an object the from-release does not", _REVIEW),
    Rule("DO002", "object-removed", "warning", "the target no longer renders an object", _REVIEW),
    Rule("DO003", "object-field-changed", "warning", "a rendered field changed", _REVIEW),
    Rule("DO004", "object-labels-changed", "note", "chart/version labels or checksums changed (cosmetic)", "nothing"),
    Rule("DO005", "image-changed", "warning", "a container runs another image", "confirm the image is the release you mean"),
    Rule("DO006", "command-changed", "warning", "a container starts another command", _REVIEW),
    Rule("DO007", "argument-changed", "warning", "a descheduler argument added, removed or changed", _REVIEW),
    Rule("DO008", "dry-run-lost", "error", "the first install's dry-run no longer reaches the descheduler", "keep cmdOptions.dry-run reaching the container's args"),
    Rule("DO009", "cronjob-not-suspended", "error", "the CronJob is not suspended under suspend=true", "keep spec.suspend rendered from the values"),
    Rule("DO010", "object-protection-lowered", "error", "a rendered object lowers a protection or raises a cap", "set the protection or cap explicitly"),
    # the policy as each release reads it
    Rule("DP001", "policy-rejected-by-target", "error", "the target refuses a policy the from-release accepts", "rewrite the policy in the target's words before upgrading"),
    Rule("DP002", "policy-field-dropped-by-target", "error", "the target drops or ignores a field the from-release reads", "move the field to the target's form before upgrading"),
    Rule("DP003", "policy-field-deprecated-by-target", "warning", "the target deprecates a field the from-release does not", "move to the replacement the finding names"),
    Rule("DP004", "policy-deprecated-field-kept", "note", "a field both releases deprecate is still used", "move to the replacement now: a later release may remove it"),
    Rule("DP005", "policy-new-error", "error", "another error finding under the target only", "fix it as the target's own lint finding says"),
    Rule("DP006", "policy-new-warning", "warning", "another warning finding under the target only", "fix it as the target's own lint finding says"),
    Rule("DP007", "policy-new-note", "note", "a note under the target only", "nothing"),
    Rule("DP008", "policy-finding-gone", "note", "a finding of the from-release no longer reported by the target", "nothing"),
    Rule("DP009", "policy-read-in-release-fields", "note", "a track's policy written in its release's own fields (the canary's per-release reading)", "nothing: the same protections, as that release spells them"),
    Rule("DP010", "protection-not-expressible", "error", "a protection the release has no field for: that track runs without it", "accept it in the canary's --expect (policy-translation:<track>:protections[X]) or pick a release that has it"),
    # the policy after each release's defaulting
    Rule("DD001", "default-strategy-added", "error", "more strategies pick candidates after the target's defaulting", "disable them explicitly if unwanted"),
    Rule("DD002", "default-plugin-added", "warning", "a filter or sort plugin added by the target's defaulting", _REVIEW),
    Rule("DD003", "default-filter-removed", "error", "a filter that protected pods no longer runs after the target's defaulting", "enable it explicitly"),
    Rule("DD004", "default-plugin-removed", "warning", "a plugin no longer enabled after the target's defaulting", _REVIEW),
    Rule("DD005", "default-disabled-changed", "warning", "the disabled plugins differ after defaulting", _REVIEW),
    Rule("DD006", "default-profile-changed", "warning", "a profile added or removed by defaulting", _REVIEW),
    Rule("DD007", "default-protection-lost", "error", "a pod protection active under the from-release is not under the target", "enable it in podProtections.extraEnabled, or drop it from defaultDisabled"),
    Rule("DD008", "default-protection-gained", "warning", "a pod protection active under the target only (fewer pods evictable)", _REVIEW),
    Rule("DD009", "default-lowers-protection", "error", "the target's defaulting lowers a protection or raises a cap", "set the value explicitly"),
    Rule("DD010", "default-changed", "warning", "a value differs after each release's defaulting", "set it explicitly if you rely on it"),
)  # fmt: skip

RULES: dict[str, Rule] = {r.id: r for r in (*_DL, *_MIGRATION)}

# Where each rule is explained: docs/lint.md, one anchor per code (`#dl007`), at the project's
# URL (pytest_desched.PROJECT_URL, the one pyproject.toml's [project.urls] give).
DOCS_URL = docs_link("lint.md")


def rule_link(code: str) -> str:
    """The docs of rule ``code`` (``--list-rules`` prints it; SARIF's ``helpUri``)."""
    return docs_link("lint.md", code.lower())


def canary_severity(code: str) -> str:
    """The canary's severity of migration rule ``code`` (rollback / review / info)."""
    return CANARY_SEVERITY[RULES[code].severity]
