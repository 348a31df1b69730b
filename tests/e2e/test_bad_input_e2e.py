"""Bad input on a real control plane: it fails fast, says why in one place, changes nothing."""

from __future__ import annotations

import time
import uuid

import pytest

from pytest_desched.descheduler.policy import Policy, PolicyError, load_default
from pytest_desched.descheduler.rounds import run_round
from pytest_desched.errors import RoundFailed
from pytest_desched.experiments import lab_policy
from pytest_desched.lab import Lab, LabApiError

pytestmark = pytest.mark.desched_selftest

# v0.36.0 nodeutilization/validation.go refuses this at start-up; the plugin's validator
# does not model LowNodeUtilization's thresholds, so only the descheduler can say it.
LNU_REFUSED = "thresholds' cpu percentage is greater than targetThresholds'"


def _lnu_policy() -> Policy:
    p = load_default().override(
        "profiles.safe-rebalance.plugins.balance.enabled", ["LowNodeUtilization"], why="test"
    )
    p = p.override("profiles.safe-rebalance.LowNodeUtilization.thresholds", {"cpu": 90}, why="t")
    return p.override(
        "profiles.safe-rebalance.LowNodeUtilization.targetThresholds", {"cpu": 50}, why="test"
    )


@pytest.fixture
def restore_policy(desched_release):
    yield
    desched_release.apply_policy(lab_policy("pdb-lister-workaround"), dry_run=False)


def _round_fails_fast(cluster, settings, release) -> RoundFailed:
    name = f"descheduler-refused-{uuid.uuid4().hex[:5]}"
    t0 = time.monotonic()
    with pytest.raises(RoundFailed) as ei:
        run_round(cluster, release, name, settings.run_dir / "round-logs", timeout=120)
    took = time.monotonic() - t0
    assert took < 30, f"a refused policy took {took:.0f}s to surface"
    err = ei.value
    assert err.job == name and err.exit_code != 0
    job = cluster.batch.read_namespaced_job(name, release.namespace)
    assert job.spec.backoff_limit == 0  # no retry of a refusal
    pods = cluster.core.list_namespaced_pod(release.namespace, label_selector=f"job-name={name}")
    assert len(pods.items) == 1, [p.metadata.name for p in pods.items]
    return err


def test_policy_the_descheduler_refuses_is_refused_before_any_change(desched_release):
    """policycheck runs v0.36.0's own validation: its words, and nothing installed."""
    revision, digest = desched_release.revision(), desched_release.configmap_digest()
    with pytest.raises(PolicyError, match="DL001 rejected-by-descheduler") as exc:
        desched_release.apply_policy(_lnu_policy(), dry_run=False)
    assert LNU_REFUSED in str(exc.value)
    assert (desched_release.revision(), desched_release.configmap_digest()) == (revision, digest)


def test_policy_the_descheduler_refuses_fails_the_round_at_once(
    desched_cluster, desched_settings, desched_release, restore_policy, monkeypatch
):
    """Defence in depth: with the lint gate bypassed, the round fails fast with the same words."""
    from pytest_desched.descheduler import chart as release_mod  # where apply_policy finds it
    from pytest_desched.descheduler.policy.checker import CheckResult

    monkeypatch.setattr(
        Policy, "validate", lambda self, *a, **k: self
    )  # validate asks policycheck too
    monkeypatch.setattr(release_mod, "lint_or_refuse", lambda *a: ([], CheckResult("", True)))
    desched_release.apply_policy(_lnu_policy(), dry_run=False)
    monkeypatch.undo()
    err = _round_fails_fast(desched_cluster, desched_settings, desched_release)
    assert any(LNU_REFUSED in line for line in err.error_lines), str(err)
    assert LNU_REFUSED in str(err)


def test_uint_cap_beyond_64_bits_is_refused_before_any_change(desched_release):
    revision, digest = desched_release.revision(), desched_release.configmap_digest()
    bad = load_default().override("maxNoOfPodsToEvictTotal", 2**64, why="test")
    go_error = (
        r"DL001 rejected-by-descheduler: .*cannot unmarshal number \d+ into Go struct field "
        r"DeschedulerPolicy\.maxNoOfPodsToEvictTotal of type uint"
    )
    with pytest.raises(PolicyError, match=go_error):
        desched_release.apply_policy(bad)
    assert (desched_release.revision(), desched_release.configmap_digest()) == (revision, digest)


def test_uint_cap_beyond_64_bits_still_fails_fast_if_validation_is_bypassed(
    desched_cluster, desched_settings, desched_release, restore_policy, monkeypatch
):
    """Defence in depth: the descheduler's own start-up error, not a two-minute timeout."""
    from pytest_desched.descheduler import chart as release_mod  # where apply_policy finds it
    from pytest_desched.descheduler.policy.checker import CheckResult

    bad = load_default().override("maxNoOfPodsToEvictTotal", 2**64, why="test")
    monkeypatch.setattr(Policy, "validate", lambda self, *a, **k: self)
    monkeypatch.setattr(release_mod, "lint_or_refuse", lambda *a: ([], CheckResult("", True)))
    desched_release.apply_policy(bad, dry_run=False)
    monkeypatch.undo()
    err = _round_fails_fast(desched_cluster, desched_settings, desched_release)
    assert err.error_lines, str(err)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"namespace": "kube-system"}, "lab namespace 'kube-system' is reserved"),
        ({"namespace": "Not_A_Name"}, "is not a valid RFC 1123 label"),
        ({"namespace": "x" * 70}, "70 characters"),
        ({"source": "no-such-node"}, "source node 'no-such-node' is not a lab worker"),
        ({"replicas": 0}, "replicas must be an integer >= 1"),
        ({"variant": "no-such-variant"}, "unknown policy variant"),
    ],
)
def test_bad_context_input_refused_before_any_change(desched_context, desched_release, kw, match):
    revision = desched_release.revision()
    with pytest.raises(pytest.UsageError, match=match) as ei:
        desched_context(**kw)
    assert "\n" not in str(ei.value)
    assert desched_release.revision() == revision


def test_policy_as_yaml_text_or_path(desched_context, tmp_path):
    text = lab_policy("pdb-lister-workaround").to_yaml()
    ctx = desched_context(policy=text)
    assert ctx.policy == lab_policy("pdb-lister-workaround")
    f = tmp_path / "policy.yaml"
    f.write_text(text)
    assert desched_context(policy=str(f)).policy == ctx.policy
    with pytest.raises(TypeError, match="a mapping, or YAML text; got int"):
        desched_context(policy=42)


def test_api_error_from_a_lab_step_is_short(desched_cluster, desched_settings, desched_release):
    lab = Lab(desched_cluster, f"{desched_settings.namespace}-api", image="x")
    lab.create_namespace()
    try:
        with pytest.raises(LabApiError) as ei:
            lab.patch_pdb(2)  # no PDB yet
        msg = str(ei.value)
        assert msg.startswith(
            "Lab.patch_pdb on poddisruptionbudgets/spread-demo: HTTP 404 Not Found"
        )
        assert "\n" not in msg and "Audit-Id" not in msg and "HTTP response headers" not in msg
    finally:
        lab.teardown()
