"""The factory fixtures: a second release in the session cluster, a second cluster.

Each test registers its "everything is gone" check with `request.addfinalizer` *before* it
asks for the factory (`request.getfixturevalue`). Finalizers of one test run last-in
first-out, so the check runs after the factory's own teardown, whatever the test order; a
leftover fails that test's teardown, naming what survived.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.descheduler.chart import Release
from pytest_desched.kube import node_ready
from pytest_desched.providers.base import Cluster
from pytest_desched.providers.existing import CONTROL_PLANE_LABEL
from pytest_desched.tools.toolchain import Toolchain
from tests.e2e.test_interrupt import _live_cmdlines

pytestmark = pytest.mark.desched_selftest

CANARY = "canary"
CANARY_SEL = f"app.kubernetes.io/instance={CANARY}"


def _canary_objects(cluster: Cluster) -> list[str]:
    """Every object of the canary release, found by the chart's instance label."""
    ns = "kube-system"
    found: list[str] = []
    for kind, items in (
        ("CronJob", cluster.batch.list_namespaced_cron_job(ns, label_selector=CANARY_SEL).items),
        ("Job", cluster.batch.list_namespaced_job(ns, label_selector=CANARY_SEL).items),
        ("ConfigMap", cluster.core.list_namespaced_config_map(ns, label_selector=CANARY_SEL).items),
        (
            "ServiceAccount",
            cluster.core.list_namespaced_service_account(ns, label_selector=CANARY_SEL).items,
        ),
        ("ClusterRole", cluster.rbac.list_cluster_role(label_selector=CANARY_SEL).items),
        (
            "ClusterRoleBinding",
            cluster.rbac.list_cluster_role_binding(label_selector=CANARY_SEL).items,
        ),
    ):
        found += [f"{kind}/{o.metadata.name}" for o in items]
    return found


def _cronjob_uid(cluster: Cluster, release: Release) -> str:
    return cluster.batch.read_namespaced_cron_job(
        release.cronjob_name, release.namespace
    ).metadata.uid


def test_release_factory_installs_a_second_release_suspended_and_in_dry_run(
    request: pytest.FixtureRequest, desched_cluster: Cluster, desched_release: Release
) -> None:
    main_uid = _cronjob_uid(desched_cluster, desched_release)
    assert not _canary_objects(desched_cluster), "a canary release exists before the test"

    def canary_gone() -> None:  # runs after the factory's teardown (registered before it)
        left = _canary_objects(desched_cluster)
        assert not left, f"release {CANARY} left behind: {left}"
        status = desched_cluster.helm("status", CANARY, "-n", "kube-system", check=False)
        assert status.returncode != 0, f"helm still knows release {CANARY}: {status.stdout}"
        # the session's own release was not touched by the canary's clean-up
        assert _cronjob_uid(desched_cluster, desched_release) == main_uid

    request.addfinalizer(canary_gone)
    factory = request.getfixturevalue("desched_release_factory")
    rel: Release = factory(CANARY)

    assert rel.name == CANARY and rel.installed
    assert (rel.dry_run, rel.policy) == (True, None)  # first install: chart default, dry run
    assert rel.pinned and rel.image == desched_release.image
    assert rel.cronjob_name != desched_release.cronjob_name
    status = json.loads(
        desched_cluster.helm("status", CANARY, "-n", "kube-system", "-o", "json").stdout
    )
    assert status["info"]["status"] == "deployed"

    (cj,) = desched_cluster.batch.list_namespaced_cron_job(
        "kube-system", label_selector=CANARY_SEL
    ).items
    assert cj.metadata.name == rel.cronjob_name
    assert cj.spec.suspend is True
    container = cj.spec.job_template.spec.template.spec.containers[0]
    assert "--dry-run=true" in container.args
    assert not [a for a in container.args if a.startswith("--dry-run") and a != "--dry-run=true"]
    assert container.image == rel.image
    assert {
        c.metadata.name
        for c in desched_cluster.core.list_namespaced_config_map("kube-system").items
    } >= {rel.configmap_name, desched_release.configmap_name}
    # two releases side by side: the session's is still there, unchanged and suspended
    main = desched_cluster.batch.read_namespaced_cron_job(
        desched_release.cronjob_name, desched_release.namespace
    )
    assert main.metadata.uid == main_uid and main.spec.suspend is True


def _cluster_left(provider: str, name: str, cdir: Path, toolchain: Toolchain) -> list[str]:
    """What is left of a removed cluster: its directory, owner file and processes (embedded),
    its node containers (kind)."""
    if provider == "kind":
        from pytest_desched.providers.kind import kind_clusters

        # kind's node containers are the cluster; the run's workdir (kubeconfig, audit log)
        # stays with the run's other files, as the embedded run directory does.
        return [f"kind cluster {name}"] if name in kind_clusters(toolchain.path("kind")) else []
    owner = toolchain.cache_dir / "clusters" / "owners" / f"{name}.json"
    procs = {pid: c for pid, c in _live_cmdlines().items() if name in c}
    return (
        ([f"cluster dir {cdir}"] if cdir.exists() else [])
        + ([f"owner file {owner}"] if owner.exists() else [])
        + [f"process {pid}: {c}" for pid, c in procs.items()]
    )


def test_cluster_factory_gives_a_second_cluster_removed_after_the_test(
    request: pytest.FixtureRequest, desched_cluster: Cluster, desched_toolchain: Toolchain
) -> None:
    made: dict[str, Any] = {}

    def cluster_gone() -> None:  # runs after the factory's teardown (registered before it)
        if not made:
            return  # the cluster never came up; the test itself failed
        left = _cluster_left(made["provider"], made["name"], made["dir"], desched_toolchain)
        assert not left, f"cluster {made['name']} left behind: {left}"
        assert desched_cluster.core.list_node().items  # the session's cluster still answers

    request.addfinalizer(cluster_gone)
    factory = request.getfixturevalue("desched_cluster_factory")
    session = factory(workers=2)
    assert session.config.workers == 2
    c = session.cluster
    assert c.provider == desched_cluster.provider  # the factory keeps the session's provider
    if c.provider == "kind":  # kind keeps its kubeconfig and audit log in the run's workdir
        cdir = Path(c.kubeconfig).parent
    else:
        cdir = desched_toolchain.cache_dir / "clusters" / "clusters" / c.name
    made.update(name=c.name, dir=cdir, provider=c.provider)

    assert c.name != desched_cluster.name
    assert Path(c.kubeconfig) != Path(desched_cluster.kubeconfig)
    assert cdir.is_dir()
    assert len(c.workers) == 2
    nodes = {n.metadata.name: n for n in c.core.list_node().items}
    others = {
        n
        for n in set(nodes) - set(c.workers)
        if CONTROL_PLANE_LABEL not in nodes[n].metadata.labels
    }
    assert set(c.workers) <= set(nodes) and not others, (
        f"nodes {sorted(nodes)}"
    )  # + kind's control plane
    assert all(node_ready(nodes[w]) for w in c.workers)
    # really another API server: the session cluster has none of these nodes
    session_nodes = {n.metadata.name for n in desched_cluster.core.list_node().items}
    assert not session_nodes & set(c.workers)
    assert session._release is None  # its release was never asked for, so never installed
