"""Which Kubernetes a run's clusters are: the pin, a served release the user names, or the
nearest served patch of a snapshot's minor.

Every choice is checked before anything is built: an unserved version is bad input (exit 2)
naming the served ones, because a build of it would fail minutes later at the module proxy.
A pre-release is taken only when named exactly, and says so wherever it is reported.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pytest_desched.errors import ConfigError
from pytest_desched.tools.versions import Component, Versions

__all__ = [
    "KubeChoice",
    "at_kubernetes",
    "choose_kubernetes",
    "for_snapshot",
    "nearest_served",
    "normalise",
    "served_versions",
]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True)
class KubeChoice:
    """The Kubernetes version a run uses and why: what every report's first line names."""

    version: str
    pinned: bool
    source: str  # "pin", "--desched-kubernetes", "snapshot serverVersion vX.Y.Z", ...
    prerelease: bool = False

    @property
    def minor(self) -> str:
        m = _VERSION.match(self.version)
        return f"{m.group(1)}.{m.group(2)}" if m else self.version

    def line(self) -> str:
        """One line for a report: the version, where it came from, and a pre-release flag."""
        text = f"Kubernetes {self.version} ({self.source})"
        if self.prerelease:
            text += "; a PRE-RELEASE: results are not those of a supported Kubernetes"
        return text

    def evidence(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def normalise(version: str) -> str:
    """`1.37.2` -> `v1.37.2`; anything that is not X.Y.Z[-pre] is refused by the caller."""
    v = version.strip()
    return v if v.startswith("v") else f"v{v}"


def served_versions(v: Versions) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(releases, pre-releases) the module proxy serves here, from versions.yaml."""
    extra = v.kubernetes.extra
    served = tuple(str(x) for x in extra.get("served") or ()) or (v.kubernetes.version,)
    if v.kubernetes.version not in served:
        served = (*served, v.kubernetes.version)
    return served, tuple(str(x) for x in extra.get("prereleases") or ())


def _key(version: str) -> tuple[int, int, int]:
    m = _VERSION.match(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def choose_kubernetes(v: Versions, requested: str | None, flag: str) -> KubeChoice:
    """The version a user named (`flag` names the option in messages), or the pin.

    Raises ConfigError (exit 2) for a malformed or unserved version, naming the served ones.
    """
    pin = v.kubernetes.version
    if requested is None or not str(requested).strip():
        return KubeChoice(pin, True, "pin")
    want = normalise(str(requested))
    served, pre = served_versions(v)
    if not _VERSION.match(want):
        raise ConfigError(
            f"{flag} {requested!r} is not a Kubernetes version; give vX.Y.Z, one of: "
            f"{', '.join(served)}"
        )
    if want in pre:
        return KubeChoice(want, want == pin, flag, prerelease=True)
    if want not in served:
        hint = f" (pre-release, named exactly: {', '.join(pre)})" if pre else ""
        raise ConfigError(
            f"{flag} {want}: not served here by the Go module proxy, so it cannot be built; "
            f"served: {', '.join(served)}{hint}"
        )
    return KubeChoice(want, want == pin, "pin" if want == pin else flag)


def nearest_served(v: Versions, server_version: str) -> str | None:
    """The served release of `server_version`'s minor nearest to its patch (ties: the newer).

    None when that minor has no served release. Pre-releases are never picked implicitly.
    """
    m = _VERSION.match(normalise(server_version or ""))
    if not m:
        return None
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3))
    served, _ = served_versions(v)
    same = [s for s in served if _key(s)[:2] == (major, minor)]
    if not same:
        return None
    return min(same, key=lambda s: (abs(_key(s)[2] - patch), -_key(s)[2]))


def at_kubernetes(v: Versions, version: str) -> Versions:
    """The pins with Kubernetes at `version`: its binaries, staging modules and kind node
    image follow it; every other tool stays pinned."""
    if version == v.kubernetes.version:
        return v
    m = _VERSION.match(version)
    if not m:
        raise ConfigError(f"Kubernetes version {version!r} is not vX.Y.Z")
    staging = f"v0.{m.group(2)}.{m.group(3)}{m.group(4) or ''}"
    extra = {**v.kubernetes.extra, "staging_version": staging}
    kube: Component = dataclasses.replace(v.kubernetes, version=version, extra=extra)
    repo = v.kind_node_image.rsplit(":", 1)[0]
    return dataclasses.replace(v, kubernetes=kube, kind_node_image=f"{repo}:{version}")


def for_snapshot(
    v: Versions, server_version: str | None, requested: str | None, flag: str
) -> KubeChoice:
    """The Kubernetes a replay runs at: the user's choice, else the nearest served patch of the
    snapshot's own minor (the scheduler and admission of that minor), else a refusal.

    A choice that differs from the snapshot's version says so in its `source`.
    """
    recorded = normalise(server_version) if server_version else ""
    if requested:
        chosen = choose_kubernetes(v, requested, flag)
        if recorded and recorded != chosen.version:
            return dataclasses.replace(
                chosen, source=f"{flag}; the snapshot's cluster ran {recorded}"
            )
        return chosen
    if not recorded or not _VERSION.match(recorded):
        pin = v.kubernetes.version
        return KubeChoice(pin, True, "pin: the snapshot records no serverVersion")
    near = nearest_served(v, recorded)
    if near is None:
        served, _ = served_versions(v)
        raise ConfigError(
            f"the snapshot's cluster ran Kubernetes {recorded}, and no release of its minor is "
            f"served here ({', '.join(served)}); name one with {flag} to replay at another "
            "minor (the scheduler and admission may then differ from the incident's)"
        )
    source = (
        "the snapshot's serverVersion"
        if near == recorded
        else (f"nearest served patch to the snapshot's {recorded}")
    )
    return KubeChoice(near, near == v.kubernetes.version, source)
