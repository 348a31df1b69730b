"""Known bugs by version range (descheduler/bug_ranges.py): semver placement, builds placed
by their base, releases nobody ran judged by where they fall, and each range's proof."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_desched.descheduler.bug_ranges import VersionRange, release_key
from pytest_desched.descheduler.known_bugs import BY_ID, REGISTRY, classify
from tests.unit.descheduler.test_known_bugs import POS, POS_FAILED, POS_LOG, real

R = VersionRange("v0.35.0", "v0.36.0", "test")


@pytest.mark.parametrize(
    ("version", "holds", "inside"),
    [
        ("v0.34.9", False, False),
        ("v0.35.0", True, True),
        ("v0.35.1", True, True),
        ("v0.35.10", True, True),  # semver, not text: v0.35.10 > v0.35.9
        ("v0.35.1-g2908b4308", True, False),  # a build: placed by its base, never `in`
        ("v0.36.0", False, False),  # the fix
        ("v0.36.0-g7d2b28bf2", False, False),  # master after the fix
        ("not-a-version", False, False),
    ],
)
def test_range_places_versions_by_semver(version: str, holds: bool, inside: bool) -> None:
    assert R.holds(version) is holds
    assert (version in R) is inside


def test_open_range_and_its_words() -> None:
    open_ = VersionRange("v0.32.2", None, "code")
    assert open_.holds("v0.99.0") and not open_.holds("v0.32.1")
    assert str(open_) == "v0.32.2 on, no fixed release"
    assert str(R) == "v0.35.0 on, fixed in v0.36.0"
    assert release_key("v0.36.0-g7d2b28bf2") == (0, 36, 0)


@pytest.mark.parametrize(
    ("bug", "affected", "not_affected"),
    [
        # v0.34.0 ran nowhere here: inside #1687's range (its cause is in v0.32.2's code)
        ("descheduler#1687", ["v0.32.2", "v0.33.0", "v0.34.0", "v0.35.1", "v0.36.0"], []),
        ("descheduler#1882", ["v0.35.0", "v0.35.1", "v0.36.0"], ["v0.32.2", "v0.33.0"]),
        ("descheduler#1917", ["v0.35.0", "v0.35.1", "v0.36.0"], ["v0.33.0"]),
        ("descheduler#1840", ["v0.35.0", "v0.35.1"], ["v0.33.0", "v0.34.0", "v0.36.0"]),
        ("descheduler#1839", ["v0.35.0"], ["v0.33.0"]),
    ],
)
def test_registry_ranges_cover_the_releases_here(
    bug: str, affected: list[str], not_affected: list[str]
) -> None:
    rng = BY_ID[bug].affected
    assert all(v in rng for v in affected), (bug, str(rng))
    assert not any(v in rng for v in not_affected), (bug, str(rng))
    assert BY_ID[bug].applies_to("v0.36.0-g7d2b28bf2") is rng.holds("v0.36.0")


def test_every_range_says_how_its_start_is_known() -> None:
    """A start read from code names the file and line in the tree; a fix names its proof."""
    for bug in REGISTRY:
        proof = bug.affected.since_proof
        assert proof.startswith(("code:", "run")), bug.id
        if proof.startswith("code:"):
            assert ".go:" in proof, bug.id  # FILE:LINE
        if bug.affected.fixed_in:
            assert bug.affected.fixed_proof, bug.id


def test_1839_is_a_chart_bug_fixed_in_chart_0_35_1() -> None:
    b = BY_ID["descheduler#1839"]
    assert b.chart_range is not None
    assert "0.35.0" in b.chart_range and "0.35.1" not in b.chart_range
    assert b.rbac == (("", "persistentvolumeclaims", ("get", "list", "watch")),)


def test_a_release_past_the_fix_is_never_excused() -> None:
    """The same round, evidence and all, on a release at the fix: a failure, not an xfail."""
    fixed = tuple(replace(b, affected=replace(b.affected, fixed_in="v0.37.0")) for b in REGISTRY)
    facts = real(POS_LOG, POS, POS_FAILED, descheduler_version="v0.36.0")
    assert classify(facts, fixed).outcome == "xfail"
    past = real(POS_LOG, POS, POS_FAILED, descheduler_version="v0.37.0")
    assert classify(past, fixed).outcome == "fail"


def test_1840_and_1839_signatures_and_triggers() -> None:
    b1840, b1839 = BY_ID["descheduler#1840"], BY_ID["descheduler#1839"]
    log = (
        'E0224 00:02:42.772045 1 profile.go:240] "unable to initialize a plugin" '
        'err="prometheus client not initialized" pluginName="LowNodeUtilization"\n'
    )
    facts = real(POS_LOG, POS, POS_FAILED, descheduler_version="v0.35.0")
    assert b1840.signature(replace(facts, log=log)) is not None
    assert b1840.signature(facts) is None
    forbidden = (
        'E0219 reflector.go:204] "Failed to watch" err="failed to list '
        '*v1.PersistentVolumeClaim: persistentvolumeclaims is forbidden: User ..."\n'
    )
    assert b1839.signature(replace(facts, log=forbidden)) is not None
    assert b1839.signature(facts) is None
    lnu = {
        "metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "http://p"}}],
        "profiles": [
            {
                "pluginConfig": [
                    {
                        "name": "LowNodeUtilization",
                        "args": {"metricsUtilization": {"source": "Prometheus"}},
                    }
                ]
            }
        ],
    }
    assert b1840.policy_trigger is not None and b1840.policy_trigger(lnu)
    assert b1840.policy_trigger({**lnu, "metricsProviders": []}) is None
    pvc = {
        "profiles": [
            {
                "pluginConfig": [
                    {
                        "name": "DefaultEvictor",
                        "args": {"podProtections": {"extraEnabled": ["PodsWithPVC"]}},
                    }
                ]
            }
        ]
    }
    assert b1839.policy_trigger is not None and "PodsWithPVC" in (b1839.policy_trigger(pvc) or "")
    assert b1839.policy_trigger({"profiles": []}) is None
