"""The runbook's own kubectl commands on a kept embedded cluster, typed as a user would.

A kept cluster (keep=always, as `desched up`), the lab arranged and the policy applied like
the experiments do; then each of the runbook's three rounds is
`kubectl -n kube-system create job --from=cronjob/descheduler NAME`, waited for with
`kubectl wait` and read with `kubectl logs job/NAME`. The cluster's supervised stand-in
kubelet runs them (kwok no longer fakes their completion), so the outcomes are the
experiments' own: exactly one eviction, none for nodeFit, a 429 per candidate for the PDB.
A pod of another image stays Pending with a Warning event. `desched down` leaves nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_desched.config import build_config
from pytest_desched.descheduler.decisions import Fate
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.experiments.framework import Runner
from pytest_desched.kube import wait_for
from pytest_desched.providers.embedded.kubelet import REFUSED_REASON
from pytest_desched.session import DeschedSession
from pytest_desched.tools.toolchain import Toolchain
from tests.e2e.test_cli_e2e import _assert_gone, _desched

pytestmark = pytest.mark.desched_selftest
VARIANT = "pdb-lister-workaround"
NS = "kube-system"


class Kept:
    """A kept cluster with the release; `kubectl` is the built binary, KUBECONFIG explicit."""

    def __init__(self, session: DeschedSession, tmp: Path) -> None:
        self.session, self.cluster, self.release = session, session.cluster, session.release
        self.kubectl_bin = str(session.toolchain.path("kubectl"))
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp / "home"),  # a user's ~/.kube is never the plugin's business
            "KUBECONFIG": str(self.cluster.kubeconfig),
        }

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.kubectl_bin, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc

    def runbook_round(self, job: str) -> str:
        """The runbook's three commands for one round; returns `kubectl logs job/NAME`."""
        self.kubectl("-n", NS, "create", "job", "--from=cronjob/descheduler", job)
        self.kubectl("-n", NS, "wait", "--for=condition=complete", f"job/{job}", "--timeout=120s")
        return self.kubectl("-n", NS, "logs", f"job/{job}").stdout


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory, desched_toolchain: Toolchain) -> Iterator[Kept]:
    tmp = tmp_path_factory.mktemp("runbook")
    config = build_config(
        {
            "--desched-provider": "embedded",
            "--desched-keep": "always",
            "--desched-cache-dir": str(desched_toolchain.cache_dir),
            "--desched-namespace": "runbook-lab",
        },
        run_dir=tmp / "run",
    )
    session = DeschedSession(config)
    name = None
    try:
        session.release  # noqa: B018 (cluster, then the release: suspended, dry run)
        name = session.cluster.name
        yield Kept(session, tmp)
    finally:
        session.close()  # kept: the cluster and its kubelet outlive the session
        if name is not None:
            down = _desched(desched_toolchain.cache_dir, tmp, "down", name, timeout=300)
            assert down.code == 0, str(down)
            _assert_gone(desched_toolchain.cache_dir, name)


def _runner(kept: Kept) -> Runner:
    ctx = kept.session.context(variant=VARIANT)
    r = Runner(ctx, "runbook-commands", VARIANT)
    r.ensure_policy()
    return r


def _lab_decisions(kept: Kept, logs: str, namespace: str) -> list:
    assert '"msg"' in logs.splitlines()[0], logs[:500]  # the descheduler's own JSON log
    json.loads(logs.splitlines()[0])
    return parse_log(logs, kept.release.descheduler_version).in_namespace(namespace)


def test_preflight_was_recorded_before_the_first_install(kept: Kept) -> None:
    pre = kept.release.preflight
    assert pre is not None
    assert pre["versions"]["server"] == kept.cluster.server_version()
    assert pre["versions"]["client"]
    assert pre["can_i_evict"]["as"] == "system:serviceaccount:kube-system:descheduler"
    assert pre["can_i_evict"]["allowed"] is False  # nothing installed yet: no RBAC yet
    # The same question after the install: the chart's ClusterRole grants pods/eviction.
    from pytest_desched.descheduler.preflight import can_i_evict

    after = can_i_evict(kept.cluster, "descheduler", "kube-system", "kube-system")
    assert after["allowed"] is True, after
    assert any(o.startswith("batch.v1.CronJob") for o in pre["diff_objects"]), pre
    assert (kept.release.workdir / "preflight.json").is_file()


def test_positive_round_typed_with_kubectl_evicts_exactly_one(kept: Kept) -> None:
    r = _runner(kept)
    try:
        r.arrange_violation()
        logs = kept.runbook_round("descheduler-positive")
        decisions = _lab_decisions(kept, logs, r.ctx.namespace)
        evicted = [d for d in decisions if d.fate == Fate.EVICTED]
        assert len(evicted) == 1, [(d.name, d.fate, d.checks) for d in decisions]
    finally:
        r.lab.teardown()


def test_negative_nodefit_round_typed_with_kubectl_evicts_nothing(kept: Kept) -> None:
    r = _runner(kept)
    try:
        r.arrange_violation()
        r.lab.unlabel_node(r.ctx.target)
        logs = kept.runbook_round("descheduler-negative-nodefit")
        decisions = _lab_decisions(kept, logs, r.ctx.namespace)
        assert decisions and all(d.fate == Fate.NODEFIT for d in decisions), decisions
    finally:
        r.lab.teardown()


def test_negative_pdb_round_typed_with_kubectl_is_refused_with_429(kept: Kept) -> None:
    r = _runner(kept)
    try:
        r.arrange_violation()
        r.lab.patch_pdb(r.ctx.replicas)
        r.lab.wait_pdb(0)
        logs = kept.runbook_round("descheduler-negative-pdb")
        decisions = _lab_decisions(kept, logs, r.ctx.namespace)
        assert not [d for d in decisions if d.fate == Fate.EVICTED]
        refused = [d for d in decisions if d.fate == Fate.REFUSED]
        assert refused and all(d.status_code == 429 for d in refused), decisions
    finally:
        r.lab.teardown()


def test_pod_of_another_image_stays_pending_with_a_warning_event(kept: Kept) -> None:
    job = "descheduler-other-image"
    manifest = json.loads(
        kept.kubectl(
            "-n", NS, "create", "job", "--from=cronjob/descheduler", job,
            "--dry-run=client", "-o", "json",
        ).stdout
    )  # fmt: skip
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "example.invalid/other:v1"
    proc = subprocess.run(
        [kept.kubectl_bin, "apply", "-f", "-"],
        input=json.dumps(manifest),
        env=kept.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    try:

        def seen() -> tuple[list[str], list[str]]:
            pods = json.loads(
                kept.kubectl("-n", NS, "get", "pods", "-l", f"job-name={job}", "-o", "json").stdout
            )["items"]
            events = json.loads(
                kept.kubectl(
                    "-n", NS, "get", "events", "--field-selector", f"reason={REFUSED_REASON}",
                    "-o", "json",
                ).stdout
            )["items"]  # fmt: skip
            names = {p["metadata"]["name"] for p in pods}
            return [p["status"].get("phase") for p in pods], [
                e["message"] for e in events if e["involvedObject"]["name"] in names
            ]

        phases, messages = wait_for(
            "a Warning event on the other image's pod", seen, lambda s: bool(s[1]), timeout=60
        )
        assert phases == ["Pending"], phases
        assert "example.invalid/other:v1" in messages[0]
        assert "--desched-descheduler " in messages[0]
        # and it stays Pending: kwok leaves descheduler pods alone
        assert seen()[0] == ["Pending"]
    finally:
        kept.kubectl("-n", NS, "delete", "job", job, "--wait=false", check=False)
