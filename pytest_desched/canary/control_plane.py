"""What the tracks' control planes do differently, and which changes that explains.

A canary whose tracks run different Kubernetes (a cluster upgrade canaried, alone or with
the descheduler's) sees changes the descheduler did not make: the scheduler placed a
replacement elsewhere or later, admission answered an eviction differently, an API the release
calls is served at another version or not at all. Such a change, with no descheduler
explanation (the user's file, a proven bug fix), is attributed to the control plane only when
the two clusters' own readings differ in the area that decides it:

- `scheduler`: the effective default KubeSchedulerConfiguration, as each track's
  kube-scheduler writes it (`--write-config-to`, offline, defaults and feature gates applied):
  decides where and when a replacement is placed (a pod created in the round), and so an
  experiment's placement checks (PLACEMENT_CHECKS) failing where they passed.
- `admission`: the API server's default-enabled admission plugins (`kube-apiserver --help`):
  decides a refusal's status code other than the PDB's 429.
- `api`: the group versions each cluster serves (discovery) of the groups the release's
  ClusterRole names: decides a 404/405 answer.
- `feature-gate`: gates whose default differs (`--help`), listed as context only; the
  scheduler's effective configuration already carries the gates that change its defaults.

Nothing else is attributed: a change in which pods the descheduler lists, filters or evicts
stays the descheduler's (its verdict judges it), whatever the clusters' versions.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.canary.compare import CREATED_IN_ROUND, PodClassDiff
from pytest_desched.proc import run

if TYPE_CHECKING:
    from pytest_desched.session import DeschedSession

AREAS = ("scheduler", "admission", "api", "feature-gate")
# The API groups a descheduler release calls (the chart's ClusterRole, CONTEXT.md): "" is core.
CALLED_GROUPS = ("", "policy", "events.k8s.io", "scheduling.k8s.io", "metrics.k8s.io")
PDB_CODE = 429  # the eviction subresource's own refusal, not admission's
API_CODES = (404, 405)  # not served: the group version or the resource is gone
# The experiments' checks the scheduler decides: where the replacement landed, and that none
# is left Pending (experiments/assertions.py ids).
PLACEMENT_CHECKS = ("replacement-on-target", "no-pending")

_ADMISSION = re.compile(r"default enabled ones \(([^)]*)\)")
_GATE = re.compile(r"^\s*(?:kube:)?([A-Za-z0-9]+)=true\|false \(([A-Z]+) - default=(true|false)\)")
_CODE = re.compile(r"^(?:refused|error)\((\d{3})\)")


@dataclass(frozen=True)
class KubeDifference:
    """One reading that differs between the tracks' control planes."""

    area: str  # one of AREAS
    subject: str  # a config path, a plugin, a group, a gate
    baseline: str
    candidate: str

    def words(self) -> str:
        return f"{self.area} {self.subject}: {self.baseline} -> {self.candidate}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def admission_defaults(help_text: str) -> list[str]:
    """The default-enabled admission plugins `kube-apiserver --help` names."""
    m = _ADMISSION.search(help_text)
    return [p.strip() for p in m.group(1).split(",") if p.strip()] if m else []


def gate_defaults(help_text: str) -> dict[str, str]:
    """Feature gate -> `STAGE default` from `--help` (`BETA true`)."""
    out: dict[str, str] = {}
    for line in help_text.splitlines():
        if m := _GATE.match(line):
            out[m.group(1)] = f"{m.group(2)} {m.group(3)}"
    return out


def flatten(doc: Any, prefix: str = "") -> dict[str, str]:
    """A YAML document as `path -> value`; a profile's plugin lists keyed by plugin name, so a
    reordered list differs only where an entry moved in or out or changed weight."""
    out: dict[str, str] = {}
    if isinstance(doc, Mapping) and not doc and prefix:
        out[prefix] = "{}"  # an empty stanza present on one side is a difference too
    elif isinstance(doc, Mapping):
        for k, v in doc.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(doc, list):
        named = all(isinstance(x, Mapping) and "name" in x for x in doc) and doc
        for i, v in enumerate(doc):
            key = f"{prefix}[{v['name']}]" if named else f"{prefix}[{i}]"
            item = {k: x for k, x in v.items() if k != "name"} if named else v
            out.update(flatten(item, key) if item not in ({}, None) else {key: "present"})
    else:
        out[prefix] = str(doc)
    return out


def scheduler_defaults(config_yaml: str) -> dict[str, str]:
    """The scheduling part of a written KubeSchedulerConfiguration, flattened (client and
    leader-election settings decide nothing about placement)."""
    doc = yaml.safe_load(config_yaml) or {}
    keep = (
        "profiles",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "parallelism",
    )
    return flatten({k: v for k, v in doc.items() if k in keep})


def differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[KubeDifference]:
    """Every reading of two control-plane profiles (read_profile's form) that differs.

    An area either track could not read is no difference (nothing is attributed to it).
    """
    out: list[KubeDifference] = []

    def keyed(area: str, b: Mapping[str, str], c: Mapping[str, str]) -> None:
        for key in sorted(set(b) | set(c)):
            if b.get(key) != c.get(key):
                out.append(KubeDifference(area, key, b.get(key, "absent"), c.get(key, "absent")))

    def listed(area: str, b: Iterable[str], c: Iterable[str]) -> None:
        bs, cs = set(b), set(c)
        for item in sorted(bs ^ cs):
            on = ("enabled", "absent") if item in bs else ("absent", "enabled")
            out.append(KubeDifference(area, item, *on))

    for area, key in (("scheduler", "scheduler"), ("feature-gate", "gates")):
        if baseline.get(key) and candidate.get(key):
            keyed(area, baseline[key], candidate[key])
    if baseline.get("admission") and candidate.get("admission"):
        listed("admission", baseline["admission"], candidate["admission"])
    if baseline.get("apis") and candidate.get("apis"):
        called = [
            v
            for v in set(baseline["apis"]) | set(candidate["apis"])
            if (v.rpartition("/")[0] if "/" in v else "") in CALLED_GROUPS
        ]
        listed(
            "api",
            [v for v in baseline["apis"] if v in called],
            [v for v in candidate["apis"] if v in called],
        )
    return out


def _codes(fates: Mapping[str, int]) -> set[int]:
    return {int(m.group(1)) for k, n in fates.items() if n and (m := _CODE.match(k))}


def _said(area: str, diffs: Sequence[KubeDifference], what: str, versions: tuple[str, str]) -> str:
    """`Kubernetes A -> B: what: the first readings of the area that differ`."""
    mine = [d for d in diffs if d.area == area]
    shown = "; ".join(d.words() for d in mine[:3])
    more = f" (+{len(mine) - 3} more)" if len(mine) > 3 else ""
    return f"Kubernetes {versions[0]} -> {versions[1]}: {what}: {shown}{more}"


def attribute(
    cd: PodClassDiff, diffs: Sequence[KubeDifference], versions: tuple[str, str]
) -> str | None:
    """Why a pod class's change is the control plane's (None: it is not shown to be).

    A pod the round's eviction created is placed by the scheduler: its change is attributed
    when the scheduler's defaults differ. A refusal answered with another status code is
    attributed to admission (a code other than 429) or to the served APIs (404/405) when those
    differ. The line names both clusters' versions and the differing readings.
    """
    areas = {d.area for d in diffs}
    replacement = cd.pods.endswith(CREATED_IN_ROUND) or cd.kinds == ["replacement-seen"]
    if replacement and "scheduler" in areas:
        what = "the scheduler places the round's replacement, its defaults differ"
        return _said("scheduler", diffs, what, versions)
    b, c = _codes(cd.baseline), _codes(cd.candidate)
    moved = b ^ c
    if moved & set(API_CODES) and "api" in areas:
        return _said("api", diffs, "an API the release calls is served differently", versions)
    if moved - {PDB_CODE} - set(API_CODES) and "admission" in areas:
        return _said(
            "admission", diffs, "the refusal's code changed and admission differs", versions
        )
    return None


def attribute_outcome(
    failed: Iterable[str], diffs: Sequence[KubeDifference], versions: tuple[str, str]
) -> str | None:
    """Why an experiment's worse outcome is the control plane's: every check it failed on the
    candidate is one the scheduler decides (PLACEMENT_CHECKS) and the scheduler's defaults
    differ. A failed check of what the descheduler did (which pod, how many) never is."""
    ids = set(failed)
    if not ids or not ids <= set(PLACEMENT_CHECKS) or "scheduler" not in {d.area for d in diffs}:
        return None
    what = f"the scheduler decides {', '.join(sorted(ids))}, its defaults differ"
    return _said("scheduler", diffs, what, versions)


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # A binary's own help and defaults: no cluster, and no kubeconfig read (the empty one).
    return run(cmd, env={**os.environ, "KUBECONFIG": os.devnull}, check=False, timeout=timeout)


def read_binaries(apiserver: Path | None, scheduler: Path | None) -> dict[str, Any]:
    """The readings a control plane's binaries give offline: the scheduler's effective
    defaults, the API server's default admission plugins and feature gate defaults."""
    out: dict[str, Any] = {}
    why: list[str] = []
    if scheduler is not None:
        with tempfile.TemporaryDirectory(prefix="desched-sched-") as tmp:
            written = Path(tmp) / "config.yaml"
            # an address nothing answers on: the scheduler writes its config before any call
            cmd = [str(scheduler), "--master=http://127.0.0.1:9", "--secure-port=0"]
            proc = _run([*cmd, f"--write-config-to={written}"])
            if proc.returncode == 0 and written.is_file():
                out["scheduler"] = scheduler_defaults(written.read_text())
            else:
                why.append(f"kube-scheduler --write-config-to exited {proc.returncode}")
    if apiserver is not None:
        proc = _run([str(apiserver), "--help"])
        text = proc.stdout + proc.stderr
        out["admission"], out["gates"] = admission_defaults(text), gate_defaults(text)
        if not out["admission"]:
            why.append("kube-apiserver --help names no default admission plugins")
    if why:
        out["why"] = "; ".join(why)
    return out


def read_profile(session: DeschedSession) -> dict[str, Any]:
    """One track's control-plane readings, while its cluster is up: its version, what its
    own binaries say (only when they are already here: nothing is built for this) and the
    group versions its API server serves."""
    cluster = session.cluster
    out: dict[str, Any] = {"kubernetes": cluster.server_version()}
    tc = session.toolchain
    local = {t: tc.where(t)[0] for t in ("kube-apiserver", "kube-scheduler")}
    if cluster.capabilities.chooses_kubernetes and all(local.values()):
        out.update(read_binaries(local["kube-apiserver"], local["kube-scheduler"]))
    else:
        out["why"] = "the cluster's control-plane binaries are not local: defaults not read"
    proc = cluster.kubectl("api-versions", check=False, timeout=60)
    if proc.returncode == 0:
        out["apis"] = sorted(v.strip() for v in proc.stdout.splitlines() if v.strip())
    else:  # said like the other readings: an area left out silently looks like no difference
        said = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        miss = f"kubectl api-versions exited {proc.returncode}: {said[0]}"
        out["why"] = f"{out['why']}; {miss}" if out.get("why") else miss
    return out


def kubernetes_differ(versions: Iterable[str | None]) -> bool:
    """Whether the tracks run different Kubernetes (each track's chosen version, or its
    server's): then the report has a control-plane section, with readings or why not."""
    return len({v for v in versions if v}) > 1


__all__ = [
    "AREAS",
    "KubeDifference",
    "admission_defaults",
    "attribute",
    "attribute_outcome",
    "differences",
    "flatten",
    "gate_defaults",
    "kubernetes_differ",
    "read_binaries",
    "read_profile",
    "scheduler_defaults",
]
