"""Known-bug expected failures excuse only what the bug explains: broken behaviour FAILS.

An inner pytest session runs the runbook-policy experiment as the suite does (strict xfail
on KnownUpstreamBug) three times: untouched (XFAIL: #1882 explains it), with a lab pod left
Pending, and with the round Job made to fail. The last two must FAIL although the #1882
signature may be in the log.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.e2e.inner_run import start_inner

pytestmark = pytest.mark.desched_selftest

INNER = """
import pytest

from pytest_desched import lab as lab_mod
from pytest_desched.descheduler import rounds as rounds_mod
from pytest_desched.experiments import KnownUpstreamBug

RUNBOOK_XFAIL = pytest.mark.xfail(raises=KnownUpstreamBug, strict=True)


@RUNBOOK_XFAIL
def test_untouched(desched_experiment):
    desched_experiment("positive", variant="runbook")


@RUNBOOK_XFAIL
def test_pending_pod(desched_experiment, monkeypatch):
    deploy = lab_mod.Lab.deploy

    def deploy_and_strand_a_pod(self, affinity=True):
        snap = deploy(self, affinity)
        body = {
            "metadata": {"name": "stranded", "labels": {"app": self.app}},
            "spec": {
                "nodeSelector": {"no-such-node": "true"},
                "containers": [{"name": "pause", "image": self.image}],
            },
        }
        self.cluster.core.create_namespaced_pod(self.namespace, body)
        return snap

    monkeypatch.setattr(lab_mod.Lab, "deploy", deploy_and_strand_a_pod)
    desched_experiment("positive", variant="runbook")


@RUNBOOK_XFAIL
def test_job_fails(desched_experiment, monkeypatch):
    make_job = rounds_mod.job_from_cronjob

    def job_with_a_bad_flag(*args, **kwargs):
        job = make_job(*args, **kwargs)
        job["spec"]["template"]["spec"]["containers"][0]["args"].append("--no-such-flag")
        job["spec"]["backoffLimit"] = 0
        return job

    monkeypatch.setattr(rounds_mod, "job_from_cronjob", job_with_a_bad_flag)
    desched_experiment("positive", variant="runbook")
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, desched_toolchain):
    d = tmp_path_factory.mktemp("verdicts")
    proc = start_inner(
        d, INNER, desched_toolchain.cache_dir, "-rA", f"--junitxml={d / 'junit.xml'}"
    )
    out, _ = proc.communicate(timeout=600)
    root = ET.parse(d / "junit.xml").getroot()
    result = {}
    for case in root.iter("testcase"):
        kinds = {child.tag for child in case}
        if "failure" in kinds or "error" in kinds:
            result[case.get("name")] = "failed"
        elif "skipped" in kinds:  # JUnit reports an xfail as skipped
            result[case.get("name")] = "xfailed"
        else:
            result[case.get("name")] = "passed"
    return result, out


def test_the_untouched_runbook_policy_is_an_expected_failure(outcomes):
    result, out = outcomes
    assert result.get("test_untouched") == "xfailed", out[-4000:]


def test_a_pending_lab_pod_fails_instead_of_xfail(outcomes):
    result, out = outcomes
    assert result.get("test_pending_pod") == "failed", out[-4000:]
    assert "[pods-violate-affinity]" in out or "[no-pending]" in out


def test_a_failed_round_job_fails_instead_of_xfail(outcomes):
    result, out = outcomes
    assert result.get("test_job_fails") == "failed", out[-4000:]
