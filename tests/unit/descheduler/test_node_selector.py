"""The policy's nodeSelector counts the nodes the descheduler's `found` counts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_desched.descheduler.node_selector import count_selected, matcher, node_facts

LAB = {"desched.io/lab": "true", "zone": "a", "gen": "3"}
OTHER = {"zone": "b", "gen": "10"}


@pytest.mark.parametrize(
    ("selector", "lab", "other"),
    [
        (None, True, True),
        ("", True, True),
        ("desched.io/lab=true", True, False),
        ("desched.io/lab==true", True, False),
        ("desched.io/lab", True, False),
        ("!desched.io/lab", False, True),
        ("zone!=a", False, True),
        ("desched.io/lab!=true", False, True),  # a node without the key matches !=
        ("zone in (a, c)", True, False),
        ("zone notin (a,c)", False, True),
        ("gen>5", False, True),
        ("gen<5", True, False),
        ("zone in (a,b), desched.io/lab=true", True, False),
        (" zone = b ", False, True),
    ],
)
def test_the_selector_grammar_matches_as_apimachinery_does(
    selector: str | None, lab: bool, other: bool
) -> None:
    match = matcher(selector)
    assert (match(LAB), match(OTHER)) == (lab, other)


@pytest.mark.parametrize("bad", ["a in b", "gen>x", "=x", "a=b=c"])
def test_a_selector_that_does_not_parse_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        matcher(bad)


def node(labels: dict[str, str], ready: bool = True) -> SimpleNamespace:
    cond = SimpleNamespace(type="Ready", status="True" if ready else "False")
    return SimpleNamespace(
        metadata=SimpleNamespace(labels=labels), status=SimpleNamespace(conditions=[cond])
    )


def test_node_facts_keep_ready_nodes_labels_and_the_policy_selector() -> None:
    nodes = [node(LAB), node(OTHER), node(OTHER), node(LAB, ready=False)]
    facts = node_facts(nodes, {"nodeSelector": "desched.io/lab=true"})
    assert facts["ready_nodes"] == 3 and facts["node_selector"] == "desched.io/lab=true"
    assert count_selected(facts["node_selector"], facts["ready_node_labels"]) == 1
    assert node_facts(nodes, {})["node_selector"] is None
