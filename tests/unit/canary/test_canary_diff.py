"""The canary's behaviour diff and verdict over round records shaped like the real ones."""

from __future__ import annotations

import pytest

from pytest_desched.canary.compare import (
    class_of,
    diff_rounds,
    fate_classes,
    node_roles,
    owner_of,
    round_figures,
)
from pytest_desched.canary.expectations import load_explanations
from pytest_desched.canary.verdict import changes_of, judge
from pytest_desched.errors import ConfigError
from pytest_desched.evidence import compare as core

NS = "descheduler-lab"
B_ROLES = node_roles(["kwok-a-worker-1", "kwok-a-worker-2", "kwok-a-worker-3"])
C_ROLES = node_roles(["kwok-b-worker-1", "kwok-b-worker-2", "kwok-b-worker-3"])


def dec(name: str, node: str, fate: str, layer: str, **kw: object) -> dict:
    return {"namespace": NS, "name": name, "node": node, "fate": fate, "layer": layer, **kw}


# A round whose cycle completed, as a real record says it (canary/compare.no_cycle reads it).
COMPLETED = {"succeeded": True, "exit_code": 0}


def record(decisions: list[dict], **kw: object) -> dict:
    kw.setdefault("job", COMPLETED)
    return {"namespace": NS, "decisions": decisions, **kw}


def filtered_1882(prefix: str, node: str) -> list[dict]:
    return [
        dec(
            f"spread-demo-6d9f7b5c4-{s}",
            node,
            "filtered",
            "evictor-filter",
            checks=["PodsWithoutPDB"],
        )
        for s in ("x2kq9", "b7mzp", "qq4rt")
    ]


BASELINE = record(
    filtered_1882("a", "kwok-a-worker-1"),
    known_bugs={"descheduler#1882": "every lab pod FILTERED [PodsWithoutPDB]"},
    versions={"descheduler": "v0.36.0"},  # a version the registry lists for #1882
    distribution_after={"kwok-a-worker-1": 3, "kwok-a-worker-2": 0},
    metrics={"names": ["descheduler_build_info", "descheduler_pods_evicted_total"]},
)
FIXED = record(
    [
        dec("spread-demo-6d9f7b5c4-zzk2w", "kwok-b-worker-1", "evicted", "api-server"),
        dec("spread-demo-6d9f7b5c4-wx5c8", "kwok-b-worker-1", "limited", "eviction-limits"),
        dec("spread-demo-6d9f7b5c4-hh7rt", "kwok-b-worker-1", "limited", "eviction-limits"),
    ],
    evictions=1,
    replacement_ready_latency_s=0.03,
    distribution_after={"kwok-b-worker-1": 2, "kwok-b-worker-2": 1},
    metrics={"names": ["descheduler_build_info", "descheduler_pods_evicted_total"]},
)


def test_owner_strips_replicaset_hash_and_pod_suffix() -> None:
    assert owner_of("spread-demo-6d9f7b5c4-x2kq9") == "spread-demo"
    assert owner_of("web-0") == "web-0"  # a StatefulSet pod's name is its identity
    assert owner_of("bare-pod") == "bare-pod"


def test_a_replacement_is_matched_across_tracks_by_the_cores_identity() -> None:
    """Each track's replacement has a random name of its own; the canary's pod class is the
    comparison core's identity (owner from the name, generation 1 for a pod the round made),
    so the two replacements are one class and evicting both is no change."""
    made = {"what": "replacement-scheduled"}
    b = record(
        [dec("web-7d4f9c8b6-x2kq9", "kwok-a-worker-2", "evicted", "api-server")],
        timeline=[{**made, "pod": "web-7d4f9c8b6-x2kq9"}],
    )
    c = record(
        [dec("web-5c8d7f9b4-q8wzt", "kwok-b-worker-2", "evicted", "api-server")],
        timeline=[{**made, "pod": "web-5c8d7f9b4-q8wzt"}],
    )
    ident = core.identity_of("ns/web-5c8d7f9b4-q8wzt", owner="web", generation=1, node="worker-2")
    assert set(fate_classes(b, B_ROLES)) == set(fate_classes(c, C_ROLES)) == {class_of(ident)}
    assert class_of(ident) == "web@worker-2 (created in round)"
    assert owner_of is core.owner_from_name
    (rd,) = diff_rounds("positive[runbook]", [b], [c], B_ROLES, C_ROLES)
    assert not rd.classes


def test_fate_classes_ignore_other_namespaces_and_name_roles() -> None:
    r = record(
        [
            *filtered_1882("a", "kwok-a-worker-1"),
            {**dec("x-abcde", "n", "evicted", "api-server"), "namespace": "other"},
        ]
    )
    classes = fate_classes(r, B_ROLES)
    assert classes == {"spread-demo@worker-1": {"filtered(PodsWithoutPDB)/evictor-filter": 3}}


def test_figures_of_a_round() -> None:
    f = round_figures(FIXED)
    assert (f.candidates, f.evictions, f.limited, f.final_skew) == (3, 1, 2, 1)
    assert round_figures(BASELINE).protected == {"PodsWithoutPDB": 3}


def test_identical_rounds_have_no_change_even_with_other_names() -> None:
    other = record(filtered_1882("b", "kwok-b-worker-1"), known_bugs=BASELINE["known_bugs"])
    (rd,) = diff_rounds("positive[runbook]", [BASELINE], [other], B_ROLES, C_ROLES)
    assert not rd.changed and changes_of([rd]) == []


def test_a_fixed_bug_explains_the_new_eviction() -> None:
    (rd,) = diff_rounds("positive[runbook]", [BASELINE], [FIXED], B_ROLES, C_ROLES)
    assert rd.bugs_fixed == ["descheduler#1882"]
    (cls,) = rd.classes
    assert cls.kinds == ["continue-evicting"]
    verdict = judge(changes_of([rd]), [])
    assert verdict.ok, verdict.reasons
    assert {j.status for j in verdict.judged} == {"fixed-bug", "informative"}


def test_continue_evicting_without_a_bug_fix_is_a_rollback_trigger() -> None:
    base = record(
        [
            dec(
                "spread-demo-6d9f7b5c4-x2kq9",
                "kwok-a-worker-1",
                "refused",
                "api-server",
                status_code=429,
            )
        ]
    )
    cand = record([dec("spread-demo-6d9f7b5c4-zzk2w", "kwok-b-worker-1", "evicted", "api-server")])
    verdict = judge(changes_of(diff_rounds("pdb[runbook]", [base], [cand], B_ROLES, C_ROLES)), [])
    assert not verdict.ok
    (j,) = verdict.unexplained
    assert j.trigger and j.change.kind == "continue-evicting"
    assert "rollback trigger continue-evicting in pdb[runbook]" in verdict.reasons[0]


def test_grown_candidate_set_and_lost_metric_are_triggers() -> None:
    base = record(
        [dec("a-6d9f7b5c4-x2kq9", "kwok-a-worker-1", "filtered", "evictor-filter")],
        metrics={"names": ["descheduler_x", "descheduler_y"]},
    )
    cand = record(
        [
            dec(f"a-6d9f7b5c4-{s}", "kwok-b-worker-1", "filtered", "evictor-filter")
            for s in ("zzk2w", "wx5c8")
        ],
        metrics={"names": ["descheduler_x"]},
    )
    changes = changes_of(diff_rounds("e[v]", [base], [cand], B_ROLES, C_ROLES))
    kinds = sorted(c.kind for c, _ in changes)
    assert kinds == ["candidate-set-grew", "lost-metric"]
    assert all(j.trigger for j in judge(changes, []).unexplained)


def test_explanations_match_or_go_stale() -> None:
    base = record(
        [
            dec(
                "spread-demo-6d9f7b5c4-x2kq9",
                "kwok-a-worker-1",
                "refused",
                "api-server",
                status_code=429,
            )
        ]
    )
    cand = record([dec("spread-demo-6d9f7b5c4-zzk2w", "kwok-b-worker-1", "evicted", "api-server")])
    changes = changes_of(diff_rounds("pdb[runbook]", [base], [cand], B_ROLES, C_ROLES))
    exps = load_explanations(
        [
            {
                "experiment": "pdb[*]",
                "pods": "spread-demo@*",
                "kind": "continue-evicting",
                "reason": "new PDB semantics",
                "link": "https://example.invalid/pr/1",
            },
            {
                "experiment": "nodefit[*]",
                "kind": "fewer-evictions",
                "reason": "expected but absent",
            },
        ]
    )
    verdict = judge(changes, exps)
    assert [j.status for j in verdict.judged] == ["explained"]
    assert [e.reason for e in verdict.stale] == ["expected but absent"]
    assert not verdict.ok and "stale explanation" in verdict.reasons[0]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"experiment": "x", "kind": "fate-changed"}], "`reason` is required"),
        ([{"reason": "r", "kinds": "x"}], "unknown key(s) ['kinds']"),
        ([{"reason": "r", "kind": "bigger"}], "kind 'bigger' is not one of"),
        (["text"], "must be a mapping"),
    ],
)
def test_bad_explanations_are_refused(items: list, message: str) -> None:
    with pytest.raises(
        ConfigError,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("]", r"\]"),
    ):
        load_explanations(items)


def test_explanation_file_errors_name_the_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"missing.yaml: no such file \(read as the explanation"):
        load_explanations(tmp_path / "missing.yaml")
    p = tmp_path / "e.yaml"
    p.write_text("other: 1\n")
    with pytest.raises(ConfigError, match=f"{p}: expected a mapping with a `changes:` list"):
        load_explanations(p)


def test_a_bug_the_baseline_shows_elsewhere_is_reached_not_new() -> None:
    pdb_429 = [
        dec(
            "spread-demo-6d9f7b5c4-x2kq9",
            "kwok-a-worker-1",
            "refused",
            "api-server",
            status_code=429,
        )
    ]
    elsewhere = record(pdb_429, known_bugs={"descheduler#1687": "events lost"})
    there = {**elsewhere, "decisions": [{**pdb_429[0], "node": "kwok-b-worker-1"}]}
    quiet = record(filtered_1882("a", "kwok-a-worker-1"))
    shows = record(filtered_1882("b", "kwok-b-worker-1"), known_bugs={"descheduler#1687": "lost"})
    rounds = [
        *diff_rounds("pdb[workaround]", [elsewhere], [there], B_ROLES, C_ROLES),
        *diff_rounds("pdb[runbook]", [quiet], [shows], B_ROLES, C_ROLES),
    ]
    ((change, by),) = changes_of(rounds)
    assert (change.kind, by) == ("bug-reached", "descheduler#1687")
    assert judge([(change, by)], []).ok
    # Never seen on the baseline: a new known bug is a rollback trigger.
    ((change, by),) = changes_of(diff_rounds("pdb[runbook]", [quiet], [shows], B_ROLES, C_ROLES))
    assert change.kind == "bug-new" and not judge([(change, by)], []).ok


def test_served_names_lists_families_not_series() -> None:
    from pytest_desched.descheduler.metrics import served_names

    text = (
        "# HELP descheduler_build_info build\n# TYPE descheduler_build_info gauge\n"
        'descheduler_build_info{GitVersion="v0.36.0"} 1\n'
        "# TYPE descheduler_loop_duration_seconds histogram\n"
        'descheduler_loop_duration_seconds_bucket{le="1"} 1\n'
        "descheduler_loop_duration_seconds_count 1\n"
        "go_goroutines 12\n"
    )
    assert served_names(text) == ["descheduler_build_info", "descheduler_loop_duration_seconds"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["canary"], "needs --candidate SPEC"),
        (["canary", "--candidate", "source:/nonexistent/tree"], "/nonexistent/tree"),
        (
            ["canary", "--candidate", "version:v0.36.0", "--expect", "/nonexistent.yaml"],
            "nonexistent.yaml: no such file (read as the explanation file (--expect))",
        ),
        (["canary", "--candidate", "version:v0.36.0", "--experiment", "nosuch"], "nosuch"),
        (
            [
                "canary",
                "--candidate",
                "version:v0.36.0",
                "--provider",
                "existing",
                "--allow-existing",
                "--existing-context",
                "x",
            ],
            "cluster of its own",
        ),
    ],
)
def test_canary_cli_refuses_bad_input_before_anything_runs(
    argv: list[str], message: str | None, tmp_path, capsys, monkeypatch
) -> None:
    from pytest_desched import cli
    from pytest_desched.session import DeschedSession

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("a session was created for bad input")

    monkeypatch.setattr(DeschedSession, "__init__", boom)
    rc = cli.main([*argv, "--artifacts", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_USAGE, err
    if message:
        assert message in err


def test_a_broken_track_is_one_reason_not_one_per_missing_round() -> None:
    from pytest_desched.canary.engine import compare_tracks
    from pytest_desched.canary.report import CanaryReport
    from pytest_desched.canary.tracks import TrackResult
    from pytest_desched.experiments import ExperimentResult

    ran = ExperimentResult("positive", "runbook", outcome="xfail", records=[BASELINE])
    broken = TrackResult("baseline", error="WaitTimeout: nodes never Ready")
    fine = TrackResult("candidate", workers=["w1", "w2", "w3"], results=[ran])
    rounds, rows, changes = compare_tracks(broken, fine)
    assert [(c.kind, c.subject) for c, _ in changes] == [("track-error", "baseline")]
    assert rows == [
        {"experiment": "positive[runbook]", "baseline": "not run", "candidate": "xfail", "note": ""}
    ]
    verdict = judge(changes, [])
    rep = CanaryReport(broken, fine, rounds, verdict)
    assert rep.broken and not rep.ok
    assert verdict.reasons == [
        "the baseline track could not run, so nothing was compared: WaitTimeout: nodes never Ready"
    ]


def test_static_only_canary_is_not_bound_by_the_provider(tmp_path) -> None:
    """No cluster starts, so an existing cluster is not refused and no track points at it."""
    from pytest_desched.canary.engine import track_configs
    from pytest_desched.config import build_config
    from pytest_desched.errors import ConfigError

    config = build_config(
        {
            "--desched-provider": "existing",
            "--desched-allow-existing": True,
            "--desched-existing-context": "prod-like",
        },
        run_dir=tmp_path,
    )
    with pytest.raises(ConfigError, match="cluster of its own"):
        track_configs(config, "version:v0.36.0", None)
    base, cand = track_configs(config, "version:v0.36.0", None, behaviour=False)
    assert (base.provider, cand.provider) == ("embedded", "embedded")
    assert (base.candidate, cand.candidate) == (None, "version:v0.36.0")


def test_a_run_to_run_race_on_one_track_is_intermittent_when_both_versions_have_it() -> None:
    """#1687 (lost events at exit) shows on whichever track loses the race: on v0.36.0 and
    a build of it, one run's signature on one side is neither a regression nor a fix."""

    def at(version: str, **kw: object) -> dict:
        pdb_429 = [
            dec("spread-demo-6d9f7b5c4-x2kq9", "w1", "refused", "api-server", status_code=429)
        ]
        return record(pdb_429, versions={"descheduler": version}, **kw)

    lost = {"known_bugs": {"descheduler#1687": "events delivered: 2 of 3 refusals"}}
    for base, cand, kind in (
        (at("v0.36.0"), at("v0.36.0-g7d2b28bf2", **lost), "bug-intermittent"),  # cand lost it
        (at("v0.36.0", **lost), at("v0.36.0-g7d2b28bf2"), "bug-intermittent"),  # base lost it
        # #1687's range starts at v0.32.2 (v0.34.0 is inside it): v0.31.0 is outside
        (at("v0.31.0"), at("v0.36.0", **lost), "bug-new"),  # the baseline's version is clean
        (at("v0.36.0", **lost), at("v0.31.0"), "bug-fixed"),  # the candidate's version is
    ):
        ((change, by),) = changes_of(
            diff_rounds("pdb[workaround]", [base], [cand], B_ROLES, C_ROLES)
        )
        assert change.kind == kind, change
        assert judge([(change, by)], []).ok is (kind != "bug-new")
        if kind == "bug-intermittent":
            assert "varies from run to run" in change.detail and by == "descheduler#1687"


def test_a_replacement_listed_on_one_track_only_is_said_not_a_grown_candidate_set() -> None:
    """The pod the round's own eviction created can be listed by a later node loop before the
    round ends (a race: found by a `make test` loop, PR 1883's canary, minPodAge on the
    replacement). Left alone it is `replacement-seen`; evicted, it is a grown candidate set."""

    def fixed(replacement_fate: str, layer: str) -> dict:
        r = dict(FIXED)
        r["decisions"] = [
            *FIXED["decisions"],
            dec("spread-demo-6d9f7b5c4-f84j5", "kwok-b-worker-2", replacement_fate, layer),
        ]
        r["timeline"] = [
            {"t_s": 1.4, "what": "eviction-request", "pod": f"{NS}/spread-demo-6d9f7b5c4-zzk2w"},
            {"t_s": 1.5, "what": "replacement-scheduled", "pod": "spread-demo-6d9f7b5c4-f84j5"},
        ]
        return r

    left = fixed("filtered", "evictor-filter")
    assert set(fate_classes(left, C_ROLES)) == {
        "spread-demo@worker-1",
        "spread-demo@worker-2 (created in round)",
    }
    (rd,) = diff_rounds("positive[runbook]", [BASELINE], [left], B_ROLES, C_ROLES)
    seen = [c for c in rd.classes if c.pods.endswith("(created in round)")]
    assert [c.kinds for c in seen] == [["replacement-seen"]]
    verdict = judge(changes_of([rd]), [])
    assert verdict.ok, verdict.reasons
    (j,) = [j for j in verdict.judged if j.change.kind == "replacement-seen"]
    assert j.status == "informative" and not j.trigger
    assert "this round's own eviction created" in j.change.detail
    # The figures count the pods that were there before the round; the replacement apart.
    figures = round_figures(left)
    assert (figures.candidates, figures.replacements_listed) == (3, 1)
    assert figures.protected == {} and round_figures(FIXED).replacements_listed == 0

    # The same pod without the round's timeline is an ordinary pod: the old verdict.
    plain = {k: v for k, v in left.items() if k != "timeline"}
    verdict = judge(changes_of(diff_rounds("p[r]", [BASELINE], [plain], B_ROLES, C_ROLES)), [])
    assert not verdict.ok and "candidate-set-grew" in verdict.reasons[0]

    # A replacement the candidate evicted in the same round is never waved through.
    thrash = fixed("evicted", "api-server")
    verdict = judge(changes_of(diff_rounds("p[r]", [BASELINE], [thrash], B_ROLES, C_ROLES)), [])
    assert not verdict.ok
    assert {j.change.kind for j in verdict.unexplained} == {"candidate-set-grew"}  # one label


def test_each_track_is_a_release_with_its_own_chart_and_values(tmp_path) -> None:
    """--baseline names the baseline like --candidate names the candidate: each track's config
    carries its own release spec and chart (None: the pin), --values first, then its own."""
    from pytest_desched.canary.engine import track_configs
    from pytest_desched.config import build_config

    files = {n: tmp_path / f"{n}.yaml" for n in ("common", "old", "new")}
    for f in files.values():
        f.write_text("cmdOptions: {v: 3}\n")
    config = build_config(
        {
            "--desched-provider": "embedded",
            "--desched-values": [str(files["common"])],
            "--desched-baseline-values": [str(files["old"])],
            "--desched-candidate-values": [str(files["new"])],
            "--desched-baseline": "version:v0.35.1",
        },
        run_dir=tmp_path,
    )
    base, cand = track_configs(config, "pinned", None, True, "version:v0.35.1", "repo:0.35.1")
    assert (base.candidate, base.candidate_chart) == ("version:v0.35.1", "repo:0.35.1")
    assert (cand.candidate, cand.candidate_chart) == (None, None)  # the pin
    assert base.values == (files["common"], files["old"])
    assert cand.values == (files["common"], files["new"])
    assert base.parsed_candidate().version == "v0.35.1"
    assert base.baseline is None and cand.baseline_values == ()  # said once, on the track


def test_the_track_table_names_each_tracks_kubernetes_when_they_differ() -> None:
    """A control-plane upgrade canaried: one header version would misname the candidate's."""
    from pytest_desched.canary.report import CanaryReport
    from pytest_desched.canary.tracks import TrackResult
    from pytest_desched.tools.release import skew_from_readme

    readme = "| Descheduler | Supported Kubernetes Version |\n|---|---|\n| v0.36 | v1.36 |\n"

    def track(name: str, kube: str) -> TrackResult:
        return TrackResult(name, "v0.36.0", skew=skew_from_readme(readme, "v0.36.0", kube))

    same = CanaryReport(
        track("baseline", "v1.36.3"), track("candidate", "v1.36.3"), [], judge([], [])
    )
    assert "skew vs Kubernetes v1.36.3" in same.markdown()
    assert "Kubernetes v1.36.3: compiled for" not in same.markdown()
    apart = CanaryReport(
        track("baseline", "v1.36.3"), track("candidate", "v1.37.2"), [], judge([], [])
    )
    md = apart.markdown()
    assert "skew vs Kubernetes the track's cluster" in md
    assert "Kubernetes v1.36.3: compiled for v1.36: the Kubernetes minor it is compiled for" in md
    assert "Kubernetes v1.37.2: compiled for v1.36: cluster 1 minor(s) newer than v1.36" in md
