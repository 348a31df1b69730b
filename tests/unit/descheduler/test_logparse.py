"""logparse against descheduler v0.36.0 JSON lines built from the source's own keys.

Lines follow component-base logs/json (json.go:67-94) as zapr writes them: ts, caller, msg,
then logger.WithValues keys, then "v" (Info only; errors have none and carry "err"), then the
call's keys.  klog.KObj renders {"name","namespace"}.  Paths below are under
sigs.k8s.io/descheduler@v0.36.0/pkg/ unless stated.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer
from pytest_desched.descheduler.logparse import (
    MSG_RULES,
    _Parser,
    check_id,
    classify_api_error,
    parse_lines,
    parse_log,
    split_checks,
    summarize,
)

NA = "RemovePodsViolatingNodeAffinity"
DE = {"plugin": "DefaultEvictor"}


def line(msg: str, v: int | None = None, ctx: dict[str, Any] | None = None, **kv: Any) -> str:
    """One JSON log line; v=None makes it an error line (klog.ErrorS / logger.Error)."""
    rec: dict[str, Any] = {"ts": 1752570000123.456, "caller": "x.go:1", "msg": msg}
    rec.update(ctx or {})
    if v is not None:
        rec["v"] = v
    rec.update(kv)
    return json.dumps(rec)


def pod(name: str, ns: str = "demo") -> dict[str, str]:
    return {"name": name, "namespace": ns}


# descheduler/evictions/evictions.go:589 klog.V(1).InfoS("Evicted pod", pod, reason, strategy,
# node, profile)
EVICTED = line(
    "Evicted pod", 1, pod=pod("web-1"), reason="", strategy=NA, node="n1", profile="safe"
)
# descheduler/evictions/evictions.go:587 same keys, dry run
DRY = line(
    "Evicted pod in dry run mode",
    1,
    pod=pod("web-2"),
    reason="",
    strategy=NA,
    node="n1",
    profile="safe",
)
# evictions.go:560 klog.ErrorS(err, "Error evicting pod", pod, reason); err wrapped at :660,
# text from kubernetes pkg/registry/core/pod/storage/eviction.go:436
PDB_429 = line(
    "Error evicting pod",
    err='error when evicting pod (ignoring) "web-3": '
    "Cannot evict pod as it would violate the pod's disruption budget.",
    pod=pod("web-3"),
    reason="",
)
# evictions.go:560; RBAC denial is a NewForbidden text (apimachinery api/errors/errors.go:216)
RBAC_403 = line(
    "Error evicting pod",
    err='pods "web-4" is forbidden: User "system:serviceaccount:kube-system:descheduler" '
    'cannot create resource "pods/eviction" in API group "" in the namespace "demo"',
    pod=pod("web-4"),
    reason="",
)
# evictions.go:549 ErrorS(err, .., limit, namespace, pod); err: evictions/errors.go:24
NS_LIMIT = line(
    "Error evicting pod",
    err="maximum number of evicted pods per namespace reached",
    limit=1,
    namespace="demo",
    pod=pod("web-5"),
)
# evictions.go:534 ErrorS(err, .., limit, node) -- no pod; err: evictions/errors.go:8
NODE_LIMIT = line(
    "Error evicting pod", err="maximum number of evicted pods per node reached", limit=2, node="n1"
)
# evictions.go:519 ErrorS(err, .., limit) -- no pod, no node; err: evictions/errors.go:38
TOTAL_LIMIT = line(
    "Error evicting pod",
    err="maximum number of evicted pods per a descheduling cycle reached",
    limit=3,
)
# framework/plugins/removepodsviolatingnodeaffinity/node_affinity.go:125 d.logger (plugin) V(2)
PROCESSING_N1 = line("Processing node", 2, {"plugin": NA}, node={"name": "n1"})
# node_affinity.go:143 d.logger.V(1).Info("Evicting pod", pod)
EVICTING_6 = line("Evicting pod", 1, {"plugin": NA}, pod=pod("web-6"))
# node_affinity.go:154 d.logger.Error(err, "eviction failed")
ECHO_NS = line(
    "eviction failed",
    None,
    {"plugin": NA},
    err="maximum number of evicted pods per namespace reached",
)
# framework/plugins/defaultevictor/defaultevictor.go:497 V(4) Info(.., pod, checks) with
# logger keys plugin, ExtensionPoint=Filter; checks = utilerrors.NewAggregate(..).Error(), texts
# from defaultevictor/constraints.go:87 (minPodAge) and :39 (labelSelector)
FILTER_2 = line(
    "Pod fails the following checks",
    4,
    {**DE, "ExtensionPoint": "Filter"},
    pod=pod("young"),
    checks="[pod age is not older than MinPodAge: 1h0m0s seconds, "
    "pod labels do not match the labelSelector filter in the policy parameter]",
)
# descheduler/node/node.go:189 klog.V(4).InfoS("Pod does not fit on node", pod, node, err);
# err from node.go:144
NOFIT_N2 = line(
    "Pod does not fit on node",
    4,
    pod=pod("stuck"),
    node={"name": "n2"},
    err="pod node selector does not match the node label",
)
# defaultevictor.go:445 logger.Info (V0!) with plugin, ExtensionPoint=PreEvictionFilter, pod
NODEFIT = line(
    "pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked "
    "as unschedulable",
    0,
    {**DE, "ExtensionPoint": "PreEvictionFilter"},
    pod=pod("stuck"),
)
# framework/profile/profile.go:387 V(1) "Total number of evictions/requests"
PLUGIN_DONE = line(
    "Total number of evictions/requests",
    1,
    **{"extension point": "Deschedule", "evictedPods": 1, "evictionRequests": 0},
)
# descheduler/descheduler.go:252 V(1) InfoS(.., totalEvicted, evictionRequests)
TOTALS = line("Number of evictions/requests", 1, totalEvicted=1, evictionRequests=0)
# descheduler/descheduler.go:281 klog.InfoS (V0) with found
SKIP = line("Skipping descheduling cycle: requires >=2 nodes", 0, found=1)


def one(*lines: str) -> Any:
    result = parse_lines(lines)
    assert len(result.decisions) == 1, result.decisions
    return result.decisions[0]


def test_every_rule_kind_has_a_handler() -> None:
    for msg, rule in MSG_RULES.items():
        assert hasattr(_Parser, "_on_" + rule.kind.replace("-", "_")), msg


def test_evicted() -> None:
    d = one(EVICTED)
    assert (d.key, d.fate, d.layer) == ("demo/web-1", Fate.EVICTED, Layer.API_SERVER)
    assert (d.node, d.strategy, d.profile, d.reason) == ("n1", NA, "safe", None)
    assert parse_lines([EVICTED]).dry_run is False


def test_dry_run_eviction_sets_dry_run() -> None:
    result = parse_lines([DRY])
    assert result.dry_run is True
    assert (result.decisions[0].fate, result.decisions[0].layer) == (Fate.DRY_RUN, Layer.DRY_RUN)


@pytest.mark.parametrize(
    "text",
    [
        # descheduler/descheduler.go:427 klog.V(3).Infof (no keys)
        line("Building a cached client from the cluster for the dry run", 3),
        # a wrapper echoing the command line (the binary itself logs no flags)
        "+ descheduler --policy-config-file=/p.yaml --dry-run --v=4",
        '{"msg":"FLAG: --dry-run=\\"true\\"","v":1}',
    ],
)
def test_dry_run_seen_at_startup(text: str) -> None:
    assert parse_log(text).dry_run is True


@pytest.mark.parametrize(
    "text",
    [
        "+ descheduler --dry-run=false --v=4",
        # cobra usage printed after a RunE error (cmd/descheduler/app/options/options.go:115)
        "      --dry-run                      Execute descheduler in dry run mode.",
    ],
)
def test_no_false_dry_run(text: str) -> None:
    assert parse_log(text).dry_run is False


def test_pdb_refusal_is_429() -> None:
    d = one(PDB_429)
    assert (d.key, d.fate, d.layer) == ("demo/web-3", Fate.REFUSED, Layer.API_SERVER)
    assert (d.status_code, d.reason) == (429, "TooManyRequests")
    assert "disruption budget" in d.message


def test_rbac_refusal_is_403() -> None:
    d = one(RBAC_403)
    assert (d.fate, d.status_code, d.reason) == (Fate.REFUSED, 403, "Forbidden")
    assert d.message.startswith('pods "web-4" is forbidden')


@pytest.mark.parametrize(
    ("err", "code", "reason"),
    [
        ('pod not found when evicting "x": pods "x" not found', 404, "NotFound"),  # :663
        (
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
            500,
            None,
        ),  # kubernetes eviction.go:226
        ("Operation cannot be fulfilled on poddisruptionbudgets.policy", 409, "Conflict"),
        ("dial tcp 10.96.0.1:443: connect: connection refused", None, None),
    ],
)
def test_classify_api_error(err: str, code: int | None, reason: str | None) -> None:
    assert classify_api_error(err) == (code, reason)


def test_unknown_api_error_is_error_at_api_layer() -> None:
    d = one(line("Error evicting pod", err="connection refused", pod=pod("p"), reason=""))
    assert (d.fate, d.layer, d.status_code) == (Fate.ERROR, Layer.API_SERVER, None)


def test_namespace_limit_names_the_pod() -> None:
    d = one(NS_LIMIT)
    assert (d.key, d.fate, d.layer) == ("demo/web-5", Fate.LIMITED, Layer.LIMITS)
    assert d.reason == "maxNoOfPodsToEvictPerNamespace"
    assert d.message.endswith("(limit=1)")


def test_node_limit_takes_pod_from_evicting_pod_line() -> None:
    result = parse_lines([PROCESSING_N1, EVICTING_6, NODE_LIMIT])
    (d,) = result.decisions
    assert (d.key, d.fate, d.node, d.strategy) == ("demo/web-6", Fate.LIMITED, "n1", NA)
    assert d.reason == "maxNoOfPodsToEvictPerNode"


def test_total_limit_without_candidate_is_kept_unattributed() -> None:
    d = one(TOTAL_LIMIT)
    assert (d.namespace, d.name, d.fate) == ("", "", Fate.LIMITED)
    assert d.reason == "maxNoOfPodsToEvictTotal"


def test_candidate_is_consumed_by_its_outcome() -> None:
    evicted6 = line("Evicted pod", 1, pod=pod("web-6"), reason="", strategy=NA, node="n1")
    result = parse_lines([EVICTING_6, evicted6, TOTAL_LIMIT])
    assert [d.key for d in result.decisions] == ["demo/web-6", "/"]


def test_eviction_failed_echo_is_absorbed() -> None:
    result = parse_lines([EVICTING_6, NS_LIMIT, ECHO_NS])
    assert [d.fate for d in result.decisions] == [Fate.LIMITED]
    assert result.errors == []
    # without a failure just before, the same msg is a real error
    assert parse_lines([ECHO_NS]).errors == [
        "eviction failed: maximum number of evicted pods per namespace reached"
    ]


def test_filter_with_several_checks() -> None:
    d = one(PROCESSING_N1, FILTER_2)
    assert (d.key, d.fate, d.layer) == ("demo/young", Fate.FILTERED, Layer.EVICTOR_FILTER)
    assert d.checks == ["minPodAge", "labelSelector"]
    assert (d.node, d.strategy) == ("n1", NA)  # from the "Processing node" context
    assert d.message.startswith("[pod age is not older")


def test_filter_single_check_is_bare() -> None:
    # defaultevictor.go:358; a single aggregated error has no brackets
    d = one(
        line(
            "Pod fails the following checks",
            4,
            pod=pod("solo"),
            checks="pod does not have a PodDisruptionBudget and is protected against eviction",
        )
    )
    assert d.checks == ["PodsWithoutPDB"]


def test_split_checks_keeps_commas_inside_wrapped_errors() -> None:
    # defaultevictor.go:355 wraps an arbitrary error with ": %w"
    raw = (
        "[daemonset pods are protected against eviction, unable to check if pod is covered "
        "by PodDisruptionBudget: a, b, owner has 1 replicas which is less than minReplicas of 2]"
    )
    parts = split_checks(raw)
    assert len(parts) == 3
    assert [check_id(p) for p in parts] == ["DaemonSetPods", "PodsWithoutPDB", "minReplicas"]
    assert check_id("some future check") == "some future check"


def test_nodefit_rejection_with_per_node_reasons() -> None:
    d = one(PROCESSING_N1, NOFIT_N2, NODEFIT)
    assert (d.key, d.fate, d.layer) == ("demo/stuck", Fate.NODEFIT, Layer.EVICTOR_NODEFIT)
    assert d.checks == ["nodeFit"]
    assert "n2: pod node selector does not match the node label" in d.message


def test_namespace_label_selector_rejection() -> None:
    # defaultevictor.go:460 logger.Info (V0) in PreEvictionFilter
    d = one(
        line(
            "pod namespace do not match the namespaceLabelSelector filter in the policy parameter",
            0,
            {**DE, "ExtensionPoint": "PreEvictionFilter"},
            pod=pod("other", "ops"),
        )
    )
    assert (d.fate, d.checks) == (Fate.FILTERED, ["namespaceLabelSelector"])


def test_missing_uid_logs_the_whole_pod() -> None:
    # evictions.go:491 klog.InfoS(.., "pod", pod) -- the full v1.Pod, not klog.KObj
    full = {"metadata": {"name": "nouid", "namespace": "demo"}, "spec": {"nodeName": "n1"}}
    d = one(line("Ignoring pod eviction due to missing UID", 0, pod=full))
    assert (d.key, d.fate) == ("demo/nouid", Fate.ERROR)


def test_pod_seen_again_keeps_every_decision() -> None:
    # node_affinity.go:85 runs processNodes once per nodeAffinityType: same Filter line twice
    result = parse_lines([FILTER_2, PLUGIN_DONE, FILTER_2])
    assert [d.fate for d in result.for_pod("demo", "young")] == [Fate.FILTERED] * 2


def test_plugin_done_clears_context() -> None:
    d = parse_lines([PROCESSING_N1, PLUGIN_DONE, FILTER_2]).decisions[0]
    assert (d.node, d.strategy) == (None, None)


def test_skip_with_fewer_than_two_nodes() -> None:
    result = parse_lines([SKIP, TOTALS])
    assert result.skipped == "Skipping descheduling cycle: requires >=2 nodes (found=1)"
    assert result.decisions == []


def test_totals_line() -> None:
    result = parse_lines([TOTALS])
    assert (result.total_evicted, result.eviction_requests) == (1, 0)


def test_non_json_and_unmapped_lines() -> None:
    text = "\n".join(
        [
            "I0715 10:00:00.000000       1 secure_serving.go:57] Serving securely",
            "panic: runtime error: invalid memory address",
            "{not json",
            "",
            line("Some future info line", 2),
            # profile.go:240 ErrorS(err, "unable to initialize a plugin", pluginName)
            line("unable to initialize a plugin", err="boom", pluginName="X"),
        ]
    )
    result = parse_log(text)
    assert (result.lines, result.unparsed) == (5, 3)
    assert result.errors == ["unable to initialize a plugin: boom"]


def test_empty_input() -> None:
    result = parse_log("")
    assert (result.lines, result.unparsed, result.decisions) == (0, 0, [])
    assert result.total_evicted is None and result.dry_run is False


# A whole RemovePodsViolatingNodeAffinity round in the order v0.36.0 writes it.
FULL_RUN = [
    "W0715 10:00:00.000000       1 client_config.go:667] Neither --kubeconfig nor --master",
    PROCESSING_N1,
    FILTER_2,
    NOFIT_N2,
    NODEFIT,
    EVICTING_6,
    line("Evicted pod", 1, pod=pod("web-6"), reason="", strategy=NA, node="n1", profile="safe"),
    line("Evicting pod", 1, {"plugin": NA}, pod=pod("web-3")),
    PDB_429,
    line("eviction failed", None, {"plugin": NA}, err=json.loads(PDB_429)["err"]),
    line("Evicting pod", 1, {"plugin": NA}, pod=pod("web-7")),
    NODE_LIMIT,
    PLUGIN_DONE,
    TOTALS,
]


def test_full_round() -> None:
    result = parse_lines(FULL_RUN)
    got = [(d.key, d.fate) for d in result.decisions]
    assert got == [
        ("demo/young", Fate.FILTERED),
        ("demo/stuck", Fate.NODEFIT),
        ("demo/web-6", Fate.EVICTED),
        ("demo/web-3", Fate.REFUSED),
        ("demo/web-7", Fate.LIMITED),
    ]
    assert (result.unparsed, result.errors, result.total_evicted) == (1, [], 1)
    assert summarize(result) == {
        "counts": {"filtered": 1, "nodefit": 1, "evicted": 1, "refused": 1, "limited": 1},
        "evicted": ["demo/web-6"],
        "would_evict": [],
        "stopped_by": [
            "api-server",
            "eviction-limits",
            "evictor-filter",
            "evictor-prefilter-nodefit",
        ],
        "dry_run": False,
        "skipped": None,
        "total_evicted": 1,
        "eviction_requests": 0,
        "errors": 0,
        "unparsed": 1,
    }


def test_summarize_by_namespace() -> None:
    result = parse_lines([EVICTED, DRY, line("Evicted pod", 1, pod=pod("x", "ops"), node="n2")])
    s = summarize(result, namespace="demo")
    assert s["counts"] == {"evicted": 1, "dry-run": 1}
    assert (s["evicted"], s["would_evict"], s["stopped_by"]) == (["demo/web-1"], ["demo/web-2"], [])


def test_the_log_table_is_chosen_by_descheduler_version() -> None:
    from pytest_desched.descheduler.logparse import V0_36, table_for

    assert table_for("v0.36.0") == (V0_36, None)
    assert table_for("v0.36.4") == (V0_36, None)
    table, note = table_for("v0.37.1")
    assert table is V0_36 and note and "v0.37.1" in note and "never guessed" in note
    line = '{"msg":"Number of evictions/requests","v":1,"totalEvicted":0,"evictionRequests":0}'
    assert parse_log(line, "v0.37.1").errors == [note]
    assert parse_log(line, "v0.36.0").errors == []


def test_v0330s_filter_texts_and_cluster_size_abort_have_their_own_table() -> None:
    """v0.33.0 words four protections and its too-few-nodes abort its own way (read from its
    release tree); parsed with the v0.36 table they stayed verbatim, so #1882's signature
    (checks exactly [PodsWithoutPDB]) could never be seen on a v0.33.0 round."""
    checks = (
        "[pod is related to daemonset and descheduler is not configured with evictDaemonSetPods, "
        "pod has a PVC and descheduler is configured to ignore PVC pods, "
        "no PodDisruptionBudget found for pod]"
    )
    line = {"ts": 1, "v": 4, "msg": "Pod fails the following checks", "checks": checks}
    line["pod"] = {"name": "web-a", "namespace": "lab"}
    res = parse_log(json.dumps(line), "v0.33.0")
    assert [d.checks for d in res.decisions] == [["DaemonSetPods", "PodsWithPVC", "PodsWithoutPDB"]]
    abort = "The cluster size is 0 or 1 meaning eviction causes service disruption or degradation. So aborting.."
    assert parse_log(json.dumps({"ts": 1, "v": 1, "msg": abort}), "v0.33.0").skipped
