"""The user's own policy and Helm values through the runbook's experiments, on a real cluster.

`desched run positive nodefit pdb --policy my.yaml --values prod-values.yaml`: the policy
differs from the runbook's (a total cap of 1, a grace period of 10 s, a priorityThreshold
protection, its own profile name); the values set resources, priorityClassName and
cmdOptions.v. The live CronJob must carry the values (helm coalesced them), the live policy
must be the user's held to the lab, and every round record must name both files by digest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pytest_desched import cli
from pytest_desched.config import build_config
from pytest_desched.descheduler.policy import Policy
from pytest_desched.experiments import lab_policy
from pytest_desched.session import DeschedSession
from tests.unit.descheduler.test_user_inputs import PROD_VALUES, USER_POLICY

pytestmark = pytest.mark.desched_selftest

USER = USER_POLICY.replace("name: safe-rebalance", "name: prod").replace(
    "gracePeriodSeconds: 30", "gracePeriodSeconds: 10"
)


def _digest(p: Path) -> str:
    return "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    pol, val = tmp_path / "my.yaml", tmp_path / "prod-values.yaml"
    pol.write_text(USER)
    val.write_text(PROD_VALUES)
    return pol, val


def test_user_policy_and_values_run_the_runbook_checks(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    pol, val = inputs
    config = build_config(
        {
            "--desched-provider": "embedded",
            "--desched-policy": str(pol),
            "--desched-values": [str(val)],
            "--desched-artifacts": str(tmp_path / "evidence"),
        },
        run_dir=tmp_path / "run",
    )
    records: list[dict] = []
    variant = "pdb-lister-workaround"  # bug 1882 is the runbook variant's known shortfall
    with DeschedSession(config) as s:
        cj = s.release.live_cronjob()
        pod = cj.spec.job_template.spec.template.spec
        c = pod.containers[0]
        assert pod.priority_class_name == "system-node-critical"
        assert c.resources.requests == {"cpu": "100m", "memory": "64Mi"}
        assert "--v=5" in c.args and "--logging-format=json" in c.args, c.args
        assert cj.spec.suspend is True and "--dry-run=true" in c.args  # the runbook's, on top
        results = [
            s.run(n, variant=variant, on_record=records.append)
            for n in ("positive", "nodefit", "pdb")
        ]
        ns = [r["namespace"] for r in records]
    assert [r.outcome for r in results] == ["pass"] * 3, "\n".join(r.message for r in results)
    assert [r.variant for r in results] == [f"{variant}@my.yaml"] * 3
    assert len(records) == 3
    user = Policy.from_yaml(USER)
    for rec, namespace in zip(records, ns, strict=True):
        assert rec["inputs"]["policy"] == {"file": "my.yaml", "sha256": _digest(pol)}
        assert rec["inputs"]["values"] == [{"file": "prod-values.yaml", "sha256": _digest(val)}]
        assert rec["caps"] == {"node": 1, "namespace": 1, "total": 1}
        live = Policy.from_yaml(rec["policy_applied"])
        assert live.profile_names == ["prod"]
        args = live.evictor_args("prod")
        assert args["priorityThreshold"] == {"value": 1000} and args["minPodAge"] == "0s"
        affinity = live.plugin_args("RemovePodsViolatingNodeAffinity", "prod")
        assert affinity["namespaces"] == {"include": [namespace]}  # held to the lab
        expected = lab_policy(variant, base=user).override(
            "profiles[0].RemovePodsViolatingNodeAffinity.namespaces",
            {"include": [namespace]},
            why="lab scope",
        )
        assert rec["policy_digest"] == expected.digest()
        assert "cpu" not in json.dumps(rec["inputs"])  # names and digests, no contents
    positive, nodefit, pdb = records
    assert positive["evictions"] == 1 and positive["deciding_layer"], positive["verdict"]
    assert nodefit["evictions"] == 0 and pdb["evictions"] == 0


def test_desched_run_with_policy_and_values_exits_0_and_records_both(
    tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The command as the issue's done-when states it (runbook variant: bug 1882 is an xfail)."""
    pol, val = inputs
    art = tmp_path / "evidence"
    code = cli.main(
        [
            "run",
            "positive",
            "nodefit",
            "pdb",
            "--policy",
            str(pol),
            "--values",
            str(val),
            "--provider",
            "embedded",
            "--artifacts",
            str(art),
        ]
    )
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, out + err[-3000:]
    assert "policy: --policy my.yaml" in err and "on top of the values: suspend=true" in err
    recs = [json.loads(p.read_text()) for p in sorted(art.glob("*/descheduler-*.json"))]
    assert len(recs) == 3, sorted(art.rglob("*"))
    for rec in recs:
        assert rec["inputs"]["policy"]["sha256"] == _digest(pol)
        assert rec["inputs"]["values"][0]["sha256"] == _digest(val)


def test_desched_up_installs_the_users_policy_and_prints_the_pinned_tools(
    tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`desched up --policy --values`: the user's policy in the live ConfigMap, the values in
    the CronJob, and exports that put the pinned kubectl and helm first on PATH."""
    import os
    import re
    import shlex
    import subprocess

    pol, val = inputs
    code = cli.main(["up", "--provider", "embedded", "--policy", str(pol), "--values", str(val)])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, out + err[-3000:]
    name = re.search(r"^# delete: desched down (\S+)$", out, re.M)
    assert name, out
    try:
        exports = dict(re.findall(r"^export (\w+)=(\S+)", out, re.M))
        path = exports["PATH"].replace("$PATH", os.environ["PATH"])
        env = {**os.environ, "PATH": path, "KUBECONFIG": shlex.split(exports["KUBECONFIG"])[0]}
        tools = [Path(p) for p in path.split(":")[:2]]  # the pinned tools' folders, first

        def sh(*argv: str) -> str:
            return subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout

        assert Path(sh("sh", "-c", "command -v kubectl").strip()).parent in tools
        assert Path(sh("sh", "-c", "command -v helm").strip()).parent in tools
        live = sh("kubectl", "-n", "kube-system", "get", "cm", "descheduler", "-o",
                  "jsonpath={.data.policy\\.yaml}")  # fmt: skip
        assert Policy.from_yaml(live) == Policy.from_yaml(USER)  # unmodified: no lab yet
        assert f"policy --policy my.yaml (sha256 {_digest(pol)[7:19]})" in out
        args = sh("kubectl", "-n", "kube-system", "get", "cronjob", "descheduler", "-o",
                  "jsonpath={.spec.suspend} {.spec.jobTemplate.spec.template.spec.containers[0].args}")  # fmt: skip
        assert args.startswith("true ") and "--dry-run=true" in args and "--v=5" in args
        assert "# chart: " in out and "helm upgrade descheduler" in out
        assert sh("helm", "list", "-n", "kube-system", "-q").split() == ["descheduler"]
    finally:
        assert cli.main(["down", name.group(1)]) == cli.EXIT_OK
