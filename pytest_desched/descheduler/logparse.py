"""Turn one descheduler run's klog JSON log into per-pod decisions that name their layer.

Written against descheduler v0.36.0 (`--logging-format=json --v=4`, one stream: info and
errors both go to stderr, so their order is the order things happened). Everything keys on
the `msg` constant and structured keys; every constant a new descheduler version may change
sits in the tables below, each with the source line it was read from.

Free text is read in exactly three places, all tabled: the `err` of an eviction failure
(limit error constants, API status messages), the DefaultEvictor `checks` list and a
`--dry-run` flag echo. None of it is ever needed to find the pod or the fate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_desched.descheduler.decisions import FATE_LAYER, Fate, Layer, PodDecision, RoundResult

# klog/logr JSON keys: component-base logs/json/json.go:67-94 (msg, caller, ts; Info carries
# "v" via zapr.LogInfoLevel("v"); Error carries no "v" and the error under "err").
# klog.KObj renders {"name":..,"namespace":..} (klog k8s_references.go:29-65).
K_MSG, K_V, K_ERR = "msg", "v", "err"


@dataclass(frozen=True)
class Rule:
    """What one msg constant means: how to handle it, the fate it proves, where it is logged."""

    kind: str
    fate: Fate | None = None
    layer: Layer | None = None  # only where it differs from FATE_LAYER[fate]
    source: str = ""


# Source files (under sigs.k8s.io/descheduler@v0.36.0/pkg/) cited in MSG_RULES.
_EV = "descheduler/evictions/evictions.go"
_DE = "framework/plugins/defaultevictor/defaultevictor.go"
_NA = "framework/plugins/removepodsviolatingnodeaffinity/node_affinity.go"
_NT = "framework/plugins/removepodsviolatingnodetaints/node_taint.go"
_ND = "descheduler/node/node.go"
_PR = "framework/profile/profile.go"
_DS = "descheduler/descheduler.go"

# The one table to adapt for a new descheduler version: msg -> Rule (kind -> _Parser._on_<kind>).
MSG_RULES: dict[str, Rule] = {
    # PodEvictor.EvictPod outcomes, V1, keys pod, reason, strategy, node, profile
    "Evicted pod": Rule("outcome", Fate.EVICTED, source=f"{_EV}:589"),
    "Evicted pod in dry run mode": Rule("outcome", Fate.DRY_RUN, source=f"{_EV}:587"),
    # ErrorS (no "v"); fate from the err: total limit {limit} :519, node limit {limit,node} :534,
    # namespace limit {limit,namespace,pod} :549, API error {pod,reason} :560.
    "Error evicting pod": Rule("evict-error", source=f"{_EV}:519,534,549,560"),
    # V0 Info whose "pod" is the whole v1.Pod, not a KObj
    "Ignoring pod eviction due to missing UID": Rule("pod-error", Fate.ERROR, source=f"{_EV}:491"),
    # EvictionsInBackground feature gate, V3
    "Eviction in background assumed": Rule("outcome", Fate.EVICTED, source=f"{_EV}:641"),
    "Eviction in background already requested (ignoring)": Rule("settled", source=f"{_EV}:499"),
    "Ignoring eviction of a completed/failed pod": Rule("settled", source=f"{_EV}:638"),
    # DefaultEvictor; logger adds plugin=DefaultEvictor, ExtensionPoint=Filter|PreEvictionFilter
    "Pod fails the following checks": Rule("filter", Fate.FILTERED, source=f"{_DE}:497 V4"),
    "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as "
    "unschedulable": Rule("nodefit", Fate.NODEFIT, source=f"{_DE}:445 V0"),
    "unable to list ready nodes": Rule(
        "pod-error", Fate.ERROR, Layer.EVICTOR_NODEFIT, f"{_DE}:441"
    ),
    "pod namespace do not match the namespaceLabelSelector filter in the policy parameter": Rule(
        "ns-selector", Fate.FILTERED, source=f"{_DE}:460 V0"
    ),
    "unable to list namespaces for namespaceLabelSelector filter in the policy parameter": Rule(
        "pod-error", Fate.ERROR, Layer.EVICTOR_FILTER, f"{_DE}:456"
    ),
    # context: which strategy/node/pod the pod-less lines above belong to
    "Processing node": Rule("context", source=f"{_NA}:125 V2 (same msg in 6 more plugins)"),
    "Evicting pod": Rule("candidate", source=f"{_NA}:143 V1"),
    "Not all taints with NoSchedule effect are tolerated after update for pod on node": Rule(
        "candidate", source=f"{_NT}:125 V2"
    ),
    "Pod does not fit on node": Rule("fit-detail", source=f"{_ND}:189 V4"),
    "Pod fits on node": Rule("fit-ok", source=f"{_ND}:185 V4"),
    "eviction failed": Rule("echo", source=f"{_NA}:154 (and every strategy)"),
    "Total number of evictions/requests": Rule("plugin-done", source=f"{_PR}:387,417 V1"),
    # round level
    "Number of evictions/requests": Rule("totals", source=f"{_DS}:252 V1"),
    "Skipping descheduling cycle: requires >=2 nodes": Rule("skip", source=f"{_DS}:281 V0"),
    "Building a cached client from the cluster for the dry run": Rule(
        "dry-run", source=f"{_DS}:427 V3"
    ),
    "Restoring evicted pods from cache": Rule("dry-run", source=f"{_DS}:244 V3"),
    "Warning: DryRun is set to True. You need to disable it to use Leader Election.": Rule(
        "dry-run", source=f"{_DS}:359"
    ),
}

# Limit errors are exact constants (descheduler/evictions/errors.go:8,24,38) -> policy field.
LIMIT_ERRORS: dict[str, str] = {
    "maximum number of evicted pods per node reached": "maxNoOfPodsToEvictPerNode",
    "maximum number of evicted pods per namespace reached": "maxNoOfPodsToEvictPerNamespace",
    "maximum number of evicted pods per a descheduling cycle reached": "maxNoOfPodsToEvictTotal",
}

# API error text -> (HTTP status, StatusReason); first match wins.  The log keeps only
# StatusError.Error() == Status.Message (apimachinery api/errors/errors.go:71), never the code,
# the reason or the PDB causes, so the code is recovered from these fixed fragments.
API_ERRORS: list[tuple[re.Pattern[str], int, str | None]] = [
    # kubernetes registry/core/pod/storage/eviction.go:418,436 (PDB would be violated)
    (
        re.compile(r"Cannot evict pod as it would violate the pod's disruption budget"),
        429,
        "TooManyRequests",
    ),
    # evictions.go:660 wraps every apierrors.IsTooManyRequests error with this prefix
    (re.compile(r"^error when evicting pod \(ignoring\) "), 429, "TooManyRequests"),
    # evictions.go:663 wraps every apierrors.IsNotFound error
    (re.compile(r"^pod not found when evicting "), 404, "NotFound"),
    # api/errors/errors.go:212-216 NewForbidden (RBAC denial, PDB with negative budget)
    (re.compile(r"(^|\bis )forbidden: "), 403, "Forbidden"),
    # eviction.go:226 Status{Code: 500} without a reason
    (re.compile(r"^This pod has more than one PodDisruptionBudget"), 500, None),
    (re.compile(r"^Internal error occurred: "), 500, "InternalError"),  # errors.go:395
    (re.compile(r"^Operation cannot be fulfilled on "), 409, "Conflict"),  # errors.go:242
    (re.compile(r"^Timeout: "), 504, "Timeout"),  # errors.go:406 (eviction.go:277)
    (re.compile(r"^Unauthorized$"), 401, "Unauthorized"),
]


@dataclass(frozen=True)
class Check:
    """A DefaultEvictor check error prefix and the short stable id it normalises to."""

    prefix: str
    id: str
    wraps: bool = False  # ends in ": %w": the wrapped text may itself contain ", "


# DefaultEvictor Filter error texts (framework/plugins/defaultevictor/...).  Ids are the
# PodProtection names (types.go:60-66) or the DefaultEvictorArgs json field (types.go:30-35).
FILTER_CHECKS: list[Check] = [
    Check("pod is a mirror pod", "mirrorPod"),  # defaultevictor.go:479
    Check("pod is a static pod", "staticPod"),  # defaultevictor.go:483
    Check("pod is terminating", "terminating"),  # defaultevictor.go:487
    Check("pod does not have any ownerRefs", "FailedBarePods"),  # defaultevictor.go:233,240
    Check("pod has system critical priority", "SystemCriticalPods"),  # defaultevictor.go:256
    Check("pod has higher priority than specified", "priorityThreshold"),  # defaultevictor.go:270
    Check("pod has local storage", "PodsWithLocalStorage"),  # defaultevictor.go:283
    Check("daemonset pods are protected", "DaemonSetPods"),  # defaultevictor.go:296
    Check("pod with PVC is protected", "PodsWithPVC"),  # defaultevictor.go:319
    Check("pod using protected storage class", "PodsWithPVC"),  # defaultevictor.go:342
    Check("failed to get persistent volume claim", "PodsWithPVC", True),  # defaultevictor.go:204
    Check("failed to resolve storage class for pod", "PodsWithPVC"),  # defaultevictor.go:215
    # defaultevictor.go:355
    Check("unable to check if pod is covered by PodDisruptionBudget", "PodsWithoutPDB", True),
    Check("pod does not have a PodDisruptionBudget", "PodsWithoutPDB"),  # defaultevictor.go:358
    Check("pod has ResourceClaims", "PodsWithResourceClaims"),  # defaultevictor.go:370
    Check("pod labels do not match the labelSelector", "labelSelector"),  # constraints.go:39
    Check("unable to list pods for minReplicas filter", "minReplicas"),  # constraints.go:69
    Check("owner has ", "minReplicas"),  # constraints.go:72 "owner has %d replicas which is..."
    Check("pod age is not older than MinPodAge", "minPodAge"),  # constraints.go:87
]
NODEFIT_CHECK = "nodeFit"  # DefaultEvictorArgs.NodeFit (types.go:33)
NAMESPACE_SELECTOR_CHECK = "namespaceLabelSelector"  # DefaultEvictorArgs (types.go:31)

# A `--dry-run` flag echoed by a wrapper or component-base's `FLAG: --dry-run="true"`; the
# lookahead skips cobra's usage text ("--dry-run    Execute descheduler in dry run mode.").
DRY_RUN_FLAG = re.compile(r'--dry-run(?:=("?)true\1)?(?=\s*$|\s+-)')


@dataclass(frozen=True)
class LogTable:
    """Every constant the parser keys on, for one descheduler minor version."""

    version: str  # the minor it was read from, e.g. "v0.36"
    msg_rules: dict[str, Rule]
    limit_errors: dict[str, str]
    api_errors: list[tuple[re.Pattern[str], int, str | None]]
    filter_checks: list[Check]


# v0.33.0 (read from its release tree): the same messages as v0.36 but the cluster-size abort,
# and the pre-podProtections filter texts for four protections (defaultevictor.go of v0.33.0).
V0_33_MSG_RULES = {
    **MSG_RULES,
    "The cluster size is 0 or 1 meaning eviction causes service disruption or degradation. "
    "So aborting..": Rule("skip", source=f"v0.33.0 {_DS}:358 V1"),
}
V0_33_FILTER_CHECKS = [
    *FILTER_CHECKS,
    Check("pod is related to daemonset", "DaemonSetPods"),  # v0.33.0 defaultevictor.go:134
    Check("pod has a PVC", "PodsWithPVC"),  # v0.33.0 defaultevictor.go:142
    Check("no PodDisruptionBudget found for pod", "PodsWithoutPDB"),  # defaultevictor.go:206
]

# One table per descheduler minor whose source was read; a new minor gets its own entry.
TABLES: dict[str, LogTable] = {
    "v0.33": LogTable("v0.33", V0_33_MSG_RULES, LIMIT_ERRORS, API_ERRORS, V0_33_FILTER_CHECKS),
    "v0.36": LogTable("v0.36", MSG_RULES, LIMIT_ERRORS, API_ERRORS, FILTER_CHECKS),
}
V0_36 = TABLES["v0.36"]


def table_for(version: str | None) -> tuple[LogTable, str | None]:
    """The table for a descheduler version, and a note when it had to fall back.

    An unread minor is parsed with the newest table and the round says so: a message that
    changed there shows up as an unknown line (an error if it has no "v"), never as a guess.
    """
    if not version:
        return V0_36, None
    minor = ".".join(version.split(".")[:2])
    if minor in TABLES:
        return TABLES[minor], None
    newest = TABLES[max(TABLES, key=lambda v: tuple(int(x) for x in v[1:].split(".")))]
    return newest, (
        f"no log table for descheduler {version}: parsed with the {newest.version} table "
        "(messages that changed since would be unparsed, never guessed)"
    )


def check_id(text: str, table: LogTable = V0_36) -> str:
    """Short stable id of one DefaultEvictor check error; unknown texts are kept verbatim."""
    return next((c.id for c in table.filter_checks if text.startswith(c.prefix)), text)


def split_checks(raw: str, table: LogTable = V0_36) -> list[str]:
    """Split utilerrors.NewAggregate(...).Error(): one error bare, several as "[a, b]".

    (apimachinery util/errors/errors.go:70-96; duplicates are already collapsed there.)
    """
    raw = raw.strip()
    if not (raw.startswith("[") and raw.endswith("]")):
        return [raw] if raw else []
    out: list[str] = []
    wraps = False
    for piece in raw[1:-1].split(", "):
        known = next((c for c in table.filter_checks if piece.startswith(c.prefix)), None)
        if out and known is None and wraps:
            out[-1] += ", " + piece  # the comma belonged to a wrapped error
            continue
        out.append(piece)
        wraps = known.wraps if known else False
    return out


def classify_api_error(err: str, table: LogTable = V0_36) -> tuple[int | None, str | None]:
    """HTTP status and StatusReason recovered from an eviction error's text."""
    for pattern, code, reason in table.api_errors:
        if pattern.search(err):
            return code, reason
    return None, None


def _pod_ref(value: Any) -> tuple[str, str] | None:
    """(namespace, name) from a KObj dict, a full Pod object (missing-UID line) or "ns/name"."""
    if isinstance(value, dict):
        meta = value.get("metadata") if "name" not in value else value
        if isinstance(meta, dict) and meta.get("name"):
            return str(meta.get("namespace", "")), str(meta["name"])
    if isinstance(value, str) and value:
        ns, _, name = value.rpartition("/")
        return ns, name
    return None


def _node(value: Any) -> str | None:
    """Node name whether logged as pod.Spec.NodeName (str) or klog.KObj(node) (dict)."""
    if isinstance(value, dict):
        value = value.get("name")
    return str(value) if value else None


@dataclass
class _Candidate:
    namespace: str
    name: str
    node: str | None
    strategy: str | None


class _Parser:
    """Line-by-line state machine; state exists only to name pods on pod-less lines."""

    def __init__(self, table: LogTable = V0_36) -> None:
        self.table = table
        self.result = RoundResult()
        self.plugin: str | None = None  # strategy of the running plugin ("Processing node")
        self.node: str | None = None  # node it is listing pods of
        self.pending: _Candidate | None = None  # announced by "Evicting pod", no outcome yet
        self.fit: dict[tuple[str, str], dict[str, str]] = {}  # pod -> node -> NodeFit error
        self.last_failed = False  # an eviction failure was just recorded ("eviction failed")

    def feed(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        self.result.lines += 1
        rec = self._json(line)
        if rec is None:
            self.result.unparsed += 1
            self.result.dry_run |= bool(DRY_RUN_FLAG.search(line))
            return
        msg = str(rec.get(K_MSG, ""))
        rule = self.table.msg_rules.get(msg)
        if rule is None:
            self._unknown(msg, rec)
            return
        getattr(self, "_on_" + rule.kind.replace("-", "_"))(msg, rule, rec)

    @staticmethod
    def _json(line: str) -> dict[str, Any] | None:
        if not line.startswith("{"):
            return None
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # a deep or huge-integer line is not a log record
            return None
        return rec if isinstance(rec, dict) and K_MSG in rec else None

    def _add(self, fate: Fate, ns: str, name: str, layer: Layer | None = None, **kw: Any) -> None:
        self.result.decisions.append(PodDecision(ns, name, fate, layer or FATE_LAYER[fate], **kw))
        self.last_failed = False

    def _claim(self, ref: tuple[str, str] | None) -> _Candidate | None:
        """Consume the announced candidate: the named pod's, or any if the line names none."""
        cand = self.pending
        if cand and ref not in (None, (cand.namespace, cand.name)):
            return None
        self.pending = None
        return cand

    # --- handlers, one per Rule.kind
    def _on_outcome(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        ref = _pod_ref(rec.get("pod")) or ("", "")
        cand = self._claim(ref)
        assert rule.fate is not None
        self.result.dry_run |= rule.fate is Fate.DRY_RUN
        self._add(
            rule.fate,
            *ref,
            node=_node(rec.get("node")) or (cand.node if cand else None),
            strategy=rec.get("strategy") or (cand.strategy if cand else self.plugin),
            profile=rec.get("profile"),
            reason=rec.get("reason") or None,
            message=msg,
        )

    def _on_evict_error(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        err = str(rec.get(K_ERR, ""))
        ref = _pod_ref(rec.get("pod"))
        cand = self._claim(ref)  # total/node limit lines do not name the pod
        if ref is None and cand is not None:
            ref = (cand.namespace, cand.name)
        common: dict[str, Any] = {
            "node": _node(rec.get("node")) or (cand.node if cand else None),
            "strategy": cand.strategy if cand else self.plugin,
        }
        reason: str | None
        if err in self.table.limit_errors:
            reason = self.table.limit_errors[err]
            message = f"{err} (limit={rec.get('limit')})"
            self._add(Fate.LIMITED, *(ref or ("", "")), reason=reason, message=message, **common)
        else:
            code, reason = classify_api_error(err, self.table)
            fate = Fate.REFUSED if code is not None else Fate.ERROR
            self._add(
                fate,
                *(ref or ("", "")),
                Layer.API_SERVER,
                status_code=code,
                reason=reason,
                message=err,
                **common,
            )
        self.last_failed = True

    def _on_pod_error(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        ref = _pod_ref(rec.get("pod")) or ("", "")
        cand = self._claim(ref)
        assert rule.fate is not None
        err = rec.get(K_ERR)
        self._add(
            rule.fate,
            *ref,
            rule.layer,
            node=cand.node if cand else self.node,
            strategy=cand.strategy if cand else self.plugin,
            message=f"{msg}: {err}" if err else msg,
        )
        self.last_failed = True

    def _on_settled(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        self._claim(_pod_ref(rec.get("pod")))

    def _on_filter(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        raw = str(rec.get("checks", ""))
        ids = list(dict.fromkeys(check_id(c, self.table) for c in split_checks(raw, self.table)))
        ref = _pod_ref(rec.get("pod")) or ("", "")
        self._add(
            Fate.FILTERED, *ref, node=self.node, strategy=self.plugin, checks=ids, message=raw
        )

    def _on_ns_selector(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        ref = _pod_ref(rec.get("pod")) or ("", "")
        self._add(
            Fate.FILTERED,
            *ref,
            node=self.node,
            strategy=self.plugin,
            checks=[NAMESPACE_SELECTOR_CHECK],
            message=msg,
        )

    def _on_nodefit(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        ref = _pod_ref(rec.get("pod")) or ("", "")
        detail = self.fit.pop(ref, {})
        why = "; ".join(f"{n}: {e}" for n, e in detail.items())
        self._add(
            Fate.NODEFIT,
            *ref,
            node=self.node,
            strategy=self.plugin,
            checks=[NODEFIT_CHECK],
            message=f"{msg} [{why}]" if why else msg,
        )

    def _on_fit_detail(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        ref, node = _pod_ref(rec.get("pod")), _node(rec.get("node"))
        if ref and node:
            self.fit.setdefault(ref, {})[node] = str(rec.get(K_ERR, ""))

    def _on_fit_ok(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        self.fit.pop(_pod_ref(rec.get("pod")) or ("", ""), None)

    def _on_context(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        self.plugin = rec.get("plugin") or self.plugin
        self.node = _node(rec.get("node"))

    def _on_candidate(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        ref = _pod_ref(rec.get("pod"))
        if ref:
            node = _node(rec.get("node")) or self.node
            self.pending = _Candidate(*ref, node, rec.get("plugin") or self.plugin)

    def _on_echo(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        if not self.last_failed:  # otherwise it repeats the err of the decision just recorded
            self._unknown(msg, rec)
        self.last_failed = False

    def _on_plugin_done(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        self.plugin = self.node = self.pending = None
        self.fit.clear()

    def _on_totals(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        self.result.total_evicted = _int(rec.get("totalEvicted"))
        self.result.eviction_requests = _int(rec.get("evictionRequests"))

    def _on_skip(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        self.result.skipped = f"{msg} (found={rec.get('found')})"

    def _on_dry_run(self, msg: str, rule: Rule, rec: dict[str, Any]) -> None:
        self.result.dry_run = True

    def _unknown(self, msg: str, rec: dict[str, Any]) -> None:
        """Unmapped lines matter only if they are errors (no "v") or echo a dry-run flag."""
        self.result.dry_run |= bool(DRY_RUN_FLAG.search(msg))
        if K_V not in rec:
            err = rec.get(K_ERR)
            self.result.errors.append(f"{msg}: {err}" if err else msg)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_lines(lines: Iterable[str], version: str | None = None) -> RoundResult:
    """Parse a descheduler log line by line (order matters: context lines name pods).

    `version` is the descheduler that wrote it: its own message table is used (see
    `table_for`); a fallback is noted in `RoundResult.errors`, never silent.
    """
    table, note = table_for(version)
    parser = _Parser(table)
    for line in lines:
        parser.feed(line)
    if note:
        parser.result.errors.append(note)
    return parser.result


def parse_log(text: str, version: str | None = None) -> RoundResult:
    """Parse a whole captured descheduler log (see `parse_lines`)."""
    return parse_lines(text.splitlines(), version)


def summarize(result: RoundResult, namespace: str | None = None) -> dict[str, Any]:
    """JSON-ready digest for reports: counts per fate, who moved, which layers stopped pods."""
    ds = result.decisions if namespace is None else result.in_namespace(namespace)
    moved = (Fate.EVICTED, Fate.DRY_RUN)
    return {
        "counts": result.counts(namespace),
        "evicted": sorted({d.key for d in ds if d.fate is Fate.EVICTED}),
        "would_evict": sorted({d.key for d in ds if d.fate is Fate.DRY_RUN}),
        "stopped_by": sorted({d.layer.value for d in ds if d.fate not in moved}),
        "dry_run": result.dry_run,
        "skipped": result.skipped,
        "total_evicted": result.total_evicted,
        "eviction_requests": result.eviction_requests,
        "errors": len(result.errors),
        "unparsed": result.unparsed,
    }
