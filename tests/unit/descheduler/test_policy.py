"""The shipped policy is the runbook's, validation stops bad policies before a cluster sees them,
digests survive helm's re-serialisation, and every lab deviation is recorded.

Validation and the policy API's facts come from the real policycheck helper (built against the
pinned descheduler), so every refusal below is in the descheduler's own words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from pytest_desched.descheduler.policy import (
    NAMESPACED_PLUGINS,
    DeschedulerFacts,
    Policy,
    PolicyError,
    PolicyScope,
    canonical_json,
    checker_for,
    digest_of_rendered,
    facts_for,
    load_default,
)
from pytest_desched.tools.resources import manifest_path
from pytest_desched.tools.versions import load_versions

pytestmark = pytest.mark.policycheck

RUNBOOK_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 1
maxNoOfPodsToEvictPerNamespace: 1
maxNoOfPodsToEvictTotal: 2
gracePeriodSeconds: 30
evictionFailureEventNotification: true
profiles:
- name: safe-rebalance
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
      minReplicas: 2
      minPodAge: 10m
      labelSelector:
        matchLabels:
          descheduler.example.com/enabled: "true"
      podProtections:
        extraEnabled:
        - PodsWithPVC
        - PodsWithoutPDB
        - PodsWithResourceClaims
  - name: RemovePodsViolatingNodeAffinity
    args:
      nodeAffinityType:
      - requiredDuringSchedulingIgnoredDuringExecution
  plugins:
    deschedule:
      enabled:
      - RemovePodsViolatingNodeAffinity
"""
EVICTOR = "profiles[0].pluginConfig[DefaultEvictor].args"
WHY = "lab pods are seconds old"


def _reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed(v) for k, v in reversed(list(value.items()))}
    if isinstance(value, list):
        return [_reversed(v) for v in value]
    return value


def _helm_render(policy: Policy) -> str:
    """What charts/descheduler/templates/configmap.yaml puts in policy.yaml (toYaml sorts keys)."""
    values = policy.chart_values()
    body = yaml.safe_dump(values["deschedulerPolicy"], sort_keys=True, default_flow_style=False)
    return (
        f'apiVersion: "{values["deschedulerPolicyAPIVersion"]}"\n'
        f'kind: "DeschedulerPolicy"\n{body.strip()}\n'
    )


def _mutated(change: Callable[[dict[str, Any]], None]) -> Policy:
    doc = load_default().to_dict()
    change(doc)
    return Policy.from_dict(doc, source="mutated")


def _profile(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["profiles"][0]


def _evictor(doc: dict[str, Any]) -> dict[str, Any]:
    return _profile(doc)["pluginConfig"][0]["args"]


def _deschedule(doc: dict[str, Any]) -> list[str]:
    return _profile(doc)["plugins"]["deschedule"]["enabled"]


# ------------------------------------------------------------------------- shipped policy ---


def test_shipped_policy_is_the_runbook_policy_unmodified() -> None:
    text = manifest_path("policy-safe-rebalance.yaml").read_text()
    assert text.startswith("#") and "safe-rebalance" in text.splitlines()[0]
    assert yaml.safe_load(text) == yaml.safe_load(RUNBOOK_POLICY)
    assert RUNBOOK_POLICY in text  # verbatim, not merely equivalent


def test_shipped_policy_loads_validates_and_exposes_its_settings() -> None:
    policy = load_default()
    assert policy.validate() is policy
    assert policy.overrides == []
    assert policy.limits == {"node": 1, "namespace": 1, "total": 2}
    assert policy.event_notification is True
    assert policy.profile_names == ["safe-rebalance"]
    assert policy.evictor_args()["minPodAge"] == "10m"
    assert policy.plugin_args("RemovePodsViolatingNodeAffinity", "safe-rebalance") == {
        "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]
    }
    # v0.36.0's setDefaultEvictor prepends DefaultEvictor to both filter extension points.
    enabled = policy.enabled_plugins()
    assert enabled["filter"] == enabled["preevictionfilter"] == ["DefaultEvictor"]
    assert enabled["deschedule"] == ["RemovePodsViolatingNodeAffinity"]


def test_accessors_return_copies() -> None:
    policy = load_default()
    policy.evictor_args()["minPodAge"] = "0s"
    policy.to_dict()["maxNoOfPodsToEvictTotal"] = 99
    assert policy.evictor_args()["minPodAge"] == "10m"
    assert policy.limits["total"] == 2


def test_plugin_args_of_unconfigured_plugin() -> None:
    policy = load_default()
    with pytest.raises(KeyError):
        policy.plugin_args("LowNodeUtilization")
    no_evictor = _mutated(lambda d: _profile(d)["pluginConfig"].pop(0))
    assert no_evictor.evictor_args() == {}  # upstream adds an all-defaults DefaultEvictor


def test_chart_values_leave_apiversion_and_kind_to_the_chart() -> None:
    values = load_default().chart_values()
    assert values["deschedulerPolicyAPIVersion"] == "descheduler/v1alpha2"
    assert "apiVersion" not in values["deschedulerPolicy"]
    assert "kind" not in values["deschedulerPolicy"]
    assert values["deschedulerPolicy"]["maxNoOfPodsToEvictTotal"] == 2


def test_to_yaml_round_trips_in_document_order() -> None:
    policy = load_default()
    text = policy.to_yaml()
    assert text == policy.to_yaml()
    assert text.splitlines()[0] == "apiVersion: descheduler/v1alpha2"
    assert Policy.from_yaml(text) == policy


# ---------------------------------------------------------------------------------- digest ---


def test_digest_is_stable_under_key_reordering_and_helm_rendering() -> None:
    policy = load_default()
    reordered = Policy.from_dict(_reversed(policy.to_dict()))
    assert next(iter(reordered.to_dict())) != "apiVersion"
    assert reordered.digest() == policy.digest()
    assert len(policy.digest()) == 64
    rendered = _helm_render(policy)
    assert digest_of_rendered(rendered) == policy.digest()
    assert policy.matches_rendered(rendered)


def test_canonical_json_folds_integral_floats() -> None:
    assert canonical_json({"b": 2.0, "a": [1]}) == '{"a":[1],"b":2}'


def test_digest_differs_after_override() -> None:
    policy = load_default()
    changed = policy.override("profiles.safe-rebalance.DefaultEvictor.minPodAge", "0s", why=WHY)
    assert changed.digest() != policy.digest()
    assert not changed.matches_rendered(_helm_render(policy))


def test_digest_of_rendered_rejects_garbage() -> None:
    with pytest.raises(PolicyError, match="not a mapping"):
        digest_of_rendered("just a string")


# ------------------------------------------------------------------------------ validation ---

REFUSED = "<root>: DL001 rejected-by-descheduler: descheduler v0.36.0 refuses it"
# (case, change, where the problem is reported, the descheduler's own words in it)
INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "unknown plugin in deschedule.enabled",
        lambda d: _deschedule(d).__setitem__(0, "RemovePodsViolatingNodeAffinty"),
        f"{REFUSED} (startup)",
        "configures deschedule extension point of non-existing plugins: "
        "map[RemovePodsViolatingNodeAffinty:{}]",
    ),
    (
        "typo'd top-level field",
        lambda d: d.__setitem__("maxNoOfPodsToEvictTotl", d.pop("maxNoOfPodsToEvictTotal")),
        'maxNoOfPodsToEvictTotl: DL002 dropped-field: "maxNoOfPodsToEvictTotl" is not a field here',
        'did you mean "maxNoOfPodsToEvictTotal"',
    ),
    (
        "string maxNoOfPodsToEvictTotal",
        lambda d: d.__setitem__("maxNoOfPodsToEvictTotal", "2"),
        f"{REFUSED} (decode)",
        "cannot unmarshal string into Go struct field DeschedulerPolicy.maxNoOfPodsToEvictTotal "
        "of type uint",
    ),
    (
        "negative maxNoOfPodsToEvictTotal",
        lambda d: d.__setitem__("maxNoOfPodsToEvictTotal", -1),
        f"{REFUSED} (decode)",
        "cannot unmarshal number -1 into Go struct field",
    ),
    (
        "bool maxNoOfPodsToEvictTotal",
        lambda d: d.__setitem__("maxNoOfPodsToEvictTotal", True),
        f"{REFUSED} (decode)",
        "cannot unmarshal bool into Go struct field",
    ),
    (
        "minPodAge in words",
        lambda d: _evictor(d).__setitem__("minPodAge", "10 minutes"),
        f"{REFUSED} (decode)",
        'time: unknown unit " minutes" in duration "10 minutes"',
    ),
    (
        "minPodAge without unit",
        lambda d: _evictor(d).__setitem__("minPodAge", 600),
        f"{REFUSED} (decode)",
        "cannot unmarshal number into Go struct field DefaultEvictorArgs.minPodAge of type string",
    ),
    (
        "misspelt podProtections name",
        lambda d: _evictor(d)["podProtections"]["extraEnabled"].__setitem__(0, "PodsWithPvc"),
        f"{REFUSED} (validate)",
        'invalid pod protection policy in ExtraEnabled: "PodsWithPvc"',
    ),
    (
        "default protection listed as extra",
        lambda d: _evictor(d)["podProtections"]["extraEnabled"].append("DaemonSetPods"),
        f"{REFUSED} (validate)",
        "Valid options are: [PodsWithPVC PodsWithoutPDB PodsWithResourceClaims]",
    ),
    (
        "bad defaultDisabled name",
        lambda d: _evictor(d)["podProtections"].__setitem__("defaultDisabled", ["PodsWithPVC"]),
        f"{REFUSED} (validate)",
        'invalid pod protection policy in DefaultDisabled: "PodsWithPVC"',
    ),
    (
        "balance plugin at deschedule",
        lambda d: (
            _deschedule(d).append("RemoveDuplicates"),
            _profile(d)["pluginConfig"].append({"name": "RemoveDuplicates"}),
        ),
        f"{REFUSED} (startup)",
        "deschedule extension point of non-existing plugins: map[RemoveDuplicates:{}]",
    ),
    (
        "evictor at deschedule",
        lambda d: _deschedule(d).append("DefaultEvictor"),
        f"{REFUSED} (startup)",
        "deschedule extension point of non-existing plugins: map[DefaultEvictor:{}]",
    ),
    (
        "camelCase preEvictionFilter",
        lambda d: _profile(d)["plugins"].__setitem__(
            "preEvictionFilter", {"enabled": ["DefaultEvictor"]}
        ),
        'profiles[0].plugins.preEvictionFilter: DL002 dropped-field: "preEvictionFilter" is not a field here',
        'did you mean "preevictionfilter"',
    ),
    (
        "plugin enabled without pluginConfig",
        lambda d: _deschedule(d).append("RemovePodsViolatingNodeTaints"),
        f"{REFUSED} (startup)",
        'unable to find "RemovePodsViolatingNodeTaints" plugin config',
    ),
    (
        "sort extension point",
        lambda d: _profile(d)["plugins"].__setitem__("sort", {"enabled": ["DefaultEvictor"]}),
        "profiles[0].plugins.sort.enabled",
        'the "sort" extension point is decoded but never run',
    ),
    (
        "disabled list",
        lambda d: _profile(d)["plugins"]["deschedule"].__setitem__("disabled", ["PodLifeTime"]),
        "profiles[0].plugins.deschedule.disabled",
        "`disabled` lists are decoded but never read",
    ),
    (
        "second pluginConfig for one plugin",
        lambda d: _profile(d)["pluginConfig"].append(dict(_profile(d)["pluginConfig"][1])),
        "profiles[0].pluginConfig[2]",
        "only the first (pluginConfig[1]) is used",
    ),
    (
        "unknown pluginConfig name",
        lambda d: _profile(d)["pluginConfig"][1].__setitem__("name", "NodeAffinity"),
        f"{REFUSED} (validate)",
        "plugin NodeAffinity in pluginConfig not registered",
    ),
    (
        "unknown evictor arg",
        lambda d: _evictor(d).__setitem__("minPodAges", "1m"),
        'profiles[0].pluginConfig[0].args.minPodAges: DL002 dropped-field: "minPodAges" is not a field here',
        'did you mean "minPodAge"',
    ),
    (
        "bad nodeAffinityType (only logged at run time)",
        lambda d: _profile(d)["pluginConfig"][1]["args"].__setitem__(
            "nodeAffinityType", ["requiredDuringScheduling"]
        ),
        "profiles[0].pluginConfig[1].args",
        'logs "Invalid nodeAffinityType" (nodeAffinity=requiredDuringScheduling) on every cycle',
    ),
    (
        "missing nodeAffinityType",
        lambda d: _profile(d)["pluginConfig"][1].pop("args"),
        f"{REFUSED} (validate)",
        "nodeAffinityType needs to be set",
    ),
    (
        "unquoted label value",
        lambda d: _evictor(d)["labelSelector"]["matchLabels"].__setitem__(
            "descheduler.example.com/enabled", True
        ),
        f"{REFUSED} (decode)",
        "cannot unmarshal bool into Go struct field LabelSelector.labelSelector.matchLabels",
    ),
    (
        "wrong apiVersion",
        lambda d: d.__setitem__("apiVersion", "descheduler/v1alpha1"),
        f"{REFUSED} (decode)",
        'no kind "DeschedulerPolicy" is registered for version "descheduler/v1alpha1"',
    ),
    (
        "helm template in a value",
        lambda d: _evictor(d).__setitem__("nodeSelector", "{{ .Values.x }}"),
        "profiles[0].pluginConfig[DefaultEvictor].args.nodeSelector",
        "`tpl`",
    ),
]


@pytest.mark.parametrize(
    ("change", "where", "words"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_policy_is_refused_in_the_descheduler_s_words(
    change: Callable[[dict[str, Any]], None], where: str, words: str
) -> None:
    policy = _mutated(change)
    with pytest.raises(PolicyError) as excinfo:
        policy.validate()
    assert isinstance(excinfo.value, ValueError)
    matching = [p for p in excinfo.value.problems if p.startswith(where)]
    assert matching, f"{where!r} not in {excinfo.value.problems}"
    assert any(words in p for p in matching), f"{words!r} not in {matching}"
    assert "fix: " in matching[0]


# What the hand-written mirror refused but v0.36.0 itself starts with: not validation errors.
ACCEPTED_BY_THE_DESCHEDULER: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("negative minPodAge", lambda d: _evictor(d).__setitem__("minPodAge", "-5m")),
    ("no deschedule or balance plugin", lambda d: _deschedule(d).clear()),
    ("duplicate profile name", lambda d: d["profiles"].append(dict(_profile(d)))),
    ("empty profile name", lambda d: _profile(d).__setitem__("name", "")),
]


@pytest.mark.parametrize(
    "change",
    [c[1] for c in ACCEPTED_BY_THE_DESCHEDULER],
    ids=[c[0] for c in ACCEPTED_BY_THE_DESCHEDULER],
)
def test_what_the_descheduler_accepts_validates(change: Callable[[dict[str, Any]], None]) -> None:
    policy = _mutated(change)
    assert policy.validate() is policy
    assert policy.check().accepted


def test_all_problems_are_reported_at_once() -> None:
    def two_mistakes(d: dict[str, Any]) -> None:
        d["maxNoOfPodsToEvictTotl"] = 2
        _evictor(d)["nodeSelector"] = "{{ x }}"

    with pytest.raises(PolicyError) as excinfo:
        _mutated(two_mistakes).validate()
    assert [p.split(":", 1)[0] for p in excinfo.value.problems] == [
        "maxNoOfPodsToEvictTotl",
        "profiles[0].pluginConfig[DefaultEvictor].args.nodeSelector",
    ]


@pytest.mark.parametrize("age", ["0", "0s", "90s", "10m", "1h30m", "1.5h", "300ms"])
def test_go_durations_accepted(age: str) -> None:
    _mutated(lambda d: _evictor(d).__setitem__("minPodAge", age)).validate()


@pytest.mark.parametrize(
    "text",
    ["- apiVersion: descheduler/v1alpha2\n", "just a string\n", "", "42\n"],
    ids=["list", "scalar", "empty", "number"],
)
def test_not_a_mapping_is_rejected_on_load(text: str) -> None:
    with pytest.raises(PolicyError, match="not a mapping"):
        Policy.from_yaml(text)


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(PolicyError, match="not a mapping"):
        Policy.from_dict(["profiles"])  # type: ignore[arg-type]


def test_bad_yaml_syntax_is_rejected_on_load() -> None:
    with pytest.raises(PolicyError, match="YAML syntax error") as excinfo:
        Policy.from_yaml("apiVersion: descheduler/v1alpha2\nprofiles: [\n", source="broken.yaml")
    assert "broken.yaml" in str(excinfo.value)


def test_duplicate_yaml_keys_are_rejected_on_load() -> None:
    text = RUNBOOK_POLICY + "maxNoOfPodsToEvictTotal: 5\n"
    with pytest.raises(PolicyError, match="line 32: duplicate key 'maxNoOfPodsToEvictTotal'"):
        Policy.from_yaml(text)


# ------------------------------------------------------------------------------- overrides ---


def test_override_is_recorded_and_leaves_the_original_alone() -> None:
    policy = load_default()
    lab = policy.override("profiles.safe-rebalance.DefaultEvictor.minPodAge", "0s", why=WHY)
    assert lab.overrides == [
        {"path": f"{EVICTOR}.minPodAge", "old": "10m", "new": "0s", "why": WHY}
    ]
    assert lab.evictor_args()["minPodAge"] == "0s"
    assert policy.evictor_args()["minPodAge"] == "10m" and policy.overrides == []
    lab.validate()
    assert "'10m' -> '0s'" in lab.overrides_report()


def test_override_paths_in_every_syntax() -> None:
    policy = (
        load_default()
        .override("maxNoOfPodsToEvictTotal", 5, why="bigger lab")
        .override(f"{EVICTOR}.minReplicas", 1, why="single replica lab")
        .override("profiles[0].DefaultEvictor.nodeFit", False, why="kwok nodes")
        .override(
            "profiles.safe-rebalance.DefaultEvictor.labelSelector.matchLabels"
            "[descheduler.example.com/enabled]",
            "yes",
            why="label value",
        )
    )
    assert [o["path"] for o in policy.overrides] == [
        "maxNoOfPodsToEvictTotal",
        f"{EVICTOR}.minReplicas",
        f"{EVICTOR}.nodeFit",
        f"{EVICTOR}.labelSelector.matchLabels[descheduler.example.com/enabled]",
    ]
    assert [o["old"] for o in policy.overrides] == [2, 2, True, "true"]
    assert policy.limits["total"] == 5
    policy.validate()


def test_with_overrides_shares_one_reason() -> None:
    policy = load_default().with_overrides(
        {"maxNoOfPodsToEvictPerNode": 3, "gracePeriodSeconds": 0}, why="fast lab"
    )
    assert [(o["path"], o["new"], o["why"]) for o in policy.overrides] == [
        ("maxNoOfPodsToEvictPerNode", 3, "fast lab"),
        ("gracePeriodSeconds", 0, "fast lab"),
    ]


def test_override_can_add_plugin_config_and_delete_fields() -> None:
    policy = load_default().override(
        "profiles.safe-rebalance.RemovePodsViolatingNodeTaints.includePreferNoSchedule",
        True,
        why="taint lab",
    )
    assert policy.plugin_args("RemovePodsViolatingNodeTaints") == {"includePreferNoSchedule": True}
    assert policy.overrides[0]["path"] == (
        "profiles[0].pluginConfig[RemovePodsViolatingNodeTaints].args.includePreferNoSchedule"
    )
    dropped = policy.override("profiles.safe-rebalance.DefaultEvictor.labelSelector", None, why="x")
    assert "labelSelector" not in dropped.evictor_args()
    assert dropped.overrides[-1]["new"] is None


def test_noop_override_is_not_recorded() -> None:
    assert load_default().override("maxNoOfPodsToEvictTotal", 2, why="same").overrides == []


def test_override_needs_a_reason_and_a_valid_path() -> None:
    policy = load_default()
    with pytest.raises(ValueError, match="why"):
        policy.override("maxNoOfPodsToEvictTotal", 3, why=" ")
    with pytest.raises(PolicyError, match="no entry named 'nope'"):
        policy.override("profiles.nope.DefaultEvictor.minPodAge", "0s", why=WHY)
    with pytest.raises(PolicyError, match="cannot parse"):
        policy.override("profiles..x", 1, why=WHY)
    with pytest.raises(PolicyError, match="scalar"):
        policy.override("maxNoOfPodsToEvictTotal.x", 1, why=WHY)


def test_invalid_override_is_caught_by_validate() -> None:
    policy = load_default().override(
        "profiles.safe-rebalance.DefaultEvictor.minPodAge", "0", why=WHY
    )
    policy.validate()  # bare "0" is a valid Go duration
    bad = policy.override("profiles.safe-rebalance.DefaultEvictor.minPodAge", 0, why=WHY)
    with pytest.raises(PolicyError, match=r"DefaultEvictorArgs\.minPodAge of type string"):
        bad.validate()


# ------------------------------------------------------------ facts from the descheduler ---


def test_no_schema_tables_remain_in_python() -> None:
    """The mirror is gone: no schema module; every fact comes from the helper."""
    import importlib.util

    assert importlib.util.find_spec("pytest_desched.descheduler.policy.schema") is None


def test_facts_come_from_the_pinned_descheduler() -> None:
    facts = facts_for()
    assert isinstance(facts, DeschedulerFacts)
    assert facts.version == load_versions().descheduler.version == "v0.36.0"
    assert facts_for() is facts  # asked once per process
    assert facts_for(load_versions().descheduler.version) is facts
    assert (facts.api_version, facts.kind) == ("descheduler/v1alpha2", "DeschedulerPolicy")
    assert facts.default_evictor == "DefaultEvictor"
    assert facts.evicting_points == ("deschedule", "balance")
    assert set(facts.extension_points) - set(facts.run_points) == {"presort", "sort"}


def test_validate_defaults_to_the_pinned_version() -> None:
    typo = _mutated(lambda d: d.__setitem__("maxNoOfPodsToEvictPerNod", 1))
    with pytest.raises(PolicyError) as default:
        typo.validate()
    with pytest.raises(PolicyError) as pinned:
        typo.validate(load_versions().descheduler.version)
    assert default.value.problems == pinned.value.problems
    assert 'did you mean "maxNoOfPodsToEvictPerNode"' in default.value.problems[0]


def test_effective_policy_is_the_descheduler_s_defaults() -> None:
    eff = load_default().effective()
    evictor = eff["profiles"][0]["pluginConfig"][0]
    assert evictor["name"] == "DefaultEvictor"
    assert evictor["args"]["priorityThreshold"]["value"] == 2000000000  # system-critical
    assert evictor["args"]["minPodAge"] == "10m0s"  # metav1.Duration's own form
    broken = _mutated(lambda d: _deschedule(d).append("DefaultEvictor"))
    with pytest.raises(PolicyError, match="non-existing plugins"):
        broken.effective()


def test_override_shorthand_takes_the_registered_plugin_names() -> None:
    assert "RemovePodsViolatingNodeTaints" in facts_for().plugins
    policy = load_default().override("profiles[0].PodLifeTime.maxPodLifeTimeSeconds", 60, why=WHY)
    assert policy.overrides[0]["path"] == (
        "profiles[0].pluginConfig[PodLifeTime].args.maxPodLifeTimeSeconds"
    )
    typo = load_default().override("profiles[0].PodLifeTimes.x", 1, why=WHY)
    assert typo.overrides[0]["path"] == "profiles[0].PodLifeTimes.x"  # not a plugin: a key


def test_scope_uses_the_descheduler_s_evicting_points_and_namespaced_plugins() -> None:
    scope = PolicyScope(node_selector="lab=true")
    scoped = scope.apply(load_default(), "lab")
    assert scoped.plugin_args("RemovePodsViolatingNodeAffinity")["namespaces"] == {
        "include": ["lab"]
    }
    assert scope.problems(scoped) == []
    assert "LowNodeUtilization" not in NAMESPACED_PLUGINS
    assert "RemoveDuplicates" in NAMESPACED_PLUGINS
    lnu = load_default().with_overrides(
        {
            "profiles[0].plugins.balance.enabled": ["LowNodeUtilization"],
            "profiles[0].LowNodeUtilization.thresholds": {"cpu": 20},
        },
        why="test",
    )
    with pytest.raises(PolicyError, match="LowNodeUtilization cannot be limited"):
        scope.apply(lnu, "lab")


def test_validate_answers_from_memory_for_a_policy_it_has_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checker = checker_for()
    policy = load_default()
    first = policy.check()
    calls: list[Any] = []
    run = checker._run
    monkeypatch.setattr(checker, "_run", lambda *a, **k: calls.append(a) or run(*a, **k))
    assert policy.check() == first
    policy.validate()
    assert calls == []
    policy.override("maxNoOfPodsToEvictTotal", 3, why=WHY).validate()
    assert len(calls) == 1  # a new text is checked by the helper
