"""The cold `.ci/run`: a fresh clone on an empty HOME, timed per step, with the machine's load.

Issue 54 asks for the whole `.ci/run` from an empty cache, quiet, against a 45-minute goal. A
new HOME empties every cache a new machine lacks (Go modules and build cache, pip's cache, the
tool cache); the Go proxy and PyPI are reached as a new machine reaches them. Every output line
is stamped with its offset, and a sampler records the 1-minute load and the CPU seconds of the
whole process tree (every descendant's, reaped ones included through the children's times), so
the table says where wall and CPU went and whether the machine was quiet.

    python bench/cold_ci.py --source /work/main --root /tmp/cold [--keep] [--json out.json]

Exit status: `.ci/run`'s own. The root is removed at the end (Go's module cache is read-only,
so it is made writable first) unless `--keep`; Ctrl-C stops the run's whole process group.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

# `desched tools` says one of these per tool it builds (tools/toolchain.py).
_BUILT = re.compile(r"built (?P<tool>\S+) (?P<version>\S+)(?: from source)? in (?P<s>\d+)s")
_PYTEST_START = re.compile(r"=+ test session starts =+")
_PYTEST_END = re.compile(r"=+ .*\b(passed|failed|error)\b.* in [\d.]+s")
_CACHE_ENV = ("GOCACHE", "GOMODCACHE", "GOPATH", "XDG_CACHE_HOME", "PIP_CACHE_DIR", "VIRTUAL_ENV")


@dataclass
class Sample:
    at: float  # s since the start
    load1: float
    cpu_s: float  # the tree's CPU: live processes plus what reaped children used


@dataclass
class Run:
    command: str
    commit: str
    started: str
    rc: int = -1
    wall_s: float = 0.0
    lines: list[tuple[float, str]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


def tree_cpu(root: psutil.Process) -> float:
    """CPU seconds of `root` and every live descendant, with what their reaped children used."""
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def clean_env(home: Path) -> dict[str, str]:
    """This login's environment (its proxies and pip settings are the machine's), with no cache
    location and no DESCHED_* setting: every cache then lies under the empty HOME."""
    env = {k: v for k, v in os.environ.items()
           if k not in _CACHE_ENV and not k.startswith("DESCHED_")}  # fmt: skip
    env.update({"HOME": str(home), "CI": "true", "GOTOOLCHAIN": "local"})
    return env


def sample_until(proc: subprocess.Popen[str], run: Run, t0: float, every: float) -> None:
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            cpu = tree_cpu(root)
        except psutil.Error:
            break
        run.samples.append(Sample(round(time.monotonic() - t0, 1), os.getloadavg()[0], cpu))
        time.sleep(every)  # the sampler's period, not a wait on anything


def cpu_at(samples: list[Sample], at: float) -> float:
    """The tree's CPU at the sample nearest before `at` (0 before the first)."""
    before = [s.cpu_s for s in samples if s.at <= at]
    return before[-1] if before else 0.0


def summarize(run: Run) -> list[dict[str, object]]:
    """One row per step: the tools each build line names, then mypy, pytest and the whole run."""
    rows: list[dict[str, object]] = []
    for at, line in run.lines:
        if m := _BUILT.search(line):
            rows.append({"step": f"{m['tool']} {m['version']}", "wall_s": int(m["s"]), "at": at})
    starts = [at for at, line in run.lines if _PYTEST_START.search(line)]
    ends = [at for at, line in run.lines if _PYTEST_END.search(line)]
    if starts:
        first = starts[0]
        rows.append({"step": "builds and checks before the first test", "wall_s": round(first),
                     "cpu_s": round(cpu_at(run.samples, first))})  # fmt: skip
        if ends:
            rows.append({"step": "pytest", "wall_s": round(ends[-1] - first),
                         "cpu_s": round(cpu_at(run.samples, ends[-1]) - cpu_at(run.samples, first))})  # fmt: skip
    rows.append({"step": "the whole .ci/run", "wall_s": round(run.wall_s),
                 "cpu_s": round(run.samples[-1].cpu_s) if run.samples else None})  # fmt: skip
    return rows


def remove(root: Path) -> None:
    """Go's module cache is read-only: make it writable, then remove the whole root."""
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default=".", help="the repository to clone (default: here)")
    ap.add_argument("--branch", default=None, help="the branch to clone (default: its HEAD)")
    ap.add_argument("--root", default="/tmp/cold", help="the clone and the empty HOME go here")
    ap.add_argument("--every", type=float, default=15.0, help="sample period, s")
    ap.add_argument("--json", default=None, help="write the lines, samples and table here")
    ap.add_argument("--keep", action="store_true", help="keep the clone and the caches")
    a = ap.parse_args(argv)
    root = Path(a.root)
    if root.exists():
        sys.exit(f"{root} exists: remove it (or name another --root); a cold run starts empty")
    home, clone = root / "home", root / "main"
    home.mkdir(parents=True)
    branch = ["-b", a.branch] if a.branch else []
    subprocess.run(["git", "clone", "-q", *branch, a.source, str(clone)], check=True)
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    run = Run(
        "CI=true bash .ci/run (HOME empty)",
        commit,
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    )
    t0 = time.monotonic()
    proc = subprocess.Popen(["bash", ".ci/run"], cwd=clone, env=clean_env(home), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    sampler = threading.Thread(target=sample_until, args=(proc, run, t0, a.every), daemon=True)
    sampler.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            at = round(time.monotonic() - t0, 1)
            run.lines.append((at, line.rstrip("\n")))
            print(f"[+{at:7.1f}s load {os.getloadavg()[0]:5.1f}] {line}", end="", flush=True)
        run.rc = proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
        run.rc = proc.wait()
    finally:
        run.wall_s = time.monotonic() - t0
        sampler.join(timeout=a.every + 5)
        table = summarize(run)
        loads = [s.load1 for s in run.samples]
        print(f"\n== cold .ci/run of {commit[:10]}: exit {run.rc}, {run.wall_s / 60:.1f} min; "
              f"1-min load {min(loads, default=0):.1f}-{max(loads, default=0):.1f}")  # fmt: skip
        for row in table:
            print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
        if a.json:
            doc = asdict(run) | {"table": table}
            Path(a.json).write_text(json.dumps(doc, indent=1))
        if not a.keep:
            remove(root)
    return run.rc


if __name__ == "__main__":
    sys.exit(main())
