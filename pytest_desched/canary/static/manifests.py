"""Rendered manifests compared: objects, RBAC widened or narrowed, args, image, CronJob."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_desched.canary.static.difference import (
    Difference,
    Path_,
    as_list,
    by_name,
    format_path,
    last_key,
    make_difference,
    walk,
)
from pytest_desched.canary.static.protections import Roots, lowerings
from pytest_desched.errors import InputError
from pytest_desched.inputs_safe import load_yaml

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


def rule_perms(rules: Any) -> set[Perm]:
    out: set[Perm] = set()
    for r in as_list(rules):
        if not isinstance(r, Mapping):
            continue
        verbs = [str(v) for v in as_list(r.get("verbs"))]
        for url in as_list(r.get("nonResourceURLs")):
            out |= {("nonResourceURL", str(url), "", v) for v in verbs}
        names = [str(n) for n in as_list(r.get("resourceNames"))] or [""]
        for g in as_list(r.get("apiGroups")):
            for res in as_list(r.get("resources")):
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


def covers(have: Perm, want: Perm) -> bool:
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
    pb, pc = rule_perms(b_rules), rule_perms(c_rules)
    widened = [p for p in sorted(pc) if not any(covers(h, p) for h in pb)]
    narrowed = [p for p in sorted(pb) if not any(covers(h, p) for h in pc)]

    def verbs(perms: set[Perm], key: tuple[str, str, str]) -> list[str]:
        return sorted({p[3] for p in perms if p[:3] == key})

    out: list[Difference] = []
    for change, perms in (("widened", widened), ("narrowed", narrowed)):
        for key in dict.fromkeys(p[:3] for p in perms):
            delta = sorted({p[3] for p in perms if p[:3] == key})
            where = f"{label} rules[{_perm_where((*key, ''))}]"
            if change == "widened":
                rule = "DR001"
                msg = (
                    f"{label} grants {', '.join(delta)} on {_perm_where((*key, ''))} beyond the "
                    "baseline: wider RBAC for this eviction-capable identity is a rollback "
                    "trigger unless explained"
                )
            else:
                rule = "DR002"
                msg = (
                    f"{label} no longer grants {', '.join(delta)} on {_perm_where((*key, ''))}: "
                    "a candidate that still needs it gets 403 (fails closed); confirm in the "
                    "behaviour comparison"
                )
            out.append(
                make_difference(rule, "rbac", where, change, verbs(pb, key), verbs(pc, key), msg)
            )
    return out


def _subject(s: Any) -> str:
    if not isinstance(s, Mapping):
        return str(s)
    ns = f"{s.get('namespace')}/" if s.get("namespace") else ""
    return f"{s.get('kind')}:{ns}{s.get('name')}"


def _binding_diffs(label: str, b: Mapping[str, Any], c: Mapping[str, Any]) -> list[Difference]:
    out: list[Difference] = []
    sb = [_subject(s) for s in as_list(b.get("subjects"))]
    sc = [_subject(s) for s in as_list(c.get("subjects"))]
    if added := [s for s in sc if s not in sb]:
        msg = f"{label} binds {', '.join(added)} too: more identities get the role (rollback trigger unless explained)"
        out.append(make_difference("DR003", "rbac", f"{label} subjects", "widened", sb, sc, msg))
    if gone := [s for s in sb if s not in sc]:
        msg = f"{label} no longer binds {', '.join(gone)}: that identity loses the role (fails closed)"
        out.append(make_difference("DR004", "rbac", f"{label} subjects", "narrowed", sb, sc, msg))
    if b.get("roleRef") != c.get("roleRef"):
        msg = f"{label} refers to another role: what it grants must be compared by hand (rollback trigger unless explained)"
        out.append(
            make_difference(
                "DR005",
                "rbac",
                f"{label} roleRef",
                "changed",
                b.get("roleRef"),
                c.get("roleRef"),
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
            make_difference(
                "DO005",
                "image",
                f"{label} {where}.image",
                "changed",
                b.get("image"),
                c.get("image"),
                msg,
            )
        )
    if b.get("command") != c.get("command"):
        msg = f"{label} {where} starts another command"
        out.append(
            make_difference(
                "DO006",
                "args",
                f"{label} {where}.command",
                "changed",
                b.get("command"),
                c.get("command"),
                msg,
            )
        )
    ab, ac = _args_map(as_list(b.get("args"))), _args_map(as_list(c.get("args")))
    for flag in dict.fromkeys([*ab, *ac]):
        vb, vc = ab.get(flag), ac.get(flag)
        if vb == vc:
            continue
        change = "added" if vb is None else "removed" if vc is None else "changed"
        show_b = None if vb is None else (vb[0] if len(vb) == 1 else vb)
        show_c = None if vc is None else (vc[0] if len(vc) == 1 else vc)
        if flag == "--dry-run" and vc != ["true"] and vb == ["true"]:
            rule = "DO008"
            msg = f"{label}: the runbook's dry-run flag no longer reaches the descheduler: it would evict for real"
        else:
            rule = "DO007"
            msg = f"{label} {where} argument {flag} {change}: the descheduler starts differently"
        out.append(
            make_difference(
                rule,
                "args",
                f"{label} {where}.args {flag}",
                change,
                show_b,
                show_c,
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


def _object_diffs(label: str, base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[Difference]:
    """One object on both sides: RBAC, containers, then every other field."""
    kind = str(cand.get("kind"))
    out: list[Difference] = []
    b: dict[str, Any] = copy.deepcopy(dict(base))  # copies: the lifted fields are popped
    c: dict[str, Any] = copy.deepcopy(dict(cand))
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
            nb = by_name((pb or {}).get(group)) or {}
            nc = by_name((pc or {}).get(group)) or {}
            for name in nb.keys() & nc.keys():
                where = f"{group}[{name}]"
                out += _container_diffs(label, where, nb[name], nc[name])
                for side in (nb[name], nc[name]):
                    for field_ in _LIFTED:
                        side.pop(field_, None)
    area = "rbac" if kind in _ROLES + _BINDINGS else "cronjob" if kind == "CronJob" else "object"
    cosmetic: dict[Path_, tuple[dict[str, Any], dict[str, Any]]] = {}
    for path, change, vb, vc in walk(b, c):
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
        out.append(_field_diff(label, area, path, change, vb, vc, (b, c, 0)))
    for path, (vb, vc) in cosmetic.items():
        msg = f"{label} {format_path(path)} differ ({', '.join(vb)}): chart/version labels and config checksums, cosmetic"
        out.append(
            make_difference("DO004", area, f"{label} {format_path(path)}", "changed", vb, vc, msg)
        )
    return out


def _field_diff(
    label: str, area: str, path: Path_, change: str, b: Any, c: Any, roots: Roots
) -> Difference:
    where, key = f"{label} {format_path(path)}", last_key(path)
    lowered = lowerings(path, b, c, roots)
    if area == "cronjob" and path == ("spec", "suspend") and c is not True:
        rule = "DO009"
        msg = f"{label}: with the runbook's suspend=true the CronJob is not suspended ({c!r}): it would run on its schedule"
    elif lowered:
        rule, msg = "DO010", f"{label} lowers a protection: {'; '.join(lowered)}"
    else:
        rule = "DR008" if area == "rbac" else "DO003"
        msg = f"{label} {format_path(path)} {change}"
    return make_difference(rule, area, where, change, b, c, msg, key)


def _policy_data(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ConfigMap's YAML data parsed, so a policy.yaml change reads as policy paths."""
    data = dict(doc.get("data") or {})
    for k, v in data.items():
        if isinstance(v, str) and k.endswith((".yaml", ".yml")):
            try:
                parsed = load_yaml(v, f"{doc.get('kind')} data {k}")
            except InputError:  # not YAML or past a bound: compared as text
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
                rule = "DR006"
                msg = f"the candidate creates {label}: new RBAC widens what the descheduler may do"
            else:
                rule = "DO001"
                msg = f"the candidate creates {label}, which the baseline install does not"
            out.append(make_difference(rule, area, label, "added", None, c, msg))
        elif c is None and b is not None:
            msg = f"the candidate no longer creates {label}: whatever relied on it stops working"
            out.append(
                make_difference("DR007" if rbac else "DO002", area, label, "removed", b, None, msg)
            )
        elif b is not None and c is not None:
            if kind == "ConfigMap":
                b, c = _policy_data(b), _policy_data(c)
            out += _object_diffs(label, b, c)
    return out
