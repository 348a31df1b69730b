"""The descheduler version a Release runs: its image, its helm flags, where it may run at all.

`Cluster` is the real dataclass (its `job_executor` rule is part of what is tested); only its
helm/kubectl are doubles that record calls, so "refused before any change" means no helm
command was run.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_desched.descheduler.chart import Release
from pytest_desched.descheduler.chart_source import ChartRef
from pytest_desched.descheduler.policy import load_default
from pytest_desched.errors import ConfigError
from pytest_desched.experiments import ExperimentContext
from pytest_desched.providers.base import Cluster
from pytest_desched.providers.embedded.kubelet import StandInKubelet
from pytest_desched.tools.versions import load_versions

VERSIONS = load_versions()
PIN = VERSIONS.descheduler.version
REPO = VERSIONS.descheduler_image.rsplit(":", 1)[0]
COMMIT = "7d2b28bf2"


class RecordingCluster(Cluster):
    """A real Cluster whose kube tools only record what would have run."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.calls: list[tuple[str, ...]] = []

    def helm(self, *args: str, **kw: Any) -> Any:
        self.calls.append(("helm", *args))
        raise AssertionError(f"helm {args} ran")

    def kubectl(self, *args: str, **kw: Any) -> Any:
        self.calls.append(("kubectl", *args))
        raise AssertionError(f"kubectl {args} ran")


def _cluster(provider: str) -> RecordingCluster:
    return RecordingCluster(
        name=f"{provider}-test",
        provider=provider,
        kubeconfig=Path("/nonexistent/kubeconfig"),
        toolchain=None,  # type: ignore[arg-type]
        workers=["w-1", "w-2"],
        job_runner=StandInKubelet() if provider == "embedded" else None,
        created=provider != "existing",
    )


def _release(tmp_path: Path, provider: str = "embedded", version: str = "") -> Release:
    chart = ChartRef(tmp_path / "chart.tgz", "module", "0.36.0", "0.36.0", "0" * 64)
    return Release(
        _cluster(provider),
        chart,
        VERSIONS,
        tmp_path / "release",
        report=lambda _: None,
        descheduler_version=version,
    )


def _pairs(flags: list[str]) -> list[tuple[str, str]]:
    return list(zip(flags[::2], flags[1::2], strict=True))


# -- image and flags -------------------------------------------------------------------------
def test_default_release_runs_the_pinned_image_without_a_tag_flag(tmp_path: Path) -> None:
    rel = _release(tmp_path)
    assert rel.descheduler_version == PIN
    assert rel.pinned
    assert rel.image == VERSIONS.descheduler_image
    flags = rel._flags([tmp_path / "values.yaml"], dry_run=True)
    assert not [f for f in flags if "image.tag" in f]
    assert "--set-string" not in flags
    assert _pairs(flags) == [
        ("--namespace", "kube-system"),
        ("-f", str(tmp_path / "values.yaml")),
        ("--set", "cmdOptions.v=4"),  # the lab's log options, set over any values by helm
        ("--set", "cmdOptions.logging-format=json"),
        ("--set", "suspend=true"),
        ("--set", "cmdOptions.dry-run=true"),
    ]


def test_the_pinned_version_given_explicitly_is_still_pinned(tmp_path: Path) -> None:
    rel = _release(tmp_path, version=PIN)
    assert rel.pinned
    assert rel.image == VERSIONS.descheduler_image
    assert "--set-string" not in rel._flags([tmp_path / "v.yaml"], dry_run=False)


def test_another_tag_runs_that_tags_image_and_says_so_to_helm(tmp_path: Path) -> None:
    rel = _release(tmp_path, version="v0.37.0")
    assert not rel.pinned
    assert rel.image == f"{REPO}:v0.37.0"
    assert rel.image != VERSIONS.descheduler_image
    for dry_run in (True, False):
        flags = rel._flags([tmp_path / "values.yaml"], dry_run=dry_run)
        pairs = _pairs(flags)
        assert ("--set-string", "image.tag=v0.37.0") in pairs
        assert ("--set", "suspend=true") in pairs  # every step stays suspended
        assert ("--set", f"cmdOptions.dry-run={'true' if dry_run else 'false'}") in pairs


# -- where a version may run -----------------------------------------------------------------
@pytest.mark.parametrize("provider", ["kind", "existing"])
def test_a_commit_is_refused_where_kubelets_run_images(tmp_path: Path, provider: str) -> None:
    rel = _release(tmp_path, provider=provider, version=COMMIT)
    assert rel.cluster.job_executor == "in-cluster"
    with pytest.raises(ConfigError) as ei:
        rel.check_version_runs_here()
    msg = str(ei.value)
    assert f"descheduler version {COMMIT!r} has no published image" in msg
    assert f"the {provider} provider runs round pods from images" in msg
    assert "use a released tag (vX.Y.Z" in msg and f"{REPO}:vX.Y.Z" in msg  # the fix...
    assert "or the embedded provider" in msg  # ...or the other one


@pytest.mark.parametrize("provider", ["kind", "existing"])
def test_install_refuses_a_commit_before_any_helm_command(tmp_path: Path, provider: str) -> None:
    rel = _release(tmp_path, provider=provider, version=COMMIT)
    with pytest.raises(ConfigError, match=COMMIT):
        rel.install_first()
    assert rel.cluster.calls == []  # type: ignore[attr-defined]
    assert not rel.installed
    assert not rel.workdir.exists()


def test_a_commit_runs_on_the_embedded_cluster(tmp_path: Path) -> None:
    rel = _release(tmp_path, provider="embedded", version=COMMIT)
    assert rel.cluster.job_executor == "embedded"
    rel.check_version_runs_here()  # the stand-in kubelet runs the binary built from source
    assert rel.cluster.calls == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", ["v0.37.0", "v0.37.0-rc.1", PIN])
@pytest.mark.parametrize("provider", ["kind", "existing", "embedded"])
def test_released_tags_run_everywhere(tmp_path: Path, provider: str, version: str) -> None:
    _release(tmp_path, provider=provider, version=version).check_version_runs_here()


@pytest.mark.parametrize("version", ["0.37.0", "v0.37", "main", "v0.37.0 ", "release-1.36"])
def test_anything_but_a_full_tag_is_refused_in_cluster(tmp_path: Path, version: str) -> None:
    with pytest.raises(ConfigError, match="has no published image"):
        _release(tmp_path, provider="kind", version=version).check_version_runs_here()


# -- every version-keyed rule follows the release ---------------------------------------------
def test_experiment_context_version_follows_the_release(tmp_path: Path) -> None:
    """Regression (fixed): `Release.descheduler_version` is documented as the one value the binary, the
    image and the version-keyed rules (known bugs, log table) follow, and rounds parse the
    log with it; but `ExperimentContext.descheduler_version`, which known-bug classification
    uses, reads the *cluster's* toolchain. A canary release made by
    `desched_release_factory("canary", version="v0.37.0")` in a cluster built for the pin
    is parsed as v0.37.0 and classified as v0.36.0 (its xfails would excuse the canary)."""
    pinned_toolchain = SimpleNamespace(groups={"descheduler": SimpleNamespace(version=PIN)})
    cluster = SimpleNamespace(toolchain=pinned_toolchain, provider="embedded")
    canary = _release(tmp_path, version="v0.37.0")
    ctx = ExperimentContext(
        cluster=cluster,  # type: ignore[arg-type]
        release=canary,
        policy=load_default(),
        source="w-1",
        target="w-2",
    )
    assert ctx.descheduler_version == canary.descheduler_version == "v0.37.0"


def test_a_release_is_built_whole_its_inputs_fixed_its_state_its_own(tmp_path: Path) -> None:
    """Item 3 of issue 30: nobody finishes a Release after it is built (was: the session set
    six inputs on it); the live state starts empty and is the release's to change."""
    rel = _release(tmp_path)
    for name, value in (("binary", tmp_path / "descheduler"), ("image_ref", "x:y"), ("name", "b")):
        with pytest.raises(AttributeError, match=f"Release.{name} is an input"):
            setattr(rel, name, value)
    assert (rel.binary, rel.image_ref, rel.name) == (None, None, "descheduler")
    assert (rel.installed, rel.dry_run, rel.policy, rel.history) == (False, None, None, [])
    rel.installed = True  # live state: the release's own steps change it
    with pytest.raises(TypeError):
        Release(rel.cluster, rel.chart, VERSIONS, tmp_path, installed=True)  # type: ignore[call-arg]
    rel.add_cmd_options({"client-qps": 50})
    assert rel._set_flags()[-2:] == ["--set", "cmdOptions.client-qps=50"]
