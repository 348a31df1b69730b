"""`make e2e` selects the runbook's experiments and nothing else (issue 26).

The user-facing marker `descheduler_e2e` is what a user's CI selects; the project's own
end-to-end suite is `desched_selftest`. A new e2e file marked `descheduler_e2e` by habit
would silently make the main job long again: this test names it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = {
    f"tests/e2e/test_experiments.py::test_{name}"
    for name in (
        "positive_affinity_migration_runbook_policy",
        "positive_affinity_migration",
        "negative_nodefit_runbook_policy",
        "negative_nodefit",
        "negative_pdb_runbook_policy",
        "negative_pdb",
    )
}


def _collect(mark: str) -> tuple[int, set[str]]:
    select = ["-m", mark, "tests/e2e"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *select],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    ids = {line for line in proc.stdout.splitlines() if line.startswith("tests/e2e/")}
    return proc.returncode, ids


def make_e2e_mark() -> str:
    found = re.search(r"^E2E_MARK := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert found, "Makefile has no E2E_MARK line"
    return found.group(1).strip()


def test_make_e2e_runs_exactly_the_runbook_experiments() -> None:
    rc, ids = _collect(make_e2e_mark())
    assert rc == 0, rc
    assert ids == RUNBOOK, f"extra: {sorted(ids - RUNBOOK)}; missing: {sorted(RUNBOOK - ids)}"


def test_every_e2e_test_has_a_home() -> None:
    """Nothing in tests/e2e falls outside make e2e, make e2e-kind's selftest and the browser."""
    rc, ids = _collect("not descheduler_e2e and not desched_selftest and not browser")
    assert rc == 5 and not ids, sorted(ids)  # 5: pytest collected nothing
