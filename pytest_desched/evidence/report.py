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
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from pytest_desched.evidence.redaction import Redactor
from pytest_desched.evidence.timeline import REPLACEMENT_SCHEDULED

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


def _plain(obj: Any) -> Any:
    """JSON-native data (as the records on disk), so redaction sees every string."""
    return json.loads(json.dumps(obj, default=str))


def _svg(fig: Any, salt: str) -> Markup:
    """A figure as inline SVG with ids unique to `salt` (several charts share one page)."""
    import matplotlib
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    return Markup(_XML_PROLOGUE.sub("", buf.getvalue(), count=1))


def _figure(height: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, height))
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


def _round_view(rec: Mapping[str, Any], salt: str) -> dict[str, Any]:
    """What the template needs of one round record, charts included."""
    timeline = rec.get("timeline") or []
    series = rec.get("pdb_series") or []
    return {
        "rec": rec,
        "distribution_svg": distribution_chart(
            rec.get("distribution_before") or {}, rec.get("distribution_after") or {}, salt
        ),
        "timeline_svg": timeline_chart(timeline, (rec.get("started_s"), rec.get("ended_s")), salt),
        "pdb_svg": pdb_chart(series, salt),
        "requests": [e for e in timeline if e.get("what") == "eviction-request"],
        "pdb_min_allowed": min((s["disruptionsAllowed"] for s in series), default=None),
        "pdb_min_healthy": min((s["currentHealthy"] for s in series), default=None),
    }


def report_context(
    entries: Iterable[Mapping[str, Any]], info: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The template's data from already-redacted entries ({name, summary, rounds})."""
    experiments = []
    for i, entry in enumerate(entries):
        rounds = [_round_view(r, f"e{i}r{j}") for j, r in enumerate(entry.get("rounds") or [])]
        experiments.append({"id": f"exp-{i}", **entry, "round_views": rounds})
    return {
        "experiments": experiments,
        "info": dict(info or {}),
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "layer_colours": LAYER_COLOURS,
    }


def render_report(
    entries: Iterable[Mapping[str, Any]],
    redactor: Redactor | None = None,
    info: Mapping[str, Any] | None = None,
) -> str:
    """The page as HTML text; everything shown passes through `redactor` first."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    red = redactor or Redactor.disabled()
    data = red.redact(_plain({"entries": list(entries), "info": dict(info or {})}))
    env = Environment(
        loader=PackageLoader("pytest_desched.evidence", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["latency"] = _latency
    template = env.get_template("report.html.j2")
    return template.render(**report_context(data["entries"], data["info"]))


def write_report(
    path: Path,
    entries: Iterable[Mapping[str, Any]],
    redactor: Redactor | None = None,
    info: Mapping[str, Any] | None = None,
) -> Path:
    """Render and write the page atomically (a crash never leaves half a page)."""
    html = render_report(entries, redactor, info)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path
