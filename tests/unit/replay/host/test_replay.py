"""`replay_on_host` refuses before any write: a context not opted in (the existing provider's
rule), a host descheduler that could act on the replay's pods, a snapshot that clashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched.errors import ConfigError, ProviderError
from pytest_desched.providers.existing import ALLOW_OPTION
from pytest_desched.replay.capture.snapshot import find_descheduler
from pytest_desched.replay.gen.generator import generate
from pytest_desched.replay.gen.incidents import label_move
from pytest_desched.replay.host import replay as host
from pytest_desched.replay.host.plan import HostState
from tests.unit.replay.stand_in_session import stand_in_sessions

POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "p",
            "pluginConfig": [{"name": "DefaultEvictor", "args": {}}, {"name": "RemoveDuplicates"}],
            "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}},
        }
    ],
}


def _kubeconfig(tmp_path: Path) -> Path:
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "host", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "host",
            }
        )
    )
    return kc


def test_a_context_not_opted_in_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match=ALLOW_OPTION) as exc:
        host.replay_on_host(tmp_path / "missing.yaml", "host", allow=False)
    assert "--host" in str(exc.value)


def test_the_current_context_is_never_used_implicitly(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="current-context 'host' is never used"):
        host.replay_on_host(
            tmp_path / "missing.yaml", None, allow=True, kubeconfig=_kubeconfig(tmp_path)
        )


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def request(self, api: Any, method: str, path: str, *a: Any, **k: Any) -> Any:
        self.calls.append((method, path))
        raise AssertionError(f"no request expected, got {method} {path}")


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return generate(seed=4, nodes=6, pods=40).write(tmp_path / "snap.yaml")


def _host_with(monkeypatch: pytest.MonkeyPatch, state: HostState, desched: bool) -> Recorder:
    rec = Recorder()
    monkeypatch.setattr(host.kubeapi, "request", rec.request)
    wl = {
        "kind": "CronJob",
        "metadata": {"namespace": "kube-system", "name": "descheduler"},
        "spec": {
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "d",
                                    "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
                                    "args": ["--policy-config-file=/p/policy.yaml"],
                                    "volumeMounts": [{"name": "v", "mountPath": "/p"}],
                                }
                            ],
                            "volumes": [{"name": "v", "configMap": {"name": "descheduler"}}],
                        }
                    }
                }
            }
        },
    }
    entries = find_descheduler([wl]) if desched else []
    policies = {("kube-system", "descheduler"): yaml.safe_dump(POLICY)} if desched else {}
    workloads = {("kube-system", "descheduler"): wl} if desched else {}
    monkeypatch.setattr(host, "read_host", lambda api: (state, entries, policies, workloads))
    return rec


def test_a_host_descheduler_that_could_evict_the_replay_s_pods_refuses_it(
    tmp_path: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _host_with(monkeypatch, HostState(namespaces={"kube-system"}), desched=True)
    with pytest.raises(ConfigError, match="never two executors") as exc:
        host.replay_on_host(
            snapshot,
            "host",
            allow=True,
            kubeconfig=_kubeconfig(tmp_path),
            namespace_prefix="r-",
            policy=POLICY,
            toolchain=object(),  # type: ignore[arg-type]
            run_id="run1",
        )
    assert "kube-system/descheduler" in str(exc.value) and "r-team-a" in str(exc.value)
    assert rec.calls == []


def test_a_namespace_clash_refuses_the_replay_before_any_write(
    tmp_path: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _host_with(monkeypatch, HostState(namespaces={"kube-system", "default"}), desched=False)
    with pytest.raises(ConfigError, match="--namespace-prefix"):
        host.replay_on_host(
            snapshot,
            "host",
            allow=True,
            kubeconfig=_kubeconfig(tmp_path),
            policy=POLICY,
            toolchain=object(),  # type: ignore[arg-type]
        )
    assert rec.calls == []


def test_the_host_s_own_objects_are_compared_by_uid() -> None:
    before = {"namespaces": {"kube-system": "u1", "app": "u2"}, "nodes": {"w1": "n1"}}
    assert host.untouched(before, before) == []
    after = {"namespaces": {"kube-system": "u1", "app": "u9"}, "nodes": {}}
    assert host.untouched(before, after) == [
        "namespaces app: replaced (new UID)",
        "nodes w1: gone",
    ]


def test_a_host_object_already_being_deleted_is_not_the_host_s_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A namespace Terminating when the replay starts goes on its own (on kind: an earlier
    test's teardown): its going is no change the replay made."""

    def ns(name: str, uid: str, deleting: bool = False, run: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "uid": uid, "labels": {}}
        if deleting:
            meta["deletionTimestamp"] = "2026-12-07T05:00:00Z"
        if run:
            meta["labels"][host.RUN_LABEL] = "run1"
        return {"metadata": meta}

    items = {
        "/api/v1/namespaces": [
            ns("app", "u1"),
            ns("going", "u2", deleting=True),
            ns("r", "u3", run=True),
        ],
        "/api/v1/nodes": [ns("w1", "n1"), ns("w2", "n2", deleting=True)],
    }
    monkeypatch.setattr(host.kubeapi, "list_all", lambda api, path: items[path])
    assert host.fingerprint(object()) == {"namespaces": {"app": "u1"}, "nodes": {"w1": "n1"}}


def test_the_cli_s_host_flags_are_checked_first(
    tmp_path: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from pytest_desched.commands.parser import parser

    def parse(*argv: str) -> argparse.Namespace:
        return parser().parse_args(list(argv))

    monkeypatch.chdir(tmp_path)  # the run folder a configuration claims
    args = parse("replay", str(snapshot), "--namespace-prefix", "r-")
    with pytest.raises(ConfigError, match="add --host CONTEXT"):
        args.func(args)
    args = parse("replay", "--from-log", str(snapshot), "--host", "h")
    with pytest.raises(ConfigError, match="replay a snapshot file"):
        args.func(args)
    args = parse("replay", str(snapshot), "--host", "host", "--repeat", "2")
    with pytest.raises(ConfigError, match="--repeat"):
        args.func(args)
    kc = _kubeconfig(tmp_path)
    args = parse("replay", str(snapshot), "--host", "host", "--existing-kubeconfig", str(kc))
    with pytest.raises(ProviderError, match=ALLOW_OPTION):
        args.func(args)


class _Played(Exception):
    """Raised where the host replay's rounds would start: the policy handed over is enough."""


VALUES_POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "from-values",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {}},
                {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 86400}},
            ],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
        }
    ],
}


def _values_file(tmp_path: Path, policy: dict[str, Any] | None) -> Path:
    f = tmp_path / "prod.yaml"
    f.write_text(yaml.safe_dump({"deschedulerPolicy": policy} if policy else {"suspend": True}))
    return f


def _play_on_host(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    snapshot: Path,
    given: Any,
    values: dict[str, Any] | None,
) -> tuple[Any, list[str], list[bool], Recorder]:
    """The host replay up to its rounds, a stand-in session announcing `values`' policy (as
    a real one renders and lints it); (the policy handed over, what was said, sessions
    entered, the host requests made)."""
    from pytest_desched.config import build_config
    from pytest_desched.descheduler.policy import Policy

    rec = _host_with(monkeypatch, HostState(namespaces={"kube-system"}), desched=False)
    announced = (
        Policy.from_dict(values, source="prod.yaml (deschedulerPolicy, as helm renders it)")
        if values
        else None
    )
    played: list[Any] = []

    def play(self: Any, session: Any, inp: Any) -> Any:
        played.append(inp.policy)
        raise _Played

    sessions = stand_in_sessions(monkeypatch, announced)
    monkeypatch.setattr(host.HostReplay, "play", play)
    monkeypatch.setattr(host, "pinned_kwok_stages", lambda tc: "")
    monkeypatch.setattr(host, "fingerprint", lambda api: {})
    monkeypatch.setattr(host.scratch, "make", lambda *a, **kw: tmp_path / "work")
    config = build_config(
        {
            "--desched-provider": "existing",
            "--desched-values": [str(_values_file(tmp_path, values))],
            "--desched-artifacts": str(tmp_path / "artifacts"),
        }
    )
    said: list[str] = []
    with pytest.raises(_Played):
        host.replay_on_host(
            snapshot,
            "host",
            allow=True,
            kubeconfig=_kubeconfig(tmp_path),
            namespace_prefix="r-",
            kwok_image="kwok:test",
            policy=given,
            config=config,
            report=said.append,
            toolchain=object(),  # type: ignore[arg-type]
            run_id="run1",
        )
    (ran,) = played
    # the values are rendered and linted once: the host's session is handed those inputs
    assert [kw.get("inputs") for kw in sessions.made] == [None, sessions.checked], sessions.made
    return ran, said, sessions.entered, rec


@pytest.mark.parametrize("given", [None, POLICY])
def test_the_values_policy_is_the_one_the_host_replay_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: Any
) -> None:
    """`--values` with a deschedulerPolicy runs in place of the snapshot's own, narrowed to
    the replay like any; an explicit policy (--policy) stands. The line says which."""
    incident = label_move().snapshot.write(tmp_path / "incident.yaml")  # with its own policy
    ran, said, entered, rec = _play_on_host(tmp_path, monkeypatch, incident, given, VALUES_POLICY)
    plugins = str(ran.to_dict()["profiles"][0]["plugins"])
    if given is None:
        assert "PodLifeTime" in plugins and ran.source.startswith("prod.yaml")
        assert (
            "host replay: the policy from --values (prod.yaml (deschedulerPolicy, as helm renders it))"
            in said
        )
    else:
        assert "RemoveDuplicates" in plugins and "PodLifeTime" not in plugins
        assert any(s.startswith("host replay: the policy from --policy") for s in said), said
    assert "RemovePodsViolatingNodeAffinity" not in plugins  # never the snapshot's own
    # narrowed like any policy the host replay runs: the replay's namespaces only
    assert "r-" in str(ran.to_dict()) and entered == [True] and rec.calls == []


def test_a_snapshot_without_a_policy_runs_the_values_one(
    tmp_path: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot holds no policy (no descheduler when it was taken): --values' runs."""
    from pytest_desched.replay.capture.snapshot import Snapshot

    assert not Snapshot.load(snapshot).policy
    ran, said, _, rec = _play_on_host(tmp_path, monkeypatch, snapshot, None, VALUES_POLICY)
    assert "PodLifeTime" in str(ran.to_dict()["profiles"][0]["plugins"])
    assert ran.source.startswith("prod.yaml") and rec.calls == []
    assert any(s.startswith("host replay: the policy from --values (prod.yaml") for s in said)


def test_values_without_a_policy_and_a_snapshot_without_one_are_refused_first(
    tmp_path: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="holds no descheduler policy"):
        _play_on_host(tmp_path, monkeypatch, snapshot, None, None)


def test_the_values_policy_is_validated_as_any_before_the_host_is_read(
    tmp_path: Path, snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A values policy the descheduler would refuse stops the replay at the input checks."""
    from pytest_desched.errors import PolicyError

    bad = {
        **VALUES_POLICY,
        "profiles": [{"name": "p", "plugins": {"balance": {"enabled": ["Nope"]}}}],
    }
    read: list[bool] = []
    monkeypatch.setattr(host, "read_host", lambda api: read.append(True))
    with pytest.raises(PolicyError, match="Nope"):
        _play_on_host(tmp_path, monkeypatch, snapshot, None, bad)
    assert read == []
