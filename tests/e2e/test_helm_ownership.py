"""The runbook's emergency stop against a release of the chosen Helm: who owns spec.suspend.

Helm 4 installs with server-side apply: `metadata.managedFields` decides what a later
`helm upgrade` or `helm rollback` does to a field another manager wrote. Helm 3 patches
client-side (a three-way merge of its last manifest, the new one and the live object). The
chart renders `suspend` only when true. The steps are the runbook's, on a release of its own
(the session's release is left alone), with `kubectl patch` as the runbook writes it:

1. first install, suspended and in dry run; 2. a `helm upgrade` that keeps `suspend=true`;
3. the emergency stop on the suspended CronJob; 4. the next `helm upgrade`, same values;
5. going live (`suspend=false`: the chart renders no `suspend`); 6. the emergency stop;
7. the next `helm upgrade`, same values; 8. the rollback step (`helm rollback` to a
suspended revision); 9. re-enabling through Helm (`--set suspend=false`).

The finding (docs/helm.md#emergency-stop-and-field-ownership) is asserted for the Helm this
run uses: `DESCHED_HELM=3` runs the same steps on Helm 3.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_desched.descheduler.ownership import SUSPEND, owners

pytestmark = pytest.mark.desched_selftest

NAME = "own"  # a release of its own: the session's release is never touched
YEARLY = "0 0 1 1 *"  # the live phase never starts a Job by itself during the test


def _state(cluster: Any, name: str) -> tuple[bool, list[str]]:
    """The CronJob's spec.suspend (absent: False) and the managers that own it."""
    cj = cluster.batch.read_namespaced_cron_job(name, "kube-system")
    return bool(cj.spec.suspend), owners(cj.metadata.managed_fields, SUSPEND)


def test_emergency_stop_and_the_next_helm_upgrade(desched_cluster, desched_release_factory):
    rel = desched_release_factory(NAME)  # 1: suspended, dry run (the runbook's first install)
    major = desched_cluster.toolchain.versions.helm_major
    helm_op = "Apply" if major == "4" else "Update"
    helm_owner = f"helm ({helm_op})"
    cj, ns, chart = rel.cronjob_name, rel.namespace, str(rel.chart.path)
    status = json.loads(desched_cluster.helm("status", NAME, "-n", ns, "-o", "json").stdout)
    # Helm 4 records how it applied (server-side); Helm 3's release has no such field
    assert status.get("apply_method") == ("ssa" if major == "4" else None), status.keys()
    assert _state(desched_cluster, cj) == (True, [helm_owner])

    def upgrade(*flags: str) -> None:
        desched_cluster.helm("upgrade", NAME, chart, "-n", ns, "--reuse-values", *flags, "--wait")

    def stop() -> None:  # the runbook's emergency stop, verbatim
        desched_cluster.kubectl("-n", ns, "patch", "cronjob", cj, "-p", '{"spec":{"suspend":true}}')

    seen: dict[str, tuple[bool, list[str]]] = {}
    upgrade()  # 2: a helm upgrade that keeps suspend=true (revision 2)
    seen["2 upgrade, suspended"] = _state(desched_cluster, cj)
    stop()  # 3: on a suspended CronJob: the value does not change
    seen["3 stop while suspended"] = _state(desched_cluster, cj)
    upgrade()  # 4: same values (revision 3)
    seen["4 upgrade again"] = _state(desched_cluster, cj)
    upgrade("--set", "suspend=false", "--set", f"schedule={YEARLY}")  # 5: live (revision 4)
    seen["5 live"] = _state(desched_cluster, cj)
    stop()  # 6: the emergency stop that matters: it changes the value
    seen["6 stop while live"] = _state(desched_cluster, cj)
    upgrade()  # 7: the next upgrade, same values (revision 5)
    seen["7 upgrade after stop"] = _state(desched_cluster, cj)
    desched_cluster.helm("rollback", NAME, "3", "-n", ns, "--wait")  # 8: revision 6
    seen["8 rollback to suspended"] = _state(desched_cluster, cj)
    upgrade("--set", "suspend=false")  # 9: re-enable through Helm (revision 7)
    seen["9 re-enable"] = _state(desched_cluster, cj)
    print(json.dumps({"helm": major, **{k: list(v) for k, v in seen.items()}}, indent=1))
    assert False, seen
