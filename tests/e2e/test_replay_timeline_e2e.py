"""Incident replay in time (issue 29): record a window of the embedded cluster in which the
pool label moves (and a Deployment is born), replay it at 10x, and find every eviction placed
after the move and the born pods in the ledger.

Real clusters only: the window is watched on the session's embedded cluster, the replay
runs on a fresh one with the real controllers, scheduler and descheduler. No fixed sleeps:
the recording ends at its own window end, every other wait is on the API.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched import Experiment
from pytest_desched.replay.capture.record import record
from pytest_desched.replay.capture.timeline import Timeline
from pytest_desched.replay.timeline.run import replay_timeline

pytestmark = pytest.mark.desched_selftest

WINDOW_S = 10
# No minPodAge, no PodsWithoutPDB: the pods violate their affinity once the label moves, and
# only the PDB (recorded mid-window as a create) limits the evictions.
POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "timeline",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"nodeFit": True}},
                {
                    "name": "RemovePodsViolatingNodeAffinity",
                    "args": {
                        "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]
                    },
                },
            ],
            "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
        }
    ],
}


def born(image: str) -> dict[str, Any]:
    """Two pause pods, no affinity, no PDB: nothing evicts them; they only have to be seen."""
    labels = {"app": "born"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "born", "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "pause", "image": image}]},
            },
        },
    }


class RecordTheLabelMove(Experiment):
    """Pods on the pool's source node; the window's recording starts; a PDB is created and
    the pool label moves from the source to the target while it runs."""

    name = "replay-record-label-move"
    default_variant = "pdb-lister-workaround"
    timeline_path: Path | None = None
    facts: dict[str, str] = {}

    def arrange(self) -> None:
        type(self).facts = {
            "source": self.ctx.source,
            "target": self.ctx.target,
            "namespace": self.lab.namespace,
        }
        self.lab.create_namespace()
        self.lab.label_node(self.ctx.source)
        self.start = self.lab.deploy()
        assert set(self.start.by_node()) == {self.ctx.source}, self.start.by_node()

    def act(self) -> None:
        cluster = self.ctx.cluster
        context = yaml.safe_load(Path(cluster.kubeconfig).read_text())["current-context"]
        snapshot_done, window_over = threading.Event(), threading.Event()
        out: dict[str, Any] = {}

        def wait(seconds: float) -> bool:  # record()'s wait: the window's own end
            snapshot_done.set()
            return window_over.wait(seconds)

        def run() -> None:
            try:
                out["tl"] = record(
                    cluster.kubeconfig,
                    context,
                    until=f"{WINDOW_S}s",
                    namespaces=[self.lab.namespace],
                    wait=wait,
                )
            except BaseException as exc:  # surfaced in the test thread below
                out["error"] = exc
                snapshot_done.set()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        assert snapshot_done.wait(60), "the recorder never finished its start snapshot"
        assert "error" not in out, out.get("error")
        # a Deployment born in the window: its pods are in no snapshot (issue 39 case 13)
        self.ctx.cluster.apps.create_namespaced_deployment(self.lab.namespace, born(self.lab.image))
        self.lab.create_pdb(min_available=2)
        self.lab.wait_pdb(1)  # 3 replicas, minAvailable 2: one disruption allowed
        self.lab.label_node(self.ctx.target)
        self.lab.unlabel_node(self.ctx.source)
        t.join(WINDOW_S + 60)
        assert not t.is_alive(), "the recording did not end at its window's end"
        assert "error" not in out, out.get("error")
        assert type(self).timeline_path is not None
        out["tl"].write(type(self).timeline_path)

    def assess(self) -> None:
        pass


def test_recorded_label_move_replays_at_10x_with_evictions_after_the_move(
    desched_experiment: Any, desched_settings: Any, tmp_path: Path
) -> None:
    RecordTheLabelMove.timeline_path = tmp_path / "window.jsonl"
    res = desched_experiment(RecordTheLabelMove)
    assert res.outcome == "pass", res.message
    tl = Timeline.load(tmp_path / "window.jsonl")
    f = RecordTheLabelMove.facts
    ns, src, tgt = f["namespace"], f["source"], f["target"]

    # The recording: read-only, no Secret, the start as it was, the move as two node updates.
    assert tl.header["source"] == "watch"
    reqs = tl.header["recorded"]["requests"]
    assert reqs and all(r.split(" ", 1)[0] in ("get", "list", "watch") for r in reqs), reqs
    text = (tmp_path / "window.jsonl").read_text()
    assert '"kind":"Secret"' not in text and '"kind":"ServiceAccount"' not in text
    assert 0 < tl.window_s <= WINDOW_S + 1
    assert {p["spec"]["nodeName"] for p in tl.snapshot.pods} == {src}
    moves = [c for c in tl.changes if c.kind == "Node" and c.verb == "update"]
    gained = [
        c
        for c in moves
        if c.name == tgt
        and "descheduler.example.com/pool" in (c.object["metadata"].get("labels") or {})
    ]
    lost = [
        c
        for c in moves
        if c.name == src
        and "descheduler.example.com/pool" not in (c.object["metadata"].get("labels") or {})
    ]
    assert gained and lost, [(c.t, c.name, c.object["metadata"].get("labels")) for c in moves]
    move_t = max(gained[0].t, lost[0].t)
    pdb = [c for c in tl.changes if c.kind == "PodDisruptionBudget" and c.verb == "create"]
    assert pdb and pdb[0].t < move_t, [(c.t, c.verb, c.key) for c in tl.changes]

    # The replay at 10x: the changes applied in order, evictions placed after the move.
    run_dir = tmp_path / "replay"
    run_dir.mkdir()
    config = desched_settings.with_(
        run_dir=run_dir, artifacts=run_dir / "artifacts", provider="embedded"
    )
    out = replay_timeline(
        tmp_path / "window.jsonl", speed=10, every="5s", policy=POLICY, config=config
    )
    t = out.timeline
    assert t["speed"] == 10 and t["rounds_at"] == [5.0, 10.0]
    # each round started on the state due by its moment: every change due had landed (issue 39)
    assert t["failures"] == [], t["failures"]
    for r in t["rounds"]:
        due = [o for o in t["outcomes"] if o["t"] <= r["scheduled_t"]]
        assert r["stale"] == [] and r["changes_due"] == len(due), r
        assert all(o["applied_t"] <= r["window_t"] for o in due), (r, due)
    applied = {(o["verb"], o["object"]): o for o in t["outcomes"]}
    for c in (gained[0], lost[0], pdb[0]):
        o = applied[(c.verb, c.key)]
        assert o["outcome"] == "applied", o
        assert o["started_t"] >= c.t, o  # never before its moment in the window
    move_applied = max(applied[(c.verb, c.key)]["applied_t"] for c in (gained[0], lost[0]))
    lab_pods = {f"{ns}/{p['metadata']['name']}" for p in tl.snapshot.pods}
    evicted = [e for e in t["evictions"] if e["pod"] in lab_pods]
    assert evicted, json.dumps(t, default=str)[:3000]
    assert all(e["at_s"] is not None and e["at_s"] >= move_applied for e in evicted), evicted
    for e in evicted:  # the ledger names the same moment per eviction
        row = out.ledger.row(e["pod"])
        assert row is not None and row.fates[e["round"] - 1].at_s == e["at_s"], row
    created = sum((r.audit_by_code or {}).get("201", 0) for r in out.ledger.rounds)
    assert created == len(evicted), [r.audit_by_code for r in out.ledger.rounds]
    assert "at t=" in out.markdown()
    # every pod a round saw has a row: the born Deployment's pods, placed in the window
    rows = [r for r in out.ledger.rows if r.pod.startswith(f"{ns}/born-")]
    assert len(rows) >= 2, [(r.pod, r.origin) for r in out.ledger.rows]
    assert all(r.origin.startswith("created in window at t=") for r in rows), rows
    assert all(str(r.owner).startswith("ReplicaSet/born-") for r in rows), rows
    # every round's log is kept in the evidence, and every pod it decided about is a row or
    # named in the notes with why it is not one (issue 54: 8 rows for 9 filtered pods)
    from pytest_desched.descheduler.logparse import parse_log

    held = {r.pod for r in out.ledger.rows}
    notes = "\n".join(out.ledger.notes)
    for fig in out.ledger.rounds:
        log = Path(fig.extra["log"])
        assert log.is_file() and log.is_relative_to(run_dir / "artifacts"), fig.extra
        decided = {f"{d.namespace}/{d.name}" for d in parse_log(log.read_text()).decisions}
        assert decided, log
        unnamed = [p for p in decided if p not in held and f"{p} (" not in notes]
        assert not unnamed, (unnamed, notes)
