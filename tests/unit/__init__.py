"""Unit tests, one folder per pytest_desched package (tests/unit/<package>/); tests of the
top-level modules and of the project as a whole stay here."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: manifests/, bench/, README
DATA_ROOT = Path(__file__).parent / "data"  # recorded real outputs the tests read
