"""Raw JSON requests over the official client's connection: no model objects in between.

Why: a snapshot and a restore move tens of thousands of objects, and the generated models
cost more than the request (and drop fields the client does not know). The connection,
TLS and authentication stay the official client's (`ApiClient`); only (de)serialisation is
skipped. A non-2xx answer raises `ApiException` like the typed APIs do.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.rest import ApiException


def request(
    api: Any,
    method: str,
    path: str,
    body: Any = None,
    query: list[tuple[str, Any]] | None = None,
    content_type: str = "application/json",
    timeout: float | None = 60,
    headers: dict[str, str] | None = None,
) -> Any:
    """One request; the decoded JSON answer (None for an empty body). `headers`: extra ones
    (an `Impersonate-User` for a dry-run probe)."""
    headers = {"Accept": "application/json", **(headers or {})}
    if body is not None:
        headers["Content-Type"] = content_type
    m, url, hdrs, payload, post = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(
        m, url, header_params=hdrs, body=payload, post_params=post, _request_timeout=timeout
    )
    data = resp.read()
    if not 200 <= resp.status < 300:
        raise ApiException(http_resp=resp)
    return json.loads(data) if data else None


def get(api: Any, path: str, query: list[tuple[str, Any]] | None = None) -> Any:
    return request(api, "GET", path, query=query)


def get_or_none(api: Any, path: str) -> Any:
    """The object at `path`, or None when the API server answers 404 (it is gone)."""
    try:
        return get(api, path)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None


def list_all(
    api: Any, path: str, query: list[tuple[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Every item of a list, paged 500 at a time."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        q = [*(query or []), ("limit", 500)]
        if token:
            q.append(("continue", token))
        doc = get(api, path, q)
        items.extend(doc.get("items") or [])
        token = (doc.get("metadata") or {}).get("continue")
        if not token:
            return items


def status_reason(exc: ApiException) -> str:
    """`HTTP 409 AlreadyExists: message` from an ApiException's Status body, no headers."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    if not isinstance(body, dict):
        body = {}
    return f"HTTP {exc.status} {body.get('reason') or exc.reason}: {str(body.get('message') or '')[:300]}"
