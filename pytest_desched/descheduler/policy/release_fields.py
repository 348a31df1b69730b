"""One policy read in the fields of the release that runs it: the per-release policy reading.

The runbook's policy speaks v0.34+'s DefaultEvictor ``podProtections``; a release without that
field (v0.33.0: its strict args decoding refuses it) protects pods through the older booleans
(``evictLocalStoragePods``, ``ignorePvcPods``, ...). :func:`policy_for_release` asks the
release's own policy checker which args its DefaultEvictor has (never a version number) and,
where it has no ``podProtections``, expresses the same protections with its booleans, each
change a recorded override with its why, then validates the result with that checker.

The protections a ``podProtections`` block leaves active and the boolean that carries each are
v0.36.0's own rules (defaultevictor.go getEffectivePodProtections / legacyGetPodProtections,
read into :func:`effective_protections` and ``DEPRECATED_EVICTOR_BOOLEANS``). A protection the
release has no field for is an error naming it, unless the caller accepts running without it
(``accepted``: name -> why, e.g. from a canary's explanation file); it is never dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.policy.checker import DeschedulerFacts, checker_for, facts_for
from pytest_desched.descheduler.policy.lint_rules import DEPRECATED_EVICTOR_BOOLEANS
from pytest_desched.descheduler.policy.model import Policy
from pytest_desched.errors import PolicyError

if TYPE_CHECKING:
    from pytest_desched.tools.toolchain import Toolchain

__all__ = [
    "NON_SAFETY_FIELDS",
    "PROTECTIONS_FIELD",
    "WHY_PREFIX",
    "ReleaseReading",
    "effective_protections",
    "has_pod_protections",
    "is_release_reading",
    "missing_key",
    "policy_for_release",
    "read_for_release",
]

PROTECTIONS_FIELD = "podProtections"
# Every override of the reading starts so (the evidence's and a replay's way to tell it apart)
WHY_PREFIX = "read in the release's fields: "
# The podProtections.config entry a boolean cannot narrow (ignorePvcPods protects every PVC pod)
CONFIG_PREFIX = "config."


def is_release_reading(override: Mapping[str, Any]) -> bool:
    """Whether a recorded override is this reading's (not the lab's or the caller's)."""
    return str(override.get("why", "")).startswith(WHY_PREFIX)


def missing_key(name: str) -> str:
    """How a protection the release cannot express is named (in errors and acceptances)."""
    return f"protections[{name}]"


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else []


def effective_protections(
    args: Mapping[str, Any], defaults: Sequence[str] | None = None
) -> list[str]:
    """The protections a DefaultEvictor's args leave active, as the descheduler computes them.

    Mirrors getEffectivePodProtections (defaultevictor.go, v0.36.0): podProtections when
    either list is non-empty (`defaults` minus defaultDisabled, plus extraEnabled), else the
    deprecated booleans (legacyGetPodProtections: the four default protections unless an
    evict* flag is true, plus each extra one whose ignore* flag is true).
    """
    if defaults is None:
        defaults = facts_for().default_pod_protections  # the pinned descheduler's own list
    pp = args.get(PROTECTIONS_FIELD) or {}
    disabled, extra = _as_list(pp.get("defaultDisabled")), _as_list(pp.get("extraEnabled"))
    if disabled or extra:
        return [p for p in defaults if p not in disabled] + [p for p in extra if p not in defaults]
    flags = DEPRECATED_EVICTOR_BOOLEANS.items()
    out = [p for f, (k, p) in flags if k == "defaultDisabled" and args.get(f) is not True]
    return out + [p for f, (k, p) in flags if k == "extraEnabled" and args.get(f) is True]


def has_pod_protections(facts: DeschedulerFacts) -> bool:
    """Whether the release's DefaultEvictor takes ``podProtections`` (its own Go type says)."""
    evictor = facts.plugins.get(facts.default_evictor)
    return evictor is not None and PROTECTIONS_FIELD in evictor.arg_fields


def _booleans(
    args: Mapping[str, Any], fields: Sequence[str], defaults: Sequence[str]
) -> tuple[dict[str, bool], list[str], list[str]]:
    """(boolean -> value, the active protections, the ones no boolean of the release carries)."""
    active = effective_protections(args, defaults)
    values: dict[str, bool] = {}
    carried: set[str] = set()
    for flag, (kind, protection) in DEPRECATED_EVICTOR_BOOLEANS.items():
        if flag not in fields:
            continue
        carried.add(protection)
        values[flag] = (
            (protection not in active) if kind == "defaultDisabled" else (protection in active)
        )
    lost = [p for p in active if p not in carried]
    config = (args.get(PROTECTIONS_FIELD) or {}).get("config") or {}
    lost += [CONFIG_PREFIX + k for k, v in config.items() if v]
    return values, active, lost


@dataclass(frozen=True)
class ReleaseReading:
    """A policy in one release's fields, and what that release runs without."""

    policy: Policy
    version: str
    lost: tuple[str, ...] = ()  # missing_key(name) of each accepted, inexpressible protection
    # Top-level fields the release has no field for and that carry no safety
    # (NON_SAFETY_FIELDS): the release runs without them, said with each one's consequence.
    dropped: tuple[str, ...] = ()


# Top-level policy fields that protect no pod and cap no eviction: a release with no field for
# one runs the policy without it, each drop a recorded override saying what it changes. Every
# other field the release lacks (the eviction caps, nodeSelector, profiles and their
# protections) is refused by the release's own checker as before: a safety field is never
# dropped. evictionFailureEventNotification is renamed, not dropped, where the release spells
# it otherwise (model.EVENT_NOTIFICATION_KEYS: v0.32's Go field name).
NON_SAFETY_FIELDS: dict[str, str] = {
    "gracePeriodSeconds": (
        "the eviction's DeleteOptions carry no grace period: each evicted pod gets its own "
        "terminationGracePeriodSeconds (the lab's pods: 30 s, the runbook's value)"
    ),
    "evictionFailureEventNotification": (
        "no EvictionFailed event for a refused eviction: the descheduler's log and the audit "
        "log are the evidence (the negative-pdb experiment's event checks then fail)"
    ),
}


def _top_level(
    policy: Policy, fields: Sequence[str], version: str
) -> tuple[Policy, tuple[str, ...]]:
    """`policy`'s top-level fields in the release's spelling; the NON_SAFETY_FIELDS it has no
    field for removed (each a recorded override with its consequence). Any other unknown
    field is left for the release's checker to refuse."""
    known = set(fields)
    out, dropped = policy, []
    for key, value in policy.to_dict().items():
        if key in known or key in ("apiVersion", "kind"):
            continue
        spelled = next((f for f in known if f.lower() == key.lower()), None)
        if spelled is not None:
            why = (
                f"{WHY_PREFIX}descheduler {version} spells {key} as {spelled} (its policy "
                "checker's top-level fields): the same setting"
            )
            out = out.override(key, None, why=why).override(spelled, value, why=why)
        elif key in NON_SAFETY_FIELDS:
            why = (
                f"{WHY_PREFIX}descheduler {version} has no {key} (its policy checker's "
                f"top-level fields); it runs without it: {NON_SAFETY_FIELDS[key]}"
            )
            out = out.override(key, None, why=why)
            dropped.append(key)
    return out, tuple(dropped)


def read_for_release(
    policy: Policy,
    version: str | None,
    toolchain: Toolchain | None = None,
    *,
    accepted: Mapping[str, str] | None = None,
) -> ReleaseReading:
    """`policy` in the fields descheduler `version` reads (None: the pinned one), validated by
    that release's own checker; unchanged where the release has ``podProtections``.

    `accepted` maps a protection the release cannot express (``missing_key(name)``) to why the
    caller runs without it; any other such protection raises PolicyError naming it.
    """
    checker = checker_for(version, toolchain)
    facts = checker.facts()
    policy, dropped = _top_level(policy, facts.top_level_fields, checker.version)
    if has_pod_protections(facts):
        validated = policy.validate(version, toolchain)
        return ReleaseReading(validated, checker.version, dropped=dropped)
    fields = facts.plugins[facts.default_evictor].arg_fields
    defaults = facts_for().default_pod_protections  # the release the policy was written for
    accepted = dict(accepted or {})
    out, lost_all = policy, []
    for i in range(len(policy.profile_names)):
        args = policy.evictor_args(i)
        if PROTECTIONS_FIELD not in args:
            continue
        values, active, lost = _booleans(args, fields, defaults)
        refused = [p for p in lost if missing_key(p) not in accepted]
        where = f"profiles[{i}].{facts.default_evictor}"
        if refused:
            names = ", ".join(refused)
            raise PolicyError(
                f"{where}.{PROTECTIONS_FIELD}: descheduler {checker.version} has no "
                f"{PROTECTIONS_FIELD} and no field for {names}: it would run without "
                f"{'it' if len(refused) == 1 else 'them'}; use a policy without "
                f"{names}, or accept running the release without it "
                f"(a canary's --expect entry kind: static, path: "
                f"'policy-translation:*{missing_key(refused[0])}')",
                policy.source,
            )
        why = (
            f"{WHY_PREFIX}descheduler {checker.version} has no {PROTECTIONS_FIELD} (its policy "
            f"checker's {facts.default_evictor} args): the same protections "
            f"{sorted(p for p in active if p not in lost)} as "
            "its booleans (v0.36.0 getEffectivePodProtections / legacyGetPodProtections)"
        )
        without = [f"{p} ({accepted[missing_key(p)]})" for p in lost]
        if without:
            why += f"; runs without {', '.join(without)}, which it cannot express"
        for flag, value in values.items():
            out = out.override(f"{where}.{flag}", True if value else None, why=why)
        out = out.override(f"{where}.{PROTECTIONS_FIELD}", None, why=why)
        lost_all += [missing_key(p) for p in lost]
    validated = out.validate(version, toolchain)
    return ReleaseReading(validated, checker.version, tuple(dict.fromkeys(lost_all)), dropped)


def policy_for_release(
    policy: Policy,
    version: str | None,
    toolchain: Toolchain | None = None,
    *,
    accepted: Mapping[str, str] | None = None,
) -> Policy:
    """The policy of :func:`read_for_release` (what a session's experiment runs)."""
    return read_for_release(policy, version, toolchain, accepted=accepted).policy
