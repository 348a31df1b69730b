"""Take a snapshot of a live cluster, read-only, without a single Secret.

Read-only by construction: the only requests are GET /version, discovery and list (kwokctl's
exporter pages with `list`; the Python exporter lists, or gets one namespace by name), and one
GET of the descheduler's policy ConfigMap. Never Secrets or ServiceAccounts: they are not in
the resource list handed to either exporter, and any that reach the output anyway are
dropped and counted (`header.filtered.secrets`). `tests/e2e/test_replay_e2e.py` proves both
from the API server's audit log.

`kwokctl snapshot export` (kwok v0.8.0) does the listing where it fits: cluster-wide,
paged, fast. What it cannot do, and so why the Python exporter exists beside it: it has no
`--context` (it uses the kubeconfig's current context: a minimal kubeconfig with the chosen
context is written to a private temp file for it), no namespace scope (it lists every
namespace, which a namespace-bound identity may not do), no field filtering (env, token
volumes, annotations: trimmed here), it exports Secrets and ServiceAccounts by default (its
`--filter` is always given here), it rewrites every timestamp to an offset from its own start
(`$(time-offset-nanosecond N)`: converted back against the time taken just before it ran;
`header.timeBase.uncertaintyS` says by how much that can be off) and it writes no header.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from pytest_desched import kube
from pytest_desched.errors import ConfigError, ProviderError
from pytest_desched.inputs_safe import load_yaml_file
from pytest_desched.log import Reporter, say
from pytest_desched.redaction import scrub_secrets
from pytest_desched.replay import kubeapi
from pytest_desched.replay.capture.format import (
    DESCHEDULER_LABEL,
    FORBIDDEN_KINDS,
    KIND_SECTION,
    SECTIONS,
    Snapshot,
    key,
    rfc3339,
)
from pytest_desched.replay.capture.redact import redact_snapshot
from pytest_desched.replay.capture.trim import Filtered, keep_container_args, trim
from pytest_desched.replay.capture.usage import read_usage
from pytest_desched.replay.capture.usage import summary as usage_summary
from pytest_desched.replay.objects import KINDS, object_path

# section -> (API path prefix, resource, namespaced): what the snapshot lists, in file order
RESOURCES: dict[str, tuple[str, str, bool]] = {
    section: (KINDS[kind].prefix, KINDS[kind].plural, namespaced)
    for section, (_, kind, namespaced) in SECTIONS.items()
}
# kwokctl's `--filter` (its own resource spelling); Secrets and ServiceAccounts never in it.
KWOKCTL_FILTER = [
    "namespace",
    "node",
    "priorityclass.scheduling.k8s.io",
    "storageclass.storage.k8s.io",
    "persistentvolume",
    "persistentvolumeclaim",
    "poddisruptionbudget.policy",
    "deployment.apps",
    "replicaset.apps",
    "statefulset.apps",
    "daemonset.apps",
    "job.batch",
    "cronjob.batch",
    "pod",
]
READ_VERBS = ("get", "list", "watch")
_OFFSET = re.compile(r"\$\(time-offset-nanosecond (-?\d+)\)")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_VERSION_TAG = re.compile(r"v\d+\.\d+\.\d+\S*")


class SnapshotError(ProviderError):
    """The cluster would not give what a snapshot needs; nothing was changed anywhere."""


# -- inputs ------------------------------------------------------------------------------
def resolve_kubeconfig(kubeconfig: str | Path | None) -> Path:
    """The explicit kubeconfig, else $KUBECONFIG; never ~/.kube/config implicitly."""
    raw = str(kubeconfig) if kubeconfig else os.environ.get("KUBECONFIG", "")
    if not raw or raw == os.devnull:
        raise ConfigError(
            "no kubeconfig: pass --kubeconfig PATH (or set KUBECONFIG); ~/.kube/config is "
            "never read implicitly"
        )
    if os.pathsep in raw:
        raise ConfigError(
            f"KUBECONFIG lists several files ({raw}); pass the one holding the context with "
            "--kubeconfig"
        )
    path = Path(raw).expanduser()
    if not path.is_file():
        raise ConfigError(f"kubeconfig {path}: no such file; pass --kubeconfig PATH")
    return path


def check_inputs(
    kubeconfig: str | Path | None, context: str | None, namespaces: Iterable[str] | None
) -> tuple[Path, str, list[str] | None]:
    """Every input checked before the first request: file, context, namespace names."""
    path = resolve_kubeconfig(kubeconfig)
    doc = load_yaml_file(path, what="kubeconfig") or {}
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path}: not a mapping; give a kubeconfig file")
    contexts = [c.get("name") for c in doc.get("contexts") or [] if isinstance(c, dict)]
    if not context:
        raise ConfigError(
            f"pass --context NAME (the kubeconfig's contexts: {contexts}); the current context "
            "is never assumed for a snapshot"
        )
    if context not in contexts:
        raise ConfigError(f"context {context!r} is not in {path}; its contexts: {contexts}")
    ns_list = None
    if namespaces:
        ns_list = sorted(set(namespaces))
        bad = [n for n in ns_list if not _DNS1123_LABEL.fullmatch(n) or len(n) > 63]
        if bad:
            raise ConfigError(f"--namespace {bad}: not RFC 1123 labels")
    return path, context, ns_list


def minimal_kubeconfig(path: Path, context: str) -> dict[str, Any]:
    """Only `context`, its cluster and user, current-context set, relative paths made absolute.

    kwokctl has no --context flag; relative certificate paths resolve against the original
    file's directory, which a copy elsewhere would break.
    """
    doc = load_yaml_file(path, what="kubeconfig") or {}
    ctx = next(c for c in doc.get("contexts") or [] if c.get("name") == context)
    cname, uname = (ctx.get("context") or {}).get("cluster"), (ctx.get("context") or {}).get("user")
    base = path.resolve().parent

    def absolutize(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        d = dict(d)
        for k in keys:
            if isinstance(d.get(k), str) and d[k] and not os.path.isabs(d[k]):
                d[k] = str(base / d[k])
        return d

    clusters = [
        {**c, "cluster": absolutize(c.get("cluster") or {}, ("certificate-authority",))}
        for c in doc.get("clusters") or []
        if c.get("name") == cname
    ]
    users = [
        {
            **u,
            "user": absolutize(
                u.get("user") or {}, ("client-certificate", "client-key", "tokenFile")
            ),
        }
        for u in doc.get("users") or []
        if u.get("name") == uname
    ]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": users,
        "contexts": [ctx],
        "current-context": context,
    }


# -- exporters ---------------------------------------------------------------------------
class Reads:
    """Every request the snapshot makes, as (verb, what): the header lists them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def add(self, verb: str, what: str) -> None:
        assert verb in READ_VERBS, f"snapshot tried a {verb} request"  # never anything else
        self.calls.append((verb, what))


def _get_json(api: Any, path: str, query: list[tuple[str, Any]] | None = None) -> Any:
    return kubeapi.get(api, path, query)


def _list(api: Any, path: str, reads: Reads, what: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        query: list[tuple[str, Any]] = [("limit", 500)]
        if token:
            query.append(("continue", token))
        reads.add("list", what)
        doc = _get_json(api, path, query)
        kind = str(doc.get("kind", "")).removesuffix("List")
        for it in doc.get("items") or []:
            it.setdefault("kind", kind)
            items.append(it)
        token = (doc.get("metadata") or {}).get("continue")
        if not token:
            return items


def export_with_client(
    api: Any, namespaces: list[str] | None, reads: Reads, report: Reporter = say
) -> tuple[list[dict[str, Any]], list[str]]:
    """List every snapshot resource with the Python client; namespaced ones per namespace."""
    from kubernetes.client.rest import ApiException

    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for section, (prefix, resource, namespaced) in RESOURCES.items():
        if section == "namespaces" and namespaces:
            for ns in namespaces:
                reads.add("get", f"namespaces/{ns}")
                try:
                    out.append({**_get_json(api, f"{prefix}/namespaces/{ns}"), "kind": "Namespace"})
                except ApiException as exc:
                    raise SnapshotError(f"namespace {ns}: HTTP {exc.status} {exc.reason}") from None
            continue
        paths = (
            [f"{prefix}/namespaces/{ns}/{resource}" for ns in namespaces]
            if namespaced and namespaces
            else [f"{prefix}/{resource}"]
        )
        for path in paths:
            try:
                out.extend(_list(api, path, reads, path))
            except ApiException as exc:
                if section in ("nodes", "pods"):
                    raise SnapshotError(
                        f"list {path}: HTTP {exc.status} {exc.reason}; a snapshot needs to list "
                        "nodes and pods (grant get/list on them, or use another context)"
                    ) from None
                notes.append(f"{path}: not readable (HTTP {exc.status}); left out")
                report(f"snapshot: {path} not readable (HTTP {exc.status}); left out")
    return out, notes


def export_with_kwokctl(
    kwokctl: Path, kubeconfig: Path, context: str, reads: Reads
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`kwokctl snapshot export`, timestamps converted back; (objects, time-base facts)."""
    work = Path(tempfile.mkdtemp(prefix="desched-snapshot-"))  # 0700
    try:
        kc = work / "kubeconfig.yaml"
        fd = os.open(kc, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(minimal_kubeconfig(kubeconfig, context), fh)
        out = work / "export.yaml"
        # heavy: psutil, kept out of this module's import
        from pytest_desched.providers.embedded.cluster import kwokctl_env

        env = kwokctl_env(work / "kwok")  # its own workdir; KUBECONFIG=/dev/null
        cmd = [
            str(kwokctl),
            "snapshot",
            "export",
            "--kubeconfig",
            str(kc),
            "--path",
            str(out),
            "--filter",
            ",".join(KWOKCTL_FILTER),
        ]
        for f in KWOKCTL_FILTER:
            reads.add("list", f"{f} (kwokctl)")
        base = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        proc = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        took = time.monotonic() - t0
        if proc.returncode != 0 or not out.is_file():
            raise SnapshotError(
                f"kwokctl snapshot export exited {proc.returncode}: "
                f"{scrub_secrets((proc.stderr or proc.stdout)[-800:])}"
            )
        text = out.read_text()
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the kubeconfig copy never outlives the call

    text = revert_offsets(text, base)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    objs = [_plain(d) for d in yaml.load_all(text, Loader=loader) if isinstance(d, dict)]
    return objs, {
        "exporter": "kwokctl snapshot export",
        "base": rfc3339(base),
        "uncertaintyS": round(took, 3),
        "why": "kwokctl writes times as offsets from its own start; converted back against "
        "the time taken just before it ran, so ages may be off by at most its run time",
    }


def _plain(x: Any) -> Any:
    """YAML timestamps (unquoted after the revert) back to the API's RFC 3339 strings."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, dt.datetime):
        return (
            (x if x.tzinfo else x.replace(tzinfo=dt.UTC))
            .astimezone(dt.UTC)
            .strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    return x


def revert_offsets(text: str, base: dt.datetime) -> str:
    """kwokctl's `$(time-offset-nanosecond N)` back to RFC 3339 timestamps, from `base`."""

    def revert(m: re.Match[str]) -> str:
        t = base + dt.timedelta(microseconds=int(m.group(1)) // 1000)
        return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    return _OFFSET.sub(revert, text)


# -- the descheduler ---------------------------------------------------------------------
def _pod_spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return (spec.get("template") or {}).get("spec") or {}


def _policy_flag(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a.startswith("--policy-config-file="):
            return a.split("=", 1)[1]
        if a == "--policy-config-file" and i + 1 < len(args):
            return args[i + 1]
    return None


def find_descheduler(objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Descheduler workloads (CronJob or Deployment): the chart's label or a policy flag."""
    found = []
    for o in objs:
        if o.get("kind") not in ("CronJob", "Deployment"):
            continue
        meta = o.get("metadata") or {}
        labelled = (meta.get("labels") or {}).get(DESCHEDULER_LABEL[0]) == DESCHEDULER_LABEL[1]
        spec = _pod_spec_of(o)
        for c in spec.get("containers") or []:
            args = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
            flag = _policy_flag(args)
            if not (flag or (labelled and "descheduler" in str(c.get("image", "")))):
                continue
            image = str(c.get("image", ""))
            tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
            entry: dict[str, Any] = {
                "kind": o["kind"],
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "image": image,
                "version": tag if _VERSION_TAG.fullmatch(tag) else None,
                "args": keep_container_args(c),
                "suspended": bool((o.get("spec") or {}).get("suspend")),
            }
            if flag:
                entry["policyFile"] = flag
                entry["configMap"] = _policy_configmap(spec, c, flag)
            found.append(entry)
            break
    return sorted(found, key=lambda e: (e["kind"] != "CronJob", e["namespace"], e["name"]))


def _policy_configmap(spec: dict[str, Any], c: dict[str, Any], flag: str) -> dict[str, Any] | None:
    """The ConfigMap (and key) mounted where --policy-config-file points."""
    vols = {v.get("name"): v for v in spec.get("volumes") or []}
    for m in sorted(c.get("volumeMounts") or [], key=lambda m: -len(m.get("mountPath", ""))):
        mp = str(m.get("mountPath", "")).rstrip("/")
        if not flag.startswith(mp + "/"):
            continue
        cm = (vols.get(m.get("name")) or {}).get("configMap")
        if not cm:
            return None
        rel = m.get("subPath") or flag[len(mp) + 1 :]
        key_ = next((i["key"] for i in cm.get("items") or [] if i.get("path") == rel), rel)
        return {"name": cm.get("name"), "key": key_}
    return None


def read_policy(api: Any, entry: dict[str, Any], reads: Reads) -> tuple[str | None, str | None]:
    """(policy text, note): one GET of the policy ConfigMap, scrubbed."""
    from kubernetes.client.rest import ApiException

    cm = entry.get("configMap")
    if not cm:
        return None, f"{entry['kind']} {entry['name']}: no ConfigMap volume behind its policy flag"
    path = object_path("ConfigMap", entry["namespace"], cm["name"])
    reads.add("get", f"configmaps/{cm['name']}")
    try:
        doc = _get_json(api, path)
    except ApiException as exc:
        return None, f"ConfigMap {entry['namespace']}/{cm['name']}: HTTP {exc.status}"
    text = (doc.get("data") or {}).get(cm["key"])
    if text is None:
        return None, f"ConfigMap {entry['namespace']}/{cm['name']} has no key {cm['key']}"
    scrubbed = scrub_secrets(text)
    note = "the policy held a credential; it was scrubbed" if scrubbed != text else None
    return scrubbed, note


# -- assembly ----------------------------------------------------------------------------
def _is_descheduler_pod(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(DESCHEDULER_LABEL[0]) == DESCHEDULER_LABEL[1]


def assemble(
    raw: Iterable[dict[str, Any]],
    namespaces: list[str] | None,
    descheduler: list[dict[str, Any]],
) -> tuple[dict[str, list[dict[str, Any]]], Filtered]:
    """Sort raw objects into sections, drop forbidden kinds, trim; only the scope's namespaces."""
    filtered = Filtered()
    objects: dict[str, list[dict[str, Any]]] = {s: [] for s in SECTIONS}
    keep_cron = {(d["namespace"], d["name"]) for d in descheduler if d["kind"] == "CronJob"}
    for obj in raw:
        kind = obj.get("kind")
        if kind in FORBIDDEN_KINDS:
            filtered[f"{kind}s"] += 1
            continue
        section = KIND_SECTION.get(str(kind))
        if section is None:
            filtered[f"other.{kind}"] += 1
            continue
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace")
        if namespaces and SECTIONS[section][2] and ns not in namespaces:
            continue
        if section == "cronJobs" and (ns, meta.get("name")) not in keep_cron:
            continue  # only the descheduler's own CronJob: other CronJobs' Jobs are not restored
        if namespaces and section == "namespaces" and meta.get("name") not in namespaces:
            continue
        objects[section].append(trim(section, obj, filtered))
    for items in objects.values():
        items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
    return {s: v for s, v in objects.items() if v}, filtered


def take_snapshot(
    kubeconfig: str | Path | None,
    context: str | None,
    namespaces: Iterable[str] | None = None,
    redact: bool = False,
    exporter: str = "auto",
    kwokctl: Path | None = None,
    report: Reporter = say,
) -> Snapshot:
    """Snapshot the cluster behind `context` (read-only; see the module docstring).

    `exporter`: `kwokctl` (needs `kwokctl`, the binary; cluster-wide only), `client`, or
    `auto` (kwokctl when given and no namespace scope). `redact` renames consistently
    (pytest_desched.replay.capture.redact); the mapping is never written.
    """
    path, context, ns_list = check_inputs(kubeconfig, context, namespaces)
    if exporter not in ("auto", "kwokctl", "client"):
        raise ConfigError(f"exporter {exporter!r}: use auto, kwokctl or client")
    if exporter == "kwokctl" and (kwokctl is None or not Path(kwokctl).is_file()):
        raise ConfigError("exporter kwokctl needs the kwokctl binary (`desched tools kwokctl`)")
    if exporter == "kwokctl" and ns_list:
        raise ConfigError(
            "kwokctl exports every namespace; use the client exporter with --namespace"
        )
    use_kwokctl = exporter == "kwokctl" or (
        exporter == "auto" and kwokctl is not None and Path(kwokctl).is_file() and not ns_list
    )
    api = kube.user_client(path, context)  # exit 2 for a bad server URL, 3 when none answers
    reads = Reads()
    t0 = time.monotonic()
    reads.add("get", "/version")
    version = _get_json(api, "/version").get("gitVersion")
    taken_at = dt.datetime.now(dt.UTC)
    notes: list[str] = []
    if use_kwokctl:
        assert kwokctl is not None
        raw, time_base = export_with_kwokctl(Path(kwokctl), path, context, reads)
    else:
        raw, notes = export_with_client(api, ns_list, reads, report)
        time_base = {"exporter": "python client", "base": rfc3339(taken_at), "uncertaintyS": 0}
    descheduler = find_descheduler(raw)
    policy_note: str | None
    policy, policy_note = (None, "no descheduler CronJob or Deployment found")
    if descheduler:
        policy, policy_note = read_policy(api, descheduler[0], reads)
    if policy_note:
        notes.append(policy_note)
    objects, filtered = assemble(raw, ns_list, descheduler)
    skipped = sum(_is_descheduler_pod(p) for p in objects.get("pods", []))
    if skipped:
        notes.append(f"{skipped} pods of the descheduler itself are kept but never restored")
    if ns_list:
        notes.append(
            f"scoped to namespaces {ns_list}: pods of other namespaces are missing, so nodes "
            "look emptier than they were (nodeFit and utilization differ)"
        )
    usage, usage_note = read_usage(
        api,
        ns_list,
        {str(n["metadata"]["name"]) for n in objects.get("nodes", [])},
        {key(p) for p in objects.get("pods", [])},
        reads.add,
        report,
        rfc3339(dt.datetime.now(dt.UTC)),
    )
    if usage_note:
        notes.append(usage_note)
    header: dict[str, Any] = {
        "takenAt": rfc3339(taken_at),
        "source": {
            "serverVersion": version,
            "context": context,
            "nodes": len(objects.get("nodes", [])),
            "pods": len(objects.get("pods", [])),
        },
        "takenWith": {
            **time_base,
            "readOnly": "only get, list and watch requests",
            "requests": sorted({f"{v} {w}" for v, w in reads.calls}),
            "seconds": round(time.monotonic() - t0, 3),
        },
        "scope": {"namespaces": ns_list or "all"},
        "filtered": {
            "secrets": filtered.get("Secrets", 0),
            "serviceAccounts": filtered.get("ServiceAccounts", 0),
            "never read": ["secrets", "serviceaccounts", "configmaps other than the policy's"],
            **{
                k: v for k, v in sorted(filtered.items()) if k not in ("Secrets", "ServiceAccounts")
            },
        },
        "descheduler": descheduler[0] if descheduler else {},
        "otherDeschedulers": descheduler[1:],
        "redacted": False,
        "usage": {
            **usage_summary(usage, len(objects.get("pods", []))),
            **({"why": usage_note} if usage_note else {}),
        },
        "notes": notes,
    }
    snap = Snapshot(header=header, policy=policy, objects=objects, usage=usage)
    if redact:
        snap = redact_snapshot(snap)
    return snap.validate("the snapshot just taken")
