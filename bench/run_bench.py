#!/usr/bin/env python3
"""Time the descheduler runbook experiments on the embedded cluster, on warm tools.

Per run (default 3): bring-up of a fresh embedded cluster (provider start until 3 Ready
kwok workers), chart first install (obtain_chart + install_first), every experiment
(positive, nodefit, pdb and minpodage with the pdb-lister-workaround policy, then the three
runbook-policy variants, which must raise KnownUpstreamBug), and teardown (cleanup_release +
provider stop). "suite" is the wall time from provider start to the end of the three
workaround experiments (positive, nodefit, pdb) plus teardown. Then `pytest -m
descheduler_e2e` runs as a subprocess (default once) so its figure includes pytest itself.

    python bench/run_bench.py --rounds 0 [--runs 3] [--pytest-runs 1]

First (issues 18, 31), the plugin against the plain script in the same invocation:
`--rounds` (default 5) alternating rounds, each running the suite once through the plugin
(bench/plugin_suite.py: the three workaround experiments, lanes or one after another as the
engine decides from the CPU count and the load, every check, the cluster's checked deletion)
and once as the committed plain script in its fastest correct form (bench/plain_runbook.sh
with TEARDOWN=pods-first: the Deployment and its pods deleted before their namespace, so
the namespace controller finishes in one pass; the same checks), the order swapped every
round. Wall and CPU seconds of each (descendants included, see cpu_wrap.py), min / median /
max, the load at each round's start, and the ratio of the medians, whatever it is.

The floor of the suite's work on this machine comes from the script's own steps in the same
rounds (bench/floor.py): bare kwokctl create to 3 Ready nodes, one helm install, the three
rounds (Job created to pod scheduled, and the descheduler's run), and one namespace deletion
where the work needs one; a second floor adds the lab's minimal arrange per experiment as the
script does it (floor_with_arrange). The plugin's median wall is shown against both.

    python bench/run_bench.py [--rounds 5] [--runs 1] [--pytest-runs 0]

Writes JSON (--out) and a Markdown table (--md); progress goes to stderr. Exit status 0
only when every phase behaved as expected; 130 on Ctrl-C (everything is torn down first).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the checkout's package, also when it is not installed

WORKAROUND = "pdb-lister-workaround"
# (experiment, variant, expected outcome, part of the "suite" figure); order matters: the
# release's policy is upgraded only when it changes, so the first experiment of each policy
# (positive[workaround], minpodage, positive[runbook]) also carries a `helm upgrade`.
PLAN: list[tuple[str, str, str, bool]] = [
    ("positive", WORKAROUND, "pass", True),
    ("nodefit", WORKAROUND, "pass", True),
    ("pdb", WORKAROUND, "pass", True),
    ("minpodage", WORKAROUND, "pass", False),
    ("positive", "runbook", "known-upstream-bug", False),
    ("nodefit", "runbook", "known-upstream-bug", False),
    ("pdb", "runbook", "known-upstream-bug", False),
]
PYTEST_ARGS = ["-m", "descheduler_e2e", "-q", "-p", "no:cacheprovider"]
SUMMARY_RE = re.compile(
    r"\d+ (passed|failed|errors?|xfailed|xpassed|skipped|deselected)|no tests ran"
)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


# --- machine facts --------------------------------------------------------------
def _proc_field(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            k, _, v = line.partition(":")
            if k.strip() == key:
                return v.strip()
    except OSError:
        pass
    return None


def _cmd_out(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout or out.stderr).strip() or None


def foreign_apiservers() -> int:
    """kube-apiserver processes running now; called while we run none (others skew timings)."""
    n = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        n += bool(argv) and argv[0].endswith(b"kube-apiserver")
    return n


def machine_facts() -> dict[str, Any]:
    from pytest_desched.tools.versions import load_versions

    mem_kb = _proc_field("/proc/meminfo", "MemTotal")
    avail_kb = _proc_field("/proc/meminfo", "MemAvailable")
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
        "mem_total_gib": round(int(mem_kb.split()[0]) / 2**20, 1) if mem_kb else None,
        "mem_available_gib_at_start": round(int(avail_kb.split()[0]) / 2**20, 1)
        if avail_kb
        else None,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "go": _cmd_out(["go", "version"]),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "pinned": load_versions().summary(),
    }


# --- one run ----------------------------------------------------------------------
OUTCOME = {"pass": "pass", "xfail": "known-upstream-bug", "fail": "failed", "error": "failed"}


def run_experiment(session: Any, name: str, variant: str, expect: str) -> dict[str, Any]:
    """One experiment through the session; its step timings come from the result itself."""
    rec: dict[str, Any] = {"name": name, "variant": variant, "expected": expect}
    t0 = time.monotonic()
    res = session.run(name, variant=variant)
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    rec["outcome"] = OUTCOME[res.outcome]
    if res.outcome == "pass":
        rec.update(
            evictions=res.evictions,
            blocking_layer=res.blocking_layer,
            ready_latency_s=res.ready_latency_s,
            job_s=[round(r.duration_s, 3) for r in res.rounds],
        )
    else:
        rec["detail"] = res.message.splitlines()[0][:300] if res.message else ""
    t = res.timings
    rec["policy_upgrade"] = t.get("policy", 0.0) > 0.05  # a helm upgrade, not a no-op check
    rec["breakdown_s"] = {
        "round_s": t.get("round", 0.0),
        "policy_upgrade_s": t.get("policy", 0.0),
        "lab_teardown_s": t.get("lab_teardown", 0.0),
        "arrange_assess_s": round(
            sum(v for k, v in t.items() if k not in ("round", "policy", "lab_teardown", "act"))
            + t.get("act", 0.0)
            - t.get("round", 0.0),
            3,
        ),
    }
    rec["ok"] = rec["outcome"] == expect
    return rec


def one_run(i: int, workdir: Path) -> dict[str, Any]:
    """Fresh cluster, install, every experiment, teardown; always tears down (Ctrl-C too)."""
    from pytest_desched.config import build_config
    from pytest_desched.session import DeschedSession

    rdir = workdir / f"run{i}"
    rdir.mkdir(parents=True, exist_ok=True)
    config = build_config(
        {"--desched-provider": "embedded", "--desched-keep": "never"},
        run_dir=rdir,
        artifacts=rdir / "artifacts",
    )
    phases: dict[str, float] = {}
    run: dict[str, Any] = {"run": i, "phases": phases, "experiments": [], "errors": []}
    session = DeschedSession(config, report=log)
    run["foreign_apiservers_at_start"] = foreign_apiservers()
    t_start = time.monotonic()
    try:
        session.cluster  # noqa: B018 (bring-up, timed by the session)
        log(f"run {i}: cluster up in {session.timings['bring_up']:.1f}s; installing the chart")
        session.release  # noqa: B018 (first install: suspended, dry run)
        log(f"run {i}: chart installed in {session.timings['install']:.1f}s")
        suite_ok = True
        for name, variant, expect, in_suite in PLAN:
            key = f"{name}[{variant}]"
            log(f"run {i}: {key} ...")
            rec = run_experiment(session, name, variant, expect)
            run["experiments"].append(rec)
            phases[f"exp.{key}"] = rec["wall_s"]
            mark = "ok" if rec["ok"] else "UNEXPECTED"
            log(f"run {i}: {key} {rec['outcome']} in {rec['wall_s']:.1f}s ({mark})")
            if not rec["ok"]:
                run["errors"].append(
                    f"{key}: expected {expect}, got {rec['outcome']}: {rec.get('detail', '')}"
                )
            if in_suite:
                suite_ok = suite_ok and rec["ok"]
                if name == "pdb":
                    phases["suite.until_teardown"] = round(time.monotonic() - t_start, 3)
        run["suite_ok"] = suite_ok
        exps = run["experiments"]
        phases["experiments"] = round(sum(e["wall_s"] for e in exps), 3)
        for part in ("round", "policy_upgrade", "lab_teardown", "arrange_assess"):
            total = sum(e["breakdown_s"].get(f"{part}_s", 0.0) for e in exps)
            phases[f"experiments.{part}"] = round(total, 3)
    except Exception as exc:
        run["errors"].append(f"{type(exc).__name__}: {str(exc)[:1500]}")
        first = (str(exc).splitlines() or [""])[0][:300]
        log(f"run {i}: ERROR {type(exc).__name__}: {first}")
        run["suite_ok"] = False
    finally:
        log(f"run {i}: tearing down (release cleanup, cluster delete)")
        t_td = time.monotonic()
        try:
            report = session.close()
            leftovers = (report.get("cleanup") or {}).get("leftovers")
            run["leftovers"] = leftovers
            if leftovers:
                run["errors"].append(f"release leftovers: {leftovers}")
        except Exception as exc:
            run["errors"].append(f"teardown: {type(exc).__name__}: {str(exc)[:500]}")
        phases["teardown"] = round(time.monotonic() - t_td, 3)
    t = session.timings
    phases["bring_up"] = t.get("bring_up", 0.0)
    for k in ("tools", "control_plane", "nodes"):
        if f"bring_up.{k}_s" in t:
            phases[f"bring_up.{k}"] = t[f"bring_up.{k}_s"]
    phases["install"] = t.get("install", 0.0)
    phases["teardown.cleanup_release"] = t.get("teardown.release", 0.0)
    phases["teardown.provider_stop"] = t.get("teardown.cluster", 0.0)
    cdir = getattr(session.provider, "cluster_dir", None)
    run["cluster_dir_removed"] = cdir is None or not cdir.exists()
    if not run["cluster_dir_removed"]:
        run["errors"].append(f"cluster dir left behind: {cdir}")
    if run.get("suite_ok") and "suite.until_teardown" in phases:
        phases["suite"] = round(phases["suite.until_teardown"] + phases["teardown"], 3)
    run["foreign_apiservers_at_end"] = foreign_apiservers()
    return run


# --- pytest as a subprocess -----------------------------------------------------------
def run_pytest(i: int) -> dict[str, Any]:
    env = dict(os.environ, DESCHED_PROVIDER="embedded")
    cmd = [sys.executable, "-m", "pytest", *PYTEST_ARGS]
    shown = "DESCHED_PROVIDER=embedded " + shlex.join(cmd)
    log(f"pytest run {i}: {shown}")
    t0 = time.monotonic()
    # Own session: a terminal Ctrl-C reaches only us, and we forward exactly one SIGINT,
    # so pytest's fixtures tear its cluster down undisturbed.
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    chunks: list[bytes] = []
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        # Raw chunks, not lines: pytest -q's progress dots arrive without a newline.
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
            sys.stderr.buffer.write(chunk)
            sys.stderr.flush()
        rc = proc.wait()
    except BaseException:
        if proc.poll() is None:
            log("interrupted: forwarding SIGINT to pytest and waiting for its teardown")
            proc.send_signal(signal.SIGINT)
            try:  # communicate() keeps draining the pipe, so pytest never blocks on it
                rest, _ = proc.communicate(timeout=300)
                sys.stderr.buffer.write(rest or b"")
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise
    wall = round(time.monotonic() - t0, 3)
    lines = b"".join(chunks).decode(errors="replace").splitlines()
    summary = next((ln.strip(" =") for ln in reversed(lines) if SUMMARY_RE.search(ln)), None)
    log(f"pytest run {i}: exit {rc} in {wall:.1f}s: {summary}")
    return {
        "command": shown,
        "wall_s": wall,
        "exit_code": rc,
        "summary_line": summary,
        "ok": rc == 0,
    }


# --- the plugin against the plain script (issue 18) ---------------------------------------
def plugin_round(i: int, workdir: Path, mode: str = "auto") -> dict[str, Any]:
    """The suite through the plugin, in a process of its own under cpu_wrap."""
    out, cpu = workdir / f"plugin{i}.json", workdir / f"plugin{i}.cpu.json"
    cmd = [sys.executable, str(REPO / "bench" / "cpu_wrap.py"), str(cpu), "--"]
    cmd += [sys.executable, str(REPO / "bench" / "plugin_suite.py"), str(out), "--mode", mode]
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    process_wall = time.monotonic() - t0
    try:
        suite = json.loads(out.read_text())
        usage = json.loads(cpu.read_text())
    except (OSError, ValueError):
        return {"ok": False, "errors": [f"plugin suite wrote no result: {proc.stderr[-1500:]}"]}
    return {
        "ok": bool(suite["ok"]) and proc.returncode == 0 and not usage["stray_pids"],
        "wall_s": suite["wall_s"],  # provider start -> final namespace scan -> cluster gone
        "process_wall_s": round(process_wall, 3),  # + interpreter start and imports
        "cpu_s": usage["cpu_s"],
        "self_cpu_s": suite.get("self_cpu_s"),  # the Python process alone (imports included)
        "marks_s": suite["marks_s"],
        "execution": suite.get("execution"),
        "namespaces_waited": suite.get("namespaces_gone") is not None,
        "timings": suite.get("timings", {}),
        "experiments": suite.get("experiments", []),
        "errors": suite["errors"]
        + [f"stray processes {usage['stray_pids']}"] * bool(usage["stray_pids"]),
    }


def script_round(i: int, workdir: Path, teardown: str = "pods-first") -> dict[str, Any]:
    """The same suite as the committed plain script (fastest correct form by default)."""
    sys.path.insert(0, str(REPO / "bench"))
    from floor import floor_of
    from plain_baseline import run_plain_script

    res = run_plain_script(workdir / f"plain{i}", teardown=teardown)
    out = {
        "ok": bool(res["ok"]),
        "teardown": teardown,
        "wall_s": res["wall_s"],
        "cpu_s": res["cpu_s"],
        "checks": res.get("checks", []),
        "steps": res.get("steps", []),
        "errors": [] if res["ok"] else [str(res.get("stderr_tail", ""))[-1500:]],
    }
    if res["ok"]:
        try:
            out["floor"] = floor_of(out["steps"])
        except KeyError as exc:
            out["ok"], out["errors"] = False, [str(exc)]
    return out


def compare_with_plain(
    rounds: int, workdir: Path, mode: str = "auto", teardown: str = "pods-first"
) -> dict[str, Any]:
    """Alternating rounds: odd rounds run the plugin first, even rounds the script first."""
    sys.path.insert(0, str(REPO / "bench"))
    from floor import median_floor, ratio

    plugin: list[dict[str, Any]] = []
    script: list[dict[str, Any]] = []
    for i in range(1, rounds + 1):
        order = ("plugin", "script") if i % 2 else ("script", "plugin")
        for side in order:
            load = round(os.getloadavg()[0], 2)
            log(f"round {i}/{rounds}: {side} (load {load}) ...")
            if side == "plugin":
                res = plugin_round(i, workdir, mode)
            else:
                res = script_round(i, workdir, teardown)
            res["load_1m_at_start"] = load
            (plugin if side == "plugin" else script).append(res)
            state = "ok" if res["ok"] else f"FAILED {res['errors'][:1]}"
            log(
                f"round {i}/{rounds}: {side} {res.get('wall_s')} s wall, {res.get('cpu_s')} s CPU: {state}"
            )
    ok = [r for r in plugin + script if r["ok"]]
    out: dict[str, Any] = {
        "rounds": rounds,
        "script_teardown": teardown,
        "plugin_mode": mode,
        "plugin": plugin,
        "script": script,
    }
    if len(ok) == len(plugin) + len(script) and rounds:
        pw, sw = [r["wall_s"] for r in plugin], [r["wall_s"] for r in script]
        out["ratio_median_wall"] = ratio(pw, sw)
        out["ratio_median_cpu"] = ratio([r["cpu_s"] for r in plugin], [r["cpu_s"] for r in script])
        out["ratio_median_process_wall"] = ratio([r["process_wall_s"] for r in plugin], sw)
        floor = median_floor([r["floor"] for r in script])
        out["floor"] = floor
        # A discarded embedded cluster needs no namespace deletion (its deletion is checked);
        # the floor counts one only when the plugin's suite waited for one.
        waited = any(r.get("namespaces_waited") for r in plugin)
        out["floor_used"] = "floor_with_namespace" if waited else "floor"
        out["ratio_median_wall_to_floor"] = ratio(pw, floor[out["floor_used"]])
        out["ratio_median_process_wall_to_floor"] = ratio(
            [r["process_wall_s"] for r in plugin], floor[out["floor_used"]]
        )
        # The second floor: the same, plus the lab's minimal arrange as the script does it;
        # the third (issue 31's): the second plus each round's Job verdict.
        for name, base in FLOORS_ABOVE:
            used = f"{base}_and_namespace" if waited else base
            out[f"floor_with_{name}_used"] = used
            out[f"ratio_median_wall_to_floor_with_{name}"] = ratio(pw, floor[used])
        out["plugin_modes"] = sorted({(r.get("execution") or {}).get("mode", "?") for r in plugin})
    return out


# The floors above the first (bench/floor.py): name -> its figure without a namespace wait.
FLOORS_ABOVE = (("arrange", "floor_with_arrange"), ("verdict", "floor_with_arrange_and_verdict"))
FLOOR_PROSE = {
    "arrange": (
        "floor with arrange",
        "the floor plus the lab's minimal arrange per experiment as the plain script does it in "
        "its fastest form: namespace + Deployment to Ready, the label move, the PDB and each "
        "experiment's own change, kubectl's waits, no checks; bench/floor.py",
    ),
    "verdict": (
        "issue 31's floor",
        "the floor with arrange plus each round's verdict as the script gets it: the pod's "
        "terminated status written until the Job's Complete condition, which the Job "
        "controller batches by a constant 1 s; bench/floor.py",
    ),
}

FLOOR_LABELS = {
    "bring_up": "floor: bare `kwokctl create --wait` + 3 nodes Ready",
    "install": "floor: one `helm install --wait`",
    "round.positive": "floor: positive round, Job create → pod scheduled, + descheduler run",
    "round.nodefit": "floor: nodefit round, Job create → pod scheduled, + descheduler run",
    "round.pdb": "floor: pdb round, Job create → pod scheduled, + descheduler run",
    "namespace_deletion": "floor: one namespace deletion (pods first; fastest of 3)",
    "floor": "**floor: bring-up + install + 3 rounds**",
    "floor_with_namespace": "**floor + one namespace deletion**",
    "arrange.positive": "floor with arrange: positive's minimal arrange (script, kubectl)",
    "arrange.nodefit": "floor with arrange: nodefit's minimal arrange (script, kubectl)",
    "arrange.pdb": "floor with arrange: pdb's minimal arrange (script, kubectl)",
    "floor_with_arrange": "**floor with arrange: floor + the 3 minimal arranges**",
    "verdict.positive": "floor with verdicts: positive's pod terminated -> Job Complete",
    "verdict.nodefit": "floor with verdicts: nodefit's pod terminated -> Job Complete",
    "verdict.pdb": "floor with verdicts: pdb's pod terminated -> Job Complete",
    "floor_with_arrange_and_verdict": "**issue 31's floor: floor with arrange + the 3 verdicts**",
}


def versus_markdown(v: dict[str, Any]) -> list[str]:
    if not v.get("rounds"):
        return []
    plugin, script = v["plugin"], v["script"]
    rows = [
        ("plugin: suite wall (provider start → cluster gone)", [r.get("wall_s") for r in plugin]),
        (
            "plugin: process wall (+ Python start, imports)",
            [r.get("process_wall_s") for r in plugin],
        ),
        (f"plain script ({v['script_teardown']}): wall", [r.get("wall_s") for r in script]),
        ("plugin: CPU seconds (process and descendants)", [r.get("cpu_s") for r in plugin]),
        (
            "plugin: CPU seconds of its Python process alone",
            [r.get("self_cpu_s") for r in plugin],
        ),
        ("plain script: CPU seconds (script and descendants)", [r.get("cpu_s") for r in script]),
        ("load (1 min) at the plugin rounds' start", [r.get("load_1m_at_start") for r in plugin]),
        ("load (1 min) at the script rounds' start", [r.get("load_1m_at_start") for r in script]),
    ]
    for key, name in FLOOR_LABELS.items():
        rows.append((name, [r["floor"][key] for r in script if "floor" in r]))
    modes = ", ".join(
        f"{(r.get('execution') or {}).get('mode', '?')} ({(r.get('execution') or {}).get('why', '')})"
        for r in plugin[:1]
    )
    out = [
        "",
        f"## The plugin against the plain script ({v['rounds']} alternating rounds)",
        "",
        "The suite: bring-up, chart install, positive / nodefit / pdb with the "
        "pdb-lister-workaround policy, every check, teardown. Plugin: `bench/plugin_suite.py "
        f"--mode {v['plugin_mode']}` (the engine's choice, first round: {modes}; lab "
        "namespaces deleted in the background; the discarded cluster's checked deletion is "
        "the cleanup proof). Script: `bench/plain_runbook.sh` with "
        f"`TEARDOWN={v['script_teardown']}` (pods-first: its fastest correct form, the same "
        "checks). The floor comes from the script's own steps in the same rounds "
        "(`bench/floor.py`).",
        "",
        "| figure | n | min (s) | median (s) | max (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in rows:
        s = stats([x for x in values if x is not None])
        if s["n"]:
            out.append(f"| {name} | {s['n']} | {s['min']} | {s['median']} | {s['max']} |")
    if "ratio_median_wall" in v:
        used = "floor + one namespace deletion" if v["floor_used"] != "floor" else "floor"
        out += [
            "",
            f"**plugin / script, median wall: {v['ratio_median_wall']}** "
            f"(with the plugin's Python start: {v['ratio_median_process_wall']}); "
            f"median CPU: {v['ratio_median_cpu']}.",
            "",
            f"**plugin median wall / {used} ({v['floor'][v['floor_used']]} s): "
            f"{v['ratio_median_wall_to_floor']}** (with the Python start: "
            f"{v['ratio_median_process_wall_to_floor']}).",
        ]
        for name, _ in FLOORS_ABOVE:
            if v.get(f"ratio_median_wall_to_floor_with_{name}") is not None:
                label, why = FLOOR_PROSE[name]
                out += [
                    "",
                    f"**plugin median wall / {label} ({v['floor'][v[f'floor_with_{name}_used']]} "
                    f"s): {v[f'ratio_median_wall_to_floor_with_{name}']}** ({why}).",
                ]
    else:
        out += ["", "**No ratio: a round failed (see Failures).**"]
    return out


# --- report ----------------------------------------------------------------------------
def stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


def phase_order(runs: list[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for r in runs:
        for k in r["phases"]:
            if k not in keys:
                keys.append(k)
    first = [
        "bring_up",
        "bring_up.timings",
        "bring_up.tools",
        "bring_up.control_plane",
        "bring_up.nodes",
    ]
    first += ["install", "install.obtain_chart", "install.install_first"]
    first += [k for k in keys if k.startswith("exp.")]
    first += ["experiments", "experiments.round", "experiments.policy_upgrade"]
    first += ["experiments.lab_teardown", "experiments.arrange_assess"]
    last = [
        "teardown",
        "teardown.cleanup_release",
        "teardown.provider_stop",
        "suite.until_teardown",
        "suite",
    ]
    middle = [k for k in keys if k not in first + last]
    return [k for k in first if k in keys] + middle + [k for k in last if k in keys]


LABELS = {
    "bring_up": "bring-up: provider start → 3 Ready workers (wall)",
    "bring_up.tools": "  tool resolution (warm)",
    "bring_up.control_plane": "  kwokctl create --wait (control plane)",
    "bring_up.nodes": "  3 kwok nodes created → Ready",
    "bring_up.timings": "  provider.timings['bring_up_s'] (control plane + nodes)",
    "install": "chart first install (obtain_chart + install_first)",
    "install.obtain_chart": "  obtain_chart (cached .tgz)",
    "install.install_first": "  Release.install_first",
    "experiments": "all 7 experiments together",
    "experiments.round": "  descheduler rounds (Job create → run → log read, pod watch on)",
    "experiments.policy_upgrade": "  policy upgrades (helm template + diff + upgrade + verify)",
    "experiments.lab_teardown": "  lab teardown (namespace delete, node labels)",
    "experiments.arrange_assess": "  arrange + assess (namespace, deploy, labels, PDB, checks)",
    "teardown": "teardown (cleanup_release + provider stop)",
    "teardown.cleanup_release": "  cleanup_release",
    "teardown.provider_stop": "  provider stop",
    "suite.until_teardown": "  suite up to the end of pdb",
    "suite": "**suite: bring-up + install + 3 workaround experiments + teardown**",
}


def label(key: str, upgrades: dict[str, bool]) -> str:
    if key.startswith("exp."):
        name = key[4:]
        expect = next(e for n, v, e, _ in PLAN if f"{n}[{v}]" == name)
        note = " (expected KnownUpstreamBug)" if expect != "pass" else ""
        note += " (+ helm upgrade of the policy)" if upgrades.get(name) else ""
        return f"experiment {name}{note}"
    return LABELS.get(key, key)


def write_markdown(path: Path, data: dict[str, Any]) -> None:
    m, runs = data["machine"], data["runs"]
    upgrades = {
        f"{e['name']}[{e['variant']}]": e["policy_upgrade"] for r in runs for e in r["experiments"]
    }
    out = [
        "# pytest-desched benchmark results",
        "",
        f"- date: {data['date']}",
        f"- command: `{data['command']}`",
        f"- runs: {len(runs)}, each on a fresh embedded cluster; "
        f"pytest runs: {len(data['pytest'])}",
        f"- machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['mem_total_gib']} GiB RAM, "
        f"Linux {m['kernel']}, load {m['load_avg_at_start']} at start",
        f"- python {m['python']}, {m['go']}",
        "- pinned: " + ", ".join(f"{k} {v}" for k, v in m["pinned"].items()),
        f"- tools (warm-up {data['toolchain']['warmup_s']} s): "
        + ", ".join(sorted({f"{s}" for s in data["toolchain"]["sources"].values()})),
    ]
    foreign = max((r.get("foreign_apiservers_at_start", 0) for r in runs), default=0)
    if foreign:
        out.append(f"- **note:** {foreign} other kube-apiserver(s) were running during the bench")
    out += ["", "| phase | n | min (s) | median (s) | max (s) |", "|---|---:|---:|---:|---:|"]
    for key, s in data["summary"].items():
        if s["n"] and key != "pytest":
            out.append(
                f"| {label(key, upgrades)} | {s['n']} | {s['min']} | {s['median']} | {s['max']} |"
            )
    if data["pytest"]:
        s = stats([p["wall_s"] for p in data["pytest"]])
        row = f"{s['n']} | {s['min']} | {s['median']} | {s['max']}"
        out.append(f"| `pytest -m descheduler_e2e` (subprocess, wall) | {row} |")
        out += ["", "pytest runs:", ""]
        out += [
            f"- exit {p['exit_code']}: `{p['summary_line']}` ({p['wall_s']} s)"
            for p in data["pytest"]
        ]
    out += ["", "Experiment outcomes (every run):", ""] if runs else []
    for n, v, e, _ in PLAN if runs else []:
        key = f"{n}[{v}]"
        recs = [x for r in runs for x in r["experiments"] if f"{x['name']}[{x['variant']}]" == key]
        outs = ", ".join(sorted({x["outcome"] for x in recs})) or "not run"
        out.append(f"- {key}: {outs} (expected {e})")
    out += versus_markdown(data.get("versus") or {})
    if data["failures"]:
        out += ["", "Failures:", ""] + [f"- {f}" for f in data["failures"]]
    path.write_text("\n".join(out) + "\n")


# --- main ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="alternating plugin / plain-script rounds (default 5; 0 skips)",
    )
    ap.add_argument(
        "--plugin-mode",
        choices=("auto", "lanes", "sequential"),
        default="auto",
        help="the plugin's suite: the engine's choice (default), or forced",
    )
    ap.add_argument(
        "--script-teardown",
        choices=("pods-first", "namespace"),
        default="pods-first",
        help="the plain script's lab teardown (default pods-first, its fastest correct form)",
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="phase-by-phase library runs of all 7 experiments in sequence (default 1)",
    )
    ap.add_argument(
        "--pytest-runs", type=int, default=0, help="`pytest -m descheduler_e2e` runs (default 0)"
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results.json", help="JSON output")
    ap.add_argument(
        "--md",
        type=Path,
        default=REPO / "bench" / "run_bench.md",
        help="Markdown output (bench/RESULTS.md is the curated summary of every bench)",
    )
    ap.add_argument(
        "--workdir", type=Path, default=None, help="keep round logs here (default: temp, removed)"
    )
    args = ap.parse_args(argv)
    if args.runs < 0 or args.pytest_runs < 0 or args.rounds < 0:
        ap.error("--rounds, --runs and --pytest-runs must be >= 0")
    signal.signal(signal.SIGTERM, _sigterm)  # SIGTERM unwinds like Ctrl-C: everything torn down

    from pytest_desched.tools.groups import TOOL_GROUP
    from pytest_desched.tools.toolchain import Toolchain

    data: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(sys.orig_argv),
        "cwd": os.getcwd(),
        "machine": machine_facts(),
    }
    log(f"{data['machine']['nproc']} CPUs, {data['machine']['mem_total_gib']} GiB; warming tools")
    toolchain = Toolchain()
    t0 = time.monotonic()
    toolchain.ensure([t for t in TOOL_GROUP if t != "kind"])
    data["toolchain"] = {
        "warmup_s": round(time.monotonic() - t0, 2),
        "sources": dict(toolchain.sources),
    }
    if "built" in toolchain.sources.values():
        log("note: some tools were built just now; the runs below use them warm")
    if n := foreign_apiservers():
        log(f"warning: {n} other kube-apiserver process(es) running; timings will be skewed")

    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="desched-bench-")
        workdir = Path(tmp.name)
    else:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        versus = compare_with_plain(args.rounds, workdir, args.plugin_mode, args.script_teardown)
        runs = []
        for i in range(1, args.runs + 1):
            log(f"=== run {i}/{args.runs}")
            runs.append(one_run(i, workdir))
        pytest_runs = [run_pytest(i) for i in range(1, args.pytest_runs + 1)]
    except KeyboardInterrupt:
        log("interrupted; everything started has been torn down; no results written")
        return 130
    finally:
        if tmp is not None:
            tmp.cleanup()

    data["versus"] = versus
    data["runs"] = runs
    data["pytest"] = pytest_runs
    data["summary"] = {
        k: stats([r["phases"][k] for r in runs if k in r["phases"]]) for k in phase_order(runs)
    }
    if pytest_runs:
        data["summary"]["pytest"] = stats([p["wall_s"] for p in pytest_runs])
    data["failures"] = [f"run {r['run']}: {e}" for r in runs for e in r["errors"]]
    data["failures"] += [
        f"round {i} {side}: {e}"
        for side in ("plugin", "script")
        for i, r in enumerate(versus.get(side, []), 1)
        for e in (r["errors"] or ["failed"] if not r["ok"] else [])
    ]
    data["failures"] += [
        f"pytest run {i}: exit {p['exit_code']} ({p['summary_line']})"
        for i, p in enumerate(pytest_runs, 1)
        if not p["ok"]
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    args.md.parent.mkdir(parents=True, exist_ok=True)
    write_markdown(args.md, data)
    log(f"wrote {args.out} and {args.md}")
    print(args.md.read_text(), file=sys.stderr)
    for f in data["failures"]:
        log(f"FAILURE {f}")
    return 1 if data["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
