"""On real kind only: an incident replayed on a host cluster (`desched replay --host`).

Runs with `--desched-provider=kind` (make e2e-kind); skipped on every other provider. The
session's multi-node kind cluster is the host: its kube-system runs the session's own
descheduler release (suspended: a note, not a refusal), its nodes are real kubelets. The
kwok controller image is built here from the pinned kwok module and loaded into kind as the
descheduler image is. Then the label-move incident is replayed on it, its namespaces
prefixed (`kube-system` is the host's too), and:

- the host's own namespaces and nodes are the same objects (UIDs) before and after, no
  object of the run's label is left, and the teardown refused nothing and failed nothing;
- every replayed pod, and every replacement, ran on a fake node of the run;
- the fate ledger equals the embedded replay of the same snapshot, row by row (namespaces
  mapped back), and the incident's expected layer for every pod.

Cost: one kwok image build (seconds once the kwok binary is cached), one host replay and one
embedded replay of a 28-pod snapshot (about 3-6 min together on the loaded 2-core VM).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dev.kind_node.kwok_image import build_kwok_image
from pytest_desched.log import say
from pytest_desched.replay import kubeapi
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.host.plan import RUN_LABEL
from pytest_desched.replay.host.replay import fingerprint, replay_on_host
from pytest_desched.replay.run import replay

pytestmark = pytest.mark.desched_selftest


@pytest.fixture
def kind_host(desched_cluster: Any, desched_toolchain: Any) -> Any:
    if desched_cluster.provider != "kind":
        pytest.skip("real kind only (make e2e-kind)")
    tag = build_kwok_image(desched_toolchain, say)
    subprocess.run(
        [
            str(desched_toolchain.path("kind")),
            "load",
            "docker-image",
            tag,
            "--name",
            desched_cluster.name,
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return desched_cluster


def _config(desched_settings: Any, tmp_path: Path, name: str, provider: str) -> Any:
    run_dir = tmp_path / name
    run_dir.mkdir()
    # An existing cluster runs the Kubernetes it runs: the session's choice (make e2e-kind
    # KIND_KUBERNETES=...) is refused there, so it goes with the provider.
    kube = {"kubernetes": None} if provider == "existing" else {}
    return desched_settings.with_(
        run_dir=run_dir, artifacts=run_dir / "artifacts", provider=provider, **kube
    )


def _row_facts(ledger: Any, unmap: dict[str, str]) -> dict[str, Any]:
    out = {}
    for row in ledger.rows:
        ns, name = row.pod.split("/", 1)
        f = row.fates[0]
        if f.fate == "new":
            continue
        out[f"{unmap.get(ns, ns)}/{name}"] = (
            f.fate,
            f.layer,
            sorted(f.checks),
            f.status_code,
            f.replacement,
            row.node,
        )
    return out


def test_an_incident_replays_on_a_kind_host_like_on_the_embedded_cluster(
    kind_host: Any, desched_settings: Any, tmp_path: Path
) -> None:
    inc = label_move()
    path = inc.snapshot.write(tmp_path / "label-move.yaml")
    api = kind_host.api_client
    before = fingerprint(api)
    assert len(before["nodes"]) >= 3  # a multi-node host

    out = replay_on_host(
        path,
        kind_host.context,
        allow=True,
        kubeconfig=kind_host.kubeconfig,
        namespace_prefix="r-",
        config=_config(desched_settings, tmp_path, "host", "existing"),
    )
    host = out.host
    assert host["host_untouched"], host["host_changed"]
    assert host["teardown"]["errors"] == [] and host["teardown"]["refused"] == []
    assert fingerprint(api) == before  # from the API, after the teardown
    for coll in (
        "/api/v1/namespaces",
        "/api/v1/nodes",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
    ):
        left = kubeapi.list_all(api, coll, [("labelSelector", f"{RUN_LABEL}={host['run_id']}")])
        assert left == [], (coll, [o["metadata"]["name"] for o in left])
    fake = {n["metadata"]["name"] for n in inc.snapshot.nodes}
    for row in out.ledger.rows:  # restored pods and replacements: fake nodes only
        assert row.node is None or row.node in fake, (row.pod, row.node)
    assert any("tolerates" in d for d in out.restore["deviations"])

    unmap = {v: k for k, v in host["namespaces"].items()}
    embedded = replay(path, config=_config(desched_settings, tmp_path, "embedded", "embedded"))
    got, want = _row_facts(out.ledger, unmap), _row_facts(embedded.ledger, {})
    assert got == want, json.dumps(
        {
            k: [str(got.get(k)), str(want.get(k))]
            for k in sorted(set(got) | set(want))
            if got.get(k) != want.get(k)
        },
        indent=1,
    )
    for pod, w in inc.expected.items():
        assert got[pod][:4] == (w["fate"], w["layer"], sorted(w["checks"]), w["status_code"]), pod
    assert out.ledger.rounds[0].total_evicted == embedded.ledger.rounds[0].total_evicted
