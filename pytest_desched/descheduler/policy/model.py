"""The runbook's DeschedulerPolicy as a value: parsed, hashed, overridden with a paper trail.

:class:`Policy` is what every other part of the plugin holds: it comes in one way
(:meth:`Policy.coerce`), goes out as chart values, has a digest that survives helm, and
changes only through recorded overrides. It knows no validation rules and no schema itself:
:meth:`Policy.validate` asks the descheduler's own code (the ``policycheck`` helper built against
that version, :mod:`.checker`) and adds the version-independent safety rules (:mod:`.safety`);
plugin names and the default evictor come from the helper's facts too.

Canonical form and digests
--------------------------
The chart (charts/descheduler/templates/configmap.yaml) renders the ConfigMap key ``policy.yaml``
as::

    apiVersion: "{{ .Values.deschedulerPolicyAPIVersion }}"
    kind: "DeschedulerPolicy"
    {{ tpl (toYaml .Values.deschedulerPolicy) . | trim | indent 4 }}

so the chart value ``deschedulerPolicy`` must *not* carry apiVersion/kind (they would be
duplicated; Go's YAML decoder keeps one in undefined order), helm re-serialises it with
``toYaml`` (keys sorted, its own quoting), and ``tpl`` evaluates any ``{{`` in it. Byte
comparison is therefore meaningless. The canonical form is the whole document (apiVersion and
kind included) parsed to plain data and dumped as JSON with sorted keys and compact separators
(integral floats folded to ints); :meth:`Policy.digest` and :func:`digest_of_rendered` are the
sha256 of that, so the written policy and the live ConfigMap's ``policy.yaml`` hash equal iff
they mean the same thing. Use :meth:`Policy.chart_values` for the values to hand to helm (in a
values file or ``--set-json``, not ``--set``, which would turn ``"true"`` into a bool).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.descheduler.policy.checker import CheckResult, checker_for, facts_for
from pytest_desched.descheduler.policy.paths import set_path
from pytest_desched.errors import InputError, PolicyError
from pytest_desched.inputs_safe import check_tree, load_yaml, read_text
from pytest_desched.tools.resources import manifest_path

if TYPE_CHECKING:
    from pytest_desched.tools.toolchain import Toolchain

__all__ = [
    "DEFAULT_POLICY_FILE",
    "EVENT_NOTIFICATION_KEYS",
    "Policy",
    "canonical_json",
    "digest_of_rendered",
    "load_default",
    "notifies_eviction_failures",
]

DEFAULT_POLICY_FILE = "policy-safe-rebalance.yaml"


# --------------------------------------------------------------------------------- parsing ---


def _parse(text: str, source: str) -> dict[str, Any]:
    try:
        doc = load_yaml(text, source)  # bounded: depth, aliases, ints, duplicate keys
    except InputError as exc:
        where = f"{exc.field}: " if exc.field else ""
        if exc.code == "DL000":
            raise PolicyError(
                f"{where}YAML syntax error: {exc.problem}; fix the YAML", source
            ) from None
        raise PolicyError(f"{where}{exc.problem}; {exc.fix}", source) from None
    if not isinstance(doc, dict):
        raise _not_a_mapping(doc, source)
    return doc


def _not_a_mapping(doc: Any, source: str) -> PolicyError:
    return PolicyError(
        f"document is {type(doc).__name__}, not a mapping; "
        "a DeschedulerPolicy is a mapping of apiVersion, kind and profiles",
        source,
    )


def _normalize(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def canonical_json(doc: Mapping[str, Any]) -> str:
    """The canonical form hashed by digests: sorted-key compact JSON of the parsed document."""
    return json.dumps(_normalize(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(doc: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def digest_of_rendered(policy_yaml_text: str) -> str:
    """Digest of a live ConfigMap's ``policy.yaml``, comparable with :meth:`Policy.digest`."""
    return _sha256(_parse(policy_yaml_text, "rendered policy.yaml"))


# ---------------------------------------------------------------------------------- policy ---


# evictionFailureEventNotification as each release spells it: v0.33 on with its JSON tag, v0.32
# by its Go field name (v0.32.2's pkg/api/v1alpha2/types.go:46 has no JSON tag; the policy
# decoder is case-sensitive). release_fields renames it for a release that spells it so.
EVENT_NOTIFICATION_KEYS = ("evictionFailureEventNotification", "EvictionFailureEventNotification")


def notifies_eviction_failures(doc: Mapping[str, Any]) -> Any:
    """The policy document's event-notification setting in whichever spelling it carries
    (None: unset)."""
    return next((doc[k] for k in EVENT_NOTIFICATION_KEYS if k in doc), None)


class Policy:
    """A DeschedulerPolicy document plus the overrides that made it differ from its source.

    Immutable in use: every accessor returns copies and :meth:`override` returns a new Policy,
    so the runbook's original stays intact for the deviation report.
    """

    def __init__(
        self,
        doc: Mapping[str, Any],
        *,
        source: str = "<dict>",
        overrides: list[dict[str, Any]] | None = None,
    ) -> None:
        if not isinstance(doc, Mapping):
            raise _not_a_mapping(doc, source)
        check_tree(doc, source)  # a shared-reference graph would blow up every later walk
        self._doc: dict[str, Any] = copy.deepcopy(dict(doc))
        self.source = source
        self.overrides: list[dict[str, Any]] = copy.deepcopy(overrides or [])

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        path = Path(path)
        return cls(_parse(read_text(path, what="policy"), str(path)), source=str(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "<yaml>") -> Policy:
        return cls(_parse(text, source), source=source)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], source: str = "<dict>") -> Policy:
        return cls(doc, source=source)

    @classmethod
    def coerce(cls, value: Policy | Mapping[str, Any] | str | Path) -> Policy:
        """The one way a policy comes in: a Policy, a path to a YAML file, a mapping, YAML text.

        A string names a file when one exists at that path, else it is parsed as YAML text
        (which must be a mapping). Not validated here: callers validate before any change.
        """
        if isinstance(value, Policy):
            return value
        if isinstance(value, Path):
            if not value.is_file():
                raise PolicyError(f"policy file {value} does not exist", str(value))
            return cls.load(value)
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        if isinstance(value, str):
            looks_like_path = "\n" not in value and len(value) < 4096
            if looks_like_path and Path(value).expanduser().is_file():
                return cls.load(Path(value).expanduser())
            if looks_like_path and ":" not in value:
                raise PolicyError(
                    f"{value!r} is neither an existing policy file nor YAML text of a "
                    "DeschedulerPolicy (a mapping of apiVersion, kind and profiles)",
                    "policy argument",
                )
            return cls.from_yaml(value, source="<yaml text>")
        raise TypeError(
            f"a policy must be a pytest_desched.descheduler.policy.Policy, a path (str or pathlib.Path) to a "
            f"YAML file, a mapping, or YAML text; got {type(value).__name__}"
        )

    # -- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc)

    def to_yaml(self) -> str:
        """Block YAML in the document's own key order (deterministic, not sorted)."""
        return yaml.safe_dump(
            self._doc, sort_keys=False, default_flow_style=False, allow_unicode=True
        )

    def chart_values(self) -> dict[str, Any]:
        """Values for the descheduler chart: it adds apiVersion/kind itself, so strip them."""
        body = {k: v for k, v in self.to_dict().items() if k not in ("apiVersion", "kind")}
        api = self._doc.get("apiVersion") or facts_for().api_version
        return {"deschedulerPolicyAPIVersion": api, "deschedulerPolicy": body}

    def digest(self) -> str:
        """sha256 of :func:`canonical_json` of the whole document (see module docstring)."""
        return _sha256(self._doc)

    def matches_rendered(self, policy_yaml_text: str) -> bool:
        """Whether a live ConfigMap's ``policy.yaml`` means exactly this policy."""
        return digest_of_rendered(policy_yaml_text) == self.digest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and canonical_json(self._doc) == canonical_json(other._doc)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n = len(self.overrides)
        return f"Policy(source={self.source!r}, overrides={n}, digest={self.digest()[:12]})"

    # -- validation --------------------------------------------------------------------------

    def validate(self, version: str | None = None, toolchain: Toolchain | None = None) -> Policy:
        """Raise :class:`PolicyError` listing every problem; return self so calls can chain.

        ``version`` is the descheduler release the policy is meant for (``v0.36.0``); None means
        the pinned one (manifests/versions.yaml). The problems are the error-level findings of
        the lint (:mod:`.lint`): that descheduler's own refusal (its words, decode / validate /
        start-up), every field it would drop or never read, and the safety rules (inline
        credentials, template markers). Warnings (caps, minPodAge, known bugs) do not refuse.
        """
        # cycle: lint -> values -> render_checks -> policy
        from pytest_desched.descheduler.policy.lint import error_problems, lint_policy_doc

        findings, _ = lint_policy_doc(self._doc, self.source, checker_for(version, toolchain))
        problems = error_problems(findings)
        if problems:
            raise PolicyError(problems, self.source)
        return self

    def check(self, version: str | None = None, toolchain: Toolchain | None = None) -> CheckResult:
        """The descheduler's own verdict on this policy (accepted, error, dropped fields, notes)."""
        return checker_for(version, toolchain).check_doc(self._doc, self.source)

    def effective(
        self, version: str | None = None, toolchain: Toolchain | None = None
    ) -> dict[str, Any]:
        """The policy as that descheduler runs it, after its defaults; PolicyError if refused."""
        res = self.check(version, toolchain)
        if not res.accepted:
            raise PolicyError([f"descheduler refuses it ({res.stage}): {res.error}"], self.source)
        return copy.deepcopy(res.effective)

    # -- overrides ---------------------------------------------------------------------------

    def override(self, path: str, value: Any, *, why: str) -> Policy:
        """A new Policy with ``path`` set to ``value`` (``None`` deletes), recorded with ``why``.

        Paths: ``maxNoOfPodsToEvictTotal``; ``profiles.safe-rebalance.DefaultEvictor.minPodAge``
        (profile by name or index, then a plugin name meaning its pluginConfig args); or the
        canonical ``profiles[0].pluginConfig[DefaultEvictor].args.minPodAge``. Use ``[...]`` for
        keys containing dots. No-op changes are not recorded. Call :meth:`validate` afterwards.
        """
        if not why or not why.strip():
            raise ValueError("override needs a non-empty 'why': deviations must be explained")
        doc = self.to_dict()
        canon, old = set_path(doc, path, copy.deepcopy(value), facts_for().plugins)
        if old == value:
            return Policy(self._doc, source=self.source, overrides=self.overrides)
        record = {"path": canon, "old": copy.deepcopy(old), "new": copy.deepcopy(value), "why": why}
        return Policy(doc, source=self.source, overrides=[*self.overrides, record])

    def with_overrides(self, changes: Mapping[str, Any], *, why: str) -> Policy:
        """Apply several :meth:`override` calls that share one reason, in order."""
        policy = self
        for path, value in changes.items():
            policy = policy.override(path, value, why=why)
        return policy

    def overrides_report(self) -> str:
        """One line per deviation from the source policy, for test reports."""
        if not self.overrides:
            return f"policy {self.source}: unmodified"
        lines = [f"policy {self.source}: {len(self.overrides)} deviation(s)"]
        lines += [
            f"  {o['path']}: {o['old']!r} -> {o['new']!r} ({o['why']})" for o in self.overrides
        ]
        return "\n".join(lines)

    # -- accessors ---------------------------------------------------------------------------

    @property
    def profile_names(self) -> list[str]:
        return [str(p.get("name")) for p in self._doc.get("profiles") or [] if isinstance(p, dict)]

    def _profile(self, profile: str | int | None) -> dict[str, Any]:
        profiles = [p for p in self._doc.get("profiles") or [] if isinstance(p, dict)]
        if profile is None:
            if len(profiles) != 1:
                raise KeyError(
                    f"policy has {len(profiles)} profiles; name one of {self.profile_names}"
                )
            return profiles[0]
        if isinstance(profile, int):
            return profiles[profile]
        for p in profiles:
            if p.get("name") == profile:
                return p
        raise KeyError(f"no profile {profile!r}; profiles: {self.profile_names}")

    def plugin_args(self, name: str, profile: str | int | None = None) -> dict[str, Any]:
        """A copy of a plugin's args; DefaultEvictor without config yields {} like upstream."""
        for pc in self._profile(profile).get("pluginConfig") or []:
            if isinstance(pc, dict) and pc.get("name") == name:
                return copy.deepcopy(pc.get("args") or {})
        if name == facts_for().default_evictor:
            return {}
        raise KeyError(f"plugin {name!r} has no pluginConfig entry in profile {profile!r}")

    def evictor_args(self, profile: str | int | None = None) -> dict[str, Any]:
        return self.plugin_args(facts_for().default_evictor, profile)

    def enabled_plugins(
        self, profile: str | int | None = None, version: str | None = None
    ) -> dict[str, list[str]]:
        """Enabled plugins per extension point as that descheduler (None: the pinned one) runs
        them, from its own defaults: v0.36.0 prepends DefaultEvictor to filter and
        preevictionfilter when absent (policyconfig.go setDefaultEvictor).
        """
        name = self._profile(profile).get("name")
        profiles = self.effective(version).get("profiles") or []
        prof: dict[str, Any] = next((p for p in profiles if p.get("name") == name), {})
        plugins = prof.get("plugins") or {}
        return {
            ep: list((plugins.get(ep) or {}).get("enabled") or [])
            for ep in facts_for(version).extension_points
        }

    @property
    def event_notification(self) -> bool:
        """evictionFailureEventNotification; false when unset (types.go default)."""
        return notifies_eviction_failures(self._doc) is True

    @property
    def limits(self) -> dict[str, int | None]:
        """Eviction caps per node / namespace / total; None means unlimited."""
        return {
            "node": self._doc.get("maxNoOfPodsToEvictPerNode"),
            "namespace": self._doc.get("maxNoOfPodsToEvictPerNamespace"),
            "total": self._doc.get("maxNoOfPodsToEvictTotal"),
        }


def load_default() -> Policy:
    """The runbook's shipped safe-rebalance policy, validated."""
    return Policy.load(manifest_path(DEFAULT_POLICY_FILE)).validate()
