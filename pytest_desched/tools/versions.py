"""Pinned versions, read from the one file that declares them: manifests/versions.yaml."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.tools.resources import manifest_path


@dataclass(frozen=True)
class Component:
    """One pinned upstream project: its Go module, version and the binaries it yields."""

    name: str
    version: str
    module: str = ""
    binaries: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Versions:
    kubernetes: Component
    etcd: Component
    kwok: Component
    descheduler: Component
    helm: Component  # the Helm a run uses: Helm 4 as pinned, or Helm 3 (`with_helm("3")`)
    kind: Component
    metrics_server: Component  # metrics.k8s.io for policies on actual utilization
    prometheus: Component  # the Prometheus source of policies on actual utilization
    actionlint: Component  # the project's own check of its CI recipe, not a cluster tool
    chart_name: str
    chart_version: str
    chart_app_version: str
    chart_repo: str
    descheduler_image: str
    workload_image: str
    kind_node_image: str
    # Helm 3, selectable (--desched-helm=3): never built or named unless chosen.
    helm3: Component | None = None

    @property
    def helm_major(self) -> str:
        """ "v4.3.2" -> "4": the major of the Helm this run uses."""
        return helm_major_of(self.helm.version)

    def helm_majors(self) -> tuple[str, ...]:
        """The Helm majors a run may choose, the default first."""
        other = () if self.helm3 is None else (helm_major_of(self.helm3.version),)
        return (self.helm_major, *other)

    def with_helm(self, major: str | None) -> Versions:
        """These pins with the Helm of `major` ("4", "3"; None: the default) as `helm`.

        Everything downstream (build group, cache folder, cache key, evidence) reads `helm`,
        so a run on Helm 3 names and builds Helm 3 only.
        """
        if major in (None, "", self.helm_major):
            return self
        if self.helm3 is not None and major == helm_major_of(self.helm3.version):
            return dataclasses.replace(self, helm=dataclasses.replace(self.helm3, name="helm"))
        raise ValueError(f"Helm {major!r}: choose one of {', '.join(self.helm_majors())}")

    @property
    def kube_minor(self) -> str:
        """ "v1.36.3" -> "1.36": used to check server and node versions."""
        return ".".join(self.kubernetes.version.lstrip("v").split(".")[:2])

    def components(self) -> list[Component]:
        return [
            self.kubernetes,
            self.etcd,
            self.kwok,
            self.descheduler,
            self.helm,
            self.kind,
            self.metrics_server,
            self.prometheus,
            self.actionlint,
        ]

    def summary(self) -> dict[str, str]:
        # actionlint checks the project's own CI recipe: no pin a user's run depends on
        out = {c.name: c.version for c in self.components() if c is not self.actionlint}
        out["chart"] = f"{self.chart_name}-{self.chart_version}"
        out["image"] = self.descheduler_image
        return out


_REQUIRED = (
    *("kubernetes", "etcd", "kwok", "descheduler", "helm", "kind", "metrics-server"),
    *("prometheus", "actionlint"),
    *("chart", "workload"),
)


def parse_versions(data: dict[str, Any]) -> Versions:
    """Validate the raw YAML mapping; a missing pin is a clear error, never a silent default."""
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError(f"versions.yaml: missing sections {missing}")

    def comp(name: str) -> Component:
        raw = dict(data[name])
        if "version" not in raw:
            raise ValueError(f"versions.yaml: {name}.version is required")
        bins = tuple(raw.pop("binaries", None) or (name,))
        return Component(
            name=name,
            version=str(raw.pop("version")),
            module=str(raw.pop("module", "")),
            binaries=bins,
            extra=raw,
        )

    chart = data["chart"]
    return Versions(
        kubernetes=comp("kubernetes"),
        etcd=comp("etcd"),
        kwok=comp("kwok"),
        descheduler=comp("descheduler"),
        helm=comp("helm"),
        kind=comp("kind"),
        metrics_server=comp("metrics-server"),
        prometheus=comp("prometheus"),
        actionlint=comp("actionlint"),
        chart_name=str(chart["name"]),
        chart_version=str(chart["version"]),
        chart_app_version=str(chart["app_version"]),
        chart_repo=str(chart["repo"]),
        descheduler_image=str(data["descheduler"]["image"]),
        workload_image=str(data["workload"]["image"]),
        kind_node_image=str(data["kind"]["node_image"]),
        helm3=comp("helm3") if "helm3" in data else None,
    )


@lru_cache(maxsize=1)
def load_versions(path: Path | None = None) -> Versions:
    p = path or manifest_path("versions.yaml")
    return parse_versions(yaml.safe_load(p.read_text()))


def helm_major_of(version: str) -> str:
    """ "v3.21.4" -> "3"."""
    return version.lstrip("v").split(".")[0]


def descheduler_image(versions: Versions, version: str) -> str:
    """The image of a descheduler version: the pinned reference, or the same repo at its tag."""
    if version == versions.descheduler.version:
        return versions.descheduler_image
    return f"{versions.descheduler_image.rsplit(':', 1)[0]}:{version}"
