"""Package metadata (issue 40): [project.urls] in pyproject.toml and the links the tool prints
come from one address, a lint rule's link lands on its anchor in docs/lint.md, and the long
description (README.md as built by the backend) carries only links that work on an index page."""

from __future__ import annotations

import email.parser
import json
import re
import subprocess
import sys
import tarfile
import tomllib
from email.message import Message
from pathlib import Path

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


# Where a Markdown or HTML link names its target: [text](target), [label]: target, href=/src=.
_LINK_TARGETS = re.compile(
    r"\]\(\s*<?([^)\s>]+)"
    r"|^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)"
    r"|\b(?:href|src)\s*=\s*[\"']([^\"']+)",
    re.MULTILINE,
)
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")


def _targets(markdown: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _LINK_TARGETS.finditer(markdown)]


def _built_descriptions(out: Path) -> dict[str, Message]:
    """The wheel's METADATA and the sdist's PKG-INFO, built offline by the project's own
    backend through its PEP 517 hooks, in a process of its own as a build frontend runs it
    (~1 s; hatch-fancy-pypi-readme comes with the dev extra)."""
    hooks = (
        "import sys; from hatchling.build import prepare_metadata_for_build_wheel, build_sdist;"
        "print(prepare_metadata_for_build_wheel(sys.argv[1])); print(build_sdist(sys.argv[1]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", hooks, str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stderr[-2000:]}\n(pip install -e '.[dev]')"
    dist_info, sdist = proc.stdout.split()
    with tarfile.open(out / sdist) as tar:
        member = tar.extractfile(f"{sdist.removesuffix('.tar.gz')}/PKG-INFO")
        assert member is not None
        pkg_info = member.read().decode()
    parse = email.parser.Parser().parsestr
    return {
        "wheel": parse((out / dist_info / "METADATA").read_text()),
        "sdist": parse(pkg_info),
    }


def test_the_long_description_links_work_on_an_index_page(tmp_path: Path) -> None:
    """Was: README.md as is, whose docs/... and examples/... links lead nowhere on an index
    page. The repository's README keeps them relative; the built ones are absolute, at main."""
    readme = (REPO / "README.md").read_text()
    relative = [t for t in _targets(readme) if not _SCHEME.match(t)]
    assert any(t.startswith("docs/") for t in relative)  # the checkout's README stays relative
    at_main = f"{pytest_desched.PROJECT_URL}/blob/main/"
    for built, meta in _built_descriptions(tmp_path).items():
        assert meta["Description-Content-Type"] == "text/markdown", built
        text = str(meta.get_payload())
        targets = _targets(text)
        assert [t for t in targets if not _SCHEME.match(t)] == [], built
        assert len(targets) == len(_targets(readme)), built  # no link lost or made
        for t in relative:
            assert (
                f"]({at_main if not t.startswith('#') else pytest_desched.PROJECT_URL}{t})" in text
            )
            path = t.split("#")[0]
            assert not path or (REPO / path).exists(), f"README links to {t}: no such file"


def test_the_readme_rewrite_uses_the_project_url() -> None:
    """One address: the substitutions' replacements are made from pytest_desched.PROJECT_URL."""
    hook = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["metadata"]
    replacements = [s["replacement"] for s in hook["hooks"]["fancy-pypi-readme"]["substitutions"]]
    url = pytest_desched.PROJECT_URL
    assert replacements == [f"]({url}#", f"]({url}/blob/main/\\1)"]


def test_the_wheel_holds_what_a_user_runs() -> None:
    """Build tooling (the kind node-image builder, which apt-get installs Debian packages and
    starts a dockerd; the lint-bin wheel's packaging) lives in the checkout's dev/, which the
    wheel does not pack (issue 51 item 5)."""
    wheel = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    assert wheel["targets"]["wheel"]["packages"] == ["pytest_desched"]
    assert (REPO / "dev" / "kind_node" / "build.py").is_file()
    assert (REPO / "dev" / "lint_wheel.py").is_file()
    package = Path(pytest_desched.__file__).parent
    builders = [
        str(p.relative_to(package))
        for p in sorted(package.rglob("*.py"))
        if re.search(r"apt-get|mmdebstrap|hatchling", p.read_text())
    ]
    assert builders == [], f"build tooling in the shipped package: {builders}"
