"""The README's "Writing your own experiment" examples, verbatim, so the docs stay true."""

import pytest


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
