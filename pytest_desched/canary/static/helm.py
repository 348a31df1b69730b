"""The helm side: each chart's label, values and render as the lab's first install makes it."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.canary.static.chart_bugs import chart_bug_differences, name_fixes
from pytest_desched.canary.static.difference import CLUSTER_API_VERSIONS, Difference
from pytest_desched.canary.static.manifests import compare_manifests
from pytest_desched.canary.static.values import compare_values
from pytest_desched.descheduler.chart import LAB_CMD_OPTIONS, private_file
from pytest_desched.descheduler.chart_source import chart_meta, sha256_file
from pytest_desched.descheduler.policy.values import read_values
from pytest_desched.descheduler.render_checks import parse_manifests
from pytest_desched.proc import run
from pytest_desched.tools.candidate import tree_digest


def chart_label(chart: Path, version: str, source: str) -> dict[str, str]:
    """The label of one side: descheduler version, chart version / app version, source, digest.

    A packaged chart's digest is the .tgz's sha256 (as ChartRef records it); a chart
    directory's is over its files' relative paths and bytes, so the two kinds never compare.
    """
    if chart.is_file():
        meta, digest = chart_meta(chart), sha256_file(chart)
    else:
        meta = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8")) or {}
        digest = tree_digest(chart)
    return {
        "version": version,
        "chart_version": str(meta.get("version", "")),
        "chart_app_version": str(meta.get("appVersion", "")),
        "chart_source": source,
        "chart_sha256": digest,
    }


def render_chart(
    helm: Path,
    chart: Path,
    values: Mapping[str, Any] | None,
    env: Mapping[str, str],
    *,
    release: str = "descheduler",
    namespace: str = "kube-system",
    api_versions: Sequence[str] = CLUSTER_API_VERSIONS,
    timeout: float = 120,
    values_files: Sequence[Path] = (),
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`helm show values` and `helm template` of one chart, as the lab's first install renders it.

    Helm coalesces, in its order: the chart's defaults, the lab's cmdOptions, the user's
    `values_files`, then `values`, then the runbook's first-install flags (suspend=true,
    cmdOptions.dry-run=true). In-memory values go to helm in a private file (a values file
    may hold a token). `env` is `helm_env(home)`. A chart that does not render raises
    CommandError (its stderr scrubbed).
    """
    helm_s, envd = str(helm), dict(env)
    shown = yaml.safe_load(
        run([helm_s, "show", "values", str(chart)], env=envd, timeout=timeout).stdout
    )
    shown = shown if isinstance(shown, dict) else {}
    flags = [f"--api-versions={a}" for a in api_versions]
    with contextlib.ExitStack() as stack:
        lab = stack.enter_context(
            private_file(yaml.safe_dump({"cmdOptions": dict(LAB_CMD_OPTIONS)}, sort_keys=False))
        )
        files = [lab, *values_files]
        if values:
            files.append(stack.enter_context(private_file(yaml.safe_dump(dict(values)))))
        text = run(
            [
                helm_s,
                "template",
                release,
                str(chart),
                "--namespace",
                namespace,
                *(a for f in files for a in ("-f", str(f))),
                "--set",
                "suspend=true",
                "--set",
                "cmdOptions.dry-run=true",
                *flags,
            ],
            env=envd,
            timeout=timeout,
        ).stdout
    return shown, parse_manifests(text)


def compare_charts(
    helm: Path,
    baseline_chart: Path,
    candidate_chart: Path,
    env: Mapping[str, str],
    values: Mapping[str, Any] | None = None,
    values_files: Sequence[Path] = (),
    candidate_values_files: Sequence[Path] | None = None,
    releases: tuple[tuple[str, str], tuple[str, str]] | None = None,
    policies: Sequence[Mapping[str, Any]] = (),
) -> list[Difference]:
    """Both charts' default values and their renders with the user's values (files first):
    the same files, unless the candidate's differ (`candidate_values_files`). `releases`:
    each side's (chart version, descheduler version), to name known chart bugs
    (chart_bugs.py) in the renders, judged with the user's `policies`."""
    c_files = values_files if candidate_values_files is None else candidate_values_files
    bv, bdocs = render_chart(helm, baseline_chart, values, env, values_files=values_files)
    cv, cdocs = render_chart(helm, candidate_chart, values, env, values_files=c_files)
    # the values written for the baseline: a key they set that the candidate dropped is DU007
    user = [read_values(f).doc for f in values_files] + ([dict(values)] if values else [])
    diffs = compare_values(bv, cv, user) + compare_manifests(bdocs, cdocs)
    if releases is None:
        return diffs
    (b_chart, b_rel), (c_chart, c_rel) = releases
    # the baseline's chart bug is named where the candidate fixes it (a widened rule); the
    # candidate's own is DR009, a rollback trigger (what the upgrade installs is broken)
    diffs = name_fixes(diffs, b_chart, b_rel, policies)
    return diffs + chart_bug_differences("candidate", cdocs, c_chart, c_rel, policies)
