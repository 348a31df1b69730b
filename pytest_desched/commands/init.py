"""`desched init`: a starting point in the user's repository, from the installed package.

A repository with no marked test made `pytest -m descheduler_e2e` exit 5 (red), and the test
file the CI recipe said to copy (tests/e2e/test_experiments.py) is not in the wheel. `init`
writes three files from the package's templates (pytest_desched/templates/init/): a starter
test using the plugin's fixtures and markers, a values file that lints SAFE, and the CI
workflow (the same file as examples/ci/descheduler-e2e.yml). It never overwrites: if any
target exists, nothing is written and the error names it (exit 2).
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_desched import render as out
from pytest_desched.errors import EXIT_OK, ConfigError
from pytest_desched.log import say

# template (in pytest_desched/templates/init/) -> where it goes, relative to --dir
FILES = {
    "test_descheduler.py.tmpl": "tests/e2e/test_descheduler.py",
    "descheduler-values.yaml": "descheduler-values.yaml",
    "descheduler-e2e.yml": ".github/workflows/descheduler-e2e.yml",
}
WHAT = {
    "test_descheduler.py.tmpl": "the runbook's three experiments on your values",
    "descheduler-values.yaml": "Helm values for the descheduler chart; lints SAFE",
    "descheduler-e2e.yml": "GitHub Actions: lint gate, experiments, SARIF to code scanning",
}


def template(name: str) -> str:
    """A template's text, read from the installed package (package data, not the checkout)."""
    return resources.files("pytest_desched").joinpath("templates", "init", name).read_text()


def write_starter(root: Path) -> None:
    """Write every file under `root`, or none: an existing one is refused before any write."""
    targets = {name: root / rel for name, rel in FILES.items()}
    taken = [str(p) for p in targets.values() if p.exists() or p.is_symlink()]
    if taken:
        raise ConfigError(
            f"{', '.join(taken)}: already exists; desched init never overwrites: move it "
            "away, or run desched init --dir EMPTY_DIR and copy what you need"
        )
    for name, path in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template(name))


def cmd_init(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    write_starter(root)
    rows = [{"file": rel, "what": WHAT[name]} for name, rel in FILES.items()]
    out.emit(
        out.render(
            {"dir": str(root), "written": rows},
            args.output,
            text=lambda: "\n".join(f"wrote {r['file']}  ({r['what']})" for r in rows),
            md=lambda: out.table(rows, {"file": "FILE", "what": "WHAT"}, "md"),
        )
    )
    say(
        "next: desched lint -f descheduler-values.yaml --fail-on warning; then pytest -m "
        "descheduler_e2e --desched-provider embedded --desched-values descheduler-values.yaml"
    )
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "init", help="write a starter test, values file and CI workflow (never overwrites)"
    )
    p.set_defaults(func=cmd_init, parser=p)
    p.add_argument("--dir", default=".", metavar="DIR", help="where to write (default: .)")
    out.add_output(p)
