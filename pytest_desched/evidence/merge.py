"""The N shards of one run as one evidence folder (`desched merge DIR... --out-dir OUT`).

Each shard (pytest `--desched-shard K/N`) is a complete run with its own cluster, evidence and
exit code; its `shard.json` (plugin/sharding.py) says which shard of which run it was. The
merge first proves the set is one whole run: the same run id, the same N and the same
selection, every K from 1 to N exactly once, their tests covering the selection with none
run twice; anything else is bad input (exit 2), never a smaller pass. Then it copies each
shard's folder whole under `shard-K-of-N/` (every round record stays with its shard) and
writes one `report.html` (the same page builder as a single run, over the copied records),
one `run-summary.json`, one `junit.xml` (when the shards wrote `junit.xml`) and
`desched-durations.json` (the next split's weights). The verdict: a failure in any shard
fails the merge (exit 1).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from pytest_desched.errors import ConfigError
from pytest_desched.evidence.shards import DURATIONS_FILE, read_shard
from pytest_desched.names import inside

SUMMARY_FILE = "run-summary.json"
JUNIT_FILE = "junit.xml"  # where a shard's JUnit is looked for: `--junitxml=<evidence>/junit.xml`
PASSING = ("passed", "xfailed", "skipped")  # as pytest counts them: exit 0
_TOTALS = ("tests", "errors", "failures", "skipped")


@dataclass
class Merged:
    """One run made of its shards: where it was written and what it says."""

    out: Path
    run_id: str
    n: int
    failed: list[str] = field(default_factory=list)  # why the verdict is a failure
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def check_shards(folders: Sequence[Path]) -> list[tuple[dict[str, Any], Path]]:
    """The shards' records in K order, once proven to be exactly one whole run."""
    shards = [(read_shard(Path(f)), Path(f)) for f in folders]
    first, where = shards[0]
    for key, what in (("run_id", "run id"), ("of", "shard count N"), ("plan_digest", "selection")):
        for rec, folder in shards[1:]:
            if rec.get(key) != first.get(key):
                raise ConfigError(
                    f"{folder}: a foreign shard ({what} {rec.get(key)!r}, but {where} has "
                    f"{first.get(key)!r}); merge the shards of one run, split from the same "
                    "tests with the same -m/-k"
                )
    n, seen = int(first["of"]), dict[int, Path]()
    for rec, folder in shards:
        k = int(rec["shard"])
        if k in seen:
            raise ConfigError(f"shard {k}/{n} given twice: {seen[k]} and {folder}; give it once")
        seen[k] = folder
    missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in seen]
    if missing:
        raise ConfigError(
            f"run {first['run_id']}: shard {', '.join(missing)} missing (have "
            f"{', '.join(f'{k}/{n}' for k in sorted(seen))}); a missing shard is not a smaller "
            "pass: rerun it, or give its evidence folder"
        )
    ran = [t for rec, _ in shards for t in rec["tests"]]
    if sorted(ran) != sorted(first["plan"]):
        twice = sorted({t for t in ran if ran.count(t) > 1})
        lost = sorted(set(first["plan"]) - set(ran))
        raise ConfigError(
            f"run {first['run_id']}: the shards do not cover the selection once (run twice: "
            f"{twice or 'none'}; not run: {lost or 'none'}); rerun the shards from one checkout"
        )
    return sorted(shards, key=lambda s: int(s[0]["shard"]))


def _check_out(out_dir: Path, folders: Sequence[Path]) -> None:
    """A new or empty folder, apart from every shard's: nothing of anyone's is overwritten."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(f"--out-dir {out_dir}: exists and is not empty; give a new folder")
    target = out_dir.resolve()
    for f in folders:
        src = Path(f).resolve()
        if target.is_relative_to(src) or src.is_relative_to(target):
            raise ConfigError(f"--out-dir {out_dir}: overlaps the shard folder {f}; give another")


def _rounds(folder: Path, rels: Sequence[str]) -> list[dict[str, Any]]:
    """The round records a shard's entry names, read from its folder (refused if absent)."""
    rounds = []
    for rel in rels:
        path = inside(folder, *Path(rel).parts)
        try:
            rounds.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{folder}: round record {rel} named in its shard.json is unreadable "
                f"({exc}); rerun that shard"
            ) from None
    return rounds


def merge_junit(parts: Sequence[tuple[str, Path]], report: Path | None) -> ET.Element:
    """One `<testsuites>` with one suite of every shard's test cases, each marked with its
    shard (`desched.shard`), its `desched.report` pointing at the merged page, totals summed."""
    suite = ET.Element("testsuite", name="pytest")
    totals, time_s = dict.fromkeys(_TOTALS, 0), 0.0
    for label, path in parts:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as exc:
            raise ConfigError(f"{path}: not JUnit XML ({exc}); rerun that shard") from None
        for s in [root] if root.tag == "testsuite" else root.iter("testsuite"):
            for key in _TOTALS:
                totals[key] += int(s.get(key) or 0)
            time_s += float(s.get("time") or 0)
            for case in s.findall("testcase"):
                props = case.find("properties")
                if props is None:
                    props = ET.Element("properties")
                    case.insert(0, props)
                for p in props.findall("property"):
                    if p.get("name") == "desched.report" and report is not None:
                        p.set("value", str(report))
                ET.SubElement(props, "property", name="desched.shard", value=label)
                suite.append(case)
    suite.attrib.update({k: str(v) for k, v in totals.items()} | {"time": f"{time_s:.3f}"})
    top = ET.Element("testsuites")
    top.append(suite)
    return top


def merge(folders: Sequence[Path], out_dir: Path) -> Merged:
    """Check, copy and join the shards into `out_dir`; the Merged run (its verdict in `.ok`).

    Everything is read and checked before anything is written: bad input leaves no folder."""
    # heavy: jinja2 and matplotlib, kept out of `desched` start-up
    from pytest_desched.evidence.report import REPORT_NAME, write_report

    shards = check_shards(folders)
    _check_out(out_dir, folders)
    first = shards[0][0]
    n, run_id, plan = int(first["of"]), str(first["run_id"]), list(first["plan"])
    with_junit = [f"{r['shard']}/{n}" for r, f in shards if (f / JUNIT_FILE).is_file()]
    if 0 < len(with_junit) < n:
        raise ConfigError(
            f"run {run_id}: only shard(s) {', '.join(with_junit)} have {JUNIT_FILE}; give every "
            f"shard --junitxml=<its evidence folder>/{JUNIT_FILE}, or none"
        )
    merged = Merged(out_dir, run_id, n)
    by_test: dict[str, list[dict[str, Any]]] = {t: [] for t in plan}
    tests: dict[str, dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    durations: dict[str, float] = {}
    for rec, folder in shards:
        label = f"{rec['shard']}/{n}"
        if rec["exit_status"] != 0:
            merged.failed.append(f"shard {label} exited {rec['exit_status']}")
        for t in rec["tests"]:
            outcome = str((rec.get("outcomes") or {}).get(t, "not run"))
            tests[t] = {"outcome": outcome, "shard": label}
            if outcome not in PASSING:
                merged.failed.append(f"{t}: {outcome} (shard {label})")
        for e in rec.get("experiments") or []:
            rounds = _rounds(folder, e.get("rounds") or [])
            by_test.setdefault(e["nodeid"], []).append({**e, "shard": label, "_rounds": rounds})
        durations.update(rec.get("durations") or {})
        runs.append(
            {
                "shard": label,
                "folder": f"shard-{rec['shard']}-of-{n}",
                "source": str(folder),
                "exit_status": rec["exit_status"],
                "wall_s": rec.get("wall_s"),
                "tests": rec["tests"],
                "split_by": rec.get("split_by"),
            }
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    for (_, folder), run in zip(shards, runs, strict=True):
        shutil.copytree(folder, out_dir / run["folder"], symlinks=True)
    experiments = [e for t in plan for e in by_test.get(t, [])]
    entries = [
        {"name": e.get("name"), "summary": e.get("summary") or {}, "rounds": e["_rounds"]}
        for e in experiments
    ]
    info = {**(first.get("info") or {}), "shards": f"{n} shards of run {run_id}"}
    report = write_report(out_dir / REPORT_NAME, entries, None, info) if entries else None
    junit = out_dir / JUNIT_FILE if with_junit else None
    if junit is not None:
        parts = [(r["shard"], out_dir / r["folder"] / JUNIT_FILE) for r in runs]
        ET.ElementTree(merge_junit(parts, report)).write(junit, "utf-8", xml_declaration=True)
    ordered = {t: durations[t] for t in plan if t in durations}
    (out_dir / DURATIONS_FILE).write_text(json.dumps(ordered, indent=1) + "\n")
    merged.summary = {
        "run_id": run_id,
        "shards": n,
        "verdict": "failed" if merged.failed else "passed",
        "failed": merged.failed,
        "report": str(report) if report else None,
        "junit": str(junit) if junit else None,
        "shard_runs": runs,
        "tests": {t: tests[t] for t in plan},
        "experiments": [
            {
                **(e.get("summary") or {}),
                "label": e.get("name"),
                "nodeid": e["nodeid"],
                "shard": e["shard"],
                "test_outcome": e.get("outcome"),
            }
            for e in experiments
        ],
    }
    (out_dir / SUMMARY_FILE).write_text(json.dumps(merged.summary, indent=1, default=str) + "\n")
    return merged
