"""The two upstream descheduler snapshots the canary tests use, and their provenance.

They live in `../shared/upstream` next to the repository (its README gives commit and sha256
per file); `$DESCHED_UPSTREAM_DIR` points elsewhere. A missing or altered file fails the test
that needs it: these are the canary's real inputs, never skipped.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]


class Snapshot(NamedTuple):
    file: str
    commit: str
    sha256: str


SNAPSHOTS = {
    "master": Snapshot(
        "descheduler-master-7d2b28bf2.tar.gz",
        "7d2b28bf2b6a12810317936d909af0270ff38fa3",
        "99d6ce268bc24fe9bb35fb425c306c16f9cf2227d1ba075f8453cd5f685a8c8c",
    ),
    "pr1883": Snapshot(
        "descheduler-pr1883-5f6c6d7b0.tar.gz",
        "5f6c6d7b078e58f33e9d42bc4f4071a7e6e911e1",
        "059dc8ac9341a585081d9521bed0cf355c61c81288c4989132f5fcb9d70a8c3c",
    ),
}


def upstream_dir() -> Path:
    """`$DESCHED_UPSTREAM_DIR`, else `<repo>/../shared/upstream`, else `/work/shared/upstream`."""
    env = os.environ.get("DESCHED_UPSTREAM_DIR")
    if env:
        return Path(env)
    for d in (REPO.parent / "shared" / "upstream", Path("/work/shared/upstream")):
        if d.is_dir():
            return d
    return REPO.parent / "shared" / "upstream"


@functools.cache
def _verified(path: Path, sha256: str) -> bool:
    return hashlib.sha256(path.read_bytes()).hexdigest() == sha256


def tarball(name: str) -> Path:
    """The snapshot `name` (master | pr1883), present and equal to its README's sha256."""
    snap = SNAPSHOTS[name]
    path = upstream_dir() / snap.file
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: the upgrade canary's candidates live in ../shared/upstream "
            "(set DESCHED_UPSTREAM_DIR to another copy)",
            pytrace=False,
        )
    if not _verified(path, snap.sha256):
        pytest.fail(f"{path} is not the snapshot its README names (sha256)", pytrace=False)
    return path


# The releases users upgrade from and the charts those releases shipped (the README's
# "Older releases" table): a test that needs one is skipped, saying why, when shared/ is
# not beside the repository at all; a file missing or altered in a shared/ that is there fails.
RELEASES = {
    "v0.35.1": Snapshot(
        "descheduler-v0.35.1-2908b4308.tar.gz",
        "2908b4308964b9e7ebc7a25449500c4762770a3e",
        "9c5856461ecdd53c851e055cff6f4d0349b45f1a2a590b43a936c22d23001dfb",
    ),
    "v0.33.0": Snapshot(
        "descheduler-v0.33.0-045fbb6a0.tar.gz",
        "045fbb6a0411d492824d0830fdaf98b179f055d5",
        "deaca4241d531ed75938d7b50ddf8fe5766a2dd06be4227646ac06ccd83c9cee",
    ),
    "chart-0.33.0": Snapshot(
        "descheduler-chart-0.33.0.tgz",
        "",
        "89f27f120ab414184262543ea0aa6efaa32c00bd619465bbca459209c8f78c40",
    ),
    "v0.35.0": Snapshot(
        "descheduler-v0.35.0-b49fd27d1.tar.gz",
        "b49fd27d108a2bd7ecea79fd602e61eb5c67749a",
        "7c1324c1e6e45e9cba36571740957b89a4605773f6f17fe15a7de1e7a6662592",
    ),
    "chart-0.35.0": Snapshot(
        "descheduler-chart-0.35.0.tgz",
        "",
        "4217bcd1dc7fb088eae26b4c6c04c5fd5c6e7bdae27aed6876141e83fdbee2ed",
    ),
    "v0.32.2": Snapshot(
        "descheduler-v0.32.2-a6e0ebff1.tar.gz",
        "a6e0ebff10692013f230f57cd122ac088d69619b",
        "3b8db17eb4fba29807e26d48d03bf5d4415920d311d92c1f95516f4b6f8808c2",
    ),
    "chart-0.32.2": Snapshot(
        "descheduler-chart-0.32.2.tgz",
        "",
        "2c43e9cbd9fe8bd38f737a0010a30152fbfb1736936b101bc4d95632162757a0",
    ),
    "chart-0.35.1": Snapshot(
        "descheduler-chart-0.35.1.tgz",
        "",
        "19da5f5885c9093fb016d8125c9c8e876cbb612b4c7039cd364c86fa666cf4c0",
    ),
}


def release_file(name: str) -> Path:
    """A file of RELEASES from `<repo>/../shared/upstream` (or $DESCHED_UPSTREAM_DIR)."""
    snap = RELEASES[name]
    folder = upstream_dir()
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent: the upgrade canary's releases live in ../shared/upstream")
    path = folder / snap.file
    if not path.is_file():
        pytest.fail(f"{path} is missing from {folder} (its README lists it)", pytrace=False)
    if not _verified(path, snap.sha256):
        pytest.fail(f"{path} is not the file its README names (sha256)", pytrace=False)
    return path


# Helm values written for the 0.35 charts: the default policy, protecting pods with PVCs. The
# chart that lets the descheduler list PVCs (0.35.1, #1839's fix) is a wider ClusterRole than
# 0.35.0's: what the lint from a release tree and the upgrade canary both name.
PVC_VALUES = """\
deschedulerPolicy:
  profiles:
    - name: default
      pluginConfig:
        - name: DefaultEvictor
          args:
            podProtections:
              extraEnabled: [PodsWithPVC]
        - name: RemoveDuplicates
      plugins:
        balance:
          enabled: [RemoveDuplicates]
"""


def pvc_values(folder: Path, name: str = "values.yaml") -> Path:
    """PVC_VALUES written to `folder/name`, for a command's `--values`."""
    path = folder / name
    path.write_text(PVC_VALUES)
    return path


def build(names: list[str]) -> int:
    """`make test-releases`: each named release tree's descheduler and policy checker, built
    (or found cached by commit) before the first test, like every other tool; a tree that is
    not there is said, and the tests that need it skip or fail on their own."""
    import subprocess
    import sys

    desched = Path(sys.executable).with_name("desched")
    for name in names:
        path = upstream_dir() / RELEASES[name].file
        if not path.is_file():
            print(
                f"make test-releases: {path} is absent: the tests that need it say so",
                file=sys.stderr,
            )
            continue
        cmd = [str(desched), "tools", "--candidate", f"source:{path}", "descheduler", "policycheck"]
        if (rc := subprocess.run(cmd, check=False).returncode) != 0:
            return rc
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(build(sys.argv[1:]))
