"""Incident replay end to end: snapshot, restore, real rounds, the fate ledger (issue 12).

Real clusters only (embedded: real API server, controllers, scheduler and descheduler); no
fixed sleeps: every wait is on the API. Each test brings up its own replay cluster and
removes it (DeschedSession as a context manager).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched import Experiment
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.format import Snapshot, key
from pytest_desched.replay.capture.snapshot import take_snapshot
from pytest_desched.replay.gen.incidents import label_move, pdb_drain
from pytest_desched.replay.ledger import round_fates, undecided
from pytest_desched.replay.rebuild.plan import RUNNER_NODE
from pytest_desched.replay.run import replay

pytestmark = pytest.mark.desched_selftest

READ_VERBS = {"get", "list", "watch"}


def _context(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["current-context"]


def _fresh(desched_settings: Any, tmp_path: Path, name: str) -> Any:
    """The session's settings for a replay: always onto a fresh embedded cluster (the replay
    engine's rule), whatever provider the snapshot was taken from (kind in `make e2e-kind`)."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    return desched_settings.with_(
        run_dir=run_dir, artifacts=run_dir / "artifacts", provider="embedded"
    )


# -- a snapshot taken mid-experiment replays to the same fates --------------------------------
class SnapshotBeforeTheRound(Experiment):
    """The positive experiment's state (pods violating their affinity, PDB minAvailable 2),
    snapshotted right before the round; the round then runs as usual."""

    name = "replay-snapshot-midway"
    default_variant = "pdb-lister-workaround"
    snapshot_path: Path | None = None

    def arrange(self) -> None:
        self.before = self.r.arrange_violation(pdb_min_available=2)

    def act(self) -> None:
        cluster = self.ctx.cluster
        snap = take_snapshot(
            cluster.kubeconfig,
            _context(cluster.kubeconfig),
            kwokctl=cluster.toolchain.path("kwokctl"),
        )
        assert type(self).snapshot_path is not None
        snap.write(type(self).snapshot_path)
        self.view = self.r.run_round("descheduler-replay-midway")

    def assess(self) -> None:
        self.view.replacement = "ready"  # not what this test is about; the replay checks it


def test_snapshot_mid_experiment_replays_to_the_same_fates(
    desched_experiment: Any, desched_settings: Any, tmp_path: Path
) -> None:
    SnapshotBeforeTheRound.snapshot_path = tmp_path / "midway.yaml"
    result = desched_experiment(SnapshotBeforeTheRound)
    rnd = result.rounds[0]
    original = round_fates(rnd.result, rnd.logs)
    log = tmp_path / "incident.log"
    log.write_text(rnd.logs)

    snap = Snapshot.load(tmp_path / "midway.yaml")
    assert snap.header["takenWith"]["exporter"] == "kwokctl snapshot export"
    assert snap.header["descheduler"]["version"] == rnd_version(result)
    out = replay(
        tmp_path / "midway.yaml", log=log, config=_fresh(desched_settings, tmp_path, "replay")
    )
    assert out.restore["verified"]["ok"], out.restore["verified"]
    ns = result.records[0]["namespace"]  # the experiment's own (fresh per experiment)
    lab_pods = {p for p in out.restored_pods if p.startswith(f"{ns}/")}
    assert len(lab_pods) == 3
    replayed = out.ledger.fates(0)
    # Fates up to the order the caps cut in (the descheduler walks pods in informer order):
    comparison = out.ledger.comparison
    assert comparison is not None and comparison["same_fates_up_to_order"] is True, comparison
    assert comparison["same_refusals"] is True, comparison
    nodes = {key(p): p["spec"].get("nodeName") for p in snap.pods}
    orig = {p: original.get(p) or undecided(rnd.result, nodes[p]) for p in lab_pods}
    want = sorted((f.fate, f.layer) for f in orig.values())
    got = sorted((replayed[p].fate, replayed[p].layer) for p in lab_pods)
    assert got == want
    assert rnd.result.total_evicted == out.ledger.rounds[0].total_evicted
    assert Path(out.artifacts["json"]).is_file() and Path(out.artifacts["markdown"]).is_file()
    page = Path(out.artifacts["html"]).read_text()  # the replay's page opens with its answer
    assert '<p class="answer" id="answer" data-k="answer">replay: ' in page
    assert "fates up to order: the same" in page, page[:2000]
    assert page.count('data-k="pod"') == len(out.ledger.rows)


def rnd_version(result: Any) -> str:
    return result.records[0]["versions"]["descheduler"]


# -- the two generated incidents: the expected layer for every pod -----------------------------
@pytest.mark.parametrize("make", [label_move, pdb_drain], ids=["label-move", "pdb-drain"])
def test_generated_incident_replays_with_expected_layers(
    make: Any, desched_settings: Any, tmp_path: Path
) -> None:
    inc = make()
    path = inc.snapshot.write(tmp_path / f"{inc.name}.yaml")
    clusters: list[Any] = []
    placed: dict[str, Any] = {}

    def before_round(i: int, cluster: Any) -> dict[str, Any]:
        clusters.append(cluster)
        return {}

    def after_round(i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        # Where the round's pods ran, from the API: the runner node, never a snapshot node.
        pods = kubeapi.list_all(
            clusters[-1].api_client,
            f"/api/v1/namespaces/{rnd.namespace}/pods",
            [("labelSelector", f"job-name={rnd.name}")],
        )
        placed.update({p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods})
        return {}

    out = replay(
        path,
        config=_fresh(desched_settings, tmp_path, inc.name),
        before_round=before_round,
        after_round=after_round,
    )
    assert placed and set(placed.values()) == {RUNNER_NODE}, placed
    assert out.restore["verified"]["ok"], out.restore["verified"]
    assert out.restore["verified"]["kwok_kept_status"]
    fates = out.ledger.fates(0)
    wrong = {
        pod: (want, fates.get(pod))
        for pod, want in inc.expected.items()
        if not (
            (f := fates.get(pod)) is not None
            and (f.fate, f.layer, sorted(f.checks), f.status_code)
            == (want["fate"], want["layer"], sorted(want["checks"]), want["status_code"])
        )
    }
    assert not wrong, json.dumps({k: [v[0], str(v[1])] for k, v in wrong.items()}, indent=1)
    assert set(inc.expected) == {p for p in fates if fates[p].fate != "new"}
    evicted = [p for p, w in inc.expected.items() if w["fate"] == "evicted"]
    assert all(fates[p].replacement == "ready" for p in evicted)  # controller and scheduler
    fig = out.ledger.rounds[0]
    assert fig.total_evicted == len(evicted)
    refused = sum(1 for w in inc.expected.values() if w["fate"] == "refused")
    assert fig.audit_by_code == {k: v for k, v in (("201", len(evicted)), ("429", refused)) if v}


# -- the snapshot is read-only (audit log) and never holds a Secret ----------------------------
AUDIT_EVERYTHING = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""


def _reader_kubeconfig(cluster: Any, path: Path) -> str:
    """A kubeconfig for a ServiceAccount that may read everything, Secrets included."""
    api = cluster.api_client
    kubeapi.request(
        api,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        {"metadata": {"name": "snapshot-reader"}},
    )
    kubeapi.request(
        api,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "metadata": {"name": "snapshot-reader"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}],
        },
    )
    kubeapi.request(
        api,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": "snapshot-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "snapshot-reader",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "snapshot-reader", "namespace": "default"}
            ],
        },
    )
    tok = kubeapi.request(
        api,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/snapshot-reader/token",
        {"spec": {"expirationSeconds": 600}},
    )["status"]["token"]
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = admin["clusters"][0]["cluster"]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": server}],
        "users": [{"name": "reader", "user": {"token": tok}}],
        "contexts": [{"name": "reader", "context": {"cluster": "c", "user": "reader"}}],
        "current-context": "reader",
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(doc, fh)
    return "system:serviceaccount:default:snapshot-reader"


def test_snapshot_is_read_only_and_holds_no_secret(
    desched_settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_desched.providers.embedded import bring_up as embedded
    from pytest_desched.replay.gen.generator import generate
    from pytest_desched.replay.rebuild.restore import restore
    from pytest_desched.session import DeschedSession

    # This cluster's API server audits every request (Metadata), not just evictions: a
    # test-only audit policy, handed to kwokctl the way the provider hands it its own.
    policy = tmp_path / "audit-everything.yaml"
    policy.write_text(AUDIT_EVERYTHING)
    real = embedded.manifest_path
    monkeypatch.setattr(
        embedded,
        "manifest_path",
        lambda name: policy if name == "audit-policy.yaml" else real(name),
    )
    secret_value = "s3cr3t-value-that-must-never-leave"
    with DeschedSession(_fresh(desched_settings, tmp_path, "audited"), report=print) as session:
        cluster = session.cluster
        assert cluster.audit_log is not None
        restore(cluster, generate(seed=7, nodes=4, pods=30), report=print)
        kubeapi.request(
            cluster.api_client,
            "POST",
            "/api/v1/namespaces/team-a/secrets",
            {"metadata": {"name": "db-password"}, "stringData": {"password": secret_value}},
        )
        user = _reader_kubeconfig(cluster, tmp_path / "reader.kubeconfig")
        start = cluster.audit_log.stat().st_size
        snaps = {
            "kwokctl": take_snapshot(
                tmp_path / "reader.kubeconfig",
                "reader",
                kwokctl=cluster.toolchain.path("kwokctl"),
                exporter="kwokctl",
            ),
            "client": take_snapshot(tmp_path / "reader.kubeconfig", "reader", exporter="client"),
            "client-scoped": take_snapshot(
                tmp_path / "reader.kubeconfig", "reader", namespaces=["team-a"], exporter="client"
            ),
            "redacted": take_snapshot(
                tmp_path / "reader.kubeconfig", "reader", exporter="client", redact=True
            ),
        }
        events = _audit_events(cluster.audit_log, start, user)
    verbs = {e["verb"] for e in events}
    assert events and verbs <= READ_VERBS, sorted(verbs)
    touched = {(e.get("objectRef") or {}).get("resource") for e in events}
    assert "secrets" not in touched and "serviceaccounts" not in touched, sorted(map(str, touched))
    for name, snap in snaps.items():
        text = snap.dump("yaml")
        assert secret_value not in text and "db-password" not in text, name
        assert "Secret" not in {o.get("kind") for _, o in snap.all_objects()}, name
        assert snap.header["takenWith"]["readOnly"], name
        assert len(snap.pods) >= (1 if name == "client-scoped" else 30), name
    assert {p["metadata"]["namespace"] for p in snaps["client-scoped"].pods} == {"team-a"}
    assert snaps["kwokctl"].counts() == snaps["client"].counts()
    assert snaps["redacted"].header["redacted"] and "team-a" not in snaps["redacted"].dump("yaml")


def _audit_events(log: Path, start: int, user: str) -> list[dict[str, Any]]:
    """Every audited request by `user` after `start`, read once the log has them all."""
    from pytest_desched.kube import wait_for

    def read() -> list[dict[str, Any]]:
        with log.open("rb") as fh:
            fh.seek(start)
            lines = fh.read().splitlines()
        out = []
        for raw in lines:
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            if (e.get("user") or {}).get("username") == user:
                out.append(e)
        return out

    # the snapshot's last request is a list; wait until the log holds its ResponseComplete
    return wait_for(
        "the reader's requests in the audit log",
        read,
        lambda evs: any(e.get("verb") == "list" for e in evs),
        timeout=10,
        describe=lambda evs: f"{len(evs)} events",
    )


# -- the statuses a restore writes are the controllers' own ------------------------------------
STATUS_OF = {
    "replicasets": (
        "/apis/apps/v1/replicasets",
        (
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "terminatingReplicas",
            "observedGeneration",
        ),
    ),
    "deployments": (
        "/apis/apps/v1/deployments",
        (
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "terminatingReplicas",
            "observedGeneration",
            "conditions",
        ),
    ),
    "poddisruptionbudgets": (
        "/apis/policy/v1/poddisruptionbudgets",
        (
            "currentHealthy",
            "desiredHealthy",
            "expectedPods",
            "disruptionsAllowed",
            "observedGeneration",
            "conditions",
        ),
    ),
}


def _facts(obj: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The status fields its controller computes; conditions without their times."""
    st = obj.get("status") or {}
    out = {f: st.get(f) or 0 for f in fields if f != "conditions"}
    if "conditions" in fields:
        out["conditions"] = sorted(
            (c["type"], c["status"], c.get("reason"), c.get("message") or "")
            for c in st.get("conditions") or []
        )
    revision = (obj["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision")
    return {**out, "revision": revision}


def test_restored_statuses_are_what_the_controllers_compute(
    desched_settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ReplicaSet, Deployment and PDB status the restore writes (replay/rebuild/settled.py,
    recorded as it is written) is cleared after the restore; its controller computes it again
    from the live cluster and must arrive at exactly what was written (counts, conditions,
    revision annotations)."""
    from pytest_desched.kube import wait_for
    from pytest_desched.replay.gen.generator import generate
    from pytest_desched.replay.rebuild import etcd_restore
    from pytest_desched.replay.rebuild.restore import restore
    from pytest_desched.session import DeschedSession

    written: dict[tuple[str, str], dict[str, Any]] = {}
    settle = etcd_restore.settle

    def recording(owners: Any, pods: Any, pdbs: Any, *a: Any) -> dict[str, int]:
        counts = settle(owners, pods, pdbs, *a)
        for resource, objs in (
            ("replicasets", owners["ReplicaSet"]),
            ("deployments", owners["Deployment"]),
            ("poddisruptionbudgets", pdbs),
        ):
            for o in objs:
                written[(resource, key(o))] = _facts(o, STATUS_OF[resource][1])
        return counts

    monkeypatch.setattr(etcd_restore, "settle", recording)
    with DeschedSession(_fresh(desched_settings, tmp_path, "settled"), report=print) as session:
        cluster, api = session.cluster, session.cluster.api_client
        snap = generate(seed=7, nodes=6, pods=60)
        restore(cluster, snap, report=print)
        assert {r for r, _ in written} == set(STATUS_OF), sorted(written)
        assert len(written) == sum(
            len(snap.items(s)) for s in ("replicaSets", "deployments", "podDisruptionBudgets")
        )
        assert all(f["observedGeneration"] for f in written.values()), "not all settled"
        for resource, k in written:
            ns, name = k.split("/", 1)
            group = STATUS_OF[resource][0].rsplit("/", 1)[0]
            obj = kubeapi.get(api, f"{group}/namespaces/{ns}/{resource}/{name}")
            obj["status"] = {}
            kubeapi.request(api, "PUT", f"{group}/namespaces/{ns}/{resource}/{name}/status", obj)

        def differing() -> dict[str, Any]:
            out = {}
            for resource, (path, fields) in STATUS_OF.items():
                for obj in kubeapi.list_all(api, path):
                    want = written.get((resource, key(obj)))
                    if want is not None and _facts(obj, fields) != want:
                        out[f"{resource} {key(obj)}"] = {
                            "now": _facts(obj, fields),
                            "written": want,
                        }
            return out

        wait_for(
            "every cleared status computed again by its controller, equal to what was written",
            differing,
            lambda d: not d,
            timeout=90,
            describe=lambda d: f"{len(d)} differ, e.g. {list(d.items())[:2]}",
        )
