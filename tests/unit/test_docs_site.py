"""The docs site (issue 52): `mkdocs build --strict` succeeds offline, its generated CLI
reference lists every subcommand `desched --help` does, and strict mode really fails on a
broken link and on a page left out of the nav."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

import pytest_desched
from pytest_desched.commands import parser
from tests.unit import REPO

# not --quiet: it hides the warnings --strict counts, and the build passes whatever is broken
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """One offline build (~2 s): no fonts, no social cards, nothing fetched."""
    env = {"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(site.parent)}
    return subprocess.run(
        [*MKDOCS, "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def _subcommands() -> list[str]:
    (sub,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_the_site_builds_strictly_and_its_cli_page_matches_the_parser(tmp_path: Path) -> None:
    done = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    top = subprocess.run(
        [str(Path(sys.executable).parent / "desched"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    listed = re.search(r"\{([a-z,-]+)\}", top).group(1).split(",")  # type: ignore[union-attr]
    assert listed == _subcommands() and len(listed) > 10  # `desched --help`'s own list
    for name in listed:
        assert f'id="desched-{name}"' in cli, f"desched {name}: not on the CLI page"
    plugin = (tmp_path / "site" / "reference" / "plugin" / "index.html").read_text()
    assert "desched_cluster" in plugin and "descheduler_e2e" in plugin
    home = (tmp_path / "site" / "index.html").read_text()
    assert 'href="replay/"' in home  # the README's docs/replay.md, resolved on the site


def _copy(tmp_path: Path) -> Path:
    """The site's sources in tmp_path: mkdocs.yml, docs/, the hook, the README."""
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    (tmp_path / "dev").mkdir()
    shutil.copy(REPO / "dev" / "mkdocs_hooks.py", tmp_path / "dev" / "mkdocs_hooks.py")
    return tmp_path / "mkdocs.yml"


def test_strict_mode_fails_on_a_broken_link(tmp_path: Path) -> None:
    config = _copy(tmp_path)
    page = tmp_path / "docs" / "replay.md"
    page.write_text(page.read_text() + "\nSee [gone](no-such-page.md).\n")
    done = _build(config, tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stderr


def test_strict_mode_fails_on_a_page_missing_from_the_nav(tmp_path: Path) -> None:
    config = _copy(tmp_path)
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n")
    done = _build(config, tmp_path / "site")
    assert done.returncode != 0 and "orphan.md" in done.stderr


def test_the_nav_names_every_page_in_docs() -> None:
    """Read from mkdocs.yml itself (the build checks it too): the list a reader browses."""
    nav = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.SafeLoader)["nav"]

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for n in node for p in pages(n)]
        if isinstance(node, dict):
            return [p for v in node.values() for p in pages(v)]
        return []

    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.SafeLoader)
    assert config["site_url"] == pytest_desched.DOCS_URL  # the package metadata's Documentation
    assert config["theme"]["font"] is False and config["plugins"] == ["search"]  # offline
    listed = set(pages(nav))
    assert {p.name for p in (REPO / "docs").glob("*.md")} <= listed
    assert {"index.md", "reference/cli.md", "reference/plugin.md"} <= listed
