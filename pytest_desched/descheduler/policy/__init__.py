"""The runbook's DeschedulerPolicy: one value type, the schema it is checked against, the safety
rules every policy obeys, and the scoping that holds it to a lab.

The package is split by concern so each part can change alone: :mod:`.model` (the
:class:`Policy` value: parsing, digests, overrides, accessors), :mod:`.schema` (the
DeschedulerPolicy schema per descheduler minor and its checker, the only module that knows field
names and rules), :mod:`.safety` (no inline credentials, no template markers), :mod:`.scope`
(:class:`PolicyScope` for existing clusters) and :mod:`.paths` (the path grammar problems and
overrides share). Import from here; the names below are the package's public API.
"""

from __future__ import annotations

from pytest_desched.descheduler.policy.model import (
    DEFAULT_POLICY_FILE,
    Policy,
    canonical_json,
    digest_of_rendered,
    load_default,
)
from pytest_desched.descheduler.policy.schema import (
    API_VERSION,
    KIND,
    NAMESPACED_PLUGINS,
    SCHEMAS,
    Schema,
    pinned_schema,
    schema_for,
)
from pytest_desched.descheduler.policy.scope import PolicyScope
from pytest_desched.errors import PolicyError

__all__ = [
    "API_VERSION",
    "DEFAULT_POLICY_FILE",
    "KIND",
    "NAMESPACED_PLUGINS",
    "SCHEMAS",
    "Policy",
    "PolicyError",
    "PolicyScope",
    "Schema",
    "canonical_json",
    "digest_of_rendered",
    "load_default",
    "pinned_schema",
    "schema_for",
]
