"""The fate vocabulary: one word per fact, old words read as today's, the chain's order."""

from __future__ import annotations

import pytest

from pytest_desched.outcome.fates import (
    CHAIN,
    DECIDED,
    EVICTED_LABEL,
    FATE_RANK,
    Fate,
    Layer,
    deciding_label,
)


@pytest.mark.parametrize(
    ("old", "now"),
    [("not-selected", Fate.NOT_PICKED), ("untouched", Fate.NOT_PICKED), ("evict", Fate.EVICTED)],
)
def test_an_old_word_for_a_fate_reads_as_todays(old: str, now: Fate) -> None:
    assert Fate(old) is now


def test_a_word_that_is_no_fate_is_refused() -> None:
    with pytest.raises(ValueError, match="'evicted-ish' is not a valid Fate"):
        Fate("evicted-ish")


def test_a_fate_compares_and_serializes_as_its_word() -> None:
    """Old JSON and tests compare fates with strings: a StrEnum is its value."""
    assert Fate.NOT_PICKED == "not-picked" and f"{Fate.ROUND_SKIPPED}" == "round-skipped"


def test_every_decided_fate_has_a_rank_and_the_furthest_link_wins() -> None:
    assert set(FATE_RANK) == set(DECIDED)
    assert FATE_RANK[Fate.EVICTED] > FATE_RANK[Fate.REFUSED] > FATE_RANK[Fate.LIMITED]
    assert FATE_RANK[Fate.NODEFIT] > FATE_RANK[Fate.FILTERED] > FATE_RANK[Fate.ERROR]
    assert CHAIN[0] is Layer.POLICY and CHAIN.index(Layer.LIMITS) < CHAIN.index(Layer.API_SERVER)


def test_the_deciding_label_names_an_eviction_apart_from_a_refusal() -> None:
    assert deciding_label(Fate.EVICTED, Layer.API_SERVER) == EVICTED_LABEL == "api-server(evicted)"
    assert deciding_label(Fate.REFUSED, Layer.API_SERVER) == "api-server"
    assert deciding_label(Fate.NOT_PICKED, None) == "policy"
    assert deciding_label(Fate.UNDECIDED, None) == ""
