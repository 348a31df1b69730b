"""Evidence must be derived from the log, written completely, and shareable without leaks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_desched.descheduler.decisions import Fate, Layer, PodDecision, RoundResult
from pytest_desched.evidence import (
    EvidenceWriter,
    Redactor,
    RoundRecord,
    junit_properties,
    scrub_secrets,
    summary_line,
)

NODES = ["prod-eu-worker-1", "prod-eu-worker-10"]
NAMESPACE = "payments-live"

JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXBhcnQ"
SECRETS = {
    "jwt": JWT,
    "bearer": "s3cr3t-opaque-bearer-value",
    "token": "opaque-token-7731",
    "json_token": "json-token-9912",
    "cert": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=",
    "key": "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlF",
    "ca": "LS0tLS1DQUNFUlQtREFUQS0tLS0t",
    "hex_password": "8f14e45fceea167a5a36dedd4bea2543",
    "client_secret": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==",
}
SECRET_TEXT = f"""\
level=info token: {SECRETS["token"]}
Authorization: Bearer {SECRETS["bearer"]}
{{"msg":"auth","token": "{SECRETS["json_token"]}", "sa": "{SECRETS["jwt"]}"}}
users:
- name: admin
  user:
    client-certificate-data: {SECRETS["cert"]}
    client-key-data: {SECRETS["key"]}
clusters:
- cluster:
    certificate-authority-data: {SECRETS["ca"]}
    server: https://10.0.0.1:6443
db_password={SECRETS["hex_password"]}
client_secret: {SECRETS["client_secret"]}
secretName: descheduler-sa
automountServiceAccountToken: false
"""


def decision(ns: str, name: str, fate: Fate, layer: Layer, **kw: object) -> PodDecision:
    return PodDecision(namespace=ns, name=name, fate=fate, layer=layer, **kw)  # type: ignore[arg-type]


def mixed_result(evicted: bool = True) -> RoundResult:
    ds = decision("kube-system", "kindnet-x", Fate.FILTERED, Layer.EVICTOR_FILTER, checks=["ds"])
    decisions = [
        ds,
        decision(
            NAMESPACE,
            "api-1",
            Fate.REFUSED,
            Layer.API_SERVER,
            status_code=429,
            reason="TooManyRequests",
            node=NODES[0],
        ),
        decision(NAMESPACE, "api-2", Fate.LIMITED, Layer.LIMITS, node=NODES[0]),
        decision(NAMESPACE, "api-3", Fate.NODEFIT, Layer.EVICTOR_NODEFIT),
        decision(NAMESPACE, "api-4", Fate.ERROR, Layer.POLICY, reason="boom"),
        decision(NAMESPACE, "api-5", Fate.DRY_RUN, Layer.DRY_RUN),
        ds,
    ]
    if evicted:
        decisions.insert(1, decision(NAMESPACE, "api-0", Fate.EVICTED, Layer.API_SERVER))
    return RoundResult(decisions=decisions, total_evicted=2, errors=["lost lease"])


def full_record(**kw: object) -> RoundRecord:
    fields: dict[str, object] = dict(
        versions={"descheduler": "v0.31.0"},
        chart={"source": "repo", "version": "0.31.0", "app_version": "0.31.0", "digest": "sha"},
        policy_digest="ab" * 32,
        policy_overrides=[{"path": "x.nodeFit", "old": False, "new": True, "why": "exp 4"}],
        job={
            "name": "desched-1",
            "uid": "u-1",
            "namespace": NAMESPACE,
            "succeeded": 1,
            "exit_code": 0,
        },
        started_s=1.0,
        ended_s=9.5,
        caps={"perNode": 1, "perNamespace": None, "total": 2},
        replacement_ready_latency_s=1.25,
        pdb_before={"name": "api", "disruptionsAllowed": 1},
        pdb_after={"name": "api", "status": {"disruptionsAllowed": 0}},
        pdb_min_disruptions_allowed_seen=0,
        events=[
            {
                "reason": "Evicted",
                "type": "Normal",
                "kind": "Pod",
                "name": "api-0",
                "uid": "p0",
                "count": 1,
                "message": f"evicted from {NODES[0]} in {NAMESPACE}",
            },
            {
                "reason": "Scheduled",
                "type": "Normal",
                "kind": "Pod",
                "name": "api-0b",
                "uid": "p1",
                "count": 1,
                "message": f"assigned {NAMESPACE}/api-0b to {NODES[1]}",
            },
            {"reason": "Evicted", "type": "Normal", "kind": "Pod", "name": "api-0", "uid": "p0"},
        ],
        pending_pods=[f"{NAMESPACE}/api-9"],
        distribution_before={NODES[0]: 3, NODES[1]: 0},
        distribution_after={NODES[0]: 2, NODES[1]: 1},
        metrics={"available": False, "why": "metrics port not exposed"},
        log_path=f"/tmp/logs/{NODES[0]}/desched.log",
    )
    fields.update(kw)
    return RoundRecord.from_round("pdb-blocks", "round-1", "kind", mixed_result(), **fields)


def all_written(root: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(root.rglob("*")) if p.is_file())


# --- from_round -------------------------------------------------------------------------------


def test_from_round_derives_figures_from_the_log() -> None:
    rec = RoundRecord.from_round("exp", "r1", "kind", mixed_result())
    assert rec.evictions == 1
    assert rec.counts == {
        "filtered": 2,
        "evicted": 1,
        "refused": 1,
        "limited": 1,
        "nodefit": 1,
        "error": 1,
        "dry-run": 1,
    }
    assert [(f["pod"], f["status_code"], f["layer"]) for f in rec.failures] == [
        (f"{NAMESPACE}/api-1", 429, "api-server"),
        (f"{NAMESPACE}/api-2", None, "eviction-limits"),
        (f"{NAMESPACE}/api-4", None, "policy"),
    ]
    # Order of first appearance, unique, without evicted/dry-run layers.
    assert rec.blocking_layers == [
        "evictor-filter",
        "api-server",
        "eviction-limits",
        "evictor-prefilter-nodefit",
        "policy",
    ]
    assert rec.decisions[1]["fate"] == "evicted" and rec.decisions[1]["layer"] == "api-server"
    assert rec.verdict == "evicted"
    assert any("reports 2 evictions, 1" in n for n in rec.notes)
    assert "error without pod: lost lease" in rec.notes


def test_verdict_names_the_furthest_layer_not_bystanders() -> None:
    result = RoundResult(
        decisions=[
            decision("kube-system", "kindnet-x", Fate.FILTERED, Layer.EVICTOR_FILTER),
            decision("app", "web-1", Fate.NODEFIT, Layer.EVICTOR_NODEFIT),
        ]
    )
    rec = RoundRecord.from_round("exp", "r1", "kind", result)
    assert rec.blocking_layers == ["evictor-filter", "evictor-prefilter-nodefit"]
    assert rec.verdict == "stopped-by:evictor-prefilter-nodefit"
    assert rec.deciding_layer == "evictor-prefilter-nodefit"
    with pytest.raises(TypeError, match="verdict"):  # one rule: callers cannot supply it
        RoundRecord.from_round("e", "r", "k", result, verdict="custom")
    assert RoundRecord.from_round("e", "r", "k", RoundResult()).verdict == "no-candidates"


def test_lab_namespace_decides_not_kube_system_bystanders() -> None:
    """A namespace-exclude run: only kube-system pods were touched; the lab's verdict stands."""
    result = RoundResult(
        decisions=[
            decision("kube-system", "coredns-x", Fate.EVICTED, Layer.API_SERVER),
            decision("lab", "web-1", Fate.FILTERED, Layer.EVICTOR_FILTER),
        ]
    )
    rec = RoundRecord.from_round("e", "r", "k", result, namespace="lab")
    assert rec.verdict == "stopped-by:evictor-filter" and rec.evictions == 0
    assert [d["name"] for d in rec.decisions] == ["web-1"]
    assert rec.cluster_counts == {"evicted": 1, "filtered": 1}


@pytest.mark.parametrize(
    ("replacement", "verdict", "label"),
    [
        ("ready", "evicted", "api-server(evicted)"),
        ("missing", "stopped-by:controller", "controller"),
        ("pending", "stopped-by:scheduler", "scheduler"),
    ],
)
def test_after_an_eviction_the_controller_and_scheduler_links_decide(
    replacement, verdict, label
) -> None:
    result = RoundResult(decisions=[decision("lab", "web-1", Fate.EVICTED, Layer.API_SERVER)])
    rec = RoundRecord.from_round("e", "r", "k", result, namespace="lab", replacement=replacement)
    assert (rec.verdict, rec.deciding_layer) == (verdict, label)


def test_a_skipped_round_says_skipped_and_why() -> None:
    rec = RoundRecord.from_round("e", "r", "k", RoundResult(skipped="requires >=2 nodes (found=1)"))
    assert rec.verdict == "skipped:requires >=2 nodes (found=1)"
    assert rec.deciding_layer == "skipped"


def test_from_round_refuses_caller_supplied_derived_figures() -> None:
    with pytest.raises(TypeError, match="evictions"):
        RoundRecord.from_round("e", "r", "k", mixed_result(), evictions=5)


def test_events_by_reason_dedupes_uids() -> None:
    rec = full_record()
    assert rec.events_by_reason == {"Evicted": ["p0"], "Scheduled": ["p1"]}
    assert rec.to_dict()["events_by_reason"] == rec.events_by_reason


# --- writer -----------------------------------------------------------------------------------


def test_write_round_writes_json_and_summary_that_round_trip(tmp_path: Path) -> None:
    rec = full_record()
    path = EvidenceWriter(tmp_path).write_round(rec)
    assert path == tmp_path / "pdb-blocks" / "round-1.json"
    assert RoundRecord.from_dict(json.loads(path.read_text())) == rec
    txt = (tmp_path / "pdb-blocks" / "round-1.txt").read_text()
    assert 10 <= len(txt.splitlines()) <= 20
    for expected in (
        "verdict=evicted",
        "evictions: 1 (caps perNode=1 perNamespace=- total=2)",
        "429 TooManyRequests (api-server)",
        "Ready latency: 1.2s",
        "before=1 after=0 min seen=0",
        f"{NODES[0]} 3->2, {NODES[1]} 0->1",
        "metrics: unavailable (metrics port not exposed)",
        "x.nodeFit: False -> True (exp 4)",
    ):
        assert expected in txt


def test_a_record_amended_later_is_rewritten_in_place_with_its_fidelity_line(
    tmp_path: Path,
) -> None:
    """A fidelity run's real half: written first, then given the comparison and rewritten."""
    writer = EvidenceWriter(tmp_path)
    rec = full_record()
    path = writer.write_round(rec)
    assert "dry-run fidelity" not in path.with_suffix(".txt").read_text()
    d = rec.to_dict()
    d["fidelity"] = {"summary": "dry-run predicted 1 of 1 real evictions", "half": "real"}
    assert writer.write_round(d) == path
    assert json.loads(path.read_text())["fidelity"]["half"] == "real"
    txt = path.with_suffix(".txt").read_text()
    assert "dry-run fidelity (real half): dry-run predicted 1 of 1 real evictions" in txt


def test_redaction_leaves_no_original_name_in_any_file(tmp_path: Path) -> None:
    redactor = Redactor(node_names=NODES, namespaces=[NAMESPACE])
    writer = EvidenceWriter(tmp_path, redactor)
    rec = replace(full_record(), experiment=f"drain-{NODES[0]}")
    writer.write_round(rec)
    writer.write_text(rec.experiment, "events", f"Evicted {NAMESPACE}/api-0 on {NODES[1]}\n")
    writer.write_json(rec.experiment, "pods", {NODES[1]: [f"{NAMESPACE}/api-0"]})

    names = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")]
    everything = all_written(tmp_path) + "\n".join(names)
    assert "prod-eu" not in everything and "payments" not in everything
    data = json.loads((tmp_path / "drain-node-1" / "round-1.json").read_text())
    assert data["distribution_after"] == {"node-1": 2, "node-2": 1}  # keys redacted
    assert data["failures"][0]["pod"] == "ns-1/api-1"
    assert data["log_path"] == "/tmp/logs/node-1/desched.log"


@pytest.mark.parametrize("order", [["worker-1", "worker-10"], ["worker-10", "worker-1"]])
def test_prefix_names_do_not_clobber_each_other(order: list[str]) -> None:
    r = Redactor(node_names=order)
    alias = r.mapping
    text = "worker-1 worker-10, worker-1. worker-100 on worker-1/x"
    assert r.redact(text) == (
        f"{alias['worker-1']} {alias['worker-10']}, {alias['worker-1']}. worker-100"
        f" on {alias['worker-1']}/x"
    )


def test_redactor_aliases_are_stable_and_extendable() -> None:
    r = Redactor(node_names=["a-node"], namespaces=["team"], extra=["corp-cluster"])
    assert r.register_node("b-node") == "node-2"
    assert r.register_node("a-node") == "node-1"
    assert r.register_namespace("other") == "ns-2"
    assert r.redact({"a-node": ["team/x", "b-node"], "c": "corp-cluster"}) == {
        "node-1": ["ns-1/x", "node-2"],
        "c": "redacted-1",
    }
    assert r.redact("teams team-a") == "teams ns-1-a"


def test_disabled_redactor_keeps_names_but_scrubs_secrets(tmp_path: Path) -> None:
    off = Redactor.disabled()
    off.register_node("worker-1")
    assert off.redact({"worker-1": "ns/p"}) == {"worker-1": "ns/p"}

    writer = EvidenceWriter(tmp_path)  # default redactor: disabled
    text = writer.write_text("exp", "kubeconfig", SECRET_TEXT).read_text()
    blob = writer.write_json(
        "exp",
        "env",
        {
            "token": "tok-1234",
            "env": [
                {"name": "API_TOKEN", "value": "env-secret-1"},
                {"name": "MODE", "value": "fast"},
            ],
        },
    )
    written = all_written(tmp_path)
    for secret in [*SECRETS.values(), "tok-1234", "env-secret-1"]:
        assert secret not in written
    # Non-secrets survive: a scrubber that blanks everything would hide the evidence.
    for kept in (
        "server: https://10.0.0.1:6443",
        "secretName: descheduler-sa",
        "automountServiceAccountToken: false",
        "Authorization: Bearer <redacted>",
    ):
        assert kept in text
    assert json.loads(blob.read_text())["env"][1]["value"] == "fast"


def test_scrub_secrets_on_plain_text() -> None:
    assert scrub_secrets(f"sa={JWT} x") == "sa=<redacted> x"
    assert scrub_secrets('{"token": "abc"}') == '{"token": "<redacted>"}'
    assert scrub_secrets("tokenExpirationSeconds: 3600") == "tokenExpirationSeconds: 3600"
    assert scrub_secrets("cert: -----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----") == (
        "cert: <redacted>"
    )


def test_text_artifacts_are_capped_with_an_explicit_marker(tmp_path: Path) -> None:
    writer = EvidenceWriter(tmp_path, max_bytes=1000)
    text = "HEAD\n" + "x" * 10_000 + "\nTAIL"
    out = writer.write_text("exp", "desched.log", text).read_text()
    assert len(out.encode()) <= 1000
    assert "TRUNCATED" in out and out.startswith("HEAD") and out.endswith("TAIL")
    small = writer.write_text("exp", "small", "short").read_text()
    assert small == "short"


def test_json_artifacts_stay_valid_json_when_capped(tmp_path: Path) -> None:
    writer = EvidenceWriter(tmp_path, max_bytes=2000)
    path = writer.write_json("exp", "pods", [{"name": f"p-{i}", "q": '"'} for i in range(500)])
    raw = path.read_text()
    assert len(raw.encode()) <= 2000
    data = json.loads(raw)
    assert data["truncated"] is True and "TRUNCATED" in data["content"]


def test_an_audit_trail_json_is_written_whole(tmp_path: Path) -> None:
    writer = EvidenceWriter(tmp_path, max_bytes=2000)
    pods = [{"name": f"p-{i}", "q": '"'} for i in range(500)]
    path = writer.write_json("replay", "replay", pods, capped=False)
    assert len(path.read_bytes()) > 2000 and json.loads(path.read_text()) == pods


@pytest.mark.parametrize(
    ("experiment", "name"),
    [("../../outside", "../../../etc/passwd"), ("/abs", "/etc/passwd"), ("..", "..")],
)
def test_names_cannot_escape_the_root(tmp_path: Path, experiment: str, name: str) -> None:
    root = tmp_path / "evidence"
    path = EvidenceWriter(root).write_text(experiment, name, "x")
    assert path.resolve().is_relative_to(root.resolve())
    assert path.parent.parent == root
    assert list(tmp_path.iterdir()) == [root]


# --- summaries --------------------------------------------------------------------------------


def test_summary_line_and_junit_properties() -> None:
    rec = full_record()
    d = rec.to_dict()
    assert summary_line({**d, "outcome": "passed"}) == (
        "pdb-blocks  PASSED  evictions=1/2  layer=api-server(evicted)  ready=1.2s"
    )
    blocked = RoundRecord.from_round("e", "r", "k", mixed_result(evicted=False)).to_dict()
    assert summary_line({"name": "pdb", "outcome": "xfailed", "rounds": [d, blocked]}) == (
        "pdb  XFAIL  evictions=1/-  layer=api-server  ready=1.2s"
    )
    # JUnit shows the same deciding layer as the terminal line (one rule), not a bystander's.
    assert dict(junit_properties(rec)) == {
        "evictions": "1",
        "blocking_layer": "api-server(evicted)",
        "ready_latency_s": "1.25",
        "policy_digest": "abababababab",
        "job_uid": "u-1",
        "pdb_disruptions_allowed_after": "0",
    }


@pytest.mark.policycheck
def test_round_record_carries_the_effective_policy_and_its_lint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the descheduler ran (after its defaults) and the lint for that version, in every
    round record, computed once per live policy."""
    from pytest_desched.descheduler.policy import checker_for, load_default
    from pytest_desched.evidence import timeline

    live = load_default().to_yaml()
    checker = checker_for("v0.36.0")
    runs: list[int] = []
    run = checker._run
    monkeypatch.setattr(checker, "_run", lambda reqs, t: runs.append(len(reqs)) or run(reqs, t))
    monkeypatch.setattr(timeline, "_POLICY_EVIDENCE", {})
    first = timeline.policy_evidence(live, "v0.36.0")
    seen = len(runs)
    same = live.replace("maxNoOfPodsToEvictTotal: 2", "maxNoOfPodsToEvictTotal: 2.0")
    assert timeline.policy_evidence(same, "v0.36.0") == first  # same digest: from memory
    assert len(runs) == seen
    plugins = first["effective_policy"]["profiles"][0]["plugins"]
    assert plugins["filter"]["enabled"] == ["DefaultEvictor"]  # the descheduler's default
    assert [f.split()[0] for f in first["policy_lint"]] == ["DL012"]
    rec = RoundRecord.from_round("e", "r", "k", RoundResult(), policy_applied=live, **first)
    back = RoundRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back.effective_policy == first["effective_policy"]
    assert back.policy_lint == first["policy_lint"]
    refused = timeline.policy_evidence("apiVersion: x\nkind: y\n", "v0.36.0")
    assert refused["effective_policy"] == {}
    assert refused["policy_lint"][0].startswith("DL001 rejected-by-descheduler")


@pytest.mark.policycheck
def test_the_round_record_takes_the_lint_apply_policy_made(monkeypatch):
    """Issue 30 item 4: the policy is linted once, by Release.apply_policy; the record takes
    that lint when the live policy is the one applied (same digest), and lints only a policy
    apply_policy did not lint (the chart's default, put back for dry-run rounds)."""
    from pytest_desched.descheduler.policy import digest_of_rendered
    from pytest_desched.descheduler.policy.model import load_default
    from pytest_desched.evidence import timeline

    live = load_default().to_yaml()
    digest = digest_of_rendered(live)
    lints: list[str] = []
    real = timeline.policy_evidence
    monkeypatch.setattr(
        timeline, "policy_evidence", lambda *a, **k: lints.append(a[0]) or real(*a, **k)
    )
    applied = {"digest": digest, "effective_policy": {"as": "applied"}, "policy_lint": ["DL999"]}
    got = timeline.live_policy_lint(live, digest, applied, "v0.36.0")
    assert got == {"effective_policy": {"as": "applied"}, "policy_lint": ["DL999"]}
    assert lints == []  # handed down: no second lint
    other = {**applied, "digest": "0" * 64}  # a different policy was applied: lint the live one
    fresh = timeline.live_policy_lint(live, digest, other, "v0.36.0")
    assert lints == [live] and [f.split()[0] for f in fresh["policy_lint"]] == ["DL012"]
    assert timeline.live_policy_lint(live, digest, None, "v0.36.0") == fresh
