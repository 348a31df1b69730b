"""--desched-kubernetes: served versions only, the pins follow, snapshots pick their minor."""

from __future__ import annotations

import pytest

from pytest_desched.config import build_config
from pytest_desched.errors import ConfigError
from pytest_desched.tools.groups import build_groups
from pytest_desched.tools.kube_versions import (
    at_kubernetes,
    choose_kubernetes,
    for_snapshot,
    nearest_served,
    served_versions,
)
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import load_versions

FLAG = "--desched-kubernetes / DESCHED_KUBERNETES"


def test_the_pin_is_served_and_the_default():
    v = load_versions()
    served, pre = served_versions(v)
    assert v.kubernetes.version in served
    assert "v1.37.2" in served and "v1.38.0-beta.0" in pre
    choice = choose_kubernetes(v, None, FLAG)
    assert (choice.version, choice.pinned, choice.source) == (v.kubernetes.version, True, "pin")


@pytest.mark.parametrize("given", ["v1.37.2", "1.37.2", " v1.37.2 "])
def test_a_served_release_is_taken_in_either_spelling(given):
    choice = choose_kubernetes(load_versions(), given, FLAG)
    assert choice.version == "v1.37.2" and not choice.pinned and not choice.prerelease
    assert choice.minor == "1.37"
    assert choice.line().startswith("Kubernetes v1.37.2 (")


@pytest.mark.parametrize("given", ["v1.33.0", "v1.37.3", "v1.38.0", "v2.0.0"])
def test_an_unserved_version_is_refused_naming_the_served_ones(given):
    with pytest.raises(ConfigError) as err:
        choose_kubernetes(load_versions(), given, FLAG)
    msg = str(err.value)
    assert given in msg and "served: " in msg and "v1.37.2" in msg and "v1.35.4" in msg
    assert "v1.38.0-beta.0" in msg  # the pre-release is named, to be asked for exactly


@pytest.mark.parametrize("given", ["latest", "v1.37", "1.37.x", "v1.37.2; rm -rf /"])
def test_a_malformed_version_is_refused(given):
    with pytest.raises(ConfigError, match="not a Kubernetes version"):
        choose_kubernetes(load_versions(), given, FLAG)


def test_a_prerelease_only_when_named_exactly_and_it_says_so():
    choice = choose_kubernetes(load_versions(), "v1.38.0-beta.0", FLAG)
    assert choice.prerelease and "PRE-RELEASE" in choice.line()
    with pytest.raises(ConfigError):
        choose_kubernetes(load_versions(), "v1.38.0-beta.1", FLAG)


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("v1.35.1", "v1.35.4"),
        ("v1.34.3", "v1.34.3"),
        ("v1.34.9", "v1.34.4"),
        ("v1.36.2", "v1.36.3"),  # a tie (1.36.1 and 1.36.3): the newer
        ("v1.37.0", "v1.37.2"),
        ("v1.33.5", None),
        ("v1.38.0", None),  # the pre-release is never picked for a snapshot
        ("garbage", None),
        ("", None),
    ],
)
def test_a_snapshot_runs_at_the_nearest_served_patch_of_its_minor(server, expected):
    assert nearest_served(load_versions(), server) == expected


def test_the_pins_follow_the_chosen_version():
    v = at_kubernetes(load_versions(), "v1.37.2")
    assert v.kubernetes.version == "v1.37.2"
    assert v.kubernetes.extra["staging_version"] == "v0.37.2"
    assert v.kind_node_image.endswith(":v1.37.2")
    assert v.descheduler == load_versions().descheduler  # every other tool stays pinned
    group = build_groups(v)["kubernetes"]
    assert group.version == "v1.37.2" and "gitVersion=v1.37.2" in " ".join(group.ldflags)
    assert "gitMinor=37" in " ".join(group.ldflags)
    assert (
        at_kubernetes(v, "v1.38.0-beta.0").kubernetes.extra["staging_version"] == "v0.38.0-beta.0"
    )


def test_the_toolchain_builds_the_chosen_version_into_its_own_cache_folder(tmp_path):
    pinned = Toolchain(cache_dir=tmp_path, use_path=False)
    other = Toolchain(cache_dir=tmp_path, use_path=False, kubernetes_version="v1.37.2")
    assert other.wanted_version("kube-apiserver") == "v1.37.2"
    assert other.wanted_version("descheduler") == pinned.wanted_version("descheduler")
    a, b = pinned.bin_dir(pinned.groups["kubernetes"]), other.bin_dir(other.groups["kubernetes"])
    assert a != b and b.name == "v1.37.2"


def test_config_refuses_an_unserved_version_before_anything_is_built(monkeypatch):
    monkeypatch.setenv("DESCHED_KUBERNETES", "v1.31.0")
    with pytest.raises(ConfigError, match=r"v1\.31\.0: not served here"):
        build_config({"--desched-provider": "embedded"})


def test_config_takes_the_env_and_the_explicit_value_wins(monkeypatch):
    monkeypatch.setenv("DESCHED_KUBERNETES", "v1.35.4")
    assert build_config({"--desched-provider": "embedded"}).kubernetes == "v1.35.4"
    c = build_config({"--desched-provider": "embedded", "--desched-kubernetes": "1.37.2"})
    assert c.kube_choice().version == "v1.37.2"


def test_an_existing_cluster_cannot_be_given_a_version():
    with pytest.raises(ConfigError, match="existing provider's cluster is not built"):
        build_config({"--desched-provider": "existing", "--desched-kubernetes": "v1.37.2"})


def test_a_named_kind_cluster_keeps_its_own_version():
    with pytest.raises(ConfigError, match="give only one"):
        build_config({"--desched-kind-cluster": "mine", "--desched-kubernetes": "v1.37.2"})


def test_a_replay_runs_at_its_snapshots_minor_by_default():
    v = load_versions()
    same = for_snapshot(v, "v1.37.2", None, FLAG)
    assert (same.version, same.source) == ("v1.37.2", "the snapshot's serverVersion")
    near = for_snapshot(v, "v1.35.1", None, FLAG)
    assert near.version == "v1.35.4" and "v1.35.1" in near.source
    assert for_snapshot(v, None, None, FLAG).pinned


def test_a_replay_override_names_the_difference_and_an_unserved_minor_is_refused():
    v = load_versions()
    over = for_snapshot(v, "v1.35.4", "v1.37.2", FLAG)
    assert over.version == "v1.37.2" and "ran v1.35.4" in over.source
    with pytest.raises(ConfigError, match=r"ran Kubernetes v1\.31\.2.*name one with"):
        for_snapshot(v, "v1.31.2", None, FLAG)
    assert for_snapshot(v, "v1.31.2", "v1.36.3", FLAG).version == "v1.36.3"


def test_a_canary_track_runs_at_its_own_kubernetes(tmp_path):
    from pytest_desched.canary.engine import track_configs

    base = build_config(
        {
            "--desched-provider": "embedded",
            "--desched-kubernetes": "v1.36.3",
            "--desched-candidate-kubernetes": "v1.37.2",
        },
        run_dir=tmp_path,
    )
    b, c = track_configs(base, "pinned", None)
    assert (b.kubernetes, c.kubernetes) == ("v1.36.3", "v1.37.2")
    assert b.candidate_kubernetes is None and c.candidate_kubernetes is None


def test_a_track_kubernetes_is_checked_like_the_runs(tmp_path):
    with pytest.raises(ConfigError, match=r"--desched-baseline-kubernetes.*v1\.30\.0: not served"):
        build_config(
            {"--desched-provider": "embedded", "--desched-baseline-kubernetes": "v1.30.0"},
            run_dir=tmp_path,
        )
