"""The comparison core: identities without random names, differences, coverage, and the one
"not comparable" wording."""

from __future__ import annotations

import json

from pytest_desched.outcome.identity import (
    NOT_COMPARABLE,
    Coverage,
    NotCompared,
    answer,
    answer_label,
    compare_runs,
    differences,
    generation,
    identity_of,
    owner_from_name,
)

RS = "ReplicaSet/web-7c9d"


def test_an_identity_never_carries_a_controllers_random_name() -> None:
    a = identity_of("prod/web-7c9d-aaaaa", RS, 1, "n1", "evicted", "api-server", "PodLifeTime")
    b = identity_of("prod/web-7c9d-zzzzz", RS, 1, "n1", "evicted", "api-server", "PodLifeTime")
    assert a == b and a.name is None
    assert a != identity_of("prod/web-7c9d-aaaaa", RS, 2, "n1", "evicted", "api-server")
    # a bare pod has no controller to rename it: its own name is stable, and kept
    bare = identity_of("prod/adhoc", None, 0, "n1", "evicted", bare=True)
    assert bare.name == "adhoc"
    assert bare != identity_of("prod/other", None, 0, "n1", "evicted", bare=True)
    assert identity_of("prod/adhoc", None).name is None  # owner unknown: no name either
    assert identity_of("p/x", RS, checks=["b", "a"]).checks == ("a", "b")


def test_generation_follows_the_replacement_chain() -> None:
    parents = {"ns/r2": "ns/r1", "ns/r1": "ns/orig", "ns/loop": "ns/loop2", "ns/loop2": "ns/loop"}
    assert [generation(p, parents) for p in ("ns/orig", "ns/r1", "ns/r2")] == [0, 1, 2]
    assert generation("ns/loop", parents) == 1  # a loop in the map ends the walk


def test_differences_count_identities_per_run_and_name_the_pods() -> None:
    ev = {"fate": "evicted", "layer": "api-server"}
    run1 = {"p/a-1": identity_of("p/a-1", RS, node="n1", **ev)}
    run2 = {"p/a-2": identity_of("p/a-2", RS, node="n1", **ev)}
    assert differences([run1, run2]) == []  # a sibling on the same node: the same
    run3 = {"p/a-3": identity_of("p/a-3", RS, node="n2", **ev)}
    diff = differences([run1, run3])
    assert [d.counts for d in diff] == [[1, 0], [0, 1]]
    assert diff[0].to_dict(("incident", "replay"))["incident"] == ["p/a-1"]
    assert diff[0].identity.label == "p ReplicaSet/web-7c9d@n1: evicted (api-server)"


def test_nothing_compared_is_not_comparable_never_same() -> None:
    none_of_14 = Coverage("evicted pods", 0, 14)
    assert answer(True, none_of_14) == NOT_COMPARABLE == "not comparable"
    assert not answer(True, none_of_14)  # `if same:` never passes on nothing
    assert json.dumps(answer(True, none_of_14)) == '"not comparable"'
    assert none_of_14.line() == "compared 0 of 14 evicted pods: not comparable"
    assert answer(True, Coverage("evicted pods", 3, 14)) is True  # over what was compared
    assert answer(False, Coverage("evicted pods", 0, 0)) is False  # nothing to cover: fine
    assert answer(True, Coverage("evicted pods", 0, 0, anything=False)) == NOT_COMPARABLE
    assert [answer_label(v) for v in (True, False, NOT_COMPARABLE)] == [
        "yes",
        "no",
        NOT_COMPARABLE,
    ]


def test_runs_compare_only_when_every_run_measured_something() -> None:
    ident = identity_of("p/a-1", RS, node="n1", fate="evicted")
    assert compare_runs([{"p/a-1": ident}, {"p/a-9": ident}]).same is True
    skipped = NotCompared("run 2", "every round skipped: requires >=2 nodes")
    c = compare_runs([{"p/a-1": ident}, {"p/a-9": ident}], [skipped])
    assert c.same == NOT_COMPARABLE and c.coverage is not None
    assert c.coverage.line() == "compared 2 of 3 runs: not comparable"
    assert compare_runs([{"p/a-1": ident}]).same == NOT_COMPARABLE  # one run: nothing to compare


def test_lineage_and_owner_from_name_drop_random_names_and_keep_a_bare_pods() -> None:
    """What fidelity, the canary and the loop detector's ledger reading group pods by."""
    assert owner_from_name("web-7d4f9c8b6-x2kq9") == owner_from_name("web-7d4f9c8b6-q8wzt") == "web"
    assert owner_from_name("web-0") == "web-0"  # a StatefulSet pod: no run renames it
    assert identity_of("prod/web-7c9d-aaaaa", RS).lineage == f"prod/{RS}"
    assert identity_of("prod/adhoc", bare=True).lineage == "prod/adhoc"
