"""pytest start-up stays light: collecting a user's suite imports no kubernetes client,
no report rendering and no YAML-to-HTML machinery (issue 31 item 5).

Run in a fresh interpreter (this one has imported everything already): `pytest
--collect-only -m descheduler_e2e` on a user-style test file that asks for `desched_session`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("kubernetes", "jinja2", "pytest_desched.evidence.report", "pytest_desched.lab")

USER_TEST = """
import pytest

pytestmark = pytest.mark.descheduler_e2e


@pytest.mark.parametrize("name", ["positive", "nodefit", "pdb"])
def test_runbook(desched_session, name):
    desched_session.run(name, variant="pdb-lister-workaround").raise_for_outcome()
"""

PROBE = """
import sys
import pytest

class Probe:
    def pytest_collection_finish(self, session):
        heavy = [m for m in {heavy!r} if m in sys.modules]
        print("HEAVY=" + ",".join(heavy))
        print("COLLECTED=" + str(len(session.items)))

sys.exit(pytest.main(
    ["--collect-only", "-q", "-m", "descheduler_e2e", "-p", "no:cacheprovider", {path!r}],
    plugins=[Probe()],
))
"""


def test_collecting_a_user_suite_imports_nothing_heavy(tmp_path: Path) -> None:
    (tmp_path / "test_runbook.py").write_text(USER_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not this repository's conftest/ini
    code = PROBE.format(heavy=HEAVY, path=str(tmp_path / "test_runbook.py"))
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = dict(ln.split("=", 1) for ln in proc.stdout.splitlines() if "=" in ln)
    assert lines.get("COLLECTED") == "3", proc.stdout
    assert lines.get("HEAVY") == "", f"imported at collection: {lines.get('HEAVY')}"
