"""The canary's side of the per-release policy reading: which inexpressible protections the
user's explanation file accepts, and the reading's rows in the static comparison."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_desched.canary import static_run
from pytest_desched.canary.engine import static_changes
from pytest_desched.canary.expectations import load_explanations
from pytest_desched.canary.static import StaticComparison
from pytest_desched.canary.static_run import TRANSLATION, accept_missing, translation_differences
from pytest_desched.canary.verdict import judge
from pytest_desched.descheduler.policy.release_fields import (
    WHY_PREFIX,
    ReleaseReading,
    missing_key,
)
from pytest_desched.errors import ConfigError, PolicyError
from pytest_desched.experiments import lab_policy

ACCEPT = {
    "kind": "static",
    "path": "policy-translation:baseline:protections[PodsWithResourceClaims]",
    "reason": "no pod of ours has a ResourceClaim",
}


def test_only_an_explanation_naming_the_track_and_protection_accepts_it() -> None:
    explanations = load_explanations([ACCEPT, {"kind": "static", "path": "rbac:*", "reason": "x"}])
    base, cand = SimpleNamespace(), SimpleNamespace()
    accept_missing(base, "baseline", explanations)
    accept_missing(cand, "candidate", explanations)
    assert base.accepted_missing == {missing_key("PodsWithResourceClaims"): ACCEPT["reason"]}
    assert cand.accepted_missing == {}


def test_the_reading_is_listed_and_its_accepted_loss_explained_by_the_same_entry() -> None:
    pol = lab_policy("runbook").override(
        "profiles.safe-rebalance.DefaultEvictor.ignorePvcPods", True, why=WHY_PREFIX + "v0.33.0"
    )
    reading = ReleaseReading(pol, "v0.33.0", (missing_key("PodsWithResourceClaims"),))
    rows = translation_differences("baseline", {"runbook": reading})
    assert {(d.path, d.severity) for d in rows} == {
        ("baseline:runbook:profiles[0].pluginConfig[DefaultEvictor].args.ignorePvcPods", "info"),
        ("baseline:protections[PodsWithResourceClaims]", "rollback"),
    }
    assert all(d.area == TRANSLATION for d in rows)  # the lab's own minPodAge is not listed
    changes = static_changes(StaticComparison({}, {}, rows))
    assert [c.subject for c, _ in changes] == [
        f"{TRANSLATION}:baseline:protections[PodsWithResourceClaims]"
    ]
    assert judge(changes, load_explanations([ACCEPT])).ok
    assert not judge(changes, []).ok  # never a silent loss


@pytest.mark.parametrize("track", ["canary baseline", "matrix release 1-v0.33.0"])
def test_a_policy_a_release_refuses_is_named_by_the_command_that_runs_it(
    track: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise PolicyError(["podProtections: unknown field"])

    monkeypatch.setattr(static_run, "read_for_release", refuse)
    session = SimpleNamespace(
        toolchain=None, candidate=None, inputs=SimpleNamespace(policy=None), accepted_missing={}
    )
    with pytest.raises(ConfigError) as err:
        static_run.track_policies(session, ["runbook"], track)  # type: ignore[arg-type]
    assert str(err.value).startswith(f"{track} policy [runbook] (")
    assert "podProtections: unknown field" in str(err.value)
    assert "canary matrix" not in str(err.value)
