"""`run_matrix`: the same experiments on several releases, one canary track each, judged.

A row is a canary track (tracks.run_track): one release with its chart and the user's values
on a cluster of its own, so no two releases evict from the same pods. Rows run one after
another (a 2-core machine runs one cluster well, not three). Every input is read before the
first cluster: each release spec and chart (tools.release, as `--candidate`/`--baseline`
take them), a version the Go proxy serves, the experiment names, the chart pairings, and the
user's --policy/--values and each experiment's policy as each release's own chart and policy
checker read them (a field a release cannot express is refused). Bad input
is a ConfigError (exit 2, one line); a release whose track broke is a row that did not run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pytest_desched.canary.engine import track_config
from pytest_desched.canary.expectations import load_explanations
from pytest_desched.canary.matrix_report import Matrix, Row
from pytest_desched.canary.static_run import accept_missing, track_policies
from pytest_desched.canary.tracks import parse_experiments, run_track
from pytest_desched.capabilities import capabilities_of
from pytest_desched.config import DeschedConfig, check_kubernetes_on
from pytest_desched.errors import ConfigError
from pytest_desched.experiments import lookup
from pytest_desched.log import tagged
from pytest_desched.session import DeschedSession
from pytest_desched.tools.kube_versions import choose_kubernetes
from pytest_desched.tools.release import check_release, parse_release_cached
from pytest_desched.tools.versions import load_versions

_say = tagged("desched matrix")
ROLE = "release"  # how an error names a release ("release 'version:v9.9.9': ...")


def pair_charts(releases: Sequence[str], charts: Sequence[str]) -> list[tuple[str, str | None]]:
    """Each release with its chart from `RELEASE=CHART` items (none: the release's default).

    The release part must be one of `releases` exactly, so a chart pin's own `=` (`DIR@
    appVersion=0.33.0`) is never read as the separator.
    """
    if not releases:
        raise ConfigError(
            "desched matrix needs at least one RELEASE (version:vX.Y.Z, source:PATH, binary:PATH, pinned)"
        )
    seen: set[str] = set()
    for r in releases:
        if r in seen:
            raise ConfigError(f"release {r!r} is given twice; name each release once")
        seen.add(r)
    chart: dict[str, str] = {}
    for item in charts:
        owner = next(
            (r for r in sorted(releases, key=len, reverse=True) if item.startswith(r + "=")), None
        )
        if owner is None or not item[len(owner) + 1 :].strip():
            raise ConfigError(
                f"--chart {item!r}: write RELEASE=CHART with RELEASE one of the releases given "
                f"({', '.join(releases)})"
            )
        if owner in chart:
            raise ConfigError(f"--chart: release {owner!r} has two charts; give it one")
        chart[owner] = item[len(owner) + 1 :].strip()
    return [(r, chart.get(r)) for r in releases]


GRID_FLAG = "--kubernetes"  # the matrix's own, repeatable spelling (commands/matrix.py)


def check_grid(kubernetes: Sequence[str]) -> list[str]:
    """Each grid version as served here (normalised), or a ConfigError naming the served
    ones; a version given twice is refused too."""
    chosen = [choose_kubernetes(load_versions(), k, GRID_FLAG).version for k in kubernetes]
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"{GRID_FLAG}: a version is given twice; name each once")
    return chosen


def labels_of(exps: Sequence[tuple[str, str]]) -> list[str]:
    """The cells' labels as the results will name them (title[variant])."""
    out = []
    for n, v in exps:
        cls = lookup(n)
        out.append(f"{cls.title or n}[{getattr(cls, 'own_policy_label', None) or v}]")
    return out


def row_name(i: int, version: str) -> str:
    """The row's evidence folder: its place and its version, safe as a path."""
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in version)[:60]
    return f"{i}-{safe or 'release'}"


def run_matrix(
    config: DeschedConfig,
    releases: Sequence[str],
    charts: Sequence[str] = (),
    experiments: Sequence[str] | None = None,
    report: Callable[[str], None] = _say,
    command: str = "",
    expect: str | Path | None = None,
    kubernetes: Sequence[str] = (),
) -> Matrix:
    """Every release's row, one after another, judged and written under config.artifacts.

    `kubernetes` (several versions) makes a grid: a row per release and Kubernetes version,
    each on a cluster of that version, named `SPEC @ VERSION`. None: the run's one version.

    `expect` is a canary explanation file; its `static` entries on `policy-translation:*`
    accept a protection a release cannot express (it then runs without it, as the canary's
    track does), e.g. PodsWithResourceClaims on v0.33.0."""
    t0 = time.monotonic()
    explanations = load_explanations(expect)
    pairs = pair_charts(releases, charts)
    exps = parse_experiments(experiments)
    caps = capabilities_of(config.provider)
    if caps is not None and caps.shared:
        raise ConfigError(
            "desched matrix runs each release on a cluster of its own; on an existing "
            "cluster the releases would share the pod set. Use --provider embedded (or kind)"
        )
    kubes: list[str | None] = [*check_grid(kubernetes)] or [None]
    named: list[tuple[str, str, str | None, str | None]] = []
    i = 0
    for spec, chart in pairs:  # every release read before any session
        rel = parse_release_cached(None if spec == "pinned" else spec, chart, ROLE)
        check_release(rel, ROLE)  # a version the Go proxy does not serve: exit 2, now
        for kube in kubes:
            i += 1
            label = rel.version if kube is None else f"{rel.version}-k8s-{kube}"
            named.append((row_name(i, label), spec, chart, kube))
    rows: list[tuple[str, str, str | None, DeschedSession]] = []
    without: dict[str, list[str]] = {}
    try:
        for name, spec, chart, kube in named:
            cfg = track_config(config, name, spec, chart)
            if kube is not None:
                cfg = cfg.with_(kubernetes=kube)
                check_kubernetes_on(cfg, cfg.provider)  # e.g. a named kind cluster: exit 2
            shown = spec if kube is None else f"{spec} @ {kube}"
            rows.append((name, shown, chart, DeschedSession(cfg, report=_tag(report, name))))
        variants = [v for _, v in exps]
        for name, _, _, session in rows:  # the user's inputs, as each release reads them
            session.inputs  # noqa: B018 (a bad --policy/--values: exit 2 before any cluster)
            # each variant's policy in the release's own fields, by its own checker
            accept_missing(session, name, explanations)
            readings = track_policies(session, variants, f"matrix release {name}")
            # the non-safety fields it has none for (release_fields.NON_SAFETY_FIELDS): said
            # on its row, never silently
            without[name] = sorted({f for r in readings.values() for f in r.dropped})
    except BaseException:
        for *_, session in rows:
            session.close()
        raise
    planned = labels_of(exps)
    done: list[Row] = []
    for n, (name, spec, chart, session) in enumerate(rows):
        report(f"[{name}] {spec}: {len(exps)} experiment(s) on a cluster of its own")
        try:
            track = run_track(name, session, exps, threading.Event(), metrics=False)
        except BaseException:  # an interrupt: the rows not reached never had a cluster
            for *_, later in rows[n + 1 :]:
                later.close()
            raise
        done.append(Row.of(name, spec, chart, track, planned, runs_without=without.get(name)))
    matrix = Matrix(
        done,
        [  # a column is named as the runs named it (a --policy file names the variant)
            next((r.cells[i].label for r in done if r.cells[i].rounds), label)
            for i, label in enumerate(planned)
        ],
        command=command,
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        wall_s=time.monotonic() - t0,
    )
    paths = matrix.write(config.artifacts)
    report(f"matrix {matrix.headline}; report: {paths['markdown']}")
    return matrix


def _tag(report: Callable[[str], None], name: str) -> Callable[[str], None]:
    return lambda m: report(f"[{name}] {m}")
