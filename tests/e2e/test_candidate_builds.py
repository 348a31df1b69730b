"""The two real upstream candidates (../shared/upstream): built, labelled, charted, and run.

Each tarball's descheduler and the project's policy checker are built from the tarball's own
tree (vendor/, no network), cached by commit: the first build takes about 1.5 minutes on 2
cores, later runs find the cache. Then a session whose config names the master tarball as
its candidate installs its chart suspended and in dry run on the embedded cluster and runs
one dry-run round with the candidate's binary.

The upstream folder is `$DESCHED_UPSTREAM_DIR`, default `<repo>/../shared/upstream`; it is
part of this machine's CI, so a missing folder FAILS (it is not a skip).
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from pytest_desched.descheduler.chart_source import obtain_chart, sha256_file
from pytest_desched.descheduler.policy.checker import PolicyChecker
from pytest_desched.descheduler.render_checks import check_render, find, parse_manifests
from pytest_desched.proc import helm_env, run
from pytest_desched.tools.candidate import Candidate, parse_candidate, tarball_commit
from pytest_desched.tools.locate import probe_version
from pytest_desched.tools.toolchain import Toolchain
from tests.upstream import REPO as REPO_ROOT
from tests.upstream import SNAPSHOTS, tarball

pytestmark = pytest.mark.desched_selftest

TRIVIAL_POLICY = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: trivial
  pluginConfig:
  - name: DefaultEvictor
    args: {}
  - name: RemoveDuplicates
  plugins:
    balance:
      enabled: [RemoveDuplicates]
"""
UNKNOWN_PLUGIN = TRIVIAL_POLICY.replace("[RemoveDuplicates]", "[NoSuchPlugin]")


@pytest.fixture(scope="module")
def built(desched_toolchain: Toolchain) -> dict[str, tuple[Candidate, Toolchain]]:
    """Both candidates' toolchains, descheduler and helper resolved (built on first use)."""
    out = {}
    for name in SNAPSHOTS:
        cand = parse_candidate(f"source:{tarball(name)}", chart="tree")
        tc = Toolchain(cache_dir=desched_toolchain.cache_dir, candidate=cand)
        tc.ensure(["descheduler", "policycheck"])
        out[name] = (cand, tc)
    return out


@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_tarball_provenance_from_the_pax_header(name: str) -> None:
    commit, digest = SNAPSHOTS[name].commit, SNAPSHOTS[name].sha256
    path = tarball(name)
    assert sha256_file(path) == digest
    with tarfile.open(path) as tf:
        tf.next()
        assert tf.pax_headers.get("comment") == commit  # `git archive` wrote the commit
    assert tarball_commit(path) == commit
    cand = parse_candidate(f"source:{path}")
    assert (cand.commit, cand.source_key, cand.sha256) == (commit, commit, digest)
    assert cand.version == f"v0.36.0-g{commit[:9]}"  # chart appVersion 0.36.0 + commit


@pytest.mark.policycheck
@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_candidate_builds_report_the_label_and_answer_a_policy(
    built: dict[str, tuple[Candidate, Toolchain]], name: str
) -> None:
    cand, tc = built[name]
    commit = SNAPSHOTS[name].commit
    desched, helper = tc.path("descheduler"), tc.path("policycheck")
    # cached by commit, beside (never instead of) the pinned build
    assert desched.parent.name == f"{cand.version}-src{commit[:12]}"
    assert helper.parent.name.startswith(f"{cand.version}-src{commit[:12]}-")
    pinned = Toolchain(cache_dir=tc.cache_dir).bin_dir(
        Toolchain(cache_dir=tc.cache_dir).groups["descheduler"]
    )
    assert desched.parent != pinned
    out = subprocess.run([str(desched), "version"], capture_output=True, text=True, timeout=60)
    assert f"GitVersion:{cand.version}" in out.stdout, out.stdout + out.stderr
    assert probe_version("policycheck", helper) == cand.version
    info = tc.build_info("descheduler")
    assert (info["commit"], info["goflags"], info["goproxy"]) == (
        commit,
        "-mod=vendor -buildvcs=false",
        "off",
    )
    assert info["source_sha256"] == SNAPSHOTS[name].sha256
    tree = Path(str(info["tree"]))
    assert tree.is_relative_to(tc.cache_dir) and not tree.is_relative_to(REPO_ROOT)
    assert (tree / "cmd" / "desched-policycheck" / "main.go").is_file()  # the helper, copied in
    checker = PolicyChecker(helper, cand.version)
    ok = checker.check(TRIVIAL_POLICY, "trivial")
    assert ok.accepted, ok.error
    assert ok.profiles == 1 and ok.enabled_plugins >= 1
    bad = checker.check(UNKNOWN_PLUGIN, "unknown")
    assert not bad.accepted and "NoSuchPlugin" in bad.error


@pytest.mark.parametrize("name", list(SNAPSHOTS))
def test_tree_chart_packages_and_renders_suspended(
    built: dict[str, tuple[Candidate, Toolchain]], name: str
) -> None:
    cand, tc = built[name]
    ref = obtain_chart(tc, tc.versions, candidate=cand, report=lambda m: None)
    assert (ref.source, ref.version, ref.app_version) == ("candidate-tree", "0.36.0", "0.36.0")
    ev = ref.evidence()
    assert ev["commit"] == SNAPSHOTS[name].commit
    assert ev["origin"].endswith(f"{SNAPSHOTS[name].file}:charts/descheduler")
    assert ev["digest"] == f"sha256:{sha256_file(ref.path)}"
    image = f"registry.k8s.io/descheduler/descheduler:{cand.version}"
    text = run(
        [
            str(tc.path("helm")),
            "template",
            "canary",
            str(ref.path),
            "--namespace",
            "kube-system",
            "--set",
            "suspend=true",
            "--set",
            "cmdOptions.dry-run=true",
            "--set-string",
            f"image.tag={cand.version}",
        ],
        env=helm_env(tc.cache_dir / "charts"),
    ).stdout
    docs = parse_manifests(text)
    checks = check_render(docs, dry_run=True, image=image)
    assert "cronjob.suspend=true" in checks and f"image {image}" in checks
    # The two trees' charts really differ where upstream/README.md says: master's ClusterRole
    # dropped `delete` on pods, the PR's branch (older master) still has it.
    (role,) = find(docs, "ClusterRole")
    pod_verbs = next(r["verbs"] for r in role["rules"] if "pods" in r.get("resources", []))
    assert ("delete" in pod_verbs) is ("pr1883" in name), pod_verbs


def test_repo_chart_version_unreachable_fails_clearly(
    built: dict[str, tuple[Candidate, Toolchain]],
) -> None:
    """No network here: repo:VERSION must fail and name the fix, never fall back."""
    from pytest_desched.errors import ToolError

    cand, tc = next(iter(built.values()))
    other = parse_candidate(cand.ref, chart="repo:0.36.1")
    with pytest.raises(ToolError, match="no other chart is used in its place"):
        obtain_chart(tc, tc.versions, candidate=other, report=lambda m: None, repo_timeout=20)


def test_session_with_a_candidate_installs_and_runs_a_dry_run_round(
    request: pytest.FixtureRequest, built: dict[str, tuple[Candidate, Toolchain]]
) -> None:
    """The master tarball as the session's candidate: its chart, image tag, binary and label."""
    from pytest_desched.descheduler.policy import load_default
    from pytest_desched.descheduler.policy.checker import checker_for
    from pytest_desched.descheduler.rounds import run_round
    from pytest_desched.providers.embedded.kubelet import read_images

    name = "master"
    cand, tc = built[name]
    factory = request.getfixturevalue("desched_cluster_factory")
    session = factory(
        provider="embedded", workers=2, candidate=f"source:{tarball(name)}", candidate_chart="tree"
    )
    label = cand.version
    assert session.candidate is not None and session.candidate.version == label
    assert session.candidate.source_dir is not None
    rel = session.release
    assert (rel.descheduler_version, rel.installed, rel.dry_run) == (label, True, True)
    assert rel.image == f"registry.k8s.io/descheduler/descheduler:{label}"
    assert rel.binary == tc.path("descheduler")
    assert rel.chart.source == "candidate-tree" and rel.chart.commit == cand.commit
    assert rel.policycheck_version == label
    recorded = session.info["candidate"]
    assert (recorded["version"], recorded["commit"]) == (label, cand.commit)
    assert recorded["chart"]["source"] == "candidate-tree"
    assert recorded["builds"]["descheduler"]["commit"] == cand.commit
    assert recorded["builds"]["policycheck"]["path"] == str(tc.path("policycheck"))
    saved = json.loads((session.config.artifacts / rel.name / "candidate.json").read_text())
    assert (saved["version"], saved["commit"]) == (label, cand.commit)
    cj = rel.live_cronjob()
    assert cj.spec.suspend is True
    container = cj.spec.job_template.spec.template.spec.containers[0]
    assert container.image == rel.image and "--dry-run=true" in container.args
    # the stand-in kubelet runs the candidate's image as the candidate's binary
    images = read_images(session.cluster.workdir)
    assert images[rel.image] == str(tc.path("descheduler"))

    # A policy is linted by the candidate's own policy checker (never a module build of the label)
    step = rel.apply_policy(load_default(), dry_run=True)
    assert step["effective_policy"] and step["dry_run"] is True
    assert checker_for(label, rel.toolchain).binary == tc.path("policycheck")

    job = f"descheduler-candidate-{uuid.uuid4().hex[:5]}"
    rnd = run_round(session.cluster, rel, job, session.config.run_dir / "round-logs")
    assert rnd.succeeded and rnd.exit_code == 0, rnd.logs[-2000:]
    assert rnd.result.dry_run is True
    (pod_run,) = rnd.pod_runs
    assert pod_run.argv[0] == str(tc.path("descheduler"))  # the candidate's build ran
    assert any(f"image {rel.image} " in n for n in pod_run.notes), pod_run.notes
    # The descheduler logs no version of its own at start (only `descheduler version` prints
    # it): the round's record shows the version through the image it ran as, above, and the
    # binary that ran says it is the candidate.
    out = subprocess.run([pod_run.argv[0], "version"], capture_output=True, text=True, timeout=60)
    assert re.search(rf"GitVersion:{re.escape(label)}\b", out.stdout), out.stdout
    job_obj = session.cluster.batch.read_namespaced_job(job, rel.namespace)
    assert (job_obj.status.succeeded or 0) >= 1
