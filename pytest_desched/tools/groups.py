"""The build recipe of each tool: a Go module at a version, its main packages and ldflags.

Pinned tools come from `versions.yaml`; a canary candidate replaces only the descheduler and
the policy checker (`candidate_groups`). `TOOL_GROUP` names the group that builds a tool.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_desched.errors import ConfigError, ToolError
from pytest_desched.tools.locate import version_matches
from pytest_desched.tools.versions import Versions

if TYPE_CHECKING:
    from pytest_desched.tools.candidate import Candidate


@dataclass(frozen=True)
class Group:
    """One `go build` invocation: a module at a version and the main packages it yields."""

    name: str
    module: str
    version: str
    packages: dict[str, str]  # binary name -> main package
    ldflags: tuple[str, ...] = ()
    # The project's own Go source (main package) built inside the wrapper, against `module`.
    source_dir: Path | None = None
    # A candidate source tree's key (commit or sha256-...): built inside that tree, not a wrapper.
    tree_key: str = ""
    # Build tags of the module's own (Prometheus' `remove_all_sd`): part of the pin, so fixed
    # per version and not in the cache key.
    tags: tuple[str, ...] = ()

    @property
    def source_digest(self) -> str:
        """Short sha256 of the project's own Go source: a changed helper is a new build."""
        if self.source_dir is None:
            return ""
        h = hashlib.sha256()
        for f in sorted(self.source_dir.glob("*.go")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        return h.hexdigest()[:12]

    @property
    def key(self) -> str:
        base = f"{self.name}-{self.version}"
        if self.tree_key:
            base += f"-src{self.tree_key[:12]}"
        if self.source_dir is not None:
            base += f"-{self.source_digest}"
        return base

    @property
    def dir_name(self) -> str:
        """The cache folder under bin/<name>/: version, source tree and helper source."""
        return self.key[len(self.name) + 1 :]


def kube_ldflags(version: str) -> tuple[str, ...]:
    """The version ldflags Kubernetes' own release builds set, so a built binary reports its tag."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


# The Helm majors a run may choose, the default first (each pinned in versions.yaml), and the
# variable that names one (config.OPTIONS' --desched-helm; a Toolchain made outside a
# configured run reads it too): the choice picks the `helm` group's module and version.
HELM_MAJORS = ("4", "3")
HELM_ENV = "DESCHED_HELM"
HELM_HELP = (
    "the Helm major that renders, installs and upgrades the release: 4 (server-side "
    "apply) or 3, each pinned in manifests/versions.yaml"
)

POLICYCHECK_PACKAGE = "desched.local/wrapper/policycheck"
POLICYCHECK_SOURCE = Path(__file__).resolve().parent / "policycheck"


def build_groups(v: Versions, descheduler_version: str | None = None) -> dict[str, Group]:
    """The build recipe of each pinned tool; `descheduler_version` builds another release or commit."""
    k, dv = v.kubernetes, descheduler_version or v.descheduler.version
    return {
        "kubernetes": Group(
            "kubernetes",
            k.module,
            k.version,
            {b: f"{k.module}/cmd/{b}" for b in k.binaries},
            kube_ldflags(k.version),
        ),
        "etcd": Group("etcd", v.etcd.module, v.etcd.version, {"etcd": v.etcd.module}),
        "kwok": Group(
            "kwok",
            v.kwok.module,
            v.kwok.version,
            {b: f"{v.kwok.module}/cmd/{b}" for b in v.kwok.binaries},
            (f"-X {v.kwok.module}/pkg/consts.Version={v.kwok.version.lstrip('v')}",),
        ),
        "descheduler": Group(
            "descheduler",
            v.descheduler.module,
            dv,
            {"descheduler": f"{v.descheduler.module}/cmd/descheduler"},
            (f"-X {v.descheduler.module}/pkg/version.version={dv}",),
        ),
        "helm": Group(
            "helm",
            v.helm.module,
            v.helm.version,
            {"helm": f"{v.helm.module}/cmd/helm"},
            (f"-X {v.helm.module}/internal/version.version={v.helm.version}",),
        ),
        "kind": Group("kind", v.kind.module, v.kind.version, {"kind": v.kind.module}),
        # metrics.k8s.io for the utilization experiments; kwokctl runs it as a binary.
        "metrics-server": Group(
            "metrics-server",
            v.metrics_server.module,
            v.metrics_server.version,
            {"metrics-server": f"{v.metrics_server.module}/cmd/metrics-server"},
            (f"-X k8s.io/client-go/pkg/version.gitVersion={v.metrics_server.version}",),
        ),
        # The Prometheus source: its server only, without the service-discovery plugins.
        "prometheus": prometheus_group(v),
        # The project's own check of its CI recipe (make test), never a lint or cluster need.
        "actionlint": Group(
            "actionlint",
            v.actionlint.module,
            v.actionlint.version,
            {"actionlint": f"{v.actionlint.module}/cmd/actionlint"},
            (f"-X {v.actionlint.module}.version={v.actionlint.version}",),
        ),
        # The project's policy checker, built against the descheduler source under test.
        "policycheck": Group(
            "policycheck",
            v.descheduler.module,
            dv,
            {"policycheck": POLICYCHECK_PACKAGE},
            (f"-X {v.descheduler.module}/pkg/version.version={dv}",),
            POLICYCHECK_SOURCE,
        ),
    }


def prometheus_group(v: Versions) -> Group:
    """Prometheus' server at its module tag, with the version its release build stamps
    (.promu.yml: `github.com/prometheus/common/version.Version`, the VERSION file's 3.MM.P)."""
    p = v.prometheus
    release = str(p.extra.get("release") or prometheus_release(p.version))
    return Group(
        "prometheus",
        p.module,
        p.version,
        {"prometheus": f"{p.module}/cmd/prometheus"},
        (f"-X github.com/prometheus/common/version.Version={release}",),
        tags=tuple(str(t) for t in p.extra.get("tags") or ()),
    )


def prometheus_release(module_version: str) -> str:
    """`v0.316.0` -> `3.16.0`: Prometheus 3's Go module tags are v0.3MM.P."""
    minor, patch = module_version.lstrip("v").split(".")[1:3]
    major, rest = minor[0], minor[1:].lstrip("0") or "0"
    return f"{major}.{rest}.{patch}"


# The helper's package inside a candidate's source tree (copied there at build time).
POLICYCHECK_TREE_DIR = "cmd/desched-policycheck"


def candidate_groups(v: Versions, cand: Candidate) -> tuple[dict[str, Group], dict[str, str]]:
    """The build recipes with a candidate's descheduler and policy checker; notes say what differs.

    Every other group stays the baseline's. A `binary:` of another version has no source to
    build the policy checker against, so the checks keep the baseline's rules (a note says so).
    """
    notes: dict[str, str] = {}
    if cand.kind in ("version", "image"):  # a Go module tag (an image's tag names its source)
        return build_groups(v, cand.version), notes
    groups = build_groups(v)
    if cand.kind == "source":
        if not cand.module or not cand.source_key:
            raise ToolError(f"candidate {cand.ref}: parse it with parse_candidate first")
        ldflags = (f"-X {cand.module}/pkg/version.version={cand.version}",)
        groups["descheduler"] = Group(
            "descheduler",
            cand.module,
            cand.version,
            {"descheduler": "./cmd/descheduler"},
            ldflags,
            tree_key=cand.source_key,
        )
        groups["policycheck"] = Group(
            "policycheck",
            cand.module,
            cand.version,
            {"policycheck": f"./{POLICYCHECK_TREE_DIR}"},
            ldflags,
            POLICYCHECK_SOURCE,
            tree_key=cand.source_key,
        )
    elif cand.kind == "binary":
        pinned = v.descheduler.version
        if version_matches(cand.version, pinned):
            return groups, notes
        groups["descheduler"] = dataclasses.replace(groups["descheduler"], version=cand.version)
        notes["policycheck"] = (
            f"the candidate binary reports {cand.version} and comes without its source: the "
            f"policy checks use the baseline's ({pinned}) rules"
        )
    return groups, notes


TOOL_GROUP = {
    "kube-apiserver": "kubernetes",
    "kube-controller-manager": "kubernetes",
    "kube-scheduler": "kubernetes",
    "kubectl": "kubernetes",
    "etcd": "etcd",
    "kwok": "kwok",
    "kwokctl": "kwok",
    "descheduler": "descheduler",
    "helm": "helm",
    "kind": "kind",
    "metrics-server": "metrics-server",
    "prometheus": "prometheus",
    "policycheck": "policycheck",
    "actionlint": "actionlint",
}

# Built only when named (`desched tools kind`, `desched tools actionlint`): kind only for the
# kind provider, actionlint only for the project's own `make test`.
ON_REQUEST = ("kind", "actionlint")


def parse_bins(raw: str | None) -> dict[str, Path]:
    """`kubectl=/usr/bin/kubectl,helm=/opt/helm` -> {tool: path}; a bad entry is an error."""
    out: dict[str, Path] = {}
    for item in filter(None, (raw or "").split(",")):
        tool, sep, path = item.partition("=")
        tool = tool.strip()
        if not sep or tool not in TOOL_GROUP:
            raise ConfigError(
                f"--desched-bin: {item!r} is not TOOL=PATH with TOOL in {sorted(TOOL_GROUP)}"
            )
        p = Path(path).expanduser()
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ConfigError(f"--desched-bin: {p} is not an executable file")
        out[tool] = p
    return out
