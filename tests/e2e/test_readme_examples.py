"""The README's "Writing your own experiment" examples, verbatim, so the docs stay true."""

import pytest

# The examples carry `descheduler_e2e` as a user's tests would; here they are the project's own
# check of its README, so `make e2e` (the runbook's experiments only) leaves them out.
pytestmark = pytest.mark.desched_selftest


@pytest.mark.descheduler_e2e
def test_my_migration(desched_experiment):
    res = desched_experiment(
        "positive",
        variant="pdb-lister-workaround",
        replicas=4,
        overrides={"maxNoOfPodsToEvictTotal": 1},
    )
    assert res.evictions == 1


@pytest.mark.descheduler_e2e
@pytest.mark.desched_experiment("nodefit", variant="pdb-lister-workaround")
def test_marker_form(desched_experiment_result):
    assert desched_experiment_result.blocking_layer == "evictor-prefilter-nodefit"


# -- "A new experiment is one class" ---------------------------------------------------------
from pytest_desched import Experiment  # noqa: E402


class OneReplicaIsProtected(Experiment):
    """A one-replica workload that violates its affinity: minReplicas=2 keeps it in place."""

    name = "one-replica-is-protected"
    default_variant = "pdb-lister-workaround"

    def arrange(self) -> None:
        self.before = self.r.arrange_violation(pdb_min_available=None)

    def act(self) -> None:
        self.round = self.r.run_round("descheduler-one-replica")

    def assess(self) -> None:
        self.r.assess_nothing_evicted(self.round, self.before)
        self.r.check(
            "minreplicas-filters",
            "the evictor filters the pod with exactly the minReplicas check",
            [d.checks for d in self.round.decisions] == [["minReplicas"]],
            str(self.round.decisions),
        )


@pytest.mark.descheduler_e2e
def test_my_own_experiment(desched_experiment):
    res = desched_experiment(OneReplicaIsProtected, replicas=1)
    assert res.blocking_layer == "evictor-filter"
    assert res.records[-1]["audit"]["requests"] == 0  # the API server saw no eviction at all
