"""`desched lint`: the policy that will run, linted; with ``--from RELEASE``, the upgrade's
migration findings too (canary.lint_from), in the same text, JSON, SARIF, GitHub-annotation
and JUnit output."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched import render as out
from pytest_desched.config import parse_bins, resolve
from pytest_desched.errors import EXIT_FAILED, EXIT_OK, ConfigError
from pytest_desched.inputs_safe import check_file
from pytest_desched.log import say
from pytest_desched.tools.candidate import parse_candidate
from pytest_desched.tools.groups import HELM_HELP, HELM_MAJORS

if TYPE_CHECKING:
    from pytest_desched.canary.lint_from import LintRelease
    from pytest_desched.descheduler.policy.checker import PolicyChecker
    from pytest_desched.tools.candidate import Candidate
    from pytest_desched.tools.toolchain import Toolchain

__all__ = ["LINT_FORMATS", "add_parser", "cmd_lint"]

# Written by lint_output itself; yaml and md come from its JSON document. github: one workflow
# command a finding (inline annotations on a pull request), junit: a CI test report.
LINT_FORMATS = ("text", "json", "sarif", "github", "junit")


def _from_release(args: argparse.Namespace) -> Candidate | None:
    """``--from``/``--from-chart`` read and checked as the canary's --baseline is, before any
    build: bad input is one line, exit 2."""
    # heavy: tools.release reads tarballs and asks the Go module proxy, only for --from
    from pytest_desched.tools.release import check_release, parse_release

    if args.from_chart and not args.from_release:
        raise ConfigError("--from-chart needs --from RELEASE (the release that chart ships)")
    if not args.from_release:
        return None
    rel = parse_release(args.from_release, args.from_chart, role="--from")
    check_release(rel, role="--from")  # a version the Go module proxy does not serve: exit 2
    return rel


def _side(
    label: str, tc: Toolchain, checker: PolicyChecker, rel: Candidate | None, chart: str | None
) -> LintRelease:
    """One side of the upgrade: its chart (explicit, the release's own, else the pin's) and
    its own source tree (for the metric families its code declares)."""
    # heavy: canary.lint_from (+ canary.static, chart_source), only for --from
    from pytest_desched.canary.lint_from import LintRelease
    from pytest_desched.descheduler.chart_source import obtain_chart
    from pytest_desched.tools.release import release_tree

    if chart is not None:
        path = Path(chart)
        if not path.exists():
            raise ConfigError(f"--chart {path}: no such chart directory or .tgz")
        chart_path, chart_label = path, str(path)
    else:
        ref = obtain_chart(tc, tc.versions, "auto", report=say, candidate=rel)
        chart_path, chart_label = ref.path, f"{tc.versions.chart_name}-{ref.version}"
    if rel is not None and rel.kind == "source":
        rel = tc.source_candidate()  # its tree unpacked in the cache
    return LintRelease(label, checker, chart_path, chart_label, release_tree(rel))


def cmd_lint(args: argparse.Namespace) -> int:
    """Lint what will run: policies, ConfigMaps, or Helm values as the pinned chart renders them.

    Exit 1 when a finding reaches --fail-on (error by default), 2 on bad input (a file
    missing or unreadable, values helm refuses, a --from release that is none) before any
    finding.
    """
    # heavy: descheduler.policy.checker and its imports; descheduler.policy.lint and its imports; descheduler.policy.lint_output and its imports; descheduler.policy.values and its imports; tools.toolchain and its imports, kept out of `desched` start-up
    from pytest_desched.descheduler.policy.checker import checker_for
    from pytest_desched.descheduler.policy.lint import (
        lint_targets,
        load_targets,
        pinned_renderer,
        values_target,
    )
    from pytest_desched.descheduler.policy.lint_first_use import first_use_line, has_values
    from pytest_desched.descheduler.policy.lint_output import failing, render, verdict
    from pytest_desched.descheduler.policy.lint_select import apply_inline, list_rules, selection
    from pytest_desched.descheduler.policy.values import read_values
    from pytest_desched.proc import helm_env
    from pytest_desched.tools.toolchain import Toolchain

    if args.list_rules:
        if args.output not in out.FORMATS:  # sarif, github, junit describe findings only
            raise ConfigError(f"--list-rules prints {', '.join(out.FORMATS)}, not -o {args.output}")
        out.emit(list_rules(args.output), args.output_file, say)
        return EXIT_OK
    if not args.files and not args.values:
        raise ConfigError("desched lint needs a FILE or --values FILE")
    chosen = selection(args.select, args.ignore, Path.cwd())  # bad codes: exit 2, no build

    for f in args.files:  # missing, a directory, a FIFO, too big: refused before any build
        check_file(f, what="policy, values or ConfigMap")
    cand = None
    if args.candidate:  # the candidate's own policy checker, built from its source
        cand = parse_candidate(args.candidate)
    old_rel = _from_release(args)
    bins = parse_bins(resolve("--desched-bin", args.bin))  # e.g. policycheck=PATH, no Go
    cache = resolve("--desched-cache-dir", args.cache_dir)
    helm_major = resolve("--desched-helm", args.helm)  # renders the values: 4 or 3
    toolchain = None
    if cand or bins or cache or old_rel or args.helm:
        toolchain = Toolchain(
            cache_dir=Path(cache) if cache else None,
            overrides=bins,
            descheduler_version=None if cand else args.descheduler,
            candidate=cand,
            report=say,
            helm=helm_major,
        )
    helm = bool(args.values) or has_values(args.files) or old_rel is not None
    said: list[bool] = []

    def first_use() -> None:  # once, after the input is read and before a first build
        tc = toolchain or Toolchain(descheduler_version=args.descheduler, helm=helm_major)
        if not said and (line := first_use_line(tc, helm)):
            say(line)
        said.append(True)

    pinned = pinned_renderer(toolchain, args.chart, report=say)

    def renderer(files: Any) -> Any:
        first_use()
        return pinned(files)

    values = [read_values(v) for v in args.values or ()]  # bad input first, before rendering
    targets = [t for f in args.files for t in load_targets(f, renderer)]
    if values:
        targets.append(values_target(renderer(values)))
    first_use()  # the policy checker may be built next
    checker = checker_for(
        toolchain.wanted_version("descheduler") if toolchain else args.descheduler, toolchain
    )
    found = lint_targets(targets, checker)
    old_version = None
    if old_rel is not None and toolchain is not None:
        # heavy: canary.lint_from (+ canary.static), only for --from
        from pytest_desched.canary.lint_from import migration_findings

        old_tc = Toolchain(
            cache_dir=toolchain.cache_dir,
            overrides=bins,
            candidate=old_rel,
            report=say,
            helm=helm_major,
        )
        if old_tc.needs_build("policycheck"):
            say(
                f"--from {old_rel.ref}: building its policy checker "
                f"{old_tc.wanted_version('policycheck')} with Go (once; cached in "
                f"{old_tc.cache_dir}; docs/lint.md#upgrades-lint---from)"
            )
        old_checker = checker_for(old_tc.wanted_version("policycheck"), old_tc)
        new_rel = cand
        if new_rel is None and args.descheduler:
            with suppress(ConfigError):  # a commit, not a tag: no module tree, no metrics
                new_rel = parse_candidate(f"version:{args.descheduler}")
        old = _side(old_rel.ref, old_tc, old_checker, old_rel, None)
        new = _side(args.candidate or "pinned", toolchain, checker, new_rel, args.chart)
        say(
            f"--from: {old.version} (chart {old.chart_label}) -> {new.version} (chart {new.chart_label})"
        )
        found += migration_findings(
            args.files,
            args.values or (),
            old,
            new,
            toolchain.path("helm"),
            helm_env(toolchain.cache_dir / "charts"),
        )
        old_version = old.version
    findings = chosen.apply(apply_inline(found, [*args.files, *(args.values or ())]))
    fmt = args.output
    if fmt in LINT_FORMATS:  # the linter's own writers
        text = render(findings, fmt, checker.version, args.fail_on, from_version=old_version)
    else:  # yaml and md from the JSON document
        data = json.loads(
            render(findings, "json", checker.version, args.fail_on, from_version=old_version)
        )
        cols = {"file": "FILE", "line": "LINE", "severity": "SEVERITY", "rule": "RULE"}
        cols |= {"name": "NAME", "path": "PATH", "message": "MESSAGE", "fix": "FIX"}
        text = out.render(data, fmt, md=lambda: out.table(data["findings"], cols, "md"))
    out.emit(text, args.output_file, say, scrubbed=fmt == "junit")  # junit: scrubbed, then XML
    if args.output_file or fmt != "text":  # the verdict is the text's last line already
        print(verdict(findings, args.fail_on), file=sys.stderr)
    return EXIT_FAILED if failing(findings, args.fail_on) else EXIT_OK


def add_parser(sub: Any) -> None:
    li = sub.add_parser(
        "lint", help="lint policies, ConfigMaps or Helm values as the chart renders them"
    )
    li.set_defaults(func=cmd_lint, parser=li)
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
    li.add_argument(
        "--from",
        dest="from_release",
        default=None,
        metavar="RELEASE",
        help="the release you upgrade from (any form canary --baseline takes): its migration "
        "findings (DM/DU/DR/DO/DP/DD rules) against this lint's release",
    )
    li.add_argument(
        "--from-chart",
        default=None,
        metavar="CHART",
        help="the chart the --from release ships (a .tgz or directory; default: the pinned chart)",
    )
    li.add_argument("--select", metavar="CODE,...", help="only these rules [pyproject.toml]")
    li.add_argument("--ignore", metavar="CODE,...", help="not these rules [pyproject.toml]")
    li.add_argument("--list-rules", action="store_true", help="each rule, its severity and docs")
    li.add_argument("--cache-dir", default=None, help="default: DESCHED_CACHE_DIR or the XDG cache")
    li.add_argument(
        "--bin",
        default=None,
        metavar="TOOL=PATH,...",
        help="e.g. policycheck=PATH [env DESCHED_BIN]",
    )
    li.add_argument(
        "--helm", default=None, choices=HELM_MAJORS, help=f"{HELM_HELP} [env DESCHED_HELM]"
    )
    out.add_output(li, formats=(*out.FORMATS, "sarif", "github", "junit"), output_file=True)
