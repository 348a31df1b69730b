"""A policy read in the fields of the release that runs it (descheduler/policy/release_fields.py).

The release's checker is a double here (its facts: the pinned descheduler's, with the
DefaultEvictor args a release without podProtections has); tests/e2e/test_canary_upgrade_e2e.py
runs the real v0.33.0 checker and binary.
"""

from __future__ import annotations

import re
import tarfile
from dataclasses import replace
from typing import Any

import pytest

from pytest_desched.descheduler.policy import Policy, facts_for
from pytest_desched.descheduler.policy import release_fields as rf
from pytest_desched.descheduler.policy.lint_rules import DEPRECATED_EVICTOR_BOOLEANS
from pytest_desched.errors import PolicyError
from pytest_desched.experiments import lab_policy
from tests.upstream import tarball

# v0.33.0's DefaultEvictorArgs json names (pkg/framework/plugins/defaultevictor/types.go)
V033_ARGS = (
    "nodeSelector",
    "evictLocalStoragePods",
    "evictDaemonSetPods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "evictFailedBarePods",
    "labelSelector",
    "priorityThreshold",
    "nodeFit",
    "minReplicas",
    "minPodAge",
    "ignorePodsWithoutPDB",
)


class _Checker:
    def __init__(self, args: tuple[str, ...] | None) -> None:
        facts = facts_for()
        if args is not None:
            plugins = dict(facts.plugins)
            ev = facts.default_evictor
            plugins[ev] = replace(plugins[ev], arg_fields=args)
            facts = replace(facts, version="v0.33.0", plugins=plugins)
        self._facts = facts
        self.version = facts.version

    def facts(self) -> Any:
        return self._facts


@pytest.fixture
def old_release(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The release's checker has v0.33.0's evictor args; validation is recorded, not run."""
    validated: list[str | None] = []
    monkeypatch.setattr(rf, "checker_for", lambda version, toolchain=None: _Checker(V033_ARGS))

    def validate(self: Policy, version: str | None = None, toolchain: Any = None) -> Policy:
        validated.append(version)
        return self

    monkeypatch.setattr(Policy, "validate", validate)
    return validated


def test_the_runbook_policy_without_an_expressible_protection_is_refused_naming_it(
    old_release: list[str | None],
) -> None:
    """v0.33.0 has no boolean for PodsWithResourceClaims: never dropped silently."""
    with pytest.raises(PolicyError) as err:
        rf.read_for_release(lab_policy("runbook"), "v0.33.0")
    msg = str(err.value)
    assert "PodsWithResourceClaims" in msg and "v0.33.0" in msg and "--expect" in msg
    assert "v0.33.0" not in old_release  # refused before its checker was asked to validate


def test_the_runbook_protections_become_the_old_releases_booleans_with_their_why(
    old_release: list[str | None],
) -> None:
    why = "the lab runs no pod with a ResourceClaim"
    accepted = {rf.missing_key("PodsWithResourceClaims"): why}
    reading = rf.read_for_release(lab_policy("runbook"), "v0.33.0", accepted=accepted)
    args = reading.policy.evictor_args()
    assert rf.PROTECTIONS_FIELD not in args
    # extraEnabled [PodsWithPVC, PodsWithoutPDB] -> their ignore* booleans; the four default
    # protections stay on (no evict* boolean set)
    assert {k: v for k, v in args.items() if k in DEPRECATED_EVICTOR_BOOLEANS} == {
        "ignorePvcPods": True,
        "ignorePodsWithoutPDB": True,
    }
    assert reading.lost == (rf.missing_key("PodsWithResourceClaims"),)
    ours = [o for o in reading.policy.overrides if rf.is_release_reading(o)]
    assert {o["path"].rsplit(".", 1)[-1] for o in ours} == {
        "ignorePvcPods",
        "ignorePodsWithoutPDB",
        "podProtections",
    }
    assert all("v0.33.0 has no podProtections" in o["why"] and why in o["why"] for o in ours)
    # the lab's own deviations are kept, and the result was validated for that release
    assert any(o["path"].endswith("minPodAge") for o in reading.policy.overrides)
    assert old_release[-1] == "v0.33.0"
    # the workaround variant (PodsWithoutPDB out) keeps ignorePodsWithoutPDB off
    wk = rf.policy_for_release(lab_policy("pdb-lister-workaround"), "v0.33.0", accepted=accepted)
    assert "ignorePodsWithoutPDB" not in wk.evictor_args()
    assert wk.evictor_args()["ignorePvcPods"] is True


def test_a_release_with_pod_protections_reads_the_policy_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rf, "checker_for", lambda version, toolchain=None: _Checker(None))
    pol = lab_policy("runbook")
    reading = rf.read_for_release(pol, None)
    assert reading.policy == pol and reading.lost == ()


def test_a_narrowed_pvc_protection_is_refused_on_a_release_without_its_config(
    old_release: list[str | None],
) -> None:
    """protectedStorageClasses narrows PodsWithPVC; ignorePvcPods would protect every PVC pod."""
    pol = lab_policy("pdb-lister-workaround").override(
        "profiles.safe-rebalance.DefaultEvictor.podProtections.extraEnabled",
        ["PodsWithPVC"],
        why="test",
    )
    pol = pol.override(
        "profiles.safe-rebalance.DefaultEvictor.podProtections.config",
        {"PodsWithPVC": {"protectedStorageClasses": [{"name": "fast"}]}},
        why="test",
    )
    with pytest.raises(PolicyError, match=r"protections\[config.PodsWithPVC\]|config.PodsWithPVC"):
        rf.read_for_release(pol, "v0.33.0")


def test_the_boolean_mapping_is_v0360s_legacy_reading() -> None:
    """DEPRECATED_EVICTOR_BOOLEANS is legacyGetPodProtections of v0.36.0 (+12 commits, the
    master snapshot in ../shared/upstream): each boolean, its sense and its protection."""
    with tarfile.open(tarball("master")) as tar:
        member = next(
            m
            for m in tar.getmembers()
            if m.name.endswith("pkg/framework/plugins/defaultevictor/defaultevictor.go")
        )
        f = tar.extractfile(member)
        assert f is not None
        src = f.read().decode()
    body = src[src.index("func legacyGetPodProtections") :]
    body = body[: body.index("\n}\n")]
    found = re.findall(r"if (!?)args\.(\w+) \{\s*protections = append\(protections, (\w+)\)", body)
    mapping = {
        name[0].lower() + name[1:]: ("defaultDisabled" if neg else "extraEnabled", prot)
        for neg, name, prot in found
    }
    assert mapping == DEPRECATED_EVICTOR_BOOLEANS


# v0.32.2's top-level policy fields, as its own policy checker describes them (built from
# ../shared/upstream/descheduler-v0.32.2-a6e0ebff1.tar.gz): no gracePeriodSeconds, and
# EvictionFailureEventNotification by its Go field name (types.go:46 has no JSON tag).
V032_TOP_LEVEL = (
    "kind",
    "apiVersion",
    "profiles",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
    "EvictionFailureEventNotification",
    "metricsCollector",
)


@pytest.fixture
def v032(monkeypatch: pytest.MonkeyPatch, old_release: list[str | None]) -> list[str | None]:
    checker = _Checker(V033_ARGS)  # v0.32.2's DefaultEvictor args are v0.33.0's
    checker._facts = replace(checker._facts, version="v0.32.2", top_level_fields=V032_TOP_LEVEL)
    checker.version = "v0.32.2"
    monkeypatch.setattr(rf, "checker_for", lambda version, toolchain=None: checker)
    return old_release


def test_v032_runs_without_the_grace_period_and_spells_the_notification_its_way(
    v032: list[str | None],
) -> None:
    accepted = {rf.missing_key("PodsWithResourceClaims"): "no resource claims in the lab"}
    reading = rf.read_for_release(lab_policy("runbook"), "v0.32.2", accepted=accepted)
    doc = reading.policy.to_dict()
    assert reading.dropped == ("gracePeriodSeconds",)
    assert "gracePeriodSeconds" not in doc
    # renamed, not dropped: the same setting in the release's own spelling
    assert doc["EvictionFailureEventNotification"] is True
    assert "evictionFailureEventNotification" not in doc
    # the safety fields are untouched
    caps = (
        "maxNoOfPodsToEvictPerNode",
        "maxNoOfPodsToEvictPerNamespace",
        "maxNoOfPodsToEvictTotal",
    )
    assert {k: doc[k] for k in caps} == dict(zip(caps, (1, 1, 2), strict=True))
    whys = {o["path"]: o["why"] for o in reading.policy.overrides if rf.is_release_reading(o)}
    assert "runs without it" in whys["gracePeriodSeconds"]
    assert "terminationGracePeriodSeconds" in whys["gracePeriodSeconds"]
    assert (
        "spells evictionFailureEventNotification as EvictionFailureEventNotification"
        in (whys["EvictionFailureEventNotification"])
    )
    assert v032[-1] == "v0.32.2"  # validated by the release's own checker


def test_a_safety_field_the_release_lacks_is_never_dropped(
    v032: list[str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release without maxNoOfPodsToEvictTotal: the field stays for its own checker to
    refuse (DL002, exit 2 in the matrix), never silently removed."""
    checker = rf.checker_for("v0.32.2")
    fields = tuple(f for f in V032_TOP_LEVEL if f != "maxNoOfPodsToEvictTotal")
    checker._facts = replace(checker._facts, top_level_fields=fields)  # type: ignore[attr-defined]
    accepted = {rf.missing_key("PodsWithResourceClaims"): "no resource claims in the lab"}
    reading = rf.read_for_release(lab_policy("runbook"), "v0.32.2", accepted=accepted)
    assert reading.policy.to_dict()["maxNoOfPodsToEvictTotal"] == 2
    assert "maxNoOfPodsToEvictTotal" not in reading.dropped
    assert set(rf.NON_SAFETY_FIELDS) == {"gracePeriodSeconds", "evictionFailureEventNotification"}
