"""Bad input fails fast, clearly, and changes nothing; the safety gaps found in review.

No cluster: fakes stand in for the API and the CLIs, so every refusal is shown to happen
before the first change (no helm upgrade, no API write) and with a one-line message.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from pytest_desched.descheduler.chart import Release, private_file
from pytest_desched.descheduler.chart_source import ChartRef
from pytest_desched.descheduler.policy import (
    NAMESPACED_PLUGINS,
    Policy,
    PolicyError,
    PolicyScope,
    check_policy_scope,
    load_default,
    scope_policy,
)
from pytest_desched.descheduler.rounds import RoundError
from pytest_desched.errors import ImplicitKubeconfig, RoundFailed
from pytest_desched.lab import (
    Lab,
    LabApiError,
    LabInputError,
    check_lab_inputs,
    check_namespace,
)
from pytest_desched.proc import helm_env, require_explicit_kubeconfig, run
from pytest_desched.providers.base import NODE_OPT_IN_LABEL
from pytest_desched.providers.embedded.kubelet import wait_runs, write_facts
from pytest_desched.providers.jobs import PodRun, error_lines, failed_pod, utcnow
from pytest_desched.redaction import scrub_secrets
from pytest_desched.tools.versions import load_versions
from tests.unit.descheduler.test_chart_checks import render

JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXBhcnQ"
SCOPE = PolicyScope(node_selector=f"{NODE_OPT_IN_LABEL}=true")


# == 1. a round whose pod fails ends at once, with the descheduler's own words ============
STARTUP_FAILURE = "\n".join(
    [
        '{"ts":1,"caller":"app/server.go:70","msg":"Starting descheduler","v":0}',
        '{"ts":2,"caller":"app/server.go:69","msg":"failed to apply","err":"thresholds\' cpu '
        "percentage is greater than targetThresholds'\"}",
        "Error: thresholds' cpu percentage is greater than targetThresholds'",
        f"token: {JWT}",
    ]
)


def test_error_lines_quote_the_descheduler_and_scrub_tokens() -> None:
    lines = error_lines(STARTUP_FAILURE)
    assert (
        lines[0] == "failed to apply: thresholds' cpu percentage is greater than targetThresholds'"
    )
    assert lines[1] == "Error: thresholds' cpu percentage is greater than targetThresholds'"
    assert all(JWT not in line for line in lines)
    # no error-looking line: the tail, never nothing
    assert error_lines("a\nb\n\nc\n", n=2) == ["b", "c"]
    assert error_lines("") == []


class _Jobs:
    """A Job whose pod kwok starts; counts reads, records patches."""

    def __init__(self, pods: list[Any]) -> None:
        self.pods, self.patches, self.reads = pods, [], 0

    # batch
    def read_namespaced_job(self, name: str, ns: str) -> Any:
        self.reads += 1
        return SimpleNamespace(status=SimpleNamespace(conditions=None))

    def patch_namespaced_job(self, name: str, ns: str, body: dict) -> None:
        self.patches.append((name, ns, body))

    # core
    def list_namespaced_pod(self, ns: str, label_selector: str) -> Any:
        return SimpleNamespace(items=self.pods)

    def read_namespaced_pod_log(self, name: str, ns: str) -> str:
        return STARTUP_FAILURE


def _pod(phase: str = "Running", exit_code: int | None = None) -> Any:
    terminated = SimpleNamespace(exit_code=exit_code, message="") if exit_code is not None else None
    return SimpleNamespace(
        metadata=SimpleNamespace(name="round-abc12-xyz", uid="uid-1", namespace="kube-system"),
        spec=SimpleNamespace(service_account_name="descheduler"),
        status=SimpleNamespace(
            phase=phase,
            container_statuses=[SimpleNamespace(state=SimpleNamespace(terminated=terminated))]
            if terminated
            else None,
        ),
    )


def test_failed_round_pod_raises_at_once_and_stops_retries(tmp_path: Path) -> None:
    """The supervised kubelet recorded a run that exited 1: the round ends on first sight."""
    jobs = _Jobs([_pod()])
    cluster = SimpleNamespace(batch=jobs, core=jobs, workdir=tmp_path / "cluster")
    log = tmp_path / "round.log"
    log.write_text(STARTUP_FAILURE)
    now = utcnow()
    write_facts(
        cluster.workdir,
        PodRun(
            "kube-system", "round-abc12-xyz", "uid-1", "descheduler", [], 1, now, now,
            STARTUP_FAILURE, log, ["image x run as local binary descheduler"],
        ),
    )  # fmt: skip
    with pytest.raises(RoundFailed) as ei:
        wait_runs(cluster, "round-abc12", "kube-system", tmp_path / "logs", 120)
    err = ei.value
    assert isinstance(err, RoundError)
    assert (err.job, err.pod, err.exit_code) == ("round-abc12", "round-abc12-xyz", 1)
    assert jobs.reads == 1  # no second pod, no 120 s wait
    assert jobs.patches == [("round-abc12", "kube-system", {"spec": {"backoffLimit": 0}})]
    msg = str(err)
    assert msg.startswith("round Job kube-system/round-abc12 failed: pod round-abc12-xyz exited 1")
    assert "failed to apply: thresholds' cpu percentage is greater than targetThresholds'" in msg
    assert JWT not in msg and "local binary" not in msg
    assert f"full log: {tmp_path / 'logs' / 'round.log'}" in msg


def test_failed_pod_of_an_in_cluster_job_is_final_too() -> None:
    jobs = _Jobs([_pod("Failed", exit_code=1)])
    err = failed_pod(SimpleNamespace(batch=jobs, core=jobs), "round-abc12", "kube-system")
    assert isinstance(err, RoundFailed) and err.exit_code == 1
    assert "greater than targetThresholds" in str(err)
    assert jobs.patches  # retries stopped there as well
    ok = _Jobs([_pod("Succeeded", exit_code=0)])
    assert failed_pod(SimpleNamespace(batch=ok, core=ok), "round-abc12", "kube-system") is None


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("maxNoOfPodsToEvictTotal", 2**64),
        ("maxNoOfPodsToEvictPerNode", 2**64 + 5),
        ("gracePeriodSeconds", 2**63),
        ("profiles.safe-rebalance.DefaultEvictor.minReplicas", 2**64),
    ],
)
def test_policy_refuses_integers_go_cannot_decode(path: str, value: int) -> None:
    """The descheduler's own decoder refuses them (policycheck), in its words."""
    go_error = r"cannot unmarshal number \d+ into Go struct field \w+\.\w+ of type u?int"
    with pytest.raises(PolicyError, match=go_error):
        load_default().override(path, value, why="test").validate()
    load_default().override(path, 2**63 - 1, why="test").validate()  # the largest that fits


# == 2. lab inputs are checked before any change; API errors are one short line ==========
WORKERS = ["w-1", "w-2", "w-3"]


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("kube-system", "is reserved"),
        ("default", "is reserved"),
        ("kube-node-lease", "is reserved"),
        ("kube-anything", "is reserved"),
        ("Bad_NS", "not a valid RFC 1123 label"),
        ("-lab", "not a valid RFC 1123 label"),
        ("a" * 64, "64 characters"),
        ("", "non-empty string"),
        (None, "non-empty string"),
    ],
)
def test_bad_lab_namespace_refused_with_the_fix(name: Any, match: str) -> None:
    with pytest.raises(LabInputError, match=match) as ei:
        check_namespace(name)
    assert "\n" not in str(ei.value) and "--desched-namespace" in str(ei.value)


def test_release_namespace_is_reserved_too() -> None:
    with pytest.raises(LabInputError, match="is reserved"):
        check_namespace("desched-system", release_namespace="desched-system")
    assert check_namespace("descheduler-lab-gw1") == "descheduler-lab-gw1"


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"source": "nope"}, "source node 'nope' is not a lab worker"),
        ({"target": "w-9"}, "target node 'w-9' is not a lab worker"),
        ({"target": "w-1"}, "must differ"),
        ({"replicas": 0}, "replicas must be an integer >= 1"),
        ({"replicas": "3"}, "replicas must be an integer >= 1"),
        ({"replicas": True}, "replicas must be an integer >= 1"),
        ({"namespace": "kube-public"}, "is reserved"),
    ],
)
def test_lab_inputs_checked_at_once(kw: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"namespace": "lab", "source": "w-1", "target": "w-2", "replicas": 3}
    with pytest.raises(LabInputError, match=match):
        check_lab_inputs(WORKERS, **{**args, **kw})
    assert check_lab_inputs(WORKERS, **args) == ("lab", "w-1", "w-2", 3)


def test_lab_refuses_a_reserved_namespace_before_any_call() -> None:
    cluster = SimpleNamespace(core=None)  # any API call would fail loudly
    with pytest.raises(LabInputError, match="'kube-system' is reserved"):
        Lab(cluster, "kube-system")


def _api_exception(status: int, reason: str, body: dict[str, Any]) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps(body)
    exc.headers = {"Audit-Id": "1234", "Content-Type": "application/json", "X-Secret": JWT}
    return exc


def test_api_error_from_a_lab_step_is_one_short_line() -> None:
    status = {
        "kind": "Status",
        "message": 'Namespace "lab" is forbidden: exceeded quota',
        "reason": "Forbidden",
        "details": {"name": "lab", "kind": "namespaces"},
        "code": 403,
    }

    class Core:
        def create_namespace(self, body: Any) -> None:
            raise _api_exception(403, "Forbidden", status)

    lab = Lab(SimpleNamespace(core=Core()), "lab")
    with pytest.raises(LabApiError) as ei:
        lab.create_namespace()
    msg = str(ei.value)
    assert msg == (
        "Lab.create_namespace on namespaces/lab: HTTP 403 Forbidden: "
        'Namespace "lab" is forbidden: exceeded quota'
    )
    assert ei.value.status == 403 and ei.value.__cause__ is None
    assert "Audit-Id" not in msg and "HTTP response headers" not in msg


def test_lab_keeps_its_own_handling_of_expected_statuses() -> None:
    class Policy_:
        def read_namespaced_pod_disruption_budget(self, name: str, ns: str) -> None:
            raise _api_exception(404, "Not Found", {"message": "not found"})

    lab = Lab(SimpleNamespace(policy=Policy_()), "lab")
    assert lab.pdb_status() is None  # a 404 it handles itself is not an error


# == 3. no credential lands in any file the plugin writes or returns =======================
@pytest.mark.parametrize(
    "text",
    [
        "url: https://prom.example:9090/api/v1/query?bearer=s3cr3t-value&step=30",
        "https://prom.example/?access_token=abcdef123456#top",
        "http://prom/x?a=1&api_key=k-123&b=2",
        "http://prom/x?token=abc",
        f"token: {JWT}",
        "bearerToken: plain-but-secret",
        "authorization: Bearer abc.def-ghi",
        "https://user:pa55@prom.example/",
    ],
)
def test_scrub_secrets_query_string_and_inline_forms(text: str) -> None:
    out = scrub_secrets(text)
    assert "<redacted>" in out
    for secret in ("s3cr3t-value", "abcdef123456", "k-123", "=abc", JWT, "plain-but", "pa55"):
        assert secret not in out


def test_scrub_keeps_harmless_query_strings() -> None:
    text = "url: https://prom.example/api/v1/query?query=up&step=30"
    assert scrub_secrets(text) == text


def _prometheus(prom: dict[str, Any]) -> Policy:
    return load_default().override(
        "metricsProviders", [{"source": "Prometheus", "prometheus": prom}], why="test"
    )


@pytest.mark.parametrize(
    "prom",
    [
        {"url": "https://prom.example/?bearer=s3cr3t-value"},
        {"url": "https://prom.example/?access_token=s3cr3t-value"},
        {"url": "https://prom.example", "authToken": JWT},
        {"url": "https://prom.example", "authToken": {"token": "s3cr3t-value"}},
        {"url": "https://prom.example", "authToken": {"bearerToken": "s3cr3t-value"}},
        {"url": "https://u:s3cr3t-value@prom.example"},
    ],
)
def test_inline_credentials_are_refused_and_never_quoted(prom: dict[str, Any]) -> None:
    with pytest.raises(PolicyError) as ei:
        _prometheus(prom).validate()
    msg = str(ei.value)
    assert "s3cr3t-value" not in msg and JWT not in msg
    assert "credential" in msg or "unknown field" in msg or "must be a mapping" in msg


def test_secret_reference_is_the_accepted_way() -> None:
    ref = {"secretReference": {"namespace": "kube-system", "name": "prom-token"}}
    _prometheus({"url": "https://prom.example:9090", "authToken": ref}).validate()
    with pytest.raises(PolicyError, match="secret reference does not set both namespace and name"):
        _prometheus({"url": "https://p", "authToken": {"secretReference": {"namespace": "x"}}}).validate()  # fmt: skip


def test_private_file_is_0600_and_gone_after() -> None:
    with private_file("x: 1\n") as p:
        assert p.read_text() == "x: 1\n"
        assert p.stat().st_mode & 0o777 == 0o600
    assert not p.exists()


class FakeReleaseCluster:
    """helm renders the chart from the values it is given; kubectl diff echoes the render."""

    created, provider, name = True, "embedded", "fake"

    def __init__(self, selector: str | None = None) -> None:
        self.lab_node_selector = selector
        self.calls: list[tuple[str, ...]] = []
        self.private: list[tuple[Path, int]] = []
        self.live: list[dict[str, Any]] = render(dry_run=True)
        self.batch = SimpleNamespace(read_namespaced_cron_job=self._cronjob)
        self.core = SimpleNamespace(read_namespaced_config_map=self._configmap)

    def _docs(self, args: tuple[str, ...]) -> list[dict[str, Any]]:
        values: dict[str, Any] = {}  # helm's order, a later file's top-level key wins
        for i, a in enumerate(args):
            if a == "-f":
                vf = Path(args[i + 1])
                self.private.append((vf, vf.stat().st_mode & 0o777))
                values.update(yaml.safe_load(vf.read_text()) or {})
        values = {k: v for k, v in values.items() if v is not None}
        dry_run = "cmdOptions.dry-run=true" in args
        if "deschedulerPolicy" not in values:  # the chart's default policy
            return render(dry_run=dry_run)
        doc = {
            "apiVersion": values["deschedulerPolicyAPIVersion"],
            "kind": "DeschedulerPolicy",
            **values["deschedulerPolicy"],
        }
        return render(dry_run=dry_run, policy_doc=doc)

    def helm(self, *args: str, check: bool = True, timeout: float = 300) -> Any:
        self.calls.append(args)
        docs = self._docs(args)
        if args[0] == "upgrade":
            self.live = docs
        return subprocess.CompletedProcess(args, 0, yaml.safe_dump_all(docs), "")

    def kubectl(self, *args: str, check: bool = True, **kw: Any) -> Any:
        self.calls.append(args)
        text = Path(args[args.index("-f") + 1]).read_text()
        return subprocess.CompletedProcess(args, 1, "+ " + text.replace("\n", "\n+ "), "")

    def _find(self, kind: str) -> dict[str, Any]:
        return next(d for d in self.live if d["kind"] == kind)

    def _cronjob(self, name: str, ns: str) -> Any:
        cj = self._find("CronJob")
        c = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        spec = SimpleNamespace(
            suspend=cj["spec"]["suspend"],
            job_template=SimpleNamespace(
                spec=SimpleNamespace(
                    template=SimpleNamespace(
                        spec=SimpleNamespace(containers=[SimpleNamespace(args=c["args"])])
                    )
                )
            ),
        )
        return SimpleNamespace(metadata=SimpleNamespace(name=name), spec=spec)

    def _configmap(self, name: str, ns: str) -> Any:
        return SimpleNamespace(data=self._find("ConfigMap")["data"])


def _release(tmp_path: Path, cluster: FakeReleaseCluster) -> Release:
    chart = ChartRef(tmp_path / "chart.tgz", "module", "0.36.0", "0.36.0", "0" * 64)
    rel = Release(cluster, chart, load_versions(), tmp_path / "release", report=lambda _: None)  # type: ignore[arg-type]
    rel.workdir.mkdir()
    return rel


def _token_policy() -> Policy:
    return _prometheus({"url": f"https://prom.example/api?bearer={JWT}&step=30"})


def test_apply_policy_refuses_inline_token_before_any_command(tmp_path: Path) -> None:
    cluster = FakeReleaseCluster()
    rel = _release(tmp_path, cluster)
    with pytest.raises(PolicyError, match="inline credential") as ei:
        rel.apply_policy(_token_policy())
    assert JWT not in str(ei.value)
    assert cluster.calls == []  # no helm template, no diff, no upgrade
    assert list(rel.workdir.iterdir()) == []


def test_release_work_files_and_diff_hold_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: were validation bypassed, no file and no returned diff has it."""
    monkeypatch.setattr(Policy, "validate", lambda self, *a, **k: self)
    from pytest_desched.descheduler import chart as release_mod  # where apply_policy finds it
    from pytest_desched.descheduler.policy.checker import CheckResult

    # ...and the lint gate (which refuses the token too, DL004) bypassed as well.
    monkeypatch.setattr(release_mod, "lint_or_refuse", lambda *a: ([], CheckResult("", True)))
    cluster = FakeReleaseCluster()
    rel = _release(tmp_path, cluster)
    step = rel.apply_policy(_token_policy(), dry_run=False)
    assert [c[0] for c in cluster.calls] == ["template", "diff", "upgrade"]
    assert JWT in json.dumps(cluster.live)  # helm did get the real values
    assert all(mode == 0o600 for _, mode in cluster.private)
    assert not any(p.exists() for p, _ in cluster.private)  # removed right after helm ran
    assert all(p.parent != rel.workdir for p, _ in cluster.private)
    names = sorted(p.name for p in rel.workdir.iterdir())
    assert names == [
        "diff-0.txt",
        "rendered-active.yaml",
        "values-active.yaml",
    ]
    for p in rel.workdir.iterdir():
        text = p.read_text()
        assert JWT not in text, p.name
        assert "<redacted>" in text, p.name
    assert JWT not in json.dumps(step, default=str)
    assert JWT not in json.dumps(rel.history, default=str)


# == 4. a policy comes in one way ==========================================================
def test_coerce_accepts_policy_path_mapping_and_yaml(tmp_path: Path) -> None:
    pol = load_default()
    f = tmp_path / "p.yaml"
    f.write_text(pol.to_yaml())
    assert Policy.coerce(pol) is pol
    for value in (f, str(f), pol.to_dict(), pol.to_yaml()):
        assert Policy.coerce(value) == pol, type(value)
    assert Policy.coerce(str(f)).source == str(f)


@pytest.mark.parametrize("value", [42, 3.5, ["apiVersion: x"], b"apiVersion: x", object()])
def test_coerce_refuses_other_types_with_what_is_expected(value: Any) -> None:
    with pytest.raises(TypeError, match=r"Policy, a path .* a mapping, or YAML text; got"):
        Policy.coerce(value)


def test_coerce_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="neither an existing policy file nor YAML text"):
        Policy.coerce(str(tmp_path / "missing.yaml"))
    with pytest.raises(PolicyError, match="does not exist"):
        Policy.coerce(tmp_path / "missing.yaml")


def test_apply_policy_takes_yaml_text(tmp_path: Path) -> None:
    cluster = FakeReleaseCluster()
    rel = _release(tmp_path, cluster)
    step = rel.apply_policy(load_default().to_yaml())
    assert step["policy_digest"] == load_default().digest()


def test_trying_a_policy_keeps_dry_run_on(tmp_path: Path) -> None:
    """Only an explicit dry_run=False turns dry run off (keyword only, never positional)."""
    cluster = FakeReleaseCluster()
    rel = _release(tmp_path, cluster)
    rel.apply_policy(load_default(), dry_run=False)
    from pytest_desched.descheduler.render_checks import cronjob_args

    assert "--dry-run=false" in cronjob_args(cluster._find("CronJob"))
    rel.apply_policy(load_default())  # a later call that only tries a policy
    assert "--dry-run=true" in cronjob_args(cluster._find("CronJob"))
    with pytest.raises(TypeError):
        rel.apply_policy(load_default(), False)  # type: ignore[misc]


# == 5. every kube tool gets an explicit kubeconfig =========================================
@pytest.mark.parametrize("tool", ["kubectl", "helm", "kwokctl", "kind"])
def test_run_refuses_a_kube_tool_without_explicit_kubeconfig(
    tool: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "users-kubeconfig"))  # inherited: no
    for env in (None, {"PATH": os.environ["PATH"]}, {"KUBECONFIG": ""}):
        with pytest.raises(ImplicitKubeconfig, match="without an explicit kubeconfig"):
            run([f"/nonexistent/{tool}", "get", "nodes"], env=env)
    require_explicit_kubeconfig([tool, "x"], {"KUBECONFIG": os.devnull})
    require_explicit_kubeconfig([tool, "x", "--kubeconfig", "/k"], None)
    require_explicit_kubeconfig([tool, "x", "--kubeconfig=/k"], None)


def test_run_leaves_other_tools_alone() -> None:
    assert run(["true"]).returncode == 0


def test_helm_env_never_points_at_a_users_kubeconfig(tmp_path: Path) -> None:
    assert helm_env(tmp_path)["KUBECONFIG"] == os.devnull


# == 6. on an existing cluster a policy is held to the lab ==================================
def test_scope_limits_namespace_and_nodes_with_recorded_overrides() -> None:
    pol = SCOPE.apply(load_default(), "lab-ns")
    pol.validate()
    doc = pol.to_dict()
    assert doc["nodeSelector"] == f"{NODE_OPT_IN_LABEL}=true"
    args = pol.plugin_args("RemovePodsViolatingNodeAffinity")
    assert args["namespaces"] == {"include": ["lab-ns"]}
    assert [o["path"] for o in pol.overrides] == [
        "nodeSelector",
        "profiles[0].pluginConfig[RemovePodsViolatingNodeAffinity].args.namespaces",
    ]
    assert all("lab-ns" in o["why"] and NODE_OPT_IN_LABEL in o["why"] for o in pol.overrides)
    assert SCOPE.problems(pol) == []


def test_scope_ands_an_existing_node_selector_and_replaces_exclude_lists() -> None:
    pol = (
        load_default()
        .override("nodeSelector", "pool=a", why="test")
        .override(
            "profiles.safe-rebalance.RemovePodsViolatingNodeAffinity.namespaces",
            {"exclude": ["kube-system"]},
            why="test",
        )
    )
    scoped = SCOPE.apply(pol, "lab")
    assert scoped.to_dict()["nodeSelector"] == f"pool=a,{NODE_OPT_IN_LABEL}=true"
    assert scoped.plugin_args("RemovePodsViolatingNodeAffinity")["namespaces"] == {
        "include": ["lab"]
    }
    assert (
        SCOPE.apply(scoped, "lab").to_dict()["nodeSelector"] == f"pool=a,{NODE_OPT_IN_LABEL}=true"
    )


def test_scope_refuses_plugins_that_cannot_be_held_to_a_namespace() -> None:
    lnu = load_default().override(
        "profiles.safe-rebalance.plugins.balance.enabled", ["LowNodeUtilization"], why="test"
    )
    assert "LowNodeUtilization" not in NAMESPACED_PLUGINS
    with pytest.raises(PolicyError, match="LowNodeUtilization cannot be limited to one namespace"):
        SCOPE.apply(lnu, "lab")


def test_embedded_cluster_scopes_nothing() -> None:
    cluster = FakeReleaseCluster(selector=None)
    pol = load_default()
    assert scope_policy(cluster, pol, "lab") is pol
    check_policy_scope(cluster, None)  # no scope: the chart default may run


def test_scoped_cluster_refuses_an_unscoped_policy_before_any_command(tmp_path: Path) -> None:
    cluster = FakeReleaseCluster(selector=f"{NODE_OPT_IN_LABEL}=true")
    rel = _release(tmp_path, cluster)
    with pytest.raises(PolicyError, match="could evict outside the lab"):
        rel.apply_policy(load_default().override(
            "profiles.safe-rebalance.DefaultEvictor.minPodAge", "0s", why="test"
        ), dry_run=False)  # fmt: skip
    with pytest.raises(PolicyError, match="chart's default policy acts on every namespace"):
        rel.apply_policy(None, dry_run=False)
    assert cluster.calls == []
    rel.apply_policy(None, dry_run=True)  # dry run evicts nothing: allowed
    step = rel.apply_policy(scope_policy(cluster, load_default(), "lab"))
    assert step["policy_digest"] == scope_policy(cluster, load_default(), "lab").digest()
