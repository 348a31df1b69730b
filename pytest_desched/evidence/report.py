"""One self-contained HTML page per run: the evidence people would rather look at than read.

`write_report` renders `<artifacts>/report.html` from the experiments' summaries
(`ExperimentResult.summary()`) and their round record dicts, after passing all of it through
the run's `Redactor`, so the page shows exactly what the JSON records show and no more. Charts
are matplotlib figures inlined as SVG, the page is a Jinja2 template with autoescaping; nothing
is fetched when it opens (no CDN, no web fonts), so it reads the same offline and in CI
artifacts. Both front ends call it through `DeschedSession.close()`.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from pytest_desched.evidence.readable import NONE_SHOWN, human, prose
from pytest_desched.evidence.timeline import REPLACEMENT_SCHEDULED
from pytest_desched.outcome.identity import NOT_COMPARABLE
from pytest_desched.redaction import Redactor
from pytest_desched.tools.locate import default_cache_dir

if TYPE_CHECKING:
    from pytest_desched.evidence.views_ahead import ViewsAhead

REPORT_NAME = "report.html"

# One colour per layer of the runbook's chain (decisions.Layer values), for the fate ledger and
# the charts; colour-blind-safe (Okabe-Ito) so "which layer stopped it" reads at a glance.
LAYER_COLOURS: dict[str, str] = {
    "policy": "#999999",
    "evictor-filter": "#E69F00",
    "evictor-prefilter-nodefit": "#56B4E9",
    "eviction-limits": "#F0E442",
    "api-server": "#009E73",
    "dry-run": "#CC79A7",
    "controller": "#D55E00",
    "scheduler": "#0072B2",
}
_TIMELINE_ROWS = (
    ("job-created", "Job"),
    ("job-complete", "Job"),
    ("pod-started", "round pod"),
    ("eviction-request", "eviction request"),
    (REPLACEMENT_SCHEDULED, "replacement"),
    ("replacement-ready", "replacement"),
)
_XML_PROLOGUE = re.compile(r"\A.*?(?=<svg)", re.S)


def json_native(obj: Any) -> Any:
    """JSON-native data (as the records on disk), so redaction sees every string."""
    return json.loads(json.dumps(obj, default=str))


# pyplot keeps global state: one chart at a time in the process (sessions of a canary's two
# tracks, and a session's background views, may draw at once).
_PYPLOT = threading.Lock()


def _svg(fig: Any, salt: str) -> Markup:
    """A figure as inline SVG with ids unique to `salt` (several charts share one page)."""
    plt = _figure_module()
    buf = io.StringIO()
    with plt.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    return Markup(_XML_PROLOGUE.sub("", buf.getvalue(), count=1))


def _figure(height: float) -> tuple[Any, Any]:
    fig, ax = _figure_module().subplots(figsize=(7.5, height))
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def distribution_chart(before: Mapping[str, int], after: Mapping[str, int], salt: str) -> Markup:
    """Pods per node before and after the round, side by side."""
    nodes = sorted(set(before) | set(after))
    fig, ax = _figure(0.6 + 0.45 * max(len(nodes), 1))
    ys = range(len(nodes))
    ax.barh([y + 0.2 for y in ys], [before.get(n, 0) for n in nodes], 0.4, label="before")
    ax.barh([y - 0.2 for y in ys], [after.get(n, 0) for n in nodes], 0.4, label="after")
    ax.set_yticks(list(ys), nodes)
    ax.invert_yaxis()
    ax.set_xlabel("lab pods")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return _svg(fig, f"{salt}-dist")


def timeline_chart(
    timeline: Sequence[Mapping[str, Any]], span: tuple[Any, Any], salt: str
) -> Markup:
    """Each moment of the round on the experiment's clock; eviction requests by HTTP code."""
    rows = list(dict.fromkeys(label for _, label in _TIMELINE_ROWS))
    row_of = dict(_TIMELINE_ROWS)
    fig, ax = _figure(2.4)
    start, end = span
    if start is not None and end is not None:
        ax.axvspan(start, end, color="#dddddd", alpha=0.6, label="Job running")
    requests = 0
    for e in timeline:
        if e.get("t_s") is None or e.get("what") not in row_of:
            continue
        y = rows.index(row_of[e["what"]])
        code = e.get("code")
        colour = (
            "#009E73"
            if code == 201
            else "#D55E00"
            if code
            else "#0072B2"
            if "replacement" in e["what"]
            else "#444444"
        )
        marker = "o" if e["what"] in ("replacement-ready", "job-complete") else "D"
        ax.plot([e["t_s"]], [y], marker=marker, color=colour, linestyle="none", markersize=7)
        if code:  # alternate above/below so requests a few ms apart stay readable
            requests += 1
            ax.annotate(
                str(code),
                (e["t_s"], y),
                textcoords="offset points",
                xytext=(0, 7 if requests % 2 else -13),
                ha="center",
                fontsize=7,
            )
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the experiment started")
    return _svg(fig, f"{salt}-timeline")


def pdb_chart(series: Sequence[Mapping[str, Any]], salt: str) -> Markup | None:
    """The PDB's disruptionsAllowed and currentHealthy (and what it wants) at every status seen."""
    if not series:
        return None
    fig, ax = _figure(2.2)
    ts = [s["t_s"] for s in series]
    for key, colour, style in (  # what the budget wants first (dashed), so the rest shows on it
        ("desiredHealthy", "#999999", "--"),
        ("currentHealthy", "#0072B2", "-"),
        ("disruptionsAllowed", "#D55E00", "-"),
    ):
        ax.step(
            ts,
            [s[key] for s in series],
            where="post",
            label=key,
            color=colour,
            linestyle=style,
            marker=".",
        )
    ax.set_xlabel("seconds since the experiment started")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    return _svg(fig, f"{salt}-pdb")


def _latency(value: Any) -> str:
    return "n/a" if value is None else f"{value:g}"


def _under_test(rounds: Iterable[Mapping[str, Any]], info: Mapping[str, Any]) -> dict[str, str]:
    """The descheduler version(s) and chart(s) the page is about, from the records."""
    versions, charts = [], []
    for r in rounds:
        v = (r.get("versions") or {}).get("descheduler")
        c = r.get("chart") or {}
        if v and v not in versions:
            versions.append(str(v))
        label = _chart_label(c)
        if label and label not in charts:
            charts.append(label)
    if not charts and _chart_label(info.get("chart") or {}):
        charts.append(_chart_label(info.get("chart") or {}))
    return {
        "descheduler": ", ".join(versions) or "unknown (no round ran)",
        "chart": ", ".join(charts) or "unknown (no release installed)",
    }


def _chart_label(chart: Mapping[str, Any]) -> str:
    if not chart or not chart.get("version"):
        return ""
    source = f" from {chart['source']}" if chart.get("source") else ""
    return f"descheduler chart {chart['version']}{source}"


def experiments_answer(summaries: Sequence[Mapping[str, Any]]) -> str:
    """The page's first line: "3 passed, 3 expected failures explained by descheduler#1882"."""
    if not summaries:
        return "no experiment ran"
    by: dict[str, int] = {}
    bugs: list[str] = []
    for s in summaries:
        by[s.get("outcome") or "error"] = by.get(s.get("outcome") or "error", 0) + 1
        bug = (s.get("classification") or {}).get("bug")
        if s.get("outcome") == "xfail" and bug and bug not in bugs:
            bugs.append(str(bug))
    parts = []
    if by.get("pass"):
        parts.append(f"{by['pass']} passed")
    if by.get("xfail"):
        n = by["xfail"]
        parts.append(
            f"{n} expected failure{'s' if n > 1 else ''} explained by {', '.join(bugs) or '?'}"
        )
    for outcome, word in (("fail", "failed"), ("error", "errored")):
        if by.get(outcome):
            parts.append(f"{by[outcome]} {word}")
    return ", ".join(parts)


def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(
        loader=PackageLoader("pytest_desched.evidence", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["latency"] = _latency
    env.filters["human"] = human
    env.filters["prose"] = prose
    return env


def warm_up() -> None:
    """Import matplotlib (about 1 s) ahead of the first chart: a background thread's job."""
    _figure_module()


def _figure_module() -> Any:
    """matplotlib, its font cache in the tool cache: a run writes nothing else under $HOME.

    matplotlib writes its font list to $MPLCONFIGDIR (default ~/.cache/matplotlib or
    ~/.config/matplotlib) on first import; a user's own MPLCONFIGDIR is kept.
    """
    os.environ.setdefault("MPLCONFIGDIR", str(default_cache_dir() / "matplotlib"))
    import matplotlib  # heavy (about 1 s): only when a chart is drawn

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


CHART_INPUTS = (
    *("distribution_before", "distribution_after", "timeline", "pdb_series"),
    *("started_s", "ended_s"),
)


def chart_key(rec: Mapping[str, Any]) -> str:
    """What a round's charts are drawn from: charts drawn ahead are reused only on the same."""
    return json.dumps([rec.get(k) for k in CHART_INPUTS], sort_keys=True, default=str)


def round_charts(rec: Mapping[str, Any], salt: str) -> dict[str, Markup | None]:
    """One round record's three charts (distribution, timeline, PDB) as inline SVG."""
    with _PYPLOT:
        return {
            "distribution_svg": distribution_chart(
                rec.get("distribution_before") or {}, rec.get("distribution_after") or {}, salt
            ),
            "timeline_svg": timeline_chart(
                rec.get("timeline") or [], (rec.get("started_s"), rec.get("ended_s")), salt
            ),
            "pdb_svg": pdb_chart(rec.get("pdb_series") or [], salt),
        }


def round_view(
    rec: Mapping[str, Any], salt: str, charts: Mapping[str, Markup | None] | None = None
) -> dict[str, Any]:
    """What the template needs of one round record, charts included (drawn now if not given)."""
    timeline = rec.get("timeline") or []
    series = rec.get("pdb_series") or []
    return {
        "rec": rec,
        **(charts if charts is not None else round_charts(rec, salt)),
        "requests": [e for e in timeline if e.get("what") == "eviction-request"],
        "pdb_min_allowed": min((s["disruptionsAllowed"] for s in series), default=None),
        "pdb_min_healthy": min((s["currentHealthy"] for s in series), default=None),
    }


def entry_views(entry: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    """The round views (charts drawn) of the `index`-th already-redacted entry."""
    return [round_view(r, f"e{index}r{j}") for j, r in enumerate(entry.get("rounds") or [])]


def report_context(
    entries: Iterable[Mapping[str, Any]],
    info: Mapping[str, Any] | None = None,
    ahead: ViewsAhead | None = None,
) -> dict[str, Any]:
    """The template's data from already-redacted entries ({name, summary, rounds})."""
    experiments = []
    for i, entry in enumerate(entries):
        rounds = ahead.views(i, entry) if ahead is not None else entry_views(entry, i)
        for j, rv in enumerate(rounds):
            rv["id"] = f"exp-{i}-r{j}"
        experiments.append({"id": f"exp-{i}", **entry, "round_views": rounds})
    info = dict(info or {})
    every_round = [r for e in experiments for r in e.get("rounds") or []]
    return {
        "experiments": experiments,
        "answer": experiments_answer([e.get("summary") or {} for e in experiments]),
        "under_test": _under_test(every_round, info),
        # a contents list once the page is long: more than one experiment or three rounds
        "toc": len(experiments) > 1 or len(every_round) > 3,
        "info": info,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "layer_colours": LAYER_COLOURS,
    }


def render_report(
    entries: Iterable[Mapping[str, Any]],
    redactor: Redactor | None = None,
    info: Mapping[str, Any] | None = None,
    ahead: ViewsAhead | None = None,
) -> str:
    """The page as HTML text; everything shown passes through `redactor` first."""
    red = redactor or Redactor.disabled()
    data = red.redact(json_native({"entries": list(entries), "info": dict(info or {})}))
    template = _environment().get_template("report.html.j2")
    return template.render(**report_context(data["entries"], data["info"], ahead))


def _write_atomically(path: Path, html: str) -> Path:
    """A crash never leaves half a page."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path


def write_report(
    path: Path,
    entries: Iterable[Mapping[str, Any]],
    redactor: Redactor | None = None,
    info: Mapping[str, Any] | None = None,
    ahead: ViewsAhead | None = None,
) -> Path:
    """Render and write the page atomically."""
    return _write_atomically(path, render_report(entries, redactor, info, ahead))


# --- the canary's page -------------------------------------------------------------------------
CANARY_FIGURES = (
    ("candidates", "candidates"),
    ("replacements_listed", "replacements listed"),
    ("protected", "protected (by check)"),
    ("nodefit", "stopped by nodeFit"),
    ("limited", "stopped by a cap"),
    ("pdb_refusals", "refused 429 (PDB)"),
    ("other_refusals", "refused, other code"),
    ("evictions", "evictions"),
    ("dry_run", "dry-run evictions"),
    ("ready_latency_s", "replacement Ready (s)"),
    ("pending", "Pending"),
    ("final_skew", "skew after"),
    ("verdict", "verdict"),
    ("deciding_layer", "deciding layer"),
    ("known_bugs", "known-bug signatures"),
)
# Judged statuses that still need someone: an unexplained change (a trigger one rolls back).
_OPEN = ("unexplained",)


def canary_answer(canary: Mapping[str, Any]) -> str:
    """The canary page's first line: "canary: FAIL, 1 rollback trigger", "canary: PASS"."""
    b, c = canary.get("baseline") or {}, canary.get("candidate") or {}
    no_verdict = list(canary.get("no_verdict") or [])
    no_verdict += [f"{t.get('name')} track: {t.get('error')}" for t in (b, c) if t.get("error")]
    if no_verdict:
        return f"canary: NO VERDICT, {no_verdict[0]}"
    changes = (canary.get("verdict") or {}).get("changes") or []
    triggers = [ch for ch in changes if ch.get("trigger") and ch.get("status") in _OPEN]
    other = [ch for ch in changes if not ch.get("trigger") and ch.get("status") in _OPEN]
    if canary.get("ok"):
        explained = [ch for ch in changes if ch.get("status") not in _OPEN]
        return (
            f"canary: PASS, {len(explained)} change(s) explained"
            if explained
            else ("canary: PASS, no change")
        )
    parts = []
    if regressions := canary.get("regressions") or []:  # the candidate ran or completed less
        parts.append(f"{len(regressions)} regression{'s' if len(regressions) > 1 else ''}")
    if triggers:
        parts.append(f"{len(triggers)} rollback trigger{'s' if len(triggers) > 1 else ''}")
    if other:
        parts.append(f"{len(other)} unexplained change{'s' if len(other) > 1 else ''}")
    reasons = (canary.get("verdict") or {}).get("reasons") or []
    return "canary: FAIL, " + (", ".join(parts) or (reasons[0] if reasons else "see below"))


def canary_context(canary: Mapping[str, Any]) -> dict[str, Any]:
    """The canary template's data from canary.json's shape (CanaryReport.to_dict())."""
    b, c = canary.get("baseline") or {}, canary.get("candidate") or {}
    changes = (canary.get("verdict") or {}).get("changes") or []
    rounds = []
    for i, rd in enumerate(canary.get("rounds") or []):
        bf, cf = rd.get("baseline") or {}, rd.get("candidate") or {}
        figures: list[dict[str, Any]] = [
            {
                "key": key,
                "label": label,
                "baseline": human(bf.get(key)) if rd.get("baseline") else "no round",
                "candidate": human(cf.get(key)) if rd.get("candidate") else "no round",
            }
            for key, label in CANARY_FIGURES
        ]
        for f in figures:
            f["changed"] = f["baseline"] != f["candidate"]
        mine = [
            ch
            for ch in changes
            if ch.get("experiment") == rd.get("experiment") and ch.get("round") == rd.get("index")
        ]
        rounds.append(
            {
                "id": f"round-{i}",
                "title": f"{rd.get('experiment')}, round {int(rd.get('index') or 0) + 1}",
                "rd": rd,
                "figures": figures,
                "classes": rd.get("words") or [],
                "changes": mine,
            }
        )
    tracks = [
        {
            "name": t.get("name") or side,
            "descheduler": t.get("descheduler_version"),
            "chart": _chart_label(t.get("chart") or {}) or NONE_SHOWN,
            "wall_s": t.get("wall_s"),
            "error": t.get("error"),
            "metrics": t.get("metric_names") or f"unknown: {t.get('metrics_why') or 'not probed'}",
        }
        for side, t in (("baseline", b), ("candidate", c))
    ]
    return {
        "answer": canary_answer(canary),
        "canary": canary,
        "tracks": tracks,
        "rounds": rounds,
        "changes": changes,
        "toc": len(rounds) > 1,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "layer_colours": LAYER_COLOURS,
        "snapshot": canary.get("snapshot"),  # `desched canary --snapshot`: per-pod fates
    }


def render_canary_report(canary: Mapping[str, Any], redactor: Redactor | None = None) -> str:
    red = redactor or Redactor.disabled()
    data = red.redact(json_native(dict(canary)))
    return _environment().get_template("canary.html.j2").render(**canary_context(data))


def write_canary_report(
    path: Path, canary: Mapping[str, Any], redactor: Redactor | None = None
) -> Path:
    """canary.html beside canary.json: both tracks side by side per round, then the verdict."""
    return _write_atomically(path, render_canary_report(canary, redactor))


# --- the replay's page ---------------------------------------------------------------------------
def replay_answer(replay: Mapping[str, Any]) -> str:
    """The replay page's first line: the comparison's outcome, else what the round did."""
    ledger = replay.get("ledger") or {}
    c = ledger.get("comparison")
    if c:
        differ = len(c.get("differ") or [])
        same = {True: "the same", False: "not the same"}.get(
            c.get("same_fates_up_to_order"), NOT_COMPARABLE
        )
        cov = ((c.get("coverage") or {}).get("evicted") or {}).get("line")
        return (
            f"replay: {differ} pod(s) differ from the incident's log; fates up to order: {same}"
            f" ({len(c.get('identities_differ') or [])} pod identities differ"
            + (f"; {cov})" if cov else ")")
        )
    rounds = ledger.get("rounds") or []
    first = (rounds[0].get("by_fate") if rounds else None) or {}
    counts = ", ".join(f"{n} {fate}" for fate, n in sorted(first.items())) or "no decision"
    return f"replay: round 1 {counts} (no incident log to compare)"


def replay_context(replay: Mapping[str, Any]) -> dict[str, Any]:
    ledger = replay.get("ledger") or {}
    rounds = ledger.get("rounds") or []
    rows = []
    for r in ledger.get("rows") or []:
        fates = r.get("fates") or []
        layer = next((f.get("layer") for f in reversed(fates) if f.get("layer")), None)
        rows.append({**r, "fates": fates, "layer": layer})
    c = ledger.get("comparison")
    ids = list((c or {}).get("identities_differ") or [])
    return {
        "answer": replay_answer(replay),
        "replay": replay,
        "ledger": ledger,
        "rows": rows,
        "rounds": rounds,
        "comparison": c,
        "identities": ids,
        "chart": _chart_label(replay.get("chart") or {}) or "unknown (no release recorded)",
        "toc": True,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "layer_colours": LAYER_COLOURS,
    }


def render_replay_report(replay: Mapping[str, Any], redactor: Redactor | None = None) -> str:
    red = redactor or Redactor.disabled()
    data = red.redact(json_native(dict(replay)))
    return _environment().get_template("replay.html.j2").render(**replay_context(data))


def write_replay_report(
    path: Path, replay: Mapping[str, Any], redactor: Redactor | None = None
) -> Path:
    """replay.html: the ledger with the deciding layer per pod, and the incident comparison."""
    return _write_atomically(path, render_replay_report(replay, redactor))
