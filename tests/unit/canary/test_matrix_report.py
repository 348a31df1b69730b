"""The release matrix's judgement: cells from results, the registry against the runs, the forms.

Results are real `ExperimentResult`s whose signatures come from a recorded v0.36.0 round log
(tests/unit/data), run through `note_signatures` as the framework does, under another version
label where a case needs one: what the matrix reads is what a run writes.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pytest_desched.canary.matrix_report import (
    NOT_EXERCISED,
    NOT_RUN,
    NOT_SHOWN,
    SHOWN,
    Cell,
    Matrix,
    Row,
    judge_bug,
    short,
    unexplained,
)
from pytest_desched.descheduler.bug_ranges import VersionRange
from pytest_desched.descheduler.known_bugs import BY_ID, REGISTRY, RoundFacts
from pytest_desched.descheduler.logparse import parse_log
from pytest_desched.experiments.results import ExperimentResult
from tests.unit import DATA_ROOT

LOG = (DATA_ROOT / "descheduler-v0.36.0" / "nodefit-runbook-bug1882.log").read_text()
NODEFIT = "negative-nodefit"
RUNBOOK_POLICY = {
    "profiles": [
        {
            "name": "p",
            "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
            "pluginConfig": [
                {
                    "name": "DefaultEvictor",
                    "args": {"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}},
                }
            ],
        }
    ]
}
WORKAROUND_POLICY = {
    "profiles": [
        {
            "name": "p",
            "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
            "pluginConfig": [{"name": "DefaultEvictor", "args": {}}],
        }
    ]
}
B1882, B1687, B1917 = (BY_ID[f"descheduler#{n}"] for n in (1882, 1687, 1917))


def facts(version: str, bug: bool = True) -> RoundFacts:
    decisions = tuple(parse_log(LOG).in_namespace("descheduler-lab"))
    return RoundFacts(
        experiment=NODEFIT,
        descheduler_version=version,
        failed_checks=frozenset(),
        decisions=decisions,
        log=LOG,
        replicas=3,
        pdb_expected_pods=3 if bug else None,  # no PDB: the signature's precondition fails
        lab_pods_running=frozenset(d.name for d in decisions),
        ready_nodes=3,
    )


def result(
    version: str,
    outcome: str = "xfail",
    bug: bool = True,
    variant: str = "runbook",
    layer: str = "stopped-by:evictor",
) -> ExperimentResult:
    r = ExperimentResult(NODEFIT, variant, outcome=outcome, blocking_layer=layer)
    r.note_signatures(facts(version, bug))
    policy = RUNBOOK_POLICY if variant == "runbook" else WORKAROUND_POLICY
    r.records.append({"effective_policy": policy})
    if outcome == "xfail":
        r.classification = {"outcome": "xfail", "bug": B1882.id}
    if outcome in ("fail", "error"):
        r.message = f"{r.label} failed 1 check(s):\n  - [nodefit-stops-every-pod] ..."
    return r


def row(version: str, *results: ExperimentResult, error: str | None = None) -> Row:
    cells = [Cell.of(r) for r in results]
    return Row(
        f"1-{version}", f"version:{version}", None, version, {"version": "x"}, {}, cells, error
    )


def test_note_signatures_records_a_bug_the_registry_does_not_give_the_release() -> None:
    """v0.33.0 is not in #1882's affected set: nothing may excuse a failure with it
    (known_bugs), but the signature its round shows is kept (signatures_seen)."""
    r = ExperimentResult(NODEFIT, "runbook")
    r.note_signatures(facts("v0.33.0"))
    assert r.known_bugs == {}
    assert set(r.signatures_seen) == {B1882.id}
    assert r.summary()["signatures_seen"] == r.signatures_seen
    r2 = ExperimentResult(NODEFIT, "runbook")
    r2.note_signatures(facts("v0.36.0"))
    assert set(r2.known_bugs) == set(r2.signatures_seen) == {B1882.id}


def test_cell_reads_outcome_layer_bug_and_the_policy_trigger() -> None:
    c = Cell.of(result("v0.36.0"))
    assert (c.label, c.experiment, c.outcome, c.bug) == (
        f"{NODEFIT}[runbook]",
        NODEFIT,
        "xfail",
        B1882.id,
    )
    assert c.layer == "stopped-by:evictor" and c.rounds == 1
    assert B1882.id in c.seen and B1882.id in c.triggers
    assert "#1882" in c.shown() and "stopped-by:evictor" in c.shown()
    w = Cell.of(result("v0.36.0", outcome="pass", bug=False, variant="pdb-lister-workaround"))
    assert w.triggers == {} and w.seen == {} and w.bug is None


@pytest.mark.parametrize(
    ("version", "res", "run", "agrees"),
    [
        ("v0.36.0", dict(outcome="xfail"), SHOWN, True),  # the registry's release, proven
        ("v0.33.0", dict(outcome="fail"), SHOWN, False),  # shown where the registry says no
        # exercised (runbook policy, a completed round), no signature, registry says yes
        ("v0.36.0", dict(outcome="pass", bug=False), NOT_SHOWN, False),
        ("v0.33.0", dict(outcome="pass", bug=False), NOT_SHOWN, True),  # absent, as registered
        # a derived build may carry the fix: only its own rounds can say
        ("v0.36.0-g7d2b28bf2", dict(outcome="pass", bug=False), NOT_SHOWN, True),
        # the workaround variant does not trigger #1882: nothing proven either way
        (
            "v0.36.0",
            dict(outcome="pass", bug=False, variant="pdb-lister-workaround"),
            NOT_EXERCISED,
            True,
        ),
    ],
)
def test_registry_against_the_run(version: str, res: dict, run: str, agrees: bool) -> None:
    f = judge_bug(B1882, row(version, result(version, **res)))
    assert (f.run, f.agrees) == (run, agrees), f
    assert bool(f.note) or agrees or f.run == SHOWN


def test_an_errored_cell_exercises_nothing() -> None:
    f = judge_bug(B1882, row("v0.36.0", result("v0.36.0", outcome="error", bug=False)))
    assert f.run == NOT_EXERCISED and f.agrees


def test_a_bug_no_experiment_can_show_is_not_exercised_and_one_that_varies_proves_nothing() -> None:
    r = row("v0.36.0", result("v0.36.0"))
    assert judge_bug(B1917, r).run == NOT_EXERCISED  # explains no experiment (fidelity's)
    assert judge_bug(B1687, r).run == NOT_EXERCISED  # negative-pdb only
    pdb = Cell.of(result("v0.36.0", outcome="pass", bug=False))
    pdb.experiment = "negative-pdb"
    f = judge_bug(B1687, Row("r", "pinned", version="v0.36.0", cells=[pdb]))
    assert (f.run, f.agrees) == (NOT_SHOWN, True) and "proves nothing" in f.note


def test_unexplained_outcomes() -> None:
    assert unexplained(row("v0.36.0", result("v0.36.0"))) == []
    failed = unexplained(row("v0.33.0", result("v0.33.0", outcome="fail")))
    assert len(failed) == 1 and "fail" in failed[0] and "version:v0.33.0" in failed[0]
    # an xfail on a bug the (given) registry does not give the release
    lean = (replace(B1882, affected=VersionRange("v0.36.0", None, "test: only v0.36.0 on")),)
    said = unexplained(row("v0.35.1", result("v0.35.1")), lean)
    assert said and "does not give v0.35.1" in said[0]


def _matrix(*rows: Row, registry=REGISTRY) -> Matrix:
    labels = [c.label for c in rows[0].cells] if rows[0].cells else ["x[runbook]"]
    return Matrix(list(rows), labels, "desched matrix A B", "2026-12-02 15:00 UTC", 12.0, registry)


def test_exit_codes_and_the_proof_line() -> None:
    ok = _matrix(row("v0.35.1", result("v0.35.1")), row("v0.36.0", result("v0.36.0")))
    assert ok.exit_code == 0 and not ok.disagreements and not ok.unexplained
    proof = next(p for p in ok.proofs() if p.startswith(B1882.id))
    assert (
        "shown on v0.35.1, v0.36.0, on every release that exercised it (oldest run: v0.35.1)"
        in proof
    )
    # v0.33.0 shows #1882 as an unexplained failure: both a disagreement and an unexplained
    bad = _matrix(
        row("v0.33.0", result("v0.33.0", outcome="fail")), row("v0.36.0", result("v0.36.0"))
    )
    assert bad.exit_code == 1
    assert any("v0.33.0" in d and B1882.id in d for d in bad.disagreements)
    assert bad.unexplained
    # a release whose track broke: the matrix is incomplete
    broken = _matrix(
        row("v0.36.0", result("v0.36.0")),
        Row(
            "2-v0.35.1",
            "version:v0.35.1",
            version="v0.35.1",
            cells=[Cell("l", "l", NOT_RUN)],
            error="boom",
        ),
    )
    assert broken.exit_code == 3 and "boom" in broken.not_run[0]
    assert broken.final_verdict.reasons == tuple(broken.not_run)  # no verdict, whatever ran


def test_rows_in_version_order_for_from_on() -> None:
    """Given newest first, the proof still reads oldest first: not shown on the old release,
    shown from the next one on."""
    m = _matrix(
        row("v0.36.0", result("v0.36.0")),
        row("v0.33.0", result("v0.33.0", outcome="pass", bug=False)),
    )
    proof = next(p for p in m.proofs() if p.startswith(B1882.id))
    assert "shown on v0.36.0, from v0.36.0 on (not on v0.33.0)" in proof
    assert "exercised, not shown on v0.33.0" in proof


def test_forms_and_judging_again_from_json(tmp_path) -> None:
    m = _matrix(row("v0.35.1", result("v0.35.1")), row("v0.36.0", result("v0.36.0")))
    md, text = m.render("md"), m.render("text")
    assert md.startswith("# Release matrix") and "| version:v0.35.1" in md
    assert f"{NODEFIT}[runbook]" in md and "#1882 proven" in md
    assert "`desched matrix A B`" in md and "2026-12-02" in md
    assert "version:v0.36.0" in text and "#1882 proven" in text and "|" not in text.split("\n")[4]
    paths = m.write(tmp_path)
    doc = json.loads(paths["json"].read_text())
    assert doc["exit_code"] == 0 and doc["releases"][0]["bugs"][0]["run"] == SHOWN
    assert paths["markdown"].read_text() == md
    again = Matrix.from_dict(doc)
    assert again.render("md") == md
    # The same runs against a registry that lacks v0.35.1: the run proves the registry wrong.
    lean = tuple(
        replace(b, affected=VersionRange("v0.36.0", None, "test: only v0.36.0 on"))
        if b.id == B1882.id
        else b
        for b in REGISTRY
    )
    judged = Matrix.from_dict(doc, lean)
    assert judged.exit_code == 1
    assert any(d.startswith("version:v0.35.1: descheduler#1882") for d in judged.disagreements)
    assert "#1882 shown, registry: no ✗" in judged.render("md")


def test_columns_are_positions_not_labels() -> None:
    """Two variants under one --policy file carry the same label: both cells are shown."""
    a = result("v0.36.0")
    b = result("v0.36.0", outcome="pass", bug=False, variant="pdb-lister-workaround")
    b.variant = a.variant
    m = _matrix(row("v0.36.0", a, b))
    rows, headers = m.table_rows()
    assert len(headers) == 3 + 2 + 2
    assert rows[0]["e0"].startswith("xfail") and rows[0]["e1"].startswith("pass")


def test_a_grid_names_each_rows_kubernetes_and_each_bugs_cells() -> None:
    """Releases x versions: a Kubernetes column, proofs per `release @ version`, and per bug
    the cells it showed on (a row where it was exercised and not shown is left out)."""
    rows = [
        replace(row(v, result(v, **kw)), kubernetes=k, spec=f"version:{v} @ {k}")
        for v, kw in (("v0.35.1", {}), ("v0.36.0", {}))
        for k in ("v1.37.2", "v1.35.4")
    ]
    rows[3] = replace(
        row("v0.36.0", result("v0.36.0", outcome="pass", bug=False)),
        kubernetes="v1.35.4",
        spec="version:v0.36.0 @ v1.35.4",
    )
    m = _matrix(*rows)
    assert m.grid and not _matrix(row("v0.36.0", result("v0.36.0"))).grid
    table, heads = m.table_rows()
    assert heads["kubernetes"] == "Kubernetes"
    assert [r["kubernetes"] for r in table] == ["v1.37.2", "v1.35.4", "v1.37.2", "v1.35.4"]
    assert table[0]["e0"].startswith("xfail (#1882) · stopped-by:evictor")
    assert table[3]["e0"].startswith("pass · stopped-by:evictor")
    proof = next(p for p in m.proofs() if p.startswith(B1882.id))
    assert "exercised, not shown on v0.36.0 @ v1.35.4" in proof, proof
    assert "shown on v0.35.1 @ v1.35.4, v0.35.1 @ v1.37.2, v0.36.0 @ v1.37.2" in proof, proof
    line = next(c for c in m.cells_shown() if c.startswith("#1882"))
    assert line == (
        f"#1882 shows on 3 row(s): v0.35.1 @ v1.35.4: {NODEFIT}[runbook]; "
        f"v0.35.1 @ v1.37.2: {NODEFIT}[runbook]; v0.36.0 @ v1.37.2: {NODEFIT}[runbook]"
    )
    md = m.render("md")
    assert "## Known bugs, by cell" in md and line in md and "| Kubernetes " in md
    again = Matrix.from_dict(json.loads(json.dumps(m.to_dict(), default=str)))
    assert again.render("md") == md and again.to_dict()["bug_cells"] == m.cells_shown()


def test_a_row_says_which_policy_fields_its_release_ran_without() -> None:
    """v0.32.2 has no gracePeriodSeconds (release_fields.NON_SAFETY_FIELDS): its row runs
    without it and says so, in the table and with the consequence below it."""
    r = row("v0.32.2", result("v0.32.2", "pass", bug=False))
    r.runs_without = ["gracePeriodSeconds"]
    md = _matrix(r).render("md")
    assert "v0.32.2 (without gracePeriodSeconds)" in md
    assert "## Policy fields a release has none for (it ran without them)" in md
    assert "terminationGracePeriodSeconds" in md
    assert "without" not in _matrix(row("v0.36.0", result("v0.36.0", "pass", bug=False))).render(
        "md"
    )


@pytest.mark.parametrize(
    ("bug_id", "shown"),
    [
        ("descheduler#1882", "#1882"),  # upstream: its issue number, the table's width
        ("desched:stale-read-as-idle", "desched:stale-read-as-idle"),  # the project's own
        ("desched:prometheus-secret-first-cycle", "desched:prometheus-secret-first-cycle"),
    ],
)
def test_only_upstream_ids_are_shortened_to_their_number(bug_id: str, shown: str) -> None:
    assert short(bug_id) == shown


def test_every_registered_bug_shows_under_a_name_of_its_own() -> None:
    shown = [short(b.id) for b in REGISTRY]
    assert len(set(shown)) == len(shown) and not any(s.startswith("#desched") for s in shown)
