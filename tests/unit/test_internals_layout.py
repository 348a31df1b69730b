"""docs/internals.md's layout table matches the tree (issue 51 item 9).

Every package and folder the table names exists, every module it names exists in its row's
package, and every package of the engine (a folder with `__init__.py`) is named, so a move
that forgets the page fails here instead of leaving a reader a map of an older tree.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit import REPO

PAGE = REPO / "docs" / "internals.md"
PACKAGE = REPO / "pytest_desched"
TICKED = re.compile(r"`([^`]+)`")


def layout_rows(text: str) -> list[tuple[str, str]]:
    """(package cell, modules cell) of each row of the table under `## Layout`."""
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and cells[0] not in ("package", "---"):
            rows.append((cells[0], cells[1]))
    return rows


def row_folder(cell: str) -> Path:
    """The folder a row is about: `pytest_desched/` itself, `bench/` at the top, else a package."""
    name = TICKED.findall(cell)[0].rstrip("/")
    return REPO / name if name in ("pytest_desched", "bench", "dev") else PACKAGE / name


def problems(text: str) -> list[str]:
    """What the table names that the tree lacks, and the packages it leaves out."""
    out: list[str] = []
    named_folders: set[Path] = set()
    for package, modules in layout_rows(text):
        folder = row_folder(package)
        named_folders.add(folder)
        if not folder.is_dir():
            out.append(f"{package}: no such folder {folder.relative_to(REPO)}")
            continue
        top_only = folder == PACKAGE  # the two `pytest_desched/` rows name its own modules
        for name in TICKED.findall(modules):
            if name.endswith("/"):
                found = [p for p in folder.rglob(name.rstrip("/")) if p.is_dir()]
                named_folders.update(found)
            elif re.fullmatch(r"[\w./-]+\.(py|sh|yaml|go)", name):
                if "/" in name:  # a path: in the row's folder, or from the checkout's root
                    found = [p for p in (folder / name, REPO / name) if p.is_file()]
                elif top_only:
                    found = [p for p in [folder / name] if p.is_file()]
                else:
                    found = list(folder.rglob(name))
            else:
                continue
            if not found:
                out.append(f"{package}: {name} is not in {folder.relative_to(REPO)}")
    packages = {p.parent for p in PACKAGE.rglob("__init__.py")} - {PACKAGE}
    out += [
        f"package {p.relative_to(REPO)} is not in the layout table"
        for p in sorted(packages - named_folders)
    ]
    return out


def test_the_layout_table_matches_the_tree() -> None:
    assert len(layout_rows(PAGE.read_text())) >= 10  # the table was found
    assert problems(PAGE.read_text()) == []


def test_the_check_sees_a_stale_row() -> None:
    """A module gone, a folder gone and a package left out each fail (a check finding none passes)."""
    page = PAGE.read_text()
    stale = page.replace("`kube.py`", "`kube_old.py`", 1)
    stale = stale.replace("| `plugin/` |", "| `plugins/` |", 1)
    stale = re.sub(r"\n\| `lab/` \|[^\n]*", "", stale, count=1)
    found = problems(stale)
    assert any("kube_old.py" in p for p in found), found
    assert any("no such folder pytest_desched/plugins" in p for p in found), found
    assert any(p == "package pytest_desched/lab is not in the layout table" for p in found), found
