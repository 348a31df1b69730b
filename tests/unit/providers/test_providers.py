"""Provider choice, existing-cluster guards and the kind provider; no cluster, no Docker.

Binaries (docker, kind) are fake scripts on a PATH of their own; the Kubernetes API is a
recording double patched into `kubernetes.config` / `kubernetes.client`.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kubernetes
import pytest
import yaml

from pytest_desched.errors import ConfigError
from pytest_desched.providers import base
from pytest_desched.providers.base import NODE_OPT_IN_LABEL, ProviderError, choose_provider
from pytest_desched.providers.existing import (
    ExistingProvider,
    check_context,
    opted_in_nodes,
    require_opted_in,
    resolve_kubeconfig,
)
from pytest_desched.providers.kind import (
    KindCli,
    KindProvider,
    add_audit_log,
    load_kind_template,
    render_kind_config,
    wait_nodes_ready,
    worker_names,
)
from pytest_desched.tools.resources import manifest_path
from pytest_desched.tools.versions import load_versions

ZONE = "topology.kubernetes.io/zone"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"


# -- doubles -------------------------------------------------------------------------
def node(name: str, ready: bool = True, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def opted(name: str) -> dict[str, Any]:
    return node(name, **{NODE_OPT_IN_LABEL: "true"})


@dataclass
class FakeKube:
    """Stands in for the API: serves node lists in turn and records every other call."""

    node_lists: list[Any] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    clients: list[tuple[str, str | None]] = field(default_factory=list)
    closed: int = 0

    def list_node(self) -> SimpleNamespace:
        self.calls.append("list_node")
        batch = self.node_lists.pop(0) if len(self.node_lists) > 1 else self.node_lists[0]
        if isinstance(batch, Exception):
            raise batch
        return SimpleNamespace(items=list(batch))


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()

    class ApiClient:
        def close(self) -> None:
            fake.closed += 1

    class CoreV1Api:
        def __init__(self, api_client: ApiClient) -> None:
            pass

        def list_node(self, **_: Any) -> SimpleNamespace:
            return fake.list_node()

        def __getattr__(self, verb: str) -> Any:  # delete_node, patch_node, ... are recorded
            return lambda *a, **k: fake.calls.append(verb)

    def new_client_from_config(config_file: str, context: str | None = None) -> ApiClient:
        fake.clients.append((config_file, context))
        return ApiClient()

    monkeypatch.setattr(kubernetes.config, "new_client_from_config", new_client_from_config)
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", CoreV1Api)
    return fake


class FakeToolchain:
    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths, self.asked = paths, []
        self.versions = load_versions()  # the pins (a run's --desched-kubernetes moves them)

    def path(self, tool: str) -> Path:
        self.asked.append(tool)
        return self.paths[tool]


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH of our own: the host's docker, kind and kubectl are invisible."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", str(d))
    return d


def script(bin_dir: Path, name: str, body: str, shebang: str = "/bin/sh") -> Path:
    p = bin_dir / name
    p.write_text(f"#!{shebang}\n{body}\n")
    p.chmod(0o755)
    return p


# -- choose_provider / docker_available ------------------------------------------------
@pytest.mark.parametrize(("answers", "expected"), [(True, "kind"), (False, "embedded")])
def test_auto_follows_docker(answers: bool, expected: str) -> None:
    kind_here = lambda: None  # noqa: E731 (kind's tools present: Docker alone decides)
    assert choose_provider("auto", docker_answers=answers, kind_missing=kind_here) == expected
    assert choose_provider("", docker_answers=answers, kind_missing=kind_here) == expected


def test_auto_probes_docker_when_not_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "docker_available", lambda: True)
    assert choose_provider("auto", kind_missing=lambda: None) == "kind"
    monkeypatch.setattr(base, "docker_available", lambda: False)
    assert choose_provider("auto") == "embedded"


@pytest.mark.parametrize("name", ["embedded", "kind", "existing"])
def test_explicit_provider_ignores_docker(name: str) -> None:
    assert choose_provider(f" {name.upper()} ", docker_answers=name != "kind") == name


def test_unknown_provider_names_the_option() -> None:
    with pytest.raises(ProviderError, match="--desched-provider") as err:
        choose_provider("minikube", docker_answers=True)
    assert "embedded, kind, existing" in str(err.value)


def test_docker_available_when_engine_answers(bin_dir: Path) -> None:
    script(bin_dir, "docker", '[ "$1" = info ] && echo 27.1.1')
    assert base.docker_available() is True


@pytest.mark.parametrize(
    "body",
    [
        'echo "Cannot connect to the Docker daemon" >&2; exit 1',  # client without engine
        "exit 0",  # answers nothing
    ],
)
def test_docker_unavailable_when_engine_silent(bin_dir: Path, body: str) -> None:
    script(bin_dir, "docker", body)
    assert base.docker_available() is False


def test_docker_unavailable_when_it_hangs(bin_dir: Path) -> None:
    script(bin_dir, "docker", f"exec {shutil.which('sleep', path='/usr/bin:/bin')} 5")
    assert base.docker_available(timeout=0.2) is False


def test_docker_unavailable_when_absent(bin_dir: Path) -> None:
    assert base.docker_available() is False


# -- existing cluster: guards ------------------------------------------------------------
def kubeconfig_dict(*contexts: str, current: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": c, "cluster": {"server": "https://127.0.0.1:1"}} for c in contexts],
        "users": [{"name": c, "user": {"token": "t"}} for c in contexts],
        "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in contexts],
        "current-context": current,
    }


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    p = tmp_path / "lab.kubeconfig"
    p.write_text(yaml.safe_dump(kubeconfig_dict("lab", "prod", current="prod")))
    return p


def test_no_context_is_refused_even_with_a_current_context() -> None:
    with pytest.raises(ProviderError, match="--desched-existing-context=NAME") as err:
        check_context(kubeconfig_dict("lab", "prod", current="prod"), None)
    assert "'prod' is never used implicitly" in str(err.value)


def test_unknown_context_lists_the_known_ones() -> None:
    with pytest.raises(ProviderError, match=r"'staging' is not in the kubeconfig.*lab, prod"):
        check_context(kubeconfig_dict("lab", "prod"), "staging")


def test_named_context_is_returned() -> None:
    assert check_context(kubeconfig_dict("lab", "prod"), "lab")["context"]["cluster"] == "lab"


def test_kubeconfig_never_defaults_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(yaml.safe_dump(kubeconfig_dict("lab")))
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(ProviderError, match="--desched-existing-kubeconfig=PATH or set KUBECONFIG"):
        resolve_kubeconfig(None, {})


def test_kubeconfig_from_env_then_explicit(kubeconfig: Path, tmp_path: Path) -> None:
    assert resolve_kubeconfig(None, {"KUBECONFIG": str(kubeconfig)}) == kubeconfig
    assert resolve_kubeconfig(kubeconfig, {"KUBECONFIG": "/nonexistent"}) == kubeconfig
    with pytest.raises(ProviderError, match="lists 2 files"):
        resolve_kubeconfig(None, {"KUBECONFIG": f"{kubeconfig}:{kubeconfig}"})
    with pytest.raises(ProviderError, match="does not exist"):
        resolve_kubeconfig(tmp_path / "missing", {})


def test_opted_in_nodes_accepts_dicts_and_api_objects() -> None:
    from kubernetes.client import V1Node, V1ObjectMeta

    nodes = [
        opted("b"),
        V1Node(metadata=V1ObjectMeta(name="a", labels={NODE_OPT_IN_LABEL: "true"})),
        node("c", **{NODE_OPT_IN_LABEL: "True"}),  # only the exact value opts in
        node("d", **{NODE_OPT_IN_LABEL: "false"}),
        node("e"),
    ]
    assert opted_in_nodes(nodes) == ["a", "b"]


def test_no_opted_in_node_lists_nodes_and_fix() -> None:
    nodes = [node("cp", **{CONTROL_PLANE: ""}), node("w1"), node("w2")]
    with pytest.raises(ProviderError) as err:
        require_opted_in(nodes, "lab")
    msg = str(err.value)
    assert "only 0 node(s)" in msg and "cp (control-plane)" in msg
    assert f"kubectl label node w1 {NODE_OPT_IN_LABEL}=true --context lab" in msg
    assert f"kubectl label node w2 {NODE_OPT_IN_LABEL}=true" in msg
    assert "kubectl label node cp " not in msg  # workers are suggested before control planes


def test_one_opted_in_node_is_not_enough() -> None:
    with pytest.raises(ProviderError, match="only 1 node") as err:
        require_opted_in([opted("w1"), node("w2")], "lab")
    assert f"kubectl label node w2 {NODE_OPT_IN_LABEL}=true" in str(err.value)
    assert "kubectl label node w1 " not in str(err.value)


def test_two_opted_in_nodes_are_the_workers() -> None:
    assert require_opted_in([opted("w2"), node("w3"), opted("w1")], "lab") == ["w1", "w2"]


# -- existing cluster: provider -----------------------------------------------------------
def existing(kubeconfig: Path | None, context: str | None, allow: bool = True) -> ExistingProvider:
    return ExistingProvider(kubeconfig, context, FakeToolchain({}), allow=allow)  # type: ignore[arg-type]


def test_existing_needs_allow(kubeconfig: Path, kube: FakeKube) -> None:
    with pytest.raises(ProviderError, match="--desched-allow-existing"):
        existing(kubeconfig, "lab", allow=False).start()
    assert kube.calls == []


@pytest.mark.parametrize(
    ("context", "message"),
    [(None, "--desched-existing-context=NAME"), ("staging", "'staging' is not in")],
)
def test_existing_refuses_bad_context(
    kubeconfig: Path, kube: FakeKube, context: str | None, message: str
) -> None:
    with pytest.raises(ProviderError, match=message):
        existing(kubeconfig, context).start()
    assert kube.clients == []  # refused before any connection


def test_existing_refuses_missing_kubeconfig(tmp_path: Path, kube: FakeKube) -> None:
    with pytest.raises(ProviderError, match="does not exist"):
        existing(tmp_path / "nope", "lab").start()


def test_existing_refuses_one_opted_in_node(kubeconfig: Path, kube: FakeKube) -> None:
    kube.node_lists = [[opted("w1"), node("w2")]]
    with pytest.raises(ProviderError, match="only 1 node"):
        existing(kubeconfig, "lab").start()


def test_existing_uses_explicit_context_and_stop_deletes_nothing(
    kubeconfig: Path, kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    kube.node_lists = [[node("cp", **{CONTROL_PLANE: ""}), opted("w1"), node("w2"), opted("w3")]]
    provider = existing(None, "lab")
    with provider as cluster:
        assert cluster.workers == ["w1", "w3"]
        assert (cluster.created, cluster.provider, cluster.context) == (False, "existing", "lab")
        assert cluster.job_executor == "in-cluster"
        assert kube.clients == [(str(kubeconfig), "lab")]  # never the current-context "prod"
    provider.stop()  # twice is harmless
    assert kube.calls == ["list_node"]  # no delete_*, patch_*, ... after stop
    assert kube.closed == 1


# -- kind: config rendering --------------------------------------------------------------
def zones(config: dict[str, Any]) -> list[str]:
    return [n["labels"][ZONE] for n in config["nodes"] if n["role"] == "worker"]


def test_kind_config_three_zones() -> None:
    config = render_kind_config(3, "kindest/node:vX")
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker", "worker"]
    assert zones(config) == ["zone-a", "zone-b", "zone-c"]
    assert {n["image"] for n in config["nodes"]} == {"kindest/node:vX"}


def test_kind_config_cycles_zones_for_more_workers() -> None:
    assert zones(render_kind_config(5, "img")) == ["zone-a", "zone-b", "zone-c", "zone-a", "zone-b"]
    assert zones(render_kind_config(1, "img")) == ["zone-a"]


def test_kind_manifest_leaves_the_image_to_versions_yaml() -> None:
    template = load_kind_template()
    assert all("image" not in n for n in template["nodes"])
    render_kind_config(4, "img", template)
    assert template == load_kind_template()  # rendering does not mutate its input


@pytest.mark.parametrize(
    ("workers", "template"),
    [(0, None), (2, {"nodes": [{"role": "control-plane"}]}), (2, {"nodes": [{"role": "worker"}]})],
)
def test_kind_config_rejects(workers: int, template: dict[str, Any] | None) -> None:
    with pytest.raises(ValueError):
        render_kind_config(workers, "img", template)


# -- kind: waiting for nodes ----------------------------------------------------------------
def test_wait_nodes_ready_retries_errors_and_not_ready() -> None:
    answers: list[Any] = [
        ConnectionError("refused"),
        [node("cp"), node("w1", ready=False)],
        [node("cp"), node("w1")],
    ]

    def list_nodes() -> list[Any]:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    got = wait_nodes_ready(list_nodes, expected=2, timeout=60, interval=1, sleep=lambda _: None)
    assert [n["metadata"]["name"] for n in got] == ["cp", "w1"] and answers == []


def test_wait_nodes_ready_timeout_says_what_it_saw() -> None:
    nodes = [node("cp"), node("w1", ready=False)]
    with pytest.raises(
        ProviderError, match=r"wanted 3 Ready.*saw 2 node\(s\): cp=Ready, w1=NotReady"
    ):
        wait_nodes_ready(lambda: nodes, expected=3, timeout=0, interval=0)
    with pytest.raises(ProviderError, match="listing nodes failed: refused"):
        wait_nodes_ready(_refuse, expected=1, timeout=0, interval=0)


def _refuse() -> list[Any]:
    raise ConnectionError("refused")


def test_worker_names_skip_control_plane() -> None:
    nodes = [node("k-worker2"), node("k-control-plane", **{CONTROL_PLANE: ""}), node("k-worker")]
    assert worker_names(nodes) == ["k-worker", "k-worker2"]


# -- kind: provider, with a fake kind and docker ------------------------------------------
FAKE_KIND = """
import json, os, pathlib, sys
state = pathlib.Path(os.environ["FAKE_KIND_STATE"])
args = sys.argv[1:]
with (state / "calls.jsonl").open("a") as f:
    f.write(json.dumps(args) + "\\n")
clusters = state / "clusters"
names = clusters.read_text().split() if clusters.exists() else []
opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
if args[:2] == ["get", "clusters"]:
    print("\\n".join(names))
elif args[:2] == ["create", "cluster"]:
    if os.environ.get("FAKE_KIND_FAIL_CREATE"):
        print(" ✓ Preparing nodes on lab-worker", file=sys.stderr)
        print("ERROR: failed to create cluster: could not find a log line", file=sys.stderr)
        sys.exit(1)
    ctx = "kind-" + opts["name"]
    pathlib.Path(opts["kubeconfig"]).write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": ctx,
        "clusters": [{"name": ctx, "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": ctx, "user": {"token": "t"}}],
        "contexts": [{"name": ctx, "context": {"cluster": ctx, "user": ctx}}],
    }))
    clusters.write_text("\\n".join([*names, opts["name"]]))
    print(" ✓ Joining worker nodes lab-worker lab-worker2 lab-worker3", file=sys.stderr)
elif args[:2] == ["delete", "cluster"]:
    clusters.write_text("\\n".join(n for n in names if n != opts["name"]))
    print('Deleted nodes: ["lab-worker" "lab-worker2" "lab-worker3"]', file=sys.stderr)
"""

KIND_NODES = [
    node("lab-control-plane", **{CONTROL_PLANE: ""}),
    node("lab-worker", **{ZONE: "zone-a"}),
    node("lab-worker2", **{ZONE: "zone-b"}),
    node("lab-worker3", **{ZONE: "zone-c"}),
]


@dataclass
class KindRig:
    workdir: Path
    cwd: Path
    toolchain: FakeToolchain
    state: Path

    def calls(self) -> list[list[str]]:
        log = self.state / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def provider(self, **kw: Any) -> KindProvider:
        p = KindProvider(self.toolchain, self.workdir, "lab", **kw)  # type: ignore[arg-type]
        p.poll_interval = 0
        return p


@pytest.fixture
def rig(tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, kube: FakeKube) -> KindRig:
    state, cwd = tmp_path / "kind-state", tmp_path / "cwd"
    state.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # nothing may be written in the current directory
    monkeypatch.setenv("FAKE_KIND_STATE", str(state))
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(state / "docker.log"))
    monkeypatch.delenv("FAKE_KIND_FAIL_CREATE", raising=False)
    script(bin_dir, "docker", 'echo "$@" >> "$FAKE_DOCKER_LOG"; [ "$1" = info ] && echo 27.1.1')
    tools = {
        "kind": script(bin_dir, "kind", FAKE_KIND, sys.executable),
        "kubectl": script(bin_dir, "kubectl", "exit 0"),
    }
    kube.node_lists = [[KIND_NODES[0], node("lab-worker", ready=False)], KIND_NODES]
    return KindRig(tmp_path / "work", cwd, FakeToolchain(tools), state)


def test_kind_start_creates_multi_zone_cluster_in_workdir(rig: KindRig, kube: FakeKube) -> None:
    provider = rig.provider()
    cluster = provider.start()
    create = next(c for c in rig.calls() if c[:2] == ["create", "cluster"])
    kubeconfig = rig.workdir / "kubeconfig"
    assert "--name=lab" in create and f"--kubeconfig={kubeconfig}" in create
    written = yaml.safe_load(Path(create[create.index("--config") + 1]).read_text())
    audit_dir = (rig.workdir / "audit").resolve()
    assert written == add_audit_log(
        render_kind_config(3, load_versions().kind_node_image),
        audit_dir,
        manifest_path("audit-policy.yaml").resolve(),
    )
    assert cluster.audit_log == rig.workdir / "audit" / "audit.log"
    assert cluster.workers == ["lab-worker", "lab-worker2", "lab-worker3"]
    assert (cluster.provider, cluster.kubeconfig, cluster.context) == (
        "kind",
        kubeconfig,
        "kind-lab",
    )
    assert cluster.created and cluster.job_executor == "in-cluster"
    assert kube.clients == [(str(kubeconfig), "kind-lab")] and kube.calls == ["list_node"] * 2
    assert cluster.info["descheduler_image_loaded"] is False  # docker has no such image
    assert cluster.info["reused"] is False
    assert not any(c[0] == "load" for c in rig.calls())
    assert list(rig.cwd.iterdir()) == []
    provider.stop()
    assert rig.calls()[-1] == ["delete", "cluster", "--name=lab", f"--kubeconfig={kubeconfig}"]
    assert kube.closed == 1


def test_kind_loads_descheduler_image_when_docker_has_it(rig: KindRig, bin_dir: Path) -> None:
    script(bin_dir, "docker", 'case "$1" in info) echo 27.1.1;; image) exit 0;; *) exit 1;; esac')
    image = load_versions().descheduler_image
    cluster = rig.provider().start()
    assert ["load", "docker-image", "--name", "lab", image] in rig.calls()
    assert cluster.info["descheduler_image_loaded"] is True


def test_kind_keep_leaves_cluster_and_says_how_to_reach_it(rig: KindRig) -> None:
    provider = rig.provider(keep=True)
    with provider:
        pass
    assert not any(c[0] == "delete" for c in rig.calls())
    hint = provider.resume_hint()
    assert f"KUBECONFIG={rig.workdir / 'kubeconfig'} kubectl get nodes" in hint
    assert f"{rig.toolchain.paths['kind']} delete cluster --name lab" in hint


def test_kind_needs_docker(rig: KindRig, bin_dir: Path) -> None:
    (bin_dir / "docker").unlink()
    with pytest.raises(ProviderError, match="--desched-provider=embedded"), rig.provider():
        pass
    assert rig.calls() == [] and rig.toolchain.asked == []


def test_kind_failed_start_deletes_what_it_created(rig: KindRig, kube: FakeKube) -> None:
    kube.node_lists = [[node("lab-control-plane", ready=False)]]
    provider = rig.provider()
    provider.ready_timeout = 0
    with pytest.raises(ProviderError, match="lab-control-plane=NotReady"), provider:
        pass
    assert rig.calls()[-1][:2] == ["delete", "cluster"]


def test_kind_create_failure_is_a_provider_error(
    rig: KindRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KIND_FAIL_CREATE", "1")
    with pytest.raises(ProviderError, match=r"kind create cluster --name=lab .* exited 1") as err:
        rig.provider().start()
    assert "could not find a log line" in str(err.value)  # kind's reason, captured


def test_kind_output_stays_off_the_terminal(rig: KindRig, capfd: pytest.CaptureFixture) -> None:
    """kind names every node; a --desched-redact run must not show them on the terminal."""
    with rig.provider() as cluster:
        assert cluster.workers
    out, err = capfd.readouterr()
    assert not [w for w in cluster.workers if w in out + err], (out, err)


def test_kind_cluster_never_downloads_binaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    kc = KindCli("lab", tmp_path, tmp_path / "no-kind", tmp_path / "no-kubectl")
    with pytest.raises(ProviderError, match=r"kind binary .*no-kind is missing"):
        kc.ensure_kind()
    with pytest.raises(ProviderError, match=r"kubectl binary .*no-kubectl is missing"):
        kc.ensure_kubectl()
    assert not (tmp_path / ".pytest-kind").exists()


def test_kind_provider_runs_without_pytest_kind(
    rig: KindRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest-kind-ng's KindCluster cannot serve (docs/providers.md#why-not-pytest-kind): the
    provider drives kind itself. Was: a subclass of it, so without the package no kind run."""
    monkeypatch.setitem(sys.modules, "pytest_kind", None)  # `import pytest_kind` fails
    with rig.provider() as cluster:
        assert cluster.workers
    calls = rig.calls()
    assert ["create", "cluster"] in [c[:2] for c in calls]
    assert ["delete", "cluster"] in [c[:2] for c in calls]
    assert KindCli.__mro__ == (KindCli, object)


# -- kind: a cluster the user already has (--desched-kind-cluster) -------------------------
def test_kind_user_cluster_is_used_never_created_nor_deleted(rig: KindRig, kube: FakeKube) -> None:
    (rig.state / "clusters").write_text("mine")
    provider = rig.provider(user_cluster="mine")
    cluster = provider.start()
    calls = rig.calls()
    assert not any(c[:2] in (["create", "cluster"], ["delete", "cluster"]) for c in calls), calls
    kubeconfig = rig.workdir / "kubeconfig"
    assert ["export", "kubeconfig", "--name=mine", f"--kubeconfig={kubeconfig}"] in calls
    assert not (rig.workdir / "kind-config.yaml").exists()  # nothing rendered for it
    assert (cluster.name, cluster.context, cluster.created) == ("mine", "kind-mine", False)
    assert kube.clients[0] == (str(kubeconfig), "kind-mine")
    assert cluster.workers == ["lab-worker", "lab-worker2", "lab-worker3"]
    assert cluster.audit_log is None  # the user's API server writes no audit log for us
    provider.stop()
    assert not any(c[:2] == ["delete", "cluster"] for c in rig.calls())
    assert "delete" not in provider.resume_hint()


def test_kind_user_cluster_missing_is_refused_before_any_change(rig: KindRig) -> None:
    (rig.state / "clusters").write_text("other")
    with pytest.raises(ProviderError, match=r"--desched-kind-cluster mine: no such .*other"):
        rig.provider(user_cluster="mine").start()
    assert [c[:2] for c in rig.calls()] == [["get", "clusters"]]


def test_kind_user_cluster_needs_two_workers(rig: KindRig, kube: FakeKube) -> None:
    (rig.state / "clusters").write_text("mine")
    small = [KIND_NODES[0], KIND_NODES[1]]
    kube.node_lists = [small, small]
    with pytest.raises(ProviderError, match="has 1 worker node"):
        rig.provider(user_cluster="mine").start()


def test_kind_cluster_option_implies_kind_and_reaches_the_provider(tmp_path: Path) -> None:
    from pytest_desched.config import build_config
    from pytest_desched.errors import ConfigError
    from pytest_desched.providers.kind import from_config

    config = build_config({"--desched-kind-cluster": "mine"}, run_dir=tmp_path)
    assert (config.provider, config.kind_cluster) == ("kind", "mine")
    provider = from_config(config, FakeToolchain({}))  # type: ignore[arg-type]
    assert (provider.cluster_name, provider.user_cluster) == ("mine", "mine")
    with pytest.raises(ConfigError, match="--desched-kind-cluster mine needs the kind provider"):
        build_config(
            {"--desched-kind-cluster": "mine", "--desched-provider": "embedded"}, run_dir=tmp_path
        )


def test_existing_refuses_a_server_url_that_does_not_parse(
    kubeconfig: Path, kube: FakeKube
) -> None:
    """Issue 54: the kubeconfig's server URL is the user's input: exit 2 naming the context,
    before any request (was urllib3's LocationParseError at the first list, exit 3)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    for c in doc["clusters"]:
        c["cluster"]["server"] = "https://exa mple:6443"
    kubeconfig.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"context 'lab'.*server URL 'https://exa mple:6443'"):
        existing(kubeconfig, "lab").start()
