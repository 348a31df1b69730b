"""The suite's flake rate: the runbook's six experiments N times in a row, `make test` M times.

A CI gate is only as good as the suite is repeatable (issue 43). Each run is one pytest
process (the experiments: `make e2e`'s selection, read from the Makefile; the whole suite:
`make test`, as CI runs it), one after another, never retried, each with its own JUnit
report. Every failure is named: the run, the test id and the first line of its error. A run
that wrote no report (pytest crashed, a timeout) is a failure of its own, named by its exit
code and its output's last line. Written: the figures as JSON (`--out`) and a section for
bench/RESULTS.md (`--md`, also printed).

On a quiet machine (the figures mean nothing beside other work):

    .venv/bin/python bench/flake_rate.py --e2e-runs 20 --test-runs 3 \\
        --out bench/flake-results.json --md bench/flake-rate.md

Smoke (one experiment once): `--e2e-runs 1 --test-runs 0 -k positive_affinity_migration_runbook_policy`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from shard_bench import CLEARED, SUITE, e2e_mark  # noqa: E402 (bench/ is on the path now)

RUN_TIMEOUT_S = {"e2e": 1800, "test": 7200}
LOAD_EVERY_S = 5.0  # /proc/loadavg sampled this often during each run


class LoadSampler:
    """The machine's 1-minute load sampled from /proc/loadavg while a run goes on: on a
    shared machine the load at a run's start says little about the run (issue 54)."""

    def __init__(self, every: float = LOAD_EVERY_S, path: Path = Path("/proc/loadavg")) -> None:
        self.every, self.path = every, path
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        # no /proc (not Linux): the start figure (os.getloadavg) stands alone
        with contextlib.suppress(OSError, ValueError, IndexError):
            self.samples.append(float(self.path.read_text().split()[0]))

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> LoadSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def failures(junit: Path) -> tuple[Counter[str], list[dict[str, str]]]:
    """(results by kind, each failed or errored case: test id and first error line)."""
    counts: Counter[str] = Counter()
    failed = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        bad = next((c for c in case if c.tag in ("failure", "error")), None)
        skipped = next((c for c in case if c.tag == "skipped"), None)
        if bad is None:
            kind = "passed" if skipped is None else _skip_kind(skipped)
            counts[kind] += 1
            continue
        counts[bad.tag] += 1
        failed.append({"test": test_id(case), "kind": bad.tag, "first_line": first_line(bad)})
    return counts, failed


def _skip_kind(skipped: ET.Element) -> str:
    """pytest writes an expected failure as a skip whose type is pytest.xfail."""
    return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"


def test_id(case: ET.Element) -> str:
    """pytest's node id from a JUnit case: `tests/e2e/test_x.py::test_y[param]`."""
    classname, name = case.get("classname", ""), case.get("name", "")
    parts = classname.split(".")
    # classname is the module path dotted, then any class: the module ends at the first
    # part from the right that names a file in the checkout
    for cut in range(len(parts), 0, -1):
        module = Path(*parts[:cut]).with_suffix(".py")
        if (ROOT / module).is_file():
            return "::".join([str(module), *parts[cut:], name])
    return "::".join(p for p in (classname, name) if p)


def first_line(element: ET.Element) -> str:
    """The error's first non-empty line: the message attribute, else the text."""
    for text in (element.get("message"), element.text):
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()[:300]
    return f"({element.tag} without a message)"


def run_once(kind: str, i: int, workdir: Path, extra: list[str]) -> dict[str, Any]:
    """One run of `kind` ("e2e": the experiments; "test": `make test`), never retried."""
    name = f"{kind}-{i:02d}"
    junit = workdir / f"{name}.xml"
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    if kind == "e2e":
        cmd = [sys.executable, "-m", "pytest", SUITE, "-m", e2e_mark(), "-p", "no:cacheprovider"]
        cmd += [f"--basetemp={workdir / (name + '-tmp')}", f"--junitxml={junit}", *extra]
        cmd += [f"--desched-artifacts={workdir / (name + '-art')}"]
    else:
        args = " ".join([f"--junitxml={junit}", *extra])
        cmd = ["make", "test", f"PYTEST_ARGS={args}"]
    load = round(os.getloadavg()[0], 2)
    started = time.monotonic()
    sampler = LoadSampler()
    try:
        with sampler:
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S[kind]
            )
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:  # its partial output comes as bytes
        partial = b"".join(
            o if isinstance(o, bytes) else o.encode() for o in (exc.stdout, exc.stderr) if o
        )
        rc, output = None, f"{partial.decode(errors='replace')}\ntimed out after {exc.timeout}s"
    (workdir / f"{name}.log").write_text(output)
    wall = round(time.monotonic() - started, 1)
    return summarize(name, kind, rc, junit, output, load, wall, sampler.samples)


def summarize(
    name: str,
    kind: str,
    rc: int | None,
    junit: Path,
    output: str,
    load: float,
    wall: float,
    loads: list[float] | None = None,
) -> dict[str, Any]:
    """One run's record: its counts and named failures (a missing report is one), and the
    load during it (`loads`: /proc/loadavg's 1-minute figure sampled while it ran)."""
    if junit.is_file():
        counts, failed = failures(junit)
    else:
        last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
        counts = Counter()
        failed = [
            {
                "test": f"({name}: no JUnit report, exit {rc})",
                "kind": "error",
                "first_line": last[:300],
            }
        ]
    if rc not in (0, None) and not failed:  # pytest failed without a failed case
        failed = [{"test": f"({name}: exit {rc})", "kind": "error", "first_line": ""}]
    return {
        "run": name,
        "kind": kind,
        "rc": rc,
        "wall_s": wall,
        "load_1m": load,
        "load_during": {
            "min": min(loads or [load]),
            "max": max(loads or [load]),
            "mean": round(sum(loads or [load]) / len(loads or [load]), 2),
            "samples": len(loads or []),
        },
        "counts": dict(counts),
        "failures": failed,
    }


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: runs, failed runs, the flake rate, and each failing test with its runs."""
    out: dict[str, Any] = {}
    for kind in ("e2e", "test"):
        mine = [r for r in runs if r["kind"] == kind]
        if not mine:
            continue
        by_test: dict[str, list[str]] = {}
        for r in mine:
            for f in r["failures"]:
                by_test.setdefault(f["test"], []).append(r["run"])
        failed = [r for r in mine if r["failures"]]
        walls = [r["wall_s"] for r in mine]
        out[kind] = {
            "runs": len(mine),
            "failed_runs": len(failed),
            "flake_rate": round(len(failed) / len(mine), 4),
            "failing_tests": dict(sorted(by_test.items())),
            "wall_s": {"min": min(walls), "max": max(walls)},
            "load_1m": {
                "min": min(r["load_1m"] for r in mine),
                "max": max(r["load_1m"] for r in mine),
            },
            "load_during": {  # over every sample of every run of the kind
                "min": min(r["load_during"]["min"] for r in mine),
                "max": max(r["load_during"]["max"] for r in mine),
            },
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    """The section for bench/RESULTS.md: the figures, then every failure named."""
    what = {"e2e": "the runbook's six experiments", "test": "`make test`"}
    lines = [
        f"## Flake rate (issue 43), {result['date']}, load {result['load']}",
        "",
        f"`{result['command']}`; every run one after another, none retried.",
        "",
        "| suite | runs | failed runs | flake rate | wall (s) | load at start (1 min) | load during |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, agg in result["summary"].items():
        lines.append(
            f"| {what[kind]} | {agg['runs']} | {agg['failed_runs']} | "
            f"{agg['flake_rate']:.1%} | {agg['wall_s']['min']}-{agg['wall_s']['max']} | "
            f"{agg['load_1m']['min']}-{agg['load_1m']['max']} | "
            f"{agg['load_during']['min']}-{agg['load_during']['max']} |"
        )
    lines += [
        "",
        "| run | result | wall (s) | load at start | load during (min-max, mean; samples) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in result["runs"]:
        ld = r["load_during"]
        verdict = "pass" if not r["failures"] else f"FAIL ({len(r['failures'])})"
        lines.append(
            f"| {r['run']} | {verdict} | {r['wall_s']} | {r['load_1m']} | "
            f"{ld['min']}-{ld['max']}, {ld['mean']}; {ld['samples']} |"
        )
    named = [(r["run"], f) for r in result["runs"] for f in r["failures"]]
    lines += ["", "Failures:" if named else "No failure.", ""]
    lines += [f"- {run}: `{f['test']}`: {f['first_line']}" for run, f in named]
    return "\n".join(lines).rstrip() + "\n"


def _head() -> str | None:
    """The checkout's commit, so the figures name the code they measured."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--e2e-runs", type=int, default=20, help="runs of the six experiments")
    ap.add_argument("--test-runs", type=int, default=3, help="runs of the whole `make test`")
    ap.add_argument("-k", dest="select", default=None, help="pytest -k for both (a smoke run)")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("--md", type=Path, default=None, help="write the RESULTS.md section here")
    ap.add_argument("--keep", type=Path, default=None, help="keep logs and reports here")
    args = ap.parse_args(argv)
    extra = ["-k", args.select] if args.select else []
    started = datetime.now(UTC)
    runs: list[dict[str, Any]] = []

    def result() -> dict[str, Any]:
        return {
            "date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "load": round(os.getloadavg()[0], 2),
            "command": "python bench/flake_rate.py "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "commit": _head(),
            "runs": runs,
            "summary": aggregate(runs),
        }

    with tempfile.TemporaryDirectory(prefix="flake-rate-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for kind, n in (("e2e", args.e2e_runs), ("test", args.test_runs)):
            for i in range(1, n + 1):
                run = run_once(kind, i, workdir, extra)
                runs.append(run)
                print(
                    f"{run['run']}: exit {run['rc']}, {len(run['failures'])} failed, "
                    f"{run['wall_s']}s, load {run['load_1m']} "
                    f"(during {run['load_during']['min']}-{run['load_during']['max']})",
                    flush=True,
                )
                if args.out:  # after every run: a run cut short still leaves its figures
                    args.out.write_text(json.dumps(result(), indent=2) + "\n")
    final = result()
    if args.out:
        args.out.write_text(json.dumps(final, indent=2) + "\n")
    text = markdown(final)
    if args.md:
        args.md.write_text(text)
    print(text)
    return 0 if all(not r["failures"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
