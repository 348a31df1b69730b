"""`desched`: the engine without pytest (tools, up, down, run), for people and for CI.

    desched tools [TOOL ...] [--descheduler-version V]   build or find the pinned binaries
    desched up [--workers N] ...                           a kept cluster with the release
    desched down [NAME ...] [--all]                        delete kept embedded clusters
    desched run [EXPERIMENT ...] [--variant V] ...         experiments, with the same evidence
    desched lint [FILE...] [-f VALUES...] [--fail-on F]    the policy that will run, linted
    desched canary --candidate SPEC [--expect FILE] ...    a candidate against the baseline
    desched snapshot --context NAME -o snap.yaml          a read-only cluster snapshot
    desched replay snap.yaml [--descheduler V] ...         an incident, replayed, every fate

Every `--desched-*` option of the plugin is here without its prefix (`--provider`,
`--keep`, `--artifacts`, ...), with the same `DESCHED_*` environment variables.

Exit codes: 0 every experiment passed or failed as a registered known bug explains (canary:
every change explained); 1 an experiment failed or errored (canary: a rollback trigger, an
unexplained change or a stale explanation; a track that could not run exits 3); 2 bad input (nothing was changed); 3 the toolchain or
the provider could not give a cluster; 130 interrupted (the last line says what the cleanup
verified gone, what was kept, or what is left and who removes it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from pytest_desched.artifacts_dir import claim
from pytest_desched.config import OPTIONS, build_config, resolve
from pytest_desched.errors import ConfigError, PolicyError, ProviderError, ToolError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _say(msg: str) -> None:
    print(f"[desched] {msg}", file=sys.stderr, flush=True)


def _add_config_options(ap: argparse.ArgumentParser) -> None:
    for flag, env, kw in OPTIONS:
        name = "--" + flag.removeprefix("--desched-")
        if name in ap._option_string_actions:  # the subcommand's own (replay's --policy)
            continue
        kw = dict(kw)
        default = kw.pop("default", False if kw.get("action") == "store_true" else None)
        kw["help"] = f"{kw['help']} [env {env}] (default: {default})"
        if kw.get("action") != "store_true":
            kw["default"] = None  # unset, so an explicit value beats the environment
            kw.setdefault("metavar", flag.removeprefix("--desched-").upper().replace("-", "_"))
        ap.add_argument(name, dest=flag, **kw)


def _config(args: argparse.Namespace, **fields: Any) -> Any:
    values = {flag: getattr(args, flag, None) for flag, _, _ in OPTIONS}
    config = build_config(values, **fields)
    if not resolve("--desched-artifacts", values["--desched-artifacts"]):
        claim(config.artifacts)  # ./desched-artifacts/<stamp>-<id>/ and `latest`
    return config


def cmd_tools(args: argparse.Namespace) -> int:
    from pytest_desched.tools.toolchain import main as tools_main

    argv = list(args.tools)
    if args.descheduler_version:
        argv += ["--descheduler-version", args.descheduler_version]
    if args.candidate:
        argv += ["--candidate", args.candidate]
    if args.cache_dir:
        argv += ["--cache-dir", str(args.cache_dir)]
    return tools_main(argv)


def cmd_up(args: argparse.Namespace) -> int:
    """Bring up a cluster with the release, and keep it: but only once all of that finished.

    Interrupted or failed before, the cluster and this run's `up/run-*` folder are deleted
    (and checked gone); the keep mark, the folder's `cluster-name` and the printed lines are
    written shielded, so a signal cannot leave a kept cluster `desched down` does not know.
    """
    import tempfile

    from pytest_desched import interrupts
    from pytest_desched.providers.embedded.cluster import write_up_owner
    from pytest_desched.session import DeschedSession
    from pytest_desched.tools.toolchain import default_cache_dir

    cache = Path(
        resolve("--desched-cache-dir", getattr(args, "--desched-cache-dir", None))
        or default_cache_dir()
    )
    up_dir = cache / "up"
    up_dir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=up_dir))  # removed by `desched down`
    write_up_owner(run_dir)  # until kept, a `desched down` leaves a live run's folder alone
    config = session = None
    finished = False
    try:
        config = _config(args, keep="always", run_dir=run_dir)
        session = DeschedSession(config, report=_say)
        name = getattr(session.provider, "cluster_name", None)
        if name:  # known before anything starts: `desched down NAME` finds this folder
            (run_dir / "cluster-name").write_text(name)
        session.release  # noqa: B018 (cluster, then the release: suspended, dry run)
        policy, said = session.install_policy()
        hints = session.continue_hints()
        with interrupts.shielded(f"desched up's cluster {name}: marking it kept"):
            cluster, release = session.cluster, session.release
            session.close()  # kept: marks the cluster kept, so no later run reaps it
            finished = True
            print("\n".join(hints))
            print(
                f"# release {release.name} in kube-system: suspended, dry run, policy {said} "
                f"(digest {policy.digest()[:12]})"
            )
            for line in session.inputs.on_top:
                print(f"# on top of your values: {line}")
            print(f"# delete: desched down {cluster.name}")
    except BaseException:
        if not finished:  # a half-made cluster is not kept
            with interrupts.shielded(f"desched up's folder {run_dir}"):
                try:
                    if session is not None and config is not None:
                        session.config = config.with_(keep="never")
                        session.close()
                finally:
                    shutil.rmtree(run_dir, ignore_errors=True)
                    if run_dir.exists():
                        interrupts.left_behind.append(f"folder {run_dir}")
        raise
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    from pytest_desched.providers.embedded.cluster import (
        delete_cluster,
        kept_clusters,
        stale_up_dirs,
    )
    from pytest_desched.tools.toolchain import Toolchain

    tc = Toolchain(cache_dir=args.cache_dir, report=_say)
    root = tc.cache_dir / "clusters"
    kept = kept_clusters(root)
    for stale in stale_up_dirs(tc.cache_dir / "up", root):  # left by interrupted `up`s
        shutil.rmtree(stale, ignore_errors=True)
        _say(f"removed {stale} (its cluster is gone)")
    names = kept if args.all else args.names
    if not names:
        print("\n".join(kept) if kept else "no kept embedded clusters")
        return EXIT_OK
    unknown = sorted(set(names) - set(kept))
    if unknown:
        raise ConfigError(f"not a kept embedded cluster: {unknown}; kept: {kept or 'none'}")
    for name in names:
        found = delete_cluster(tc, root, name, _say)
        for marker in (tc.cache_dir / "up").glob("run-*/cluster-name"):
            if marker.read_text().strip() == name:  # `desched up`'s kubeconfig copy and files
                shutil.rmtree(marker.parent, ignore_errors=True)
        if found["processes_left"] or found["dir_left"]:
            _say(f"embedded cluster {name}: not fully deleted ({found}); run desched down again")
            return EXIT_INFRA
        _say(f"deleted embedded cluster {name} (0 processes, folder removed)")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from pytest_desched.evidence.summary import summary_line
    from pytest_desched.experiments import REGISTRY, lookup
    from pytest_desched.session import DeschedSession

    names = args.experiments or ["positive", "nodefit", "pdb"]
    for n in names:
        try:
            lookup(n)
        except KeyError:
            raise ConfigError(f"unknown experiment {n!r}; known: {sorted(REGISTRY)}") from None
    config = _config(args)
    if args.parallel and len(names) > 1 and config.workers < 2 * len(names):
        # two workers per lane (a source and a target); only the embedded cluster grows
        config = config.with_(workers=2 * len(names))
    outcomes: list[dict[str, Any]] = []
    failed: list[str] = []
    with DeschedSession(config, report=_say) as session:
        by_name: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        if args.parallel:
            ran = session.run_concurrently(
                [(n, args.variant) for n in names],
                on_record=lambda rec: by_name[_experiment_of(rec, names)].append(rec),
            )
        else:
            ran = [session.run(n, variant=args.variant, on_record=by_name[n].append) for n in names]
        for n, result in zip(names, ran, strict=True):
            rounds = by_name[n]
            session.failed |= result.outcome in ("fail", "error")
            entry = {"name": f"{n}[{result.variant}]", "outcome": _shown(result.outcome)}
            print(summary_line({**entry, "rounds": rounds}), flush=True)
            if result.outcome in ("fail", "error"):
                failed.append(entry["name"])
                print(result.message, file=sys.stderr)
            outcomes.append({**entry, **result.summary()})
    summary = config.artifacts / "run-summary.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text(json.dumps(outcomes, indent=1, default=str))
    _say(f"evidence: {config.artifacts} (summary {summary.name})")
    report = getattr(session, "info", {}).get("report")  # written by session.close()
    if report:
        _say(f"report: {report}")
    return EXIT_FAILED if failed else EXIT_OK


def _experiment_of(record: dict[str, Any], names: list[str]) -> str:
    """Which of `names` a round record belongs to (records carry the experiment's title)."""
    from pytest_desched.experiments import lookup

    label = str(record.get("experiment", ""))
    return next((n for n in names if label.startswith(lookup(n).title + "[")), names[0])


def cmd_lint(args: argparse.Namespace) -> int:
    """Lint what will run: policies, ConfigMaps, or Helm values as the pinned chart renders them.

    Exit 1 when a finding reaches --fail-on (error by default), 2 on bad input (a file
    missing or unreadable, values helm refuses) before any finding.
    """
    from pytest_desched.descheduler.policy.checker import checker_for
    from pytest_desched.descheduler.policy.lint import (
        lint_targets,
        load_targets,
        pinned_renderer,
        values_target,
    )
    from pytest_desched.descheduler.policy.lint_output import failing, render, verdict
    from pytest_desched.descheduler.policy.values import read_values

    if not args.files and not args.values:
        raise ConfigError("desched lint needs a FILE or --values FILE")
    toolchain = None
    if args.candidate:  # the candidate's own policy checker, built from its source
        from pytest_desched.descheduler.candidate import parse_candidate
        from pytest_desched.tools.toolchain import Toolchain

        toolchain = Toolchain(candidate=parse_candidate(args.candidate), report=_say)
    renderer = pinned_renderer(toolchain, args.chart, report=_say)
    values = [read_values(v) for v in args.values or ()]  # bad input first, before rendering
    targets = [t for f in args.files for t in load_targets(f, renderer)]
    if values:
        targets.append(values_target(renderer(values)))
    checker = checker_for(
        toolchain.wanted_version("descheduler") if toolchain else args.descheduler, toolchain
    )
    findings = lint_targets(targets, checker)
    out = render(findings, args.format, checker.version, args.fail_on)
    if args.output:
        Path(args.output).write_text(out + "\n")
    else:
        print(out)
    if args.output or args.format != "text":  # the verdict is the text's last line already
        print(verdict(findings, args.fail_on), file=sys.stderr)
    return EXIT_FAILED if failing(findings, args.fail_on) else EXIT_OK


def cmd_canary(args: argparse.Namespace) -> int:
    """Both tracks, the diff, the verdict; the Markdown report on stdout (or JSON)."""
    from pytest_desched.canary.engine import run_canary

    config = _config(args)
    candidate = getattr(config, "candidate", None)
    if not candidate:
        raise ConfigError(
            "desched canary needs --candidate SPEC (version:vX.Y.Z, source:PATH, binary:PATH)"
        )
    rep = run_canary(
        config,
        candidate,
        getattr(config, "candidate_chart", None),
        expect=args.expect,
        experiments=args.experiment,
        report=_say,
        parallel=not args.serial,
        static=not args.no_static,
        behaviour=not args.static_only,
    )
    print(json.dumps(rep.to_dict(), indent=1, default=str) if args.json else rep.markdown())
    _say(f"report: {config.artifacts / 'canary.md'} and canary.json")
    if rep.broken:  # a track could not run: no verdict on the candidate, exit as infra
        return EXIT_INFRA
    return EXIT_OK if rep.ok else EXIT_FAILED


def _shown(outcome: str) -> str:
    return {"pass": "passed", "xfail": "xfailed", "fail": "failed", "error": "error"}[outcome]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="desched", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tools", help="build or find the pinned binaries")
    t.add_argument("tools", nargs="*", help="tools to provide (default: all but kind)")
    t.add_argument("--descheduler-version", default=None, help="another release tag or commit")
    t.add_argument("--candidate", default=None, help="a canary candidate to build (source:PATH)")
    t.add_argument("--cache-dir", type=Path, default=None)
    t.set_defaults(func=cmd_tools)
    u = sub.add_parser("up", help="bring up a kept cluster with the release installed")
    _add_config_options(u)
    u.set_defaults(func=cmd_up)
    d = sub.add_parser("down", help="delete kept embedded clusters (list them without names)")
    d.add_argument("names", nargs="*")
    d.add_argument("--all", action="store_true", help="every kept embedded cluster")
    d.add_argument("--cache-dir", type=Path, default=None)
    d.set_defaults(func=cmd_down)
    r = sub.add_parser("run", help="run experiments (default: positive nodefit pdb)")
    r.add_argument("experiments", nargs="*", help="registered experiment names")
    r.add_argument("--variant", default=None, help="policy variant (runbook, ...)")
    r.add_argument(
        "--parallel",
        action="store_true",
        help="run the experiments side by side, a lane each (own namespace, nodes, release; "
        "needs two workers per experiment: the embedded cluster gets them)",
    )
    _add_config_options(r)
    r.add_argument(
        "--descheduler",
        dest="--desched-descheduler-version",
        default=None,
        metavar="VERSION",
        help="alias of --descheduler-version",
    )
    r.set_defaults(func=cmd_run)
    li = sub.add_parser(
        "lint", help="lint policies, ConfigMaps or Helm values as the chart renders them"
    )
    li.add_argument("files", nargs="*", metavar="FILE", help="each linted on its own")
    li.add_argument(
        "--values",
        "-f",
        action="append",
        default=None,
        metavar="FILE",
        help="Helm values, rendered together with the pinned chart (repeatable, Helm's order)",
    )
    li.add_argument(
        "--chart", default=None, metavar="PATH", help="render values with this chart (dir or .tgz)"
    )
    li.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        default="error",
        help="exit 1 on findings of this severity or worse (default: error)",
    )
    li.add_argument("--descheduler", default=None, metavar="VERSION", help="default: pinned")
    li.add_argument(
        "--candidate", default=None, metavar="SPEC", help="lint as a candidate reads it"
    )
    li.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    li.add_argument("--output", "-o", default=None, help="write here instead of stdout")
    li.set_defaults(func=cmd_lint)
    c = sub.add_parser("canary", help="a candidate descheduler/chart against the baseline")
    _add_config_options(c)  # includes --candidate and --candidate-chart
    c.add_argument("--expect", default=None, metavar="FILE", help="explanations of changes")
    c.add_argument(
        "--experiment",
        action="append",
        default=None,
        help="name or name[variant] (repeatable; default: the runbook's three, both variants)",
    )
    c.add_argument("--serial", action="store_true", help="one track after the other")
    c.add_argument("--no-static", action="store_true", help="skip the static comparison")
    c.add_argument(
        "--static-only",
        action="store_true",
        help="charts and policies only: no cluster, no experiments (a CI pre-check)",
    )
    c.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    c.set_defaults(func=cmd_canary)
    from pytest_desched.replay.cli import add_parsers  # desched snapshot / desched replay

    add_parsers(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    from pytest_desched.interrupts import interrupts_unwind, reset

    reset()
    args = parser().parse_args(argv)
    try:
        with interrupts_unwind():  # SIGTERM cleans up like Ctrl-C
            return int(args.func(args))
    except (ConfigError, PolicyError) as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except (ToolError, ProviderError) as exc:
        _say(f"error: {exc}")
        return EXIT_INFRA
    except KeyboardInterrupt:
        from pytest_desched import interrupts

        _say(interrupts.exit_message())  # what the cleanups verified, kept or left
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
