"""Two users (or CI jobs) on one machine at once: none sees another's cluster, lock, evidence
or temporary files.

Two `desched run`, a `desched canary --static-only` (charts and policies only: a behaviour
canary would add two more clusters to a 2-core machine) and a pytest session of the plugin
start together, with one tool cache and one $TMPDIR (as jobs of one CI runner), each with its
own evidence folder. Each reaps killed runs' clusters as it starts while the others' are being
created: a reaper that took a live run's cluster for a dead one's would fail that run. All
must pass, each with its own cluster (name, and an API server port no cluster up at the same
time has: a port one frees may serve a later one), none reaping or naming
another's, each evidence folder naming no other's cluster, each temporary folder its own;
after all, no process or folder of any cluster, an empty $TMPDIR and no lock held.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

from pytest_desched.tools.toolchain import Toolchain
from tests.e2e.commands import assert_nothing_left, cluster_processes
from tests.e2e.inner_run import start_inner
from tests.e2e.test_interrupt import INNER, _embedded_inner_cluster

pytestmark = pytest.mark.desched_selftest

# Other sessions on this machine share the cache: a cluster-creation or chart lock may be
# theirs for a moment (tool-build locks are left out: another session's build holds one long).
LOCK_FREE_S = 60.0


class Sampler:
    """What the commands make while they run: each cluster's API server and when it was seen
    (first, last), each temporary folder."""

    def __init__(self, clusters: Path, tmp: Path) -> None:
        self.clusters, self.tmp = clusters, tmp
        self.servers: dict[str, str] = {}
        self.seen: dict[str, tuple[float, float]] = {}
        self.folders: set[str] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.05):  # until stop(): a run's cluster lives ~20 s
            now = time.monotonic()
            self.folders.update(p.name for p in self.tmp.glob("desched-*"))
            for kc in self.clusters.glob("*/kubeconfig.yaml"):
                name = kc.parent.name
                if name not in self.servers:
                    try:
                        doc = yaml.safe_load(kc.read_text())
                        self.servers[name] = doc["clusters"][0]["cluster"]["server"]
                    except (OSError, yaml.YAMLError, LookupError, TypeError):
                        continue  # being written
                self.seen[name] = (self.seen.get(name, (now, now))[0], now)

    def overlap(self, a: str, b: str) -> bool:
        """Both clusters were up at one moment (a port freed by one may serve a later one)."""
        (a0, a1), (b0, b1) = self.seen[a], self.seen[b]
        return a0 <= b1 and b0 <= a1

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)


def _assert_locks_free(cache: Path) -> None:
    for lock in sorted([*cache.glob("locks/chart-*.lock"), *cache.glob("clusters/*.lock")]):
        with FileLock(lock, timeout=LOCK_FREE_S):
            pass


def test_two_runs_a_canary_and_a_pytest_session_at_once_keep_to_their_own(
    run_cmd, tmp_path: Path, desched_toolchain: Toolchain
) -> None:
    cache = desched_toolchain.cache_dir
    tmp = tmp_path / "tmp"  # one $TMPDIR for all four
    tmp.mkdir()
    sampler = Sampler(cache / "clusters" / "clusters", tmp)
    arts = {k: tmp_path / f"art-{k}" for k in ("a", "b", "canary", "pytest")}
    # --provider embedded: the sampler reads embedded clusters, and with a Docker engine
    # answering (make e2e-kind) `auto` would choose kind and ask for the pin's node image.
    runs = [
        run_cmd("run", "positive", "--provider", "embedded", "--artifacts", str(arts[k]), tmp=tmp)
        for k in "ab"
    ]
    canary = run_cmd(
        "canary",
        "--candidate",
        "version:v0.36.0",
        "--static-only",
        "--artifacts",
        str(arts["canary"]),
        tmp=tmp,
    )
    (tmp_path / "session").mkdir()
    session = start_inner(
        tmp_path / "session",
        INNER,
        cache,
        "-q",
        "--desched-provider=embedded",
        f"--desched-artifacts={arts['pytest']}",
        TMPDIR=str(tmp),
    )
    try:
        inner, inner_dir, _ = _embedded_inner_cluster(session, cache)
        session_out, _ = session.communicate(timeout=600)
        for cmd in [*runs, canary]:
            cmd.wait(timeout=600)
    finally:
        sampler.stop()
        if session.poll() is None:
            session.kill()
            session.wait()
    for cmd in [*runs, canary]:
        assert cmd.proc.returncode == 0, cmd.text()
    assert session.returncode == 0, session_out[-3000:]
    assert not canary.clusters(), canary.text()  # static only: no cluster
    [a], [b] = (cmd.clusters() for cmd in runs)
    names = {"a": a, "b": b, "pytest": inner}
    assert len(set(names.values())) == 3, names
    ports = {k: sampler.servers.get(n) for k, n in names.items()}
    assert None not in ports.values(), ports
    together = [(x, y) for x, y in (("a", "b"), ("a", "pytest"), ("b", "pytest"))]
    together = [(x, y) for x, y in together if sampler.overlap(names[x], names[y])]
    # Started together, at least two were up at one moment (else nothing here ran side by side).
    # Which two is the machine's timing: a fresh-clone CI run saw run a end 2 s before run b's
    # cluster came up (cluster creation is serialised), while each overlapped the pytest session.
    assert together, sampler.seen
    for x, y in together:
        assert ports[x] != ports[y], f"{x} and {y} were up together on one port: {ports}"
    texts = {"a": runs[0].text(), "b": runs[1].text(), "canary": canary.text()}
    texts["pytest"] = session_out
    for who, text in texts.items():
        for other_who, other in names.items():
            if other_who != who:
                assert other not in text, f"{who}'s output names {other_who}'s cluster {other}"
    for who, art in arts.items():
        assert art.is_dir() and any(art.iterdir()), f"no evidence from {who} in {art}"
        for other_who, other in names.items():
            if other_who == who:
                continue
            named = [
                p for p in art.rglob("*") if p.is_file() and other in p.read_text(errors="replace")
            ]
            assert not named, f"{who}'s evidence names {other_who}'s cluster {other}: {named}"
    # each of the four made a temporary folder of its own (mkdtemp), and all are gone
    assert len(sampler.folders) >= 4, sampler.folders
    for cmd in [*runs, canary]:
        assert_nothing_left(cmd)
    assert not inner_dir.exists() and not cluster_processes(inner)
    assert not list(tmp.iterdir()), f"left in the shared $TMPDIR: {list(tmp.iterdir())}"
    _assert_locks_free(cache)
