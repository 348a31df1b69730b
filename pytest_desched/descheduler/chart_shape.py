"""When a policy upgrade may skip helm's OpenAPI validation: only when it cannot find anything new.

`helm upgrade` validates every rendered object against the API server's OpenAPI schema
(about half of its 0.6-0.8 s here: the schema is fetched and parsed on each run). A policy
upgrade of the same release changes three strings: the policy ConfigMap's `policy.yaml`,
the CronJob pod template's `checksum/config` annotation and the container's `--dry-run=`
argument. When a render differs from one helm already validated on this release in those
strings only, every object has the same fields with the same types as before, so the
schema has nothing new to say and the upgrade passes `--disable-openapi-validation`; any
other difference (another object, field, value or type) keeps the validation.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

SKIP_FLAG = "--disable-openapi-validation"
POLICY_KEY = "policy.yaml"
CHECKSUM_ANNOTATION = "checksum/config"
DRY_RUN_ARG = "--dry-run="


def _masked_cronjob(doc: dict[str, Any]) -> None:
    template = doc.get("spec", {}).get("jobTemplate", {}).get("spec", {}).get("template", {})
    annotations = template.get("metadata", {}).get("annotations")
    if isinstance(annotations, dict) and isinstance(annotations.get(CHECKSUM_ANNOTATION), str):
        annotations[CHECKSUM_ANNOTATION] = "<checksum>"
    for c in template.get("spec", {}).get("containers") or []:
        args = c.get("args") if isinstance(c, dict) else None
        if isinstance(args, list):
            c["args"] = [
                f"{DRY_RUN_ARG}<flag>"
                if isinstance(a, str)
                and a.startswith(DRY_RUN_ARG)
                and a[len(DRY_RUN_ARG) :] in ("true", "false")
                else a
                for a in args
            ]


def shape(docs: Iterable[Mapping[str, Any]]) -> str:
    """A digest of the render with the policy's three strings masked (see the module doc)."""
    masked = []
    for d in docs:
        doc = copy.deepcopy(dict(d))
        data = doc.get("data")
        if isinstance(data, dict) and isinstance(data.get(POLICY_KEY), str):
            data[POLICY_KEY] = "<policy>"
        if doc.get("kind") == "CronJob":
            _masked_cronjob(doc)
        masked.append(doc)
    masked.sort(key=lambda d: json.dumps([d.get("kind"), d.get("metadata")], sort_keys=True))
    return hashlib.sha256(json.dumps(masked, sort_keys=True).encode()).hexdigest()


def validation_flags(docs: Iterable[Mapping[str, Any]], validated: set[str]) -> list[str]:
    """`[SKIP_FLAG]` when helm validated a render of this shape before, else `[]`."""
    return [SKIP_FLAG] if shape(docs) in validated else []
