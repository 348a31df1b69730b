"""What must never be in a policy, whatever the descheduler would accept: inline credentials and
template markers.

A policy travels through helm values, a ConfigMap, work files and logs, and the chart runs it
through ``tpl``. So a token written into it leaks, and a ``{{`` in it is evaluated by helm into
something nobody wrote. Neither is a descheduler rule: both hold for every descheduler version,
on top of the descheduler's own verdict (:mod:`.checker`), which is why they live here. Each
function returns the problems it finds (``path: issue; fix``), never the offending value.
"""

from __future__ import annotations

from typing import Any

from pytest_desched.descheduler.policy.paths import join_path, problem
from pytest_desched.redaction import scrub_secrets

__all__ = ["credential_problems", "safety_problems", "template_problems"]

CREDENTIAL_FIX = (
    "holds an inline credential (value not shown); tokens never go into a policy, "
    "its ConfigMap or helm values: create a Secret and reference it with "
    "metricsProviders[].prometheus.authToken.secretReference {namespace, name}"
)
TEMPLATE_FIX = "contains '{{', which the chart's `tpl` would evaluate; remove it"


def template_problems(value: Any, path: str = "") -> list[str]:
    """Every key or string value containing ``{{`` (the chart's ``tpl`` would evaluate it)."""
    if isinstance(value, str) and "{{" in value:
        return [problem(path, TEMPLATE_FIX)]
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += template_problems(k, join_path(path, str(k)))
            out += template_problems(v, join_path(path, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            named = path.endswith("pluginConfig") and isinstance(v, dict) and v.get("name")
            out += template_problems(v, f"{path}[{named or i}]")
    return out


def credential_problems(value: Any, path: str = "", key: str = "") -> list[str]:
    """Refuse any inline credential: a policy lands in a ConfigMap, helm values and logs.

    The runbook keeps tokens out of values, logs and artifacts; the descheduler's own way
    is a Secret reference (metricsProviders[].prometheus.authToken.secretReference). A
    value counts as a credential when the scrubber would hide it (JWT, `Bearer x`,
    `?access_token=`/`?bearer=` in a URL, user:password@ in a URL, PEM) or when its key
    names one (`token`, `bearerToken`, `password`, ...). The value is never quoted.
    """
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += credential_problems(v, join_path(path, str(k)), str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += credential_problems(v, f"{path}[{i}]", key)
    elif isinstance(value, str) and (
        scrub_secrets(value) != value or scrub_secrets(f"{key}: {value}") != f"{key}: {value}"
    ):
        out.append(problem(path, CREDENTIAL_FIX))
    return out


def safety_problems(doc: Any) -> list[str]:
    """Template markers, then inline credentials, anywhere in the document."""
    return template_problems(doc) + credential_problems(doc)
