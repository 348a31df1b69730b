"""Each figure the docs give lives in bench/RESULTS.md ("Figures the docs cite"); a doc that
states one tags it `VALUE<!-- figure:ID -->`, and the text before the tag must be the table's
value (issue 40: the README, docs/benchmark.md, docs/replay.md and docs/canary.md gave
different figures for the same test count, cold build, replay and static canary).

Untagged restatements are caught for the phrases the docs used for them (PHRASES): a number in
such a phrase must be the table's too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit import REPO

RESULTS = REPO / "bench" / "RESULTS.md"
DOCS = sorted(
    [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        *(REPO / "examples" / "ci").glob("*.yml"),
        REPO / "pytest_desched" / "templates" / "init" / "descheduler-e2e.yml",
    ]
)
TAG = re.compile(r"<!-- figure:([\w-]+) -->")

# figure ID -> phrases (group 1: the number) in which a doc restates it without a tag
PHRASES: dict[str, list[str]] = {
    "cold-tools": [r"(\d+) min(?:<!--[^>]*-->)? cold", r"keeps its (\d+)-minute build"],
    "static-canary": [r"(\d+(?:\.\d+)?) s(?:<!--[^>]*-->)? (?:here )?once the candidate is built"],
    "test-count": [r"about ([\d,]+)(?:<!--[^>]*-->)? tests"],
    "replay-1k": [r"1,000 nodes / 10,000 pods restored plus one round in\s+(\d+(?:\.\d+)?) s"],
}


def figures() -> dict[str, str]:
    """ID -> value, from the table under "## Figures the docs cite"."""
    section = RESULTS.read_text().split("## Figures the docs cite", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return {r[0].strip(): r[2].strip() for r in rows[1:] if not set(r[0].strip()) <= {"-"}}


def _number(value: str) -> str:
    return re.sub(r"[^\d.,]", "", value.split()[0] if value[0].isdigit() else value).strip(".,")


def test_the_table_has_the_figures_the_docs_tag() -> None:
    table = figures()
    assert {"cold-tools", "make-test", "static-canary", "replay-1k"} <= set(table)
    tagged = {m.group(1) for doc in DOCS for m in TAG.finditer(doc.read_text())}
    assert tagged - set(table) == set(), "tags naming no figure of bench/RESULTS.md"
    assert set(table) - tagged == set(), "figures no doc cites: drop them or cite them"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_tagged_figure_is_the_tables(doc: Path) -> None:
    table, text = figures(), doc.read_text()
    for m in TAG.finditer(text):
        before = text[: m.start()].rstrip("*")
        want = table[m.group(1)]
        assert before.endswith(want), (
            f"{doc.name}: figure {m.group(1)} is {want!r} in bench/RESULTS.md, the doc says "
            f"{before[-len(want) - 10 :]!r}"
        )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_an_untagged_restatement_agrees(doc: Path) -> None:
    table, text = figures(), " ".join(doc.read_text().split())
    for fid, phrases in PHRASES.items():
        want = _number(table[fid])
        for phrase in phrases:
            for m in re.finditer(phrase, text):
                assert m.group(1) == want, (
                    f"{doc.name}: {m.group(0)!r} restates figure {fid} as {m.group(1)}, "
                    f"bench/RESULTS.md says {table[fid]!r}"
                )
