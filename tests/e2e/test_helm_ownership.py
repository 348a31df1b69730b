"""The runbook's emergency stop against a release of the chosen Helm: who owns spec.suspend.

Helm 4 installs with server-side apply: `metadata.managedFields` decides what a later
`helm upgrade` or `helm rollback` does to a field another manager wrote. Helm 3 patches
client-side (a three-way merge of its last manifest, the new one and the live object). The
chart renders `suspend` only when true. The runbook's commands, verbatim, on a release of
their own in a namespace of their own (the session's release is never touched):

1. first install, `--set suspend=true --set cmdOptions.dry-run=true`;
2. a `helm upgrade` that keeps `suspend=true`; 3. the emergency stop
   (`kubectl patch cronjob ... -p '{"spec":{"suspend":true}}'`) on the suspended CronJob;
4. the next `helm upgrade`, same values;
5. going live (`suspend=false`: the chart renders no `suspend`); 6. the emergency stop;
7. the next `helm upgrade`, same values; 8. the rollback step (`helm rollback` to the
   suspended revision 3); 9. re-enabling through Helm (`--set suspend=false`).

The finding, asserted for the Helm this run uses (`DESCHED_HELM=3` runs it on Helm 3) and
written down in docs/helm.md#emergency-stop-and-field-ownership: neither Helm takes the stop
back (steps 7 and 8 keep `suspend: true`); the stop's manager `kubectl-patch` owns the field
from step 6 on; under Helm 4 it keeps it through step 9, so re-enabling through Helm leaves
the CronJob suspended (Helm 3 resumes it), and a Helm 4 upgrade that sets a value other than
the stop's fails with a conflict, until the field is handed back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_desched.descheduler.ownership import SUSPEND, owners, suspend_notes
from pytest_desched.errors import CommandError

pytestmark = pytest.mark.desched_selftest

NAME, NS = "own", "desched-ownership"  # the release's objects: own-descheduler
CRONJOB = f"{NAME}-descheduler"
YEARLY = "0 0 1 1 *"  # the live phase never starts a Job by itself during the test
STOP = '{"spec":{"suspend":true}}'  # the runbook's emergency stop


class Runbook:
    """The runbook's helm and kubectl commands against one release, and what they leave."""

    def __init__(self, cluster: Any, chart: str) -> None:
        self.cluster, self.chart = cluster, chart

    def helm(self, *args: str) -> None:
        self.cluster.helm(*args, "-n", NS, "--wait")

    def upgrade(self, *flags: str) -> None:
        self.helm("upgrade", NAME, self.chart, "--reuse-values", *flags)

    def stop(self) -> None:
        self.cluster.kubectl("-n", NS, "patch", "cronjob", CRONJOB, "-p", STOP)

    def state(self) -> tuple[bool, list[str]]:
        """spec.suspend (absent: False) and who owns it: "manager (Operation)"."""
        cj = self.cluster.batch.read_namespaced_cron_job(CRONJOB, NS)
        return bool(cj.spec.suspend), owners(cj.metadata.managed_fields, SUSPEND)


@pytest.fixture
def runbook(desched_session, desched_cluster):
    desched_cluster.kubectl("create", "namespace", NS)
    rb = Runbook(desched_cluster, str(desched_session.chart().path))
    try:
        yield rb
    finally:
        desched_cluster.helm("uninstall", NAME, "-n", NS, "--wait", check=False)
        desched_cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def test_emergency_stop_and_the_next_helm_upgrade(desched_cluster, runbook):
    major = desched_cluster.toolchain.versions.helm_major
    helm = f"helm ({'Apply' if major == '4' else 'Update'})"  # server-side vs client-side
    stopper = "kubectl-patch (Update)"
    runbook.helm(  # 1: the runbook's first install
        "upgrade", "--install", NAME, runbook.chart,
        "--set", "suspend=true", "--set", "cmdOptions.dry-run=true",
    )  # fmt: skip
    status = json.loads(desched_cluster.helm("status", NAME, "-n", NS, "-o", "json").stdout)
    assert status.get("apply_method") == ("ssa" if major == "4" else None), sorted(status)
    assert runbook.state() == (True, [helm])
    runbook.upgrade()  # 2 (revision 2)
    assert runbook.state() == (True, [helm])
    runbook.stop()  # 3: the value does not change, so kubectl-patch takes nothing
    assert runbook.state() == (True, [helm])
    runbook.upgrade()  # 4 (revision 3)
    assert runbook.state() == (True, [helm])

    runbook.upgrade("--set", "suspend=false", "--set", f"schedule={YEARLY}")  # 5 (revision 4)
    # Helm 4 applies no suspend: nobody owns the defaulted false. Helm 3's patch removed it.
    assert runbook.state() == (False, [] if major == "4" else [helm])
    runbook.stop()  # 6: the emergency stop that changes the value
    assert runbook.state() == (True, [stopper])
    runbook.upgrade()  # 7: same values (revision 5): the stop holds on both
    assert runbook.state() == (True, [stopper])
    assert suspend_notes([stopper], major), "the record says what the stop's owner means"
    runbook.helm("rollback", NAME, "3")  # 8: the rollback step, to the suspended revision
    suspended, by = runbook.state()
    assert suspended and stopper in by, by  # Helm 4 shares the field with the stop

    runbook.upgrade("--set", "suspend=false", "--set", f"schedule={YEARLY}")  # 9: re-enable
    if major == "3":  # three-way merge: revision 6 had suspend, the new one has none
        assert runbook.state() == (False, [helm])
        return
    # Helm 4: the stop's manager still owns the field, so the CronJob stays suspended
    assert runbook.state() == (True, [stopper])
    # ... and resuming it by hand leaves kubectl-patch owning false: Helm's next suspend fails
    desched_cluster.kubectl(
        "-n", NS, "patch", "cronjob", CRONJOB, "-p", '{"spec":{"suspend":false}}'
    )  # fmt: skip
    with pytest.raises(CommandError, match=r"conflict with \\?\"kubectl-patch\\?\".*spec\.suspend"):
        runbook.upgrade("--set", "suspend=true")
    assert runbook.state() == (False, [stopper])
    runbook.upgrade("--set", "suspend=true", "--force-conflicts")  # the hand-back, forced
    assert runbook.state() == (True, [helm])
    runbook.upgrade("--set", "suspend=false")  # and Helm re-enables it again
    assert runbook.state() == (False, [])
