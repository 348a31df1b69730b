"""The upgrade canary's static comparison: what differs between baseline and candidate before
anything runs.

The runbook's upgrade section asks for this first: compare `helm show values` and the
rendered manifests of both charts (RBAC widened or narrowed, args, image, CronJob fields,
objects added or removed), the same policy linted under both versions, the plugin and pod
protection defaults, and the metric names each binary serves. Every difference is classified
the runbook's way:

* ``rollback``: a rollback trigger unless explained (RBAC widened, a protection lowered, an
  eviction cap raised, a metric the baseline served gone, the CronJob no longer suspended or
  no longer in dry-run under the runbook's first-install flags);
* ``review``: a behaviour-relevant change to look at (args, image, CronJob fields, objects
  added or removed, RBAC narrowed, chart values);
* ``info``: cosmetic or inert (chart labels, opt-in values that render nothing by default).

Everything but :func:`render_chart` (and :func:`compare_charts` over it) is a pure function
over data. Values and rendered objects may hold a credential: every Difference is scrubbed
when built (:mod:`pytest_desched.evidence.redaction`), so none reaches a report.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.descheduler.chart import (
    LAB_CMD_OPTIONS,
    chart_meta,
    parse_manifests,
    private_file,
    sha256_file,
)
from pytest_desched.descheduler.policy.lint import DEPRECATED_EVICTOR_BOOLEANS, RULES, Finding
from pytest_desched.evidence.redaction import scrub_data, scrub_secrets
from pytest_desched.providers.base import run

__all__ = [
    "AREAS",
    "CHANGES",
    "CLUSTER_API_VERSIONS",
    "SEVERITIES",
    "Difference",
    "StaticComparison",
    "chart_label",
    "compare_charts",
    "compare_defaults",
    "compare_lint",
    "compare_manifests",
    "compare_metric_names",
    "compare_values",
    "default_protections_from_source",
    "effective_protections",
    "render_chart",
]

AREAS = (
    "values",
    "object",
    "rbac",
    "args",
    "image",
    "cronjob",
    "policy-lint",
    "defaults",
    "metrics",
)
CHANGES = ("added", "removed", "changed", "widened", "narrowed")
SEVERITIES = ("rollback", "review", "info")  # most serious first
_RANK = {s: i for i, s in enumerate(SEVERITIES)}

# The lab's clusters (Kubernetes 1.36) serve these; an offline `helm template` knows only
# group/versions, so a chart gating on a kind (the master chart's PDB) would render the
# removed policy/v1beta1 form that no install on those clusters ever gets.
CLUSTER_API_VERSIONS = ("policy/v1/PodDisruptionBudget",)

Path_ = tuple[str, ...]  # internal path: keys, and "[name]" for an element of a named list


@dataclass(frozen=True)
class Difference:
    """One classified difference between baseline and candidate (values already scrubbed)."""

    area: str  # one of AREAS
    path: str  # where, e.g. "ClusterRole/descheduler rules[pods]" or "values.cmdOptions.v"
    change: str  # one of CHANGES
    baseline: Any
    candidate: Any
    severity: str  # one of SEVERITIES
    message: str  # what changed and why it matters per the runbook


def _diff(
    area: str,
    path: str,
    change: str,
    baseline: Any,
    candidate: Any,
    severity: str,
    message: str,
    key: str = "",
) -> Difference:
    """A Difference with its values scrubbed; `key` gives a bare value its key's context."""
    assert area in AREAS and change in CHANGES and severity in SEVERITIES
    return Difference(
        area,
        scrub_secrets(path),
        change,
        _scrub(key, baseline),
        _scrub(key, candidate),
        severity,
        scrub_secrets(message),
    )


def _scrub(key: str, value: Any) -> Any:
    # scrub_data judges a string by its key ("authToken: ..." is a secret whatever it looks like).
    return scrub_data({key or "value": value})[key or "value"]


# ---------------------------------------------------------------------------- tree walk ---

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _fmt(path: Path_) -> str:
    out = ""
    for p in path:
        if p.startswith("["):
            out += p
        elif _PLAIN_KEY.fullmatch(p):
            out += f".{p}" if out else p
        else:
            out += f"[{json.dumps(p)}]"
    return out


def _last_key(path: Path_) -> str:
    return next((p for p in reversed(path) if not p.startswith("[")), "")


def _named(v: Any) -> dict[str, Any] | None:
    """A list of dicts with unique names (containers, profiles, pluginConfig) keyed by name."""
    if not isinstance(v, list) or not v:
        return None
    if not all(isinstance(x, Mapping) and isinstance(x.get("name"), str) for x in v):
        return None
    names = [x["name"] for x in v]
    return dict(zip(names, v, strict=True)) if len(set(names)) == len(names) else None


def _walk(a: Any, b: Any, path: Path_ = ()) -> Iterator[tuple[Path_, str, Any, Any]]:
    """(path, added|removed|changed, baseline, candidate); a subtree on one side only is one row."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        items: Iterable[tuple[str, Any, Any, bool, bool]] = (
            (str(k), a.get(k), b.get(k), k in a, k in b) for k in dict.fromkeys([*a, *b])
        )
    else:
        na, nb = _named(a), _named(b)
        if na is None or nb is None:
            if a != b:
                yield path, "changed", a, b
            return
        items = (
            (f"[{k}]", na.get(k), nb.get(k), k in na, k in nb) for k in dict.fromkeys([*na, *nb])
        )
    for k, va, vb, in_a, in_b in items:
        p = (*path, k)
        if not in_b:
            yield p, "removed", va, None
        elif not in_a:
            yield p, "added", None, vb
        else:
            yield from _walk(va, vb, p)


def _leaves(v: Any, path: Path_ = ()) -> dict[Path_, Any]:
    if isinstance(v, Mapping) and v:
        return {k: x for key, sub in v.items() for k, x in _leaves(sub, (*path, str(key))).items()}
    named = _named(v)
    if named is not None:
        return {
            k: x for n, sub in named.items() for k, x in _leaves(sub, (*path, f"[{n}]")).items()
        }
    return {path: v}


def _leaf_pairs(path: Path_, a: Any, b: Any) -> Iterator[tuple[Path_, Any, Any]]:
    """Every leaf under one walk row, both sides: where the protection rules look."""
    la, lb = _leaves(a, path), _leaves(b, path)
    for k in dict.fromkeys([*la, *lb]):
        if la.get(k) != lb.get(k):
            yield k, la.get(k), lb.get(k)


# ------------------------------------------------------------------ protection rules ---

_EVICT_FLAGS = {k for k, (f, _) in DEPRECATED_EVICTOR_BOOLEANS.items() if f == "defaultDisabled"}
_IGNORE_FLAGS = {k for k, (f, _) in DEPRECATED_EVICTOR_BOOLEANS.items() if f == "extraEnabled"}
_CAPS = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _seconds(v: Any) -> float | None:
    """A Go duration ("10m0s", as the effective policy spells minPodAge) in seconds."""
    if v is None or v in ("", "0"):
        return 0.0
    if _num(v) is not None:
        return _num(v)
    parts = _DURATION.findall(str(v))
    if not parts or "".join(n + u for n, u in parts) != str(v):
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else []


def _lowering(path: Path_, b: Any, c: Any) -> str | None:
    """Why a leaf change lowers a protection or raises a cap (the runbook's rollback), or None."""
    key = path[-1] if path else ""
    parent = path[-2] if len(path) > 1 else ""
    if parent == "podProtections" and key == "defaultDisabled":
        new = [x for x in _as_list(c) if x not in _as_list(b)]
        return f"default protection(s) {', '.join(map(str, new))} disabled" if new else None
    if parent == "podProtections" and key == "extraEnabled":
        gone = [x for x in _as_list(b) if x not in _as_list(c)]
        return (
            f"extra protection(s) {', '.join(map(str, gone))} no longer enabled" if gone else None
        )
    if key in _EVICT_FLAGS and c is True and b is not True:
        return f"{key}: true disables the {DEPRECATED_EVICTOR_BOOLEANS[key][1]} protection"
    if key in _IGNORE_FLAGS and b is True and c is not True:
        return f"{key} off drops the {DEPRECATED_EVICTOR_BOOLEANS[key][1]} protection"
    if key == "nodeFit" and b is True and c is not True:
        return "nodeFit off: pods are evicted even where no other node fits them"
    if key == "minReplicas" and (_num(c) or 0) < (_num(b) or 0):
        return f"minReplicas lowered ({b} -> {c}): smaller owners become evictable"
    if key == "minPodAge":
        sb, sc = _seconds(b), _seconds(c)
        if sb is not None and sc is not None and sc < sb:
            return f"minPodAge lowered ({b} -> {c}): younger pods become evictable"
    if key == "noEvictionPolicy" and b == "Mandatory" and c != "Mandatory":
        return "noEvictionPolicy no longer Mandatory: annotated pods become evictable"
    if parent == "priorityThreshold" and key == "value":
        nb, nc = _num(b), _num(c)
        if nb is not None and nc is not None and nc > nb:
            return f"priorityThreshold raised ({b} -> {c}): fewer pods count as system-critical"
    if key in _CAPS and _num(b) is not None and (c is None or (_num(c) or 0) > (_num(b) or 0)):
        return f"eviction cap {key} {'removed' if c is None else 'raised'} ({b} -> {c})"
    return None


def _lowerings(path: Path_, b: Any, c: Any) -> list[str]:
    return [r for p, x, y in _leaf_pairs(path, b, c) if (r := _lowering(p, x, y))]


def effective_protections(
    args: Mapping[str, Any], defaults: Sequence[str] | None = None
) -> list[str]:
    """The protections a DefaultEvictor's args leave active, as the descheduler computes them.

    Mirrors getEffectivePodProtections (defaultevictor.go, v0.36.0): podProtections when
    either list is non-empty (`defaults` minus defaultDisabled, plus extraEnabled), else the
    deprecated booleans (all four default protections unless an evict* flag is true).
    """
    if defaults is None:
        from pytest_desched.descheduler.policy.checker import facts_for

        defaults = facts_for().default_pod_protections  # the pinned descheduler's own list
    pp = args.get("podProtections") or {}
    disabled, extra = _as_list(pp.get("defaultDisabled")), _as_list(pp.get("extraEnabled"))
    if disabled or extra:
        return [p for p in defaults if p not in disabled] + [p for p in extra if p not in defaults]
    out = [
        p
        for flag, (_, p) in DEPRECATED_EVICTOR_BOOLEANS.items()
        if flag in _EVICT_FLAGS and args.get(flag) is not True
    ]
    return out + [
        p
        for flag, (_, p) in DEPRECATED_EVICTOR_BOOLEANS.items()
        if flag in _IGNORE_FLAGS and args.get(flag) is True
    ]


_GO_CONST = re.compile(r"(\w+)\s+PodProtection\s*=\s*\"([^\"]+)\"")
_GO_DEFAULTS = re.compile(r"defaultPodProtections\s*=\s*\[\]PodProtection\{([^}]*)\}", re.S)


def default_protections_from_source(source: Path) -> tuple[str, ...]:
    """`defaultPodProtections` of a descheduler source tree (a candidate's own defaults).

    Read from pkg/framework/plugins/defaultevictor/types.go, because a candidate may change
    which protections are on by default ("subject to change in future versions", it says).
    """
    types_go = source / "pkg/framework/plugins/defaultevictor/types.go"
    text = types_go.read_text(encoding="utf-8")
    consts = dict(_GO_CONST.findall(text))
    m = _GO_DEFAULTS.search(text)
    if m is None:
        raise ValueError(f"{types_go}: no defaultPodProtections list")
    names = [re.sub(r"//.*", "", n).strip() for n in m.group(1).split(",")]
    return tuple(consts.get(n, n.strip('"')) for n in names if n)


# ------------------------------------------------------------------------------ values ---


def _inert(v: Any) -> bool:
    """A value that renders nothing by default (opt-in: `enabled: false`, empty, null)."""
    if isinstance(v, Mapping) and v.get("enabled") is False:
        return True
    return v is None or v is False or v in ("", {}, [])


def compare_values(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[Difference]:
    """`helm show values` of both charts, by path (a key on one side only is one row).

    A removed key matters because helm silently ignores values a chart no longer reads: a
    values file written for the baseline may stop doing what it says under the candidate.
    """
    out: list[Difference] = []
    for path, change, b, c in _walk(baseline, candidate, ("values",)):
        where, key = _fmt(path), _last_key(path)
        lowered = _lowerings(path, b, c)
        if lowered:
            sev, msg = (
                "rollback",
                f"the chart's default policy lowers a protection: {'; '.join(lowered)}",
            )
        elif change == "added" and _inert(c):
            sev, msg = (
                "info",
                f"new value {where}, inert by default (opt-in): renders nothing unless set",
            )
        elif change == "added":
            sev, msg = (
                "review",
                f"new value {where} with a non-empty default: check what it renders",
            )
        elif change == "removed":
            sev = "review"
            msg = (
                f"{where} is gone: a values file that sets it is silently ignored by the candidate"
            )
        elif _inert(b) and _inert(c):
            sev, msg = "info", f"{where}: one empty default for another"
        else:
            sev, msg = "review", f"default of {where} changed: installs that rely on it change too"
        out.append(_diff("values", where, change, b, c, sev, msg, key))
    return out


# --------------------------------------------------------------------------- manifests ---

_ROLES = ("ClusterRole", "Role")
_BINDINGS = ("ClusterRoleBinding", "RoleBinding")
_POD_SPEC = {
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
}
_LIFTED = ("image", "command", "args")  # compared per container as image / args rows

Perm = tuple[str, str, str, str]  # apiGroup (or "nonResourceURL"), resource, resourceName, verb


def _label(doc: Mapping[str, Any]) -> str:
    md = doc.get("metadata") or {}
    ns = md.get("namespace")
    return (
        f"{doc.get('kind')}/{ns}/{md.get('name')}" if ns else f"{doc.get('kind')}/{md.get('name')}"
    )


def _index(docs: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {_label(d): d for d in docs}


def _perms(rules: Any) -> set[Perm]:
    out: set[Perm] = set()
    for r in _as_list(rules):
        if not isinstance(r, Mapping):
            continue
        verbs = [str(v) for v in _as_list(r.get("verbs"))]
        for url in _as_list(r.get("nonResourceURLs")):
            out |= {("nonResourceURL", str(url), "", v) for v in verbs}
        names = [str(n) for n in _as_list(r.get("resourceNames"))] or [""]
        for g in _as_list(r.get("apiGroups")):
            for res in _as_list(r.get("resources")):
                out |= {(str(g), str(res), n, v) for n in names for v in verbs}
    return out


def _res_match(have: str, want: str) -> bool:
    if have in ("*", want):
        return True
    if have.endswith("/*"):  # "pods/*": every subresource of pods
        return want.startswith(have[:-1])
    if have.startswith("*/"):  # "*/scale": that subresource of anything
        return want.endswith(have[1:])
    return False


def _covers(have: Perm, want: Perm) -> bool:
    hg, hr, hn, hv = have
    wg, wr, wn, wv = want
    if (hg == "nonResourceURL") != (wg == "nonResourceURL"):
        return False
    if hg == "nonResourceURL":
        url_ok = hr == wr or (hr.endswith("*") and wr.startswith(hr[:-1]))
        return url_ok and hv in ("*", wv)
    return hg in ("*", wg) and _res_match(hr, wr) and hn in ("", wn) and hv in ("*", wv)


def _perm_where(p: Perm) -> str:
    g, r, n, _ = p
    res = r if g in ("", "nonResourceURL") else f"{g}/{r}"
    return f"{res}:{n}" if n else res


def _rbac_diffs(label: str, b_rules: Any, c_rules: Any) -> list[Difference]:
    """Per (apiGroup, resource, resourceName): verbs granted beyond / no longer within the other."""
    pb, pc = _perms(b_rules), _perms(c_rules)
    widened = [p for p in sorted(pc) if not any(_covers(h, p) for h in pb)]
    narrowed = [p for p in sorted(pb) if not any(_covers(h, p) for h in pc)]

    def verbs(perms: set[Perm], key: tuple[str, str, str]) -> list[str]:
        return sorted({p[3] for p in perms if p[:3] == key})

    out: list[Difference] = []
    for change, perms in (("widened", widened), ("narrowed", narrowed)):
        for key in dict.fromkeys(p[:3] for p in perms):
            delta = sorted({p[3] for p in perms if p[:3] == key})
            where = f"{label} rules[{_perm_where((*key, ''))}]"
            if change == "widened":
                sev = "rollback"
                msg = (
                    f"{label} grants {', '.join(delta)} on {_perm_where((*key, ''))} beyond the "
                    "baseline: wider RBAC for this eviction-capable identity is a rollback "
                    "trigger unless explained"
                )
            else:
                sev = "review"
                msg = (
                    f"{label} no longer grants {', '.join(delta)} on {_perm_where((*key, ''))}: "
                    "a candidate that still needs it gets 403 (fails closed); confirm in the "
                    "behaviour comparison"
                )
            out.append(_diff("rbac", where, change, verbs(pb, key), verbs(pc, key), sev, msg))
    return out


def _subject(s: Any) -> str:
    if not isinstance(s, Mapping):
        return str(s)
    ns = f"{s.get('namespace')}/" if s.get("namespace") else ""
    return f"{s.get('kind')}:{ns}{s.get('name')}"


def _binding_diffs(label: str, b: Mapping[str, Any], c: Mapping[str, Any]) -> list[Difference]:
    out: list[Difference] = []
    sb = [_subject(s) for s in _as_list(b.get("subjects"))]
    sc = [_subject(s) for s in _as_list(c.get("subjects"))]
    if added := [s for s in sc if s not in sb]:
        msg = f"{label} binds {', '.join(added)} too: more identities get the role (rollback trigger unless explained)"
        out.append(_diff("rbac", f"{label} subjects", "widened", sb, sc, "rollback", msg))
    if gone := [s for s in sb if s not in sc]:
        msg = f"{label} no longer binds {', '.join(gone)}: that identity loses the role (fails closed)"
        out.append(_diff("rbac", f"{label} subjects", "narrowed", sb, sc, "review", msg))
    if b.get("roleRef") != c.get("roleRef"):
        msg = f"{label} refers to another role: what it grants must be compared by hand (rollback trigger unless explained)"
        out.append(
            _diff(
                "rbac",
                f"{label} roleRef",
                "changed",
                b.get("roleRef"),
                c.get("roleRef"),
                "rollback",
                msg,
            )
        )
    return out


def _args_map(args: Sequence[Any]) -> dict[str, list[Any]]:
    """`--flag=value` / `--flag` (as the chart renders cmdOptions) -> flag: [values]."""
    out: dict[str, list[Any]] = {}
    for i, a in enumerate(args):
        s = str(a)
        if s.startswith("-"):
            name, eq, val = s.partition("=")
            out.setdefault(name, []).append(val if eq else None)
        else:
            out.setdefault(f"arg[{i}]", []).append(s)
    return out


def _container_diffs(
    label: str, where: str, b: Mapping[str, Any], c: Mapping[str, Any]
) -> list[Difference]:
    out: list[Difference] = []
    if b.get("image") != c.get("image"):
        msg = f"{label} {where} runs another image: the runbook pins image and chart separately; confirm this is the candidate you mean"
        out.append(
            _diff(
                "image",
                f"{label} {where}.image",
                "changed",
                b.get("image"),
                c.get("image"),
                "review",
                msg,
            )
        )
    if b.get("command") != c.get("command"):
        msg = f"{label} {where} starts another command"
        out.append(
            _diff(
                "args",
                f"{label} {where}.command",
                "changed",
                b.get("command"),
                c.get("command"),
                "review",
                msg,
            )
        )
    ab, ac = _args_map(_as_list(b.get("args"))), _args_map(_as_list(c.get("args")))
    for flag in dict.fromkeys([*ab, *ac]):
        vb, vc = ab.get(flag), ac.get(flag)
        if vb == vc:
            continue
        change = "added" if vb is None else "removed" if vc is None else "changed"
        show_b = None if vb is None else (vb[0] if len(vb) == 1 else vb)
        show_c = None if vc is None else (vc[0] if len(vc) == 1 else vc)
        if flag == "--dry-run" and vc != ["true"] and vb == ["true"]:
            sev = "rollback"
            msg = f"{label}: the runbook's dry-run flag no longer reaches the descheduler: it would evict for real"
        else:
            sev, msg = (
                "review",
                f"{label} {where} argument {flag} {change}: the descheduler starts differently",
            )
        out.append(
            _diff(
                "args",
                f"{label} {where}.args {flag}",
                change,
                show_b,
                show_c,
                sev,
                msg,
                flag.lstrip("-"),
            )
        )
    return out


def _get(doc: Mapping[str, Any], path: Path_) -> Any:
    cur: Any = doc
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def _object_diffs(label: str, b: Mapping[str, Any], c: Mapping[str, Any]) -> list[Difference]:
    """One object on both sides: RBAC, containers, then every other field."""
    kind = str(c.get("kind"))
    out: list[Difference] = []
    b, c = copy.deepcopy(dict(b)), copy.deepcopy(dict(c))
    if kind in _ROLES:
        out += _rbac_diffs(label, b.pop("rules", None), c.pop("rules", None))
    if kind in _BINDINGS:
        out += _binding_diffs(label, b, c)
        for d in (b, c):
            d.pop("subjects", None)
            d.pop("roleRef", None)
    spec = _POD_SPEC.get(kind)
    if spec is not None:
        pb, pc = _get(b, spec), _get(c, spec)
        for group in ("initContainers", "containers"):
            nb = _named((pb or {}).get(group)) or {}
            nc = _named((pc or {}).get(group)) or {}
            for name in nb.keys() & nc.keys():
                where = f"{group}[{name}]"
                out += _container_diffs(label, where, nb[name], nc[name])
                for side in (nb[name], nc[name]):
                    for field_ in _LIFTED:
                        side.pop(field_, None)
    area = "rbac" if kind in _ROLES + _BINDINGS else "cronjob" if kind == "CronJob" else "object"
    cosmetic: dict[Path_, tuple[dict[str, Any], dict[str, Any]]] = {}
    for path, change, vb, vc in _walk(b, c):
        i = next(
            (
                i
                for i in range(len(path) - 1)
                if path[i] == "metadata" and path[i + 1] in ("labels", "annotations")
            ),
            None,
        )
        if i is not None and len(path) > i + 2:  # one label or annotation: collapsed below
            side = cosmetic.setdefault(path[: i + 2], ({}, {}))
            side[0][path[i + 2]], side[1][path[i + 2]] = vb, vc
            continue
        out.append(_field_diff(label, area, path, change, vb, vc))
    for path, (vb, vc) in cosmetic.items():
        msg = f"{label} {_fmt(path)} differ ({', '.join(vb)}): chart/version labels and config checksums, cosmetic"
        out.append(_diff(area, f"{label} {_fmt(path)}", "changed", vb, vc, "info", msg))
    return out


def _field_diff(label: str, area: str, path: Path_, change: str, b: Any, c: Any) -> Difference:
    where, key = f"{label} {_fmt(path)}", _last_key(path)
    lowered = _lowerings(path, b, c)
    if area == "cronjob" and path == ("spec", "suspend") and c is not True:
        sev = "rollback"
        msg = f"{label}: with the runbook's suspend=true the CronJob is not suspended ({c!r}): it would run on its schedule"
    elif lowered:
        sev, msg = "rollback", f"{label} lowers a protection: {'; '.join(lowered)}"
    else:
        sev, msg = "review", f"{label} {_fmt(path)} {change}"
    return _diff(area, where, change, b, c, sev, msg, key)


def _policy_data(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ConfigMap's YAML data parsed, so a policy.yaml change reads as policy paths."""
    data = dict(doc.get("data") or {})
    for k, v in data.items():
        if isinstance(v, str) and k.endswith((".yaml", ".yml")):
            try:
                parsed = yaml.safe_load(v)
            except yaml.YAMLError:
                continue
            if isinstance(parsed, Mapping):
                data[k] = parsed
    return {**doc, "data": data}


def compare_manifests(
    baseline: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]]
) -> list[Difference]:
    """Rendered documents of both charts, matched by kind, namespace and name."""
    ib, ic = _index(baseline), _index(candidate)
    out: list[Difference] = []
    for label in dict.fromkeys([*ib, *ic]):
        b, c = ib.get(label), ic.get(label)
        kind = str((c or b or {}).get("kind"))
        rbac = kind in _ROLES + _BINDINGS
        area = "rbac" if rbac else "cronjob" if kind == "CronJob" else "object"
        if b is None and c is not None:
            if rbac:
                sev, msg = (
                    "rollback",
                    f"the candidate creates {label}: new RBAC widens what the descheduler may do",
                )
            else:
                sev, msg = (
                    "review",
                    f"the candidate creates {label}, which the baseline install does not",
                )
            out.append(_diff(area, label, "added", None, c, sev, msg))
        elif c is None and b is not None:
            msg = f"the candidate no longer creates {label}: whatever relied on it stops working"
            out.append(_diff(area, label, "removed", b, None, "review", msg))
        elif b is not None and c is not None:
            if kind == "ConfigMap":
                b, c = _policy_data(b), _policy_data(c)
            out += _object_diffs(label, b, c)
    return out


# ------------------------------------------------------------------- lint, defaults, metrics ---

_LINT_SEVERITY = {"error": "rollback", "warning": "review", "note": "info"}
_LINT_RANK = {"error": 0, "warning": 1, "note": 2}


def compare_lint(baseline: Sequence[Finding], candidate: Sequence[Finding]) -> list[Difference]:
    """The same policy linted under each version, by (rule, path).

    A new error means the candidate refuses the policy or drops a field of it: the policy
    would not do under the candidate what it does now, so it must be explained.
    """

    def key(f: Finding) -> tuple[str, str]:
        return f.rule, f.path

    fb, fc = {key(f): f for f in baseline}, {key(f): f for f in candidate}
    out: list[Difference] = []
    for k in dict.fromkeys([*fb, *fc]):
        b, c = fb.get(k), fc.get(k)
        name = RULES[k[0]].name if k[0] in RULES else k[0]
        where = f"{k[0]} {name} {k[1]}"
        if b is None and c is not None:
            sev = _LINT_SEVERITY.get(c.severity, "review")
            msg = f"new under the candidate ({c.severity}): {c.message}"
            out.append(_diff("policy-lint", where, "added", None, c.message, sev, msg))
        elif c is None and b is not None:
            msg = f"no longer reported under the candidate (was {b.severity}): {b.message}"
            out.append(_diff("policy-lint", where, "removed", b.message, None, "info", msg))
        elif b is not None and c is not None and (b.severity, b.message) != (c.severity, c.message):
            worse = _LINT_RANK.get(c.severity, 1) < _LINT_RANK.get(b.severity, 1)
            sev = _LINT_SEVERITY.get(c.severity, "review") if worse else "info"
            msg = f"{b.severity} -> {c.severity}: {c.message}"
            out.append(_diff("policy-lint", where, "changed", b.message, c.message, sev, msg))
    return out


_EVICTING = ("deschedule", "balance")
_FILTERING = ("filter", "preevictionfilter")
_RAW_PROTECTION_KEYS = {"defaultDisabled", "extraEnabled"} | _EVICT_FLAGS | _IGNORE_FLAGS


def _plugin_diffs(where: str, b: Mapping[str, Any], c: Mapping[str, Any]) -> list[Difference]:
    out: list[Difference] = []
    for point in dict.fromkeys([*b, *c]):
        eb = _as_list((b.get(point) or {}).get("enabled"))
        ec = _as_list((c.get(point) or {}).get("enabled"))
        path = f"{where}.plugins.{point}.enabled"
        if added := [p for p in ec if p not in eb]:
            if point in _EVICTING:
                sev, why = "rollback", "more strategies pick candidates: the candidate set can grow"
            else:
                sev, why = "review", "a new filter or sort changes which pods are picked"
            msg = f"{', '.join(added)} enabled at {point} after the candidate's defaulting: {why}"
            out.append(_diff("defaults", path, "added", eb, ec, sev, msg))
        if gone := [p for p in eb if p not in ec]:
            if point in _FILTERING:
                sev, why = "rollback", "a filter that protected pods no longer runs"
            else:
                sev, why = "review", "fewer pods are picked"
            msg = f"{', '.join(gone)} no longer enabled at {point} after the candidate's defaulting: {why}"
            out.append(_diff("defaults", path, "removed", eb, ec, sev, msg))
        db = _as_list((b.get(point) or {}).get("disabled"))
        dc = _as_list((c.get(point) or {}).get("disabled"))
        if db != dc:
            msg = f"the disabled plugins at {point} differ after defaulting"
            out.append(
                _diff(
                    "defaults",
                    f"{where}.plugins.{point}.disabled",
                    "changed",
                    db,
                    dc,
                    "review",
                    msg,
                )
            )
    return out


def _evictor_args(profile: Mapping[str, Any]) -> Mapping[str, Any]:
    cfg = _named(profile.get("pluginConfig")) or {}
    return (cfg.get("DefaultEvictor") or {}).get("args") or {}


def compare_defaults(
    baseline_effective: Mapping[str, Any],
    candidate_effective: Mapping[str, Any],
    *,
    baseline_protections: Sequence[str] | None = None,
    candidate_protections: Sequence[str] | None = None,
) -> list[Difference]:
    """One policy after each version's own defaulting (policycheck's ``effective``).

    Pod protections are compared as the sets each DefaultEvictor leaves active
    (:func:`effective_protections` over that version's defaults: pass the candidate's from
    :func:`default_protections_from_source`), not as raw lists: the descheduler's effective
    form does not list the protections that are on by default, and those are what an
    upgrade can silently take away.
    """
    out: list[Difference] = []
    pb = _named(baseline_effective.get("profiles")) or {}
    pc = _named(candidate_effective.get("profiles")) or {}
    for name in dict.fromkeys([*pb, *pc]):
        where = f"profiles[{name}]"
        b, c = pb.get(name), pc.get(name)
        if b is None or c is None:
            change = "added" if b is None else "removed"
            msg = f"profile {name} {change} after defaulting: it runs its own strategies"
            out.append(_diff("defaults", where, change, b, c, "review", msg))
            continue
        out += _plugin_diffs(where, b.get("plugins") or {}, c.get("plugins") or {})
        act_b = effective_protections(_evictor_args(b), baseline_protections)
        act_c = effective_protections(_evictor_args(c), candidate_protections)
        for p in dict.fromkeys([*act_b, *act_c]):
            path = f"{where}.DefaultEvictor.protections[{p}]"
            if p not in act_c:
                msg = f"protection {p} is active under the baseline and not under the candidate: those pods become evictable"
                out.append(
                    _diff("defaults", path, "removed", "active", "inactive", "rollback", msg)
                )
            elif p not in act_b:
                msg = f"protection {p} is active under the candidate only: fewer pods are evictable"
                out.append(_diff("defaults", path, "added", "inactive", "active", "review", msg))
        cfg_path = ("profiles", f"[{name}]", "pluginConfig")
        for path, change, vb, vc in _walk(b.get("pluginConfig"), c.get("pluginConfig"), cfg_path):
            if set(path) & _RAW_PROTECTION_KEYS:
                continue  # summarised above as active protections
            out.append(_defaults_row(path, change, vb, vc))
    rest_b = {k: v for k, v in baseline_effective.items() if k != "profiles"}
    rest_c = {k: v for k, v in candidate_effective.items() if k != "profiles"}
    out += [_defaults_row(p, ch, vb, vc) for p, ch, vb, vc in _walk(rest_b, rest_c)]
    return out


def _defaults_row(path: Path_, change: str, b: Any, c: Any) -> Difference:
    where, lowered = _fmt(path), _lowerings(path, b, c)
    if lowered:
        sev, msg = "rollback", f"after the candidate's defaulting: {'; '.join(lowered)}"
    else:
        sev, msg = "review", f"{where} {change} after the candidate's defaulting"
    return _diff("defaults", where, change, b, c, sev, msg, _last_key(path))


def compare_metric_names(baseline: Iterable[str], candidate: Iterable[str]) -> list[Difference]:
    """Metric families each binary served: a lost one breaks dashboards and comparisons."""
    b, c = set(baseline), set(candidate)
    new = sorted(c - b)
    out: list[Difference] = []
    for name in sorted(b - c):
        like = difflib.get_close_matches(name, new, n=1, cutoff=0.8)
        hint = f" (renamed to {like[0]}?)" if like else ""
        msg = f"{name} is no longer served{hint}: metrics lose comparability, a rollback trigger unless explained"
        out.append(_diff("metrics", name, "removed", name, None, "rollback", msg))
    for name in new:
        out.append(
            _diff("metrics", name, "added", None, name, "info", f"{name} is new in the candidate")
        )
    return out


# --------------------------------------------------------------------------- the result ---


def _cell(v: Any, width: int = 60) -> str:
    if v is None:
        return "—"
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    s = s.replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= width else s[: width - 1] + "…"


@dataclass
class StaticComparison:
    """Both sides' labels and every classified difference, for the report and the verdict."""

    baseline: dict[str, Any]  # version, chart version / source / sha256 (chart_label)
    candidate: dict[str, Any]
    differences: list[Difference] = field(default_factory=list)

    def by_severity(self, severity: str) -> list[Difference]:
        return [d for d in self.differences if d.severity == severity]

    def counts(self) -> dict[str, int]:
        return {s: len(self.by_severity(s)) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return scrub_data(
            {
                "baseline": self.baseline,
                "candidate": self.candidate,
                "counts": self.counts(),
                "differences": [asdict(d) for d in self.differences],
            }
        )

    def markdown(self) -> str:
        """One table per area (worst area first), rows by severity: the rollback rows lead."""
        head = (
            f"Baseline {_cell(self.baseline.get('version'))} (chart "
            f"{_cell(self.baseline.get('chart_version'))}) against candidate "
            f"{_cell(self.candidate.get('version'))} (chart {_cell(self.candidate.get('chart_version'))}): "
            + ", ".join(f"{n} {s}" for s, n in self.counts().items())
        )
        if not self.differences:
            return head + "\n\nNo static difference."
        areas: dict[str, list[Difference]] = {}
        for d in self.differences:
            areas.setdefault(d.area, []).append(d)

        def worst(a: str) -> tuple[int, int]:
            return min(_RANK[d.severity] for d in areas[a]), AREAS.index(a) if a in AREAS else 99

        lines = [head]
        for area in sorted(areas, key=worst):
            lines += [
                "",
                f"### {area}",
                "",
                "| severity | change | where | baseline | candidate | why it matters |",
                "|---|---|---|---|---|---|",
            ]
            for d in sorted(areas[area], key=lambda d: _RANK[d.severity]):
                lines.append(
                    f"| {d.severity} | {d.change} | {_cell(d.path, 90)} | {_cell(d.baseline)} "
                    f"| {_cell(d.candidate)} | {_cell(d.message, 240)} |"
                )
        return scrub_secrets("\n".join(lines))


# ---------------------------------------------------------------------------- helm side ---


def chart_label(chart: Path, version: str, source: str) -> dict[str, str]:
    """The label of one side: descheduler version, chart version / app version, source, digest.

    A packaged chart's digest is the .tgz's sha256 (as ChartRef records it); a chart
    directory's is over its files' relative paths and bytes, so the two kinds never compare.
    """
    if chart.is_file():
        meta, digest = chart_meta(chart), sha256_file(chart)
    else:
        from pytest_desched.descheduler.candidate import tree_digest

        meta = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8")) or {}
        digest = tree_digest(chart)
    return {
        "version": version,
        "chart_version": str(meta.get("version", "")),
        "chart_app_version": str(meta.get("appVersion", "")),
        "chart_source": source,
        "chart_sha256": digest,
    }


def render_chart(
    helm: Path,
    chart: Path,
    values: Mapping[str, Any] | None,
    env: Mapping[str, str],
    *,
    release: str = "descheduler",
    namespace: str = "kube-system",
    api_versions: Sequence[str] = CLUSTER_API_VERSIONS,
    timeout: float = 120,
    values_files: Sequence[Path] = (),
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`helm show values` and `helm template` of one chart, as the lab's first install renders it.

    Helm coalesces, in its order: the chart's defaults, the lab's cmdOptions, the user's
    `values_files`, then `values`, then the runbook's first-install flags (suspend=true,
    cmdOptions.dry-run=true). In-memory values go to helm in a private file (a values file
    may hold a token). `env` is `helm_env(home)`. A chart that does not render raises
    CommandError (its stderr scrubbed).
    """
    helm_s, envd = str(helm), dict(env)
    shown = yaml.safe_load(
        run([helm_s, "show", "values", str(chart)], env=envd, timeout=timeout).stdout
    )
    shown = shown if isinstance(shown, dict) else {}
    flags = [f"--api-versions={a}" for a in api_versions]
    with contextlib.ExitStack() as stack:
        lab = stack.enter_context(
            private_file(yaml.safe_dump({"cmdOptions": dict(LAB_CMD_OPTIONS)}, sort_keys=False))
        )
        files = [lab, *values_files]
        if values:
            files.append(stack.enter_context(private_file(yaml.safe_dump(dict(values)))))
        text = run(
            [
                helm_s,
                "template",
                release,
                str(chart),
                "--namespace",
                namespace,
                *(a for f in files for a in ("-f", str(f))),
                "--set",
                "suspend=true",
                "--set",
                "cmdOptions.dry-run=true",
                *flags,
            ],
            env=envd,
            timeout=timeout,
        ).stdout
    return shown, parse_manifests(text)


def compare_charts(
    helm: Path,
    baseline_chart: Path,
    candidate_chart: Path,
    env: Mapping[str, str],
    values: Mapping[str, Any] | None = None,
    values_files: Sequence[Path] = (),
) -> list[Difference]:
    """Both charts' default values and their renders with the same values (files first)."""
    bv, bdocs = render_chart(helm, baseline_chart, values, env, values_files=values_files)
    cv, cdocs = render_chart(helm, candidate_chart, values, env, values_files=values_files)
    return compare_values(bv, cv) + compare_manifests(bdocs, cdocs)
