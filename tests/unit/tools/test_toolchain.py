"""Binary selection, version probes, wrapper go.mod and the build path; no network, no Go build.

Binaries are fake shell scripts written to tmp_path; `go` is a fake script on a PATH of its
own, so the build path (wrapper module, `go build`, renames, log, errors) runs for real.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pytest_desched.errors import ConfigError, ToolError
from pytest_desched.tools.gobuild import go_build_cmd, go_env, wrapper_gomod
from pytest_desched.tools.groups import TOOL_GROUP, build_groups, prometheus_release
from pytest_desched.tools.locate import (
    VERSION_PROBES,
    default_cache_dir,
    module_tag_of,
    probe_version,
    select_binary,
    version_matches,
)
from pytest_desched.tools.toolchain import Toolchain, provide
from pytest_desched.tools.versions import load_versions

V = load_versions()


def script(path: Path, body: str, shebang: str = "/bin/sh") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{shebang}\n{body}\n")
    path.chmod(0o755)
    return path


def exe(path: Path) -> Path:
    return script(path, "exit 0")


# -- select_binary ----------------------------------------------------------------------
class Probe:
    """A probe that answers from a table and records which binaries it was asked about."""

    def __init__(self, answers: dict[Path, str | None]) -> None:
        self.answers, self.asked = answers, []

    def __call__(self, tool: str, path: Path) -> str | None:
        self.asked.append((tool, path))
        return self.answers.get(path)


@pytest.fixture
def bins(tmp_path: Path) -> dict[str, Path]:
    return {n: exe(tmp_path / n / "kubectl") for n in ("explicit", "path", "cache")}


def test_explicit_binary_wins_over_path_and_cache(bins: dict[str, Path]) -> None:
    probe = Probe({bins["explicit"]: "v1.36.3", bins["path"]: "v1.36.3"})
    chosen, why = select_binary(
        "kubectl", "v1.36.3", bins["explicit"], bins["path"], bins["cache"], probe
    )
    assert (chosen, why) == (bins["explicit"], "explicit")
    assert probe.asked == [("kubectl", bins["explicit"])]


@pytest.mark.parametrize("reported", ["v1.35.0", None])
def test_explicit_binary_with_wrong_version_raises_naming_tool_and_fix(
    bins: dict[str, Path], reported: str | None
) -> None:
    probe = Probe({bins["explicit"]: reported, bins["path"]: "v1.36.3"})
    with pytest.raises(ToolError) as ei:
        select_binary("kubectl", "v1.36.3", bins["explicit"], bins["path"], bins["cache"], probe)
    msg = str(ei.value)
    assert msg.startswith("kubectl: ")
    assert str(bins["explicit"]) in msg
    assert f"reports version {reported or 'unknown'}" in msg
    assert "pinned is v1.36.3" in msg
    assert "point the option at a v1.36.3 binary or drop it to build one" in msg


def test_path_binary_used_when_its_version_matches(bins: dict[str, Path]) -> None:
    probe = Probe({bins["path"]: "v1.36.3+abc"})
    assert select_binary("kubectl", "v1.36.3", None, bins["path"], bins["cache"], probe) == (
        bins["path"],
        "PATH",
    )


def test_path_binary_with_other_version_falls_back_to_cache(bins: dict[str, Path]) -> None:
    probe = Probe({bins["path"]: "v1.31.0"})
    chosen, why = select_binary("kubectl", "v1.36.3", None, bins["path"], bins["cache"], probe)
    assert (chosen, why) == (bins["cache"], "cache")
    # the cache is keyed by version: it is trusted without running the binary
    assert probe.asked == [("kubectl", bins["path"])]


def test_cache_used_without_path_binary(bins: dict[str, Path]) -> None:
    probe = Probe({})
    assert select_binary("kubectl", "v1.36.3", None, None, bins["cache"], probe) == (
        bins["cache"],
        "cache",
    )
    assert probe.asked == []


def test_nothing_usable_means_build(tmp_path: Path, bins: dict[str, Path]) -> None:
    probe = Probe({bins["path"]: "v1.30.0"})
    missing = tmp_path / "nope" / "kubectl"
    assert select_binary("kubectl", "v1.36.3", None, bins["path"], missing, probe) == (
        None,
        "build",
    )
    assert select_binary("kubectl", "v1.36.3", None, None, None, probe) == (None, "build")


def test_non_executable_cache_entry_means_build(tmp_path: Path) -> None:
    cached = tmp_path / "kubectl"
    cached.write_text("not a binary")
    cached.chmod(0o644)
    assert select_binary("kubectl", "v1.36.3", None, None, cached, Probe({})) == (None, "build")


# -- version_matches --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("found", "wanted", "ok"),
    [
        ("v1.36.3", "v1.36.3", True),
        ("1.36.3", "v1.36.3", True),
        ("v3.6.16", "3.6.16", True),
        ("v3.22.0+g8a2b1c4", "v3.22.0", True),
        (" v0.8.0\n", "v0.8.0", True),
        ("v1.36.30", "v1.36.3", False),
        ("v1.36.3-rc.1", "v1.36.3", False),
        ("v1.36.2", "v1.36.3", False),
        (None, "v1.36.3", False),
    ],
)
def test_version_matches(found: str | None, wanted: str, ok: bool) -> None:
    assert version_matches(found, wanted) is ok


# -- probe_version against each tool's real output format ----------------------------------
KUBECTL_JSON = """{
  "clientVersion": {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.3",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "1970-01-01T00:00:00Z",
    "goVersion": "go1.26.8",
    "compiler": "gc",
    "platform": "linux/amd64"
  },
  "kustomizeVersion": "v5.7.1"
}"""

OUTPUTS = {
    "kube-apiserver": ("Kubernetes v1.36.3", "v1.36.3"),
    "kube-controller-manager": ("Kubernetes v1.36.3", "v1.36.3"),
    "kube-scheduler": ("Kubernetes v1.36.3", "v1.36.3"),
    "kubectl": (KUBECTL_JSON, "v1.36.3"),
    "etcd": (
        "etcd Version: 3.6.16\nGit SHA: GitNotFound\nGo Version: go1.26.8\nGo OS/Arch: linux/amd64",
        "3.6.16",
    ),
    "kwok": ("kwok version v0.8.0 go1.26.8 (linux/amd64)", "0.8.0"),
    "kwokctl": ("kwokctl version v0.8.0 go1.26.8 (linux/amd64)", "0.8.0"),
    "descheduler": (
        "Descheduler version {Major: Minor: GitCommit: GitVersion:v0.36.0 GitBranch: "
        "BuildDate:1970-01-01T00:00:00Z GoVersion:go1.26.8 Compiler:gc Platform:linux/amd64}",
        "v0.36.0",
    ),
    "helm": ("v4.3.2", "v4.3.2"),
    "kind": ("kind v0.33.0 go1.26 linux/amd64", "v0.33.0"),
    "policycheck": ('policycheck GitVersion:"v0.36.0"', "v0.36.0"),
    # cmd/metrics-server/app/start.go prints client-go's gitVersion alone (the build's -X)
    "metrics-server": ("v0.8.0\n", "v0.8.0"),
    # cmd/prometheus prints the release (its VERSION file); the pin is the module's tag
    "prometheus": (
        "prometheus, version 3.16.0 (branch: , revision: unknown)\n  build user:       \n"
        "  go version:       go1.26.8\n  platform:         linux/amd64\n  tags:             "
        "remove_all_sd",
        "v0.316.0",
    ),
    "actionlint": (
        "v1.7.12\ninstalled by building from source\nbuilt with go1.26.8 compiler for linux/amd64",
        "v1.7.12",
    ),
}


def fake_tool(path: Path, argv: list[str], output: str) -> Path:
    """Prints `output` only when called with exactly `argv` (the probe's own arguments)."""
    return script(
        path,
        f'[ "$*" = "{" ".join(argv)}" ] || {{ echo "unexpected args: $*" >&2; exit 2; }}\n'
        f"cat <<'EOF'\n{output}\nEOF",
    )


def test_every_tool_has_a_probe() -> None:
    assert set(VERSION_PROBES) == set(TOOL_GROUP) == set(OUTPUTS)


@pytest.mark.parametrize("tool", sorted(OUTPUTS))
def test_probe_version_reads_each_real_format(tmp_path: Path, tool: str) -> None:
    output, expected = OUTPUTS[tool]
    fake = fake_tool(tmp_path / tool, VERSION_PROBES[tool][0], output)
    found = probe_version(tool, fake)
    assert found == expected
    # and the probed version is accepted against the pin
    wanted = Toolchain(versions=V, cache_dir=tmp_path / "c").wanted_version(tool)
    assert version_matches(found, wanted)


def test_probe_version_reads_stderr_too(tmp_path: Path) -> None:
    fake = script(tmp_path / "etcd", "echo 'etcd Version: 3.6.16' >&2")
    assert probe_version("etcd", fake) == "3.6.16"


def test_probe_version_none_when_binary_cannot_say(tmp_path: Path) -> None:
    silent = script(tmp_path / "silent", "echo hello")
    not_exec = tmp_path / "plain"
    not_exec.write_text("#!/bin/sh\necho Kubernetes v1.36.3\n")
    not_exec.chmod(0o644)
    assert probe_version("kube-apiserver", silent) is None
    assert probe_version("kube-apiserver", tmp_path / "missing") is None
    assert probe_version("kube-apiserver", not_exec) is None


# -- wrapper_gomod -------------------------------------------------------------------------
KUBERNETES_GOMOD = """// This is a generated file. Do not edit directly.
// Run hack/pin-dependency.sh to change pinned dependency versions.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tbitbucket.org/bertimus9/systemstat v0.5.0
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
\tgithub.com/kylelemons/godebug v1.1.0 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go // the staging copy
\tk8s.io/streaming => ./staging/src/k8s.io/streaming
)
"""

DESCHEDULER_GOMOD = """module sigs.k8s.io/descheduler

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/client9/misspell v0.3.4
\tsigs.k8s.io/structured-merge-diff/v6 v6.3.2 // indirect
)

replace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20260512234627-ef417d054102
"""

ETCD_GOMOD = """module go.etcd.io/etcd/server/v3

go 1.26.0

require (
\tgithub.com/kylelemons/godebug v1.1.0 // indirect
)

replace (
\tgo.etcd.io/etcd/api/v3 => ../api
\tgo.etcd.io/etcd/client/pkg/v3 => ../client/pkg
)

// Bad imports are sometimes causing attempts to pull that code.
replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
"""


def directives(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(("replace", "godebug", "require"))]


def test_wrapper_gomod_pins_kubernetes_staging_replaces() -> None:
    g = build_groups(V)["kubernetes"]
    out = wrapper_gomod(g, KUBERNETES_GOMOD, "v0.36.3")
    assert out.startswith("module desched.local/wrapper/kubernetes\n")
    assert directives(out) == [
        "require k8s.io/kubernetes v1.36.3",
        "godebug default=go1.26",
        "replace k8s.io/api => k8s.io/api v0.36.3",
        "replace k8s.io/client-go => k8s.io/client-go v0.36.3",
        "replace k8s.io/streaming => k8s.io/streaming v0.36.3",
    ]
    assert "./staging" not in out
    assert "kylelemons" not in out  # require lines are not copied


def test_wrapper_gomod_copies_versioned_replace_and_godebug() -> None:
    g = build_groups(V)["descheduler"]
    out = wrapper_gomod(g, DESCHEDULER_GOMOD, None)
    assert directives(out) == [
        "require sigs.k8s.io/descheduler v0.36.0",
        "godebug default=go1.26",
        "replace k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-20260512234627-ef417d054102",
    ]


def test_wrapper_gomod_drops_relative_replaces() -> None:
    g = build_groups(V)["etcd"]
    out = wrapper_gomod(g, ETCD_GOMOD, None)
    assert directives(out) == ["require go.etcd.io/etcd/server/v3 v3.6.16"]
    assert "../" not in out
    assert "FORBIDDEN_DEPENDENCY" not in out


def test_wrapper_gomod_staging_replace_without_staging_version_is_dropped() -> None:
    g = build_groups(V)["kubernetes"]
    out = wrapper_gomod(g, KUBERNETES_GOMOD, None)
    assert not [ln for ln in directives(out) if ln.startswith("replace")]


def test_wrapper_gomod_replace_with_old_version() -> None:
    g = build_groups(V)["helm"]
    out = wrapper_gomod(
        g, "module helm.sh/helm/v3\n\nreplace a.io/x v1.0.0 => b.io/x v1.2.0\n", None
    )
    assert "replace a.io/x => b.io/x v1.2.0" in directives(out)


def test_wrapper_gomod_carries_godebug_block() -> None:
    g = build_groups(V)["kind"]
    upstream = "module sigs.k8s.io/kind\n\ngodebug (\n\tdefault=go1.26\n\tpanicnil=1\n)\n"
    out = wrapper_gomod(g, upstream, None)
    assert "default=go1.26" in out
    assert out.count("(") == out.count(")")


# -- build_groups ----------------------------------------------------------------------------
def test_actionlint_is_pinned_and_built_only_when_named(tmp_path: Path) -> None:
    """actionlint checks the project's CI recipe (make test): built from its Go module at the
    pin with its version in the binary, and never by a plain `desched tools` (nor by lint)."""
    g = build_groups(V)["actionlint"]
    assert (g.module, g.version) == ("github.com/rhysd/actionlint", V.actionlint.version)
    assert g.packages == {"actionlint": "github.com/rhysd/actionlint/cmd/actionlint"}
    assert f"-X github.com/rhysd/actionlint.version={V.actionlint.version}" in g.ldflags
    tc = Toolchain(cache_dir=tmp_path, use_path=False)
    asked: list[str] = []
    tc.path = lambda tool: asked.append(tool) or tmp_path / tool  # type: ignore[method-assign]
    tc.sources = dict.fromkeys(TOOL_GROUP, "cache")
    list(provide(tc))
    assert "actionlint" not in asked and "kind" not in asked and "helm" in asked


def test_metrics_server_is_pinned_and_built_by_plain_tools(tmp_path: Path) -> None:
    """metrics-server (issue 50's Kubernetes Metrics source) is built from its Go module at the
    approved v0.8.0 with its version where `--version` reads it, and `desched tools` (what
    .ci/run and make test run before the tests) builds it with the others."""
    assert V.metrics_server.version == "v0.8.0"
    g = build_groups(V)["metrics-server"]
    assert (g.module, g.version) == ("sigs.k8s.io/metrics-server", "v0.8.0")
    assert g.packages == {"metrics-server": "sigs.k8s.io/metrics-server/cmd/metrics-server"}
    assert "-X k8s.io/client-go/pkg/version.gitVersion=v0.8.0" in g.ldflags
    tc = Toolchain(cache_dir=tmp_path, use_path=False)
    asked: list[str] = []
    tc.path = lambda tool: asked.append(tool) or tmp_path / tool  # type: ignore[method-assign]
    tc.sources = dict.fromkeys(TOOL_GROUP, "cache")
    list(provide(tc))
    assert "metrics-server" in asked


def test_prometheus_is_pinned_lean_and_built_by_plain_tools(tmp_path: Path) -> None:
    """Prometheus (issue 50's Prometheus source) is built from its Go module at v0.316.0
    (Prometheus 3.16.0), without the service-discovery plugins, with the release where
    `--version` reads it, and `desched tools` (make test's prerequisite) builds it."""
    g = build_groups(V)["prometheus"]
    assert (g.module, g.version) == ("github.com/prometheus/prometheus", "v0.316.0")
    assert g.packages == {"prometheus": "github.com/prometheus/prometheus/cmd/prometheus"}
    assert "-X github.com/prometheus/common/version.Version=3.16.0" in g.ldflags
    assert g.tags == ("remove_all_sd",)
    cmd = go_build_cmd(g, tmp_path, g.tags)
    assert cmd[cmd.index("-tags") + 1] == "remove_all_sd"
    assert prometheus_release("v0.316.0") == "3.16.0"
    assert module_tag_of("prometheus", "3.16.0") == "v0.316.0"
    tc = Toolchain(cache_dir=tmp_path, use_path=False)
    asked: list[str] = []
    tc.path = lambda tool: asked.append(tool) or tmp_path / tool  # type: ignore[method-assign]
    tc.sources = dict.fromkeys(TOOL_GROUP, "cache")
    list(provide(tc))
    assert "prometheus" in asked


def test_build_groups_follow_the_pins() -> None:
    groups = build_groups(V)
    assert {g.version for g in groups.values()} == {c.version for c in V.components()}
    kube = groups["kubernetes"]
    assert kube.packages["kube-apiserver"] == "k8s.io/kubernetes/cmd/kube-apiserver"
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in kube.ldflags
    assert "-X k8s.io/component-base/version.gitMajor=1" in kube.ldflags
    assert "-X k8s.io/component-base/version.gitMinor=36" in kube.ldflags
    assert groups["etcd"].packages == {"etcd": "go.etcd.io/etcd/server/v3"}
    assert set(groups["kwok"].packages) == {"kwok", "kwokctl"}
    assert groups["kwok"].ldflags == ("-X sigs.k8s.io/kwok/pkg/consts.Version=0.8.0",)


def test_descheduler_version_override_builds_side_by_side(tmp_path: Path) -> None:
    pinned = Toolchain(versions=V, cache_dir=tmp_path)
    canary = Toolchain(versions=V, cache_dir=tmp_path, descheduler_version="v0.35.1")
    g0, g1 = pinned.groups["descheduler"], canary.groups["descheduler"]
    assert (g0.version, g1.version) == ("v0.36.0", "v0.35.1")
    assert g1.ldflags == ("-X sigs.k8s.io/descheduler/pkg/version.version=v0.35.1",)
    assert canary.wanted_version("descheduler") == "v0.35.1"
    assert pinned.bin_dir(g0) != canary.bin_dir(g1)
    assert canary.bin_dir(g1) == tmp_path / "bin" / "descheduler" / "v0.35.1"
    assert pinned.log_path(g0) != canary.log_path(g1)
    # everything else is unchanged
    for name in ("kubernetes", "etcd", "kwok", "helm", "kind"):
        assert pinned.groups[name] == canary.groups[name]


# -- Toolchain.path ----------------------------------------------------------------------------
@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def build(self: Toolchain, group: object) -> None:
        raise AssertionError(f"unexpected build of {group}")

    monkeypatch.setattr(Toolchain, "build", build)


def test_path_uses_cached_binary_and_never_rebuilds(tmp_path: Path, no_build: None) -> None:
    tc = Toolchain(versions=V, cache_dir=tmp_path, use_path=False)
    cached = exe(tc.bin_dir(tc.groups["descheduler"]) / "descheduler")
    assert tc.path("descheduler") == cached
    assert tc.sources["descheduler"] == "cache"
    cached.unlink()  # resolved once per run: the second call does not look again
    assert tc.path("descheduler") == cached


def test_path_builds_when_nothing_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []

    def fake_build(self: Toolchain, g: object) -> None:
        built.append(g.key)  # type: ignore[attr-defined]
        script(self.bin_dir(g) / "kwokctl", "echo kwokctl version v0.8.0")  # type: ignore[arg-type]

    monkeypatch.setattr(Toolchain, "build", fake_build)
    tc = Toolchain(versions=V, cache_dir=tmp_path, use_path=False)
    p = tc.path("kwokctl")
    assert built == ["kwok-v0.8.0"]
    assert p == tmp_path / "bin" / "kwok" / "v0.8.0" / "kwokctl"
    assert tc.sources["kwokctl"] == "built"


def test_built_binary_with_wrong_version_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        Toolchain,
        "build",
        lambda self, g: script(self.bin_dir(g) / "kwokctl", "echo kwokctl version v0.7.0"),
    )
    with pytest.raises(ToolError, match=r"reports version 0\.7\.0, pinned is v0\.8\.0"):
        Toolchain(versions=V, cache_dir=tmp_path, use_path=False).path("kwokctl")


def test_path_uses_path_binary_of_the_pinned_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_build: None
) -> None:
    d = tmp_path / "pathbin"
    script(d / "helm", 'echo "v4.3.2"')
    monkeypatch.setenv("PATH", str(d))
    tc = Toolchain(versions=V, cache_dir=tmp_path / "cache")
    assert tc.path("helm") == d / "helm"
    assert tc.sources["helm"] == "PATH"


def test_override_is_version_checked(tmp_path: Path, no_build: None) -> None:
    fake = script(tmp_path / "helm", 'echo "v3.19.0+gabc"')
    tc = Toolchain(versions=V, cache_dir=tmp_path / "c", overrides={"helm": fake}, use_path=False)
    with pytest.raises(
        ToolError, match=r"^helm: .* reports version v3\.19\.0, pinned is v4\.3\.2;"
    ):
        tc.path("helm")


# -- default_cache_dir -------------------------------------------------------------------------
def test_default_cache_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("DESCHED_CACHE_DIR", "~/desched-cache")
    assert default_cache_dir() == tmp_path / "home" / "desched-cache"
    monkeypatch.delenv("DESCHED_CACHE_DIR")
    assert default_cache_dir() == tmp_path / "xdg" / "pytest-desched"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "pytest-desched"


def test_toolchain_uses_default_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(tmp_path / "dc"))
    assert Toolchain(versions=V).cache_dir == tmp_path / "dc"


# -- building with a fake `go` -----------------------------------------------------------------
FAKE_GO = r"""
import json, os, sys
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_GO_CALLS"], "a") as fh:
    fh.write(" ".join(args) + "\n")
if args[:2] == ["mod", "download"]:
    print(json.dumps({"GoMod": os.environ["FAKE_GO_UPSTREAM"], "Dir": os.environ.get("FAKE_GO_MODDIR", "")}))
elif args[:2] == ["mod", "tidy"]:
    print("go: finding module for package")
elif args[:1] == ["version"]:
    print("go version go1.26.8 linux/amd64")
elif args[:1] == ["build"]:
    if os.environ.get("FAKE_GO_MODE") == "fail":
        print("go.etcd.io/etcd/api/v3/etcdserverpb")
        print("go.etcd.io/etcd/server/v3/etcdserver")
        print("etcdserver/server.go:1:1: syntax error: boom")
        sys.exit(1)
    out = Path(args[args.index("-o") + 1])
    for pkg in [a for a in args[args.index("-o") + 2 :]]:
        parts = pkg.split("/")
        name = parts[-2] if parts[-1][:1] == "v" and parts[-1][1:].isdigit() else parts[-1]
        (out / name).write_text("#!/bin/sh\necho 'etcd Version: 3.6.16'\n")
        (out / name).chmod(0o755)
        print(pkg)
else:
    sys.exit(3)
"""


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "gobin"
    script(d / "go", FAKE_GO, shebang=sys.executable)
    upstream = tmp_path / "upstream.mod"
    upstream.write_text(ETCD_GOMOD)
    calls = tmp_path / "go-calls.txt"
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE_GO_UPSTREAM", str(upstream))
    monkeypatch.setenv("FAKE_GO_CALLS", str(calls))
    return calls


def test_build_failure_names_tool_command_and_log(
    tmp_path: Path, fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO_MODE", "fail")
    reports: list[str] = []
    tc = Toolchain(versions=V, cache_dir=tmp_path / "cache", use_path=False, report=reports.append)
    group = tc.groups["etcd"]
    with pytest.raises(ToolError) as ei:
        tc.path("etcd")
    msg, log = str(ei.value), tc.log_path(group)
    assert "building etcd v3.6.16 failed (exit 1)" in msg
    assert "`go build -v ...`" in msg
    assert f"full log: {log}" in msg
    text = log.read_text()
    assert "$ go build -v -trimpath" in text
    assert "etcdserver/server.go:1:1: syntax error: boom" in text
    assert not tc.bin_dir(group).exists()  # nothing half-built is left where the cache looks
    assert any(r.startswith("building etcd v3.6.16") and str(log) in r for r in reports)
    # the wrapper module was written from the upstream go.mod
    src = tmp_path / "cache" / "src" / group.key
    assert "require go.etcd.io/etcd/server/v3 v3.6.16" in (src / "go.mod").read_text()
    assert '_ "go.etcd.io/etcd/server/v3"' in (src / "tools.go").read_text()


def test_build_success_renames_and_caches(
    tmp_path: Path, fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports: list[str] = []
    tc = Toolchain(versions=V, cache_dir=tmp_path / "cache", use_path=False, report=reports.append)
    group = tc.groups["etcd"]
    p = tc.path("etcd")
    out = tc.bin_dir(group)
    assert p == out / "etcd"
    assert p.is_file() and os.access(p, os.X_OK)
    assert not (out / "server").exists()  # go's name for .../server/v3 was renamed to the tool
    info = json.loads((out / "BUILDINFO.json").read_text())
    assert info["module"] == "go.etcd.io/etcd/server/v3"
    assert info["version"] == "v3.6.16"
    assert info["go"] == "go version go1.26.8 linux/amd64"
    assert [d.name for d in out.parent.iterdir()] == ["v3.6.16"]  # no .tmp<pid> left
    assert tc.sources["etcd"] == "built"
    assert reports[-1].startswith("built etcd v3.6.16")
    # a new run finds it in the cache and never calls go again
    calls_before = fake_go.read_text()
    tc2 = Toolchain(versions=V, cache_dir=tmp_path / "cache", use_path=False)
    assert tc2.path("etcd") == p
    assert tc2.sources["etcd"] == "cache"
    assert fake_go.read_text() == calls_before


def test_policy_checker_from_a_module_fits_the_modules_api(
    tmp_path: Path, fake_go: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `version:` release's checker is built with the tags its module's own API asks for
    (tools/api_probe.py), as a source tree's is: here a v0.33-shaped module."""
    from tests.unit.tools.test_candidate import api_files, make_dir

    mod = make_dir(tmp_path / "mod", api_files(ctx=False, prom="value", instance_id=False))
    monkeypatch.setenv("FAKE_GO_MODDIR", str(mod))
    tc = Toolchain(versions=V, cache_dir=tmp_path / "cache", use_path=False)
    tc.build(tc.groups["policycheck"])  # the fake binary reports no version: build only
    [build] = [ln for ln in fake_go.read_text().splitlines() if ln.startswith("build ")]
    assert "-tags profile_noctx,prom_value,profile_noid " in build


def test_build_is_noop_when_already_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no go at all
    tc = Toolchain(versions=V, cache_dir=tmp_path, use_path=False)
    group = tc.groups["kwok"]
    for b in group.packages:
        exe(tc.bin_dir(group) / b)
    tc.build(group)  # must not need go
    assert sorted(p.name for p in tc.bin_dir(group).iterdir()) == ["kwok", "kwokctl"]


def test_build_without_go_says_how_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    tc = Toolchain(versions=V, cache_dir=tmp_path, use_path=False)
    with pytest.raises(ToolError) as ei:
        tc.path("descheduler")
    msg = str(ei.value)
    assert msg.startswith("descheduler v0.36.0: not cached and no `go` on PATH")
    assert "install Go" in msg
    assert "--desched-bin" in msg


def test_go_env_pins_local_toolchain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOTOOLCHAIN", "auto")
    env = go_env()
    assert env["GOTOOLCHAIN"] == "local"
    assert env["CGO_ENABLED"] == "0"
    assert "-mod=mod" in env["GOFLAGS"]


def test_cache_folders_of_pinned_groups_keep_their_names(tmp_path: Path) -> None:
    """Candidate builds add `-src<commit>` to the folder; the pinned ones stay where they were."""
    tc = Toolchain(versions=V, cache_dir=tmp_path)
    assert tc.bin_dir(tc.groups["descheduler"]) == tmp_path / "bin" / "descheduler" / "v0.36.0"
    pc = tc.groups["policycheck"]
    assert tc.bin_dir(pc) == tmp_path / "bin" / "policycheck" / f"v0.36.0-{pc.source_digest}"
    assert pc.key == f"policycheck-v0.36.0-{pc.source_digest}"
    assert tc.groups["kubernetes"].dir_name == "v1.36.3"


# -- the Helm major (--desched-helm / DESCHED_HELM) --------------------------------------------
def test_helm_4_is_the_default_and_helm_3_builds_side_by_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DESCHED_HELM", raising=False)
    four, three = (
        Toolchain(versions=V, cache_dir=tmp_path),
        Toolchain(versions=V, cache_dir=tmp_path, helm="3"),
    )
    g4, g3 = four.groups["helm"], three.groups["helm"]
    assert (g4.module, g4.version) == ("helm.sh/helm/v4", "v4.3.2")
    assert g4.packages == {"helm": "helm.sh/helm/v4/cmd/helm"}
    assert g4.ldflags == ("-X helm.sh/helm/v4/internal/version.version=v4.3.2",)
    assert (g3.module, g3.version) == ("helm.sh/helm/v3", "v3.21.4")
    assert g3.packages == {"helm": "helm.sh/helm/v3/cmd/helm"}
    assert g3.ldflags == ("-X helm.sh/helm/v3/internal/version.version=v3.21.4",)
    assert four.bin_dir(g4) == tmp_path / "bin" / "helm" / "v4.3.2"
    assert three.bin_dir(g3) == tmp_path / "bin" / "helm" / "v3.21.4"
    # the evidence and the cache key follow the choice; nothing else changes
    assert (four.versions.summary()["helm"], three.versions.summary()["helm"]) == (
        "v4.3.2",
        "v3.21.4",
    )
    assert (four.versions.helm_major, three.versions.helm_major) == ("4", "3")
    for name in ("kubernetes", "etcd", "kwok", "descheduler", "policycheck", "kind"):
        assert four.groups[name] == three.groups[name]


def test_helm_major_from_the_environment_and_explicit_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESCHED_HELM", "3")
    assert Toolchain(versions=V, cache_dir=tmp_path).wanted_version("helm") == "v3.21.4"
    assert Toolchain(versions=V, cache_dir=tmp_path, helm="4").wanted_version("helm") == "v4.3.2"
    monkeypatch.setenv("DESCHED_HELM", "2")
    with pytest.raises(ConfigError, match=r"DESCHED_HELM: Helm '2': choose one of 4, 3"):
        Toolchain(versions=V, cache_dir=tmp_path)


def test_the_pins_name_approved_helm_releases() -> None:
    """v3.22.0 is served by the proxy but not approved: the pins are v4.3.2 and v3.21.4."""
    assert V.helm.version == "v4.3.2" and V.helm3 is not None
    assert V.helm3.version == "v3.21.4" and V.helm3.binaries == ("helm",)
    assert V.helm_majors() == ("4", "3")
    assert V.with_helm(None) is V and V.with_helm("4") is V
    assert V.with_helm("3").helm.name == "helm"
