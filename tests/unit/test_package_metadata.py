"""Package metadata (issue 40): [project.urls] in pyproject.toml and the links the tool prints
come from one address, and a lint rule's link lands on its anchor in docs/lint.md."""

from __future__ import annotations

import json
import tomllib

import pytest_desched
from pytest_desched.descheduler.policy.lint_output import RULES, render, rule_link
from tests.unit import REPO


def test_project_urls_and_the_printed_links_agree() -> None:
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Source", "Issues"}
    assert urls["Homepage"] == urls["Source"] == pytest_desched.PROJECT_URL
    assert urls["Documentation"] == pytest_desched.DOCS_URL
    assert urls["Issues"] == f"{pytest_desched.PROJECT_URL}/issues"
    assert all(u.startswith("https://") and "OWNER" not in u for u in urls.values())


def test_sarif_help_uri_is_the_rules_anchor_in_docs_lint_md() -> None:
    """Was: a placeholder host written out in lint_output.py, agreeing with nothing."""
    docs = (REPO / "docs" / "lint.md").read_text()
    sarif = json.loads(render([], "sarif", "v0"))
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == set(RULES)
    for r in rules:
        page, anchor = r["helpUri"].split("#")
        assert (
            page
            == f"{pytest_desched.PROJECT_URL}/blob/main/docs/lint.md"
            == rule_link(r["id"]).split("#")[0]
        )
        assert anchor == r["id"].lower() and f'<a id="{anchor}"></a>' in docs
