"""Small helpers over the official client: waiting on the API, never sleeping blindly."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential

from pytest_desched import interrupts
from pytest_desched.errors import (
    ConfigError,
    ControlPlaneDied,
    DeschedError,
    ProviderError,
    RoundError,
    WaitTimeout,
)

if TYPE_CHECKING:
    from kubernetes import client

T = TypeVar("T")


class HasApi(Protocol):
    """What these helpers read of a cluster (providers.base.Cluster, a floor above)."""

    @property
    def api_client(self) -> client.ApiClient: ...

    @property
    def core(self) -> client.CoreV1Api: ...


class CuttableWatch(Protocol):
    """A background watch a fault may cut (the lab recorder's), as a dropped connection would."""

    def disconnect(self, kind: str) -> bool: ...


# (namespace, watch) of every background watch open now: how a fault injector reaches a
# round's recorder without importing the lab (which sits above the providers).
LIVE_WATCHES: list[tuple[str, CuttableWatch]] = []


def live_watches(namespace: str | None = None) -> list[CuttableWatch]:
    """The background watches open now (in `namespace`)."""
    return [w for ns, w in list(LIVE_WATCHES) if namespace is None or ns == namespace]


# The liveness checks of the clusters this process runs (the embedded provider registers one
# per cluster, by name): each returns None, or an error naming a process of the cluster that
# died. Every wait runs them, so a dead control plane is a named error within a second or
# two, never a silent wait until the timeout. A process running two clusters (a canary's
# tracks) fails every wait when either dies: the message names which.
LIVENESS_CHECKS: dict[str, Callable[[], str | None]] = {}
LIVENESS_EVERY_S = 0.5  # the cost is a few pid files and /proc reads
WATCH_SLICE_S = 5  # a watch on a dead etcd sees no event: it is cut to check liveness


_LIVENESS_AT = [0.0]  # when the checks last ran (any thread): they run at most every ..._S
_DIED: dict[str, str] = {}  # a death found stays found: every later check raises at once


def _known_death() -> str | None:
    return next((_DIED[n] for n in list(LIVENESS_CHECKS) if n in _DIED), None)


def control_plane_death() -> str | None:
    """The error of the first dead cluster process a check reports, else None."""
    known = _known_death()
    if known:
        return known
    for name, check in list(LIVENESS_CHECKS.items()):
        why = check()
        if why:
            _DIED[name] = why
            return why
    return None


def forget_death(name: str) -> None:
    """Cluster `name` was deleted and is being created again under its name (a port taken
    at create: providers/embedded/port_collision.py): the old one's death is not the new one's."""
    _DIED.pop(name, None)


def check_liveness(every: float = LIVENESS_EVERY_S) -> None:
    """ControlPlaneDied (exit 3) naming a dead cluster process; checks every `every` s at
    most, but a death once found raises on every call."""
    why = _known_death()
    if why is None and time.monotonic() - _LIVENESS_AT[0] >= every:
        _LIVENESS_AT[0] = time.monotonic()
        why = control_plane_death()
    if why:
        raise ControlPlaneDied(why)


def wait_for(
    what: str,
    probe: Callable[[], T],
    done: Callable[[T], bool],
    timeout: float = 60,
    describe: Callable[[T], str] = repr,
    max_interval: float = 1.0,
    progress: Callable[[str], None] | None = None,
    every: float = 15.0,
) -> T:
    """Poll `probe` until `done(result)`; on timeout fail with what was seen last.

    A cluster process that died ends the wait at once (`check_liveness`). `progress`: told
    what is still awaited every `every` seconds, so a long wait (a 100,000-pod restore's
    settle) is never silent.
    """
    last: list[Any] = [None]
    start = time.monotonic()
    told = [start]

    def attempt() -> bool:
        check_liveness()
        last[0] = probe()
        ok = bool(done(last[0]))
        now = time.monotonic()
        if progress is not None and not ok and now - told[0] >= every:
            told[0] = now
            progress(f"waiting for {what} ({now - start:.0f}s): {describe(last[0])}")
        return ok

    try:
        for a in Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_exponential(multiplier=0.05, max=max_interval),
            retry=retry_if_result(lambda ok: not ok),
        ):
            with a:
                ok = attempt()
            if a.retry_state.outcome is not None and not a.retry_state.outcome.failed:
                a.retry_state.set_result(ok)
    except RetryError:
        raise WaitTimeout(
            f"timed out after {timeout:.0f}s waiting for {what}; last seen: {describe(last[0])}"
        ) from None
    return last[0]


def _object_key(obj: Any) -> str:
    meta = obj.metadata
    return f"{meta.namespace or ''}/{meta.name}"


def watch_until(
    what: str,
    list_call: Callable[..., Any],
    done: Callable[[list[Any]], bool],
    timeout: float = 60,
    describe: Callable[[list[Any]], str] | None = None,
    *args: Any,
    **list_kwargs: Any,
) -> list[Any]:
    """List a collection, then follow its watch until `done(objects)`; fail with what was seen.

    Driven by the API server's events, not a polling interval: `done` sees the listed state
    first, then the state after every event (so a wait ends within milliseconds of the change
    it waits for). A watch that ends early (server timeout, 410 Gone) lists again. Returns the
    objects `done` accepted. `args`/`list_kwargs` go to `list_call` (namespace, selectors).
    A watch lasts at most WATCH_SLICE_S, then the cluster's liveness is checked.
    """
    from kubernetes import watch
    from kubernetes.client.rest import ApiException

    deadline = time.monotonic() + timeout
    objs: dict[str, Any] = {}
    show = describe or (lambda items: f"{len(items)} object(s): {sorted(objs)}")
    while True:
        check_liveness(every=0)
        listed = list_call(*args, **list_kwargs)
        objs = {_object_key(o): o for o in listed.items}
        if done(list(objs.values())):
            return list(objs.values())
        rv = listed.metadata.resource_version
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        w = watch.Watch()
        try:
            for ev in w.stream(
                list_call,
                *args,
                resource_version=rv,
                timeout_seconds=max(1, min(math.ceil(remaining), WATCH_SLICE_S)),
                allow_watch_bookmarks=True,
                **list_kwargs,
            ):
                kind, obj = ev["type"], ev["object"]
                if kind == "BOOKMARK":
                    continue
                if kind == "ERROR":  # e.g. 410 as an event: list again
                    break
                if kind == "DELETED":
                    objs.pop(_object_key(obj), None)
                else:
                    objs[_object_key(obj)] = obj
                if done(list(objs.values())):
                    return list(objs.values())
                if time.monotonic() >= deadline:
                    break
        except ApiException as exc:
            if exc.status != 410:
                raise
        finally:
            w.stop()
        if time.monotonic() >= deadline:
            break
    raise WaitTimeout(
        f"timed out after {timeout:.0f}s waiting for {what}; last seen: {show(list(objs.values()))}"
    )


# -- nodes as dicts (kubectl -o json, sanitized API objects) or kubernetes.client.V1Node --
def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def node_name(node: Any) -> str:
    return _field(_field(node, "metadata"), "name") or ""


def node_labels(node: Any) -> dict[str, str]:
    return dict(_field(_field(node, "metadata"), "labels") or {})


def node_annotations(node: Any) -> dict[str, str]:
    return dict(_field(_field(node, "metadata"), "annotations") or {})


def node_ready(node: Any) -> bool:
    for cond in _field(_field(node, "status"), "conditions") or []:
        if _field(cond, "type") == "Ready":
            return _field(cond, "status") == "True"
    return False


def wait_nodes_ready(cluster: HasApi, names: list[str], timeout: float = 60) -> None:
    def ready(nodes: list[Any]) -> dict[str, bool]:
        by_name = {n.metadata.name: n for n in nodes}
        return {name: name in by_name and node_ready(by_name[name]) for name in names}

    watch_until(
        f"nodes {names} Ready",
        cluster.core.list_node,
        lambda nodes: all(ready(nodes).values()),
        timeout,
        describe=lambda nodes: str(ready(nodes)),
    )


def pod_ready(pod: Any) -> bool:
    for c in (pod.status.conditions or []) if pod.status else []:
        if c.type == "Ready":
            return c.status == "True"
    return False


# -- failing closed when the API server (or etcd behind it) misbehaves ---------------------
# The official client has no default request timeout: with etcd down, kube-apiserver holds a
# read for its own --request-timeout (60 s) and a write for ~35 s, and urllib3 retries a timed
# out GET three more times. A round would then sit minutes on a dead control plane before
# saying anything. `bound_requests` gives every non-watch request a deadline (and no read
# retries); `api_unavailable` turns what then fails into one error naming the API server and
# what its /readyz says (etcd, ...), instead of a transport traceback or a bare timeout.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
# After a SIGINT/SIGTERM the command must end within seconds, and its cleanup may be talking
# to a control plane that died (the reason it was interrupted, often): each request then gets
# this deadline, and the first one that fails latches the server as gone, so the cleanup's
# next requests fail at once instead of each waiting (`ApiGone`). The cluster's own deletion
# does not need its API server; a kept cluster's leftovers are named by the cleanup.
AFTER_SIGNAL_TIMEOUT_S = (0.5, 1.0)


class ApiGone(ConnectionError):
    """The API server did not answer after a signal; later requests are not even tried."""


_WATCH_URL = re.compile(r"[?&](watch|follow)=(true|1)\b", re.IGNORECASE)


def bound_requests(
    api_client: Any, connect: float = CONNECT_TIMEOUT_S, read: float = READ_TIMEOUT_S
) -> Any:
    """Give `api_client`'s requests a (connect, read) deadline unless the caller set one.

    Watches and log follows keep theirs (None: they end by the server's timeoutSeconds).
    Timed-out reads are not retried (urllib3 would retry a GET three times): one deadline
    is the whole wait. A request first checks that the cluster's processes live
    (`check_liveness`): one to a dead etcd would hang to its read timeout. Idempotent: a
    client is wrapped once. Returns the client.
    """
    import urllib3

    rest = api_client.rest_client
    if getattr(rest, "_desched_bounded", None) is not None:
        return api_client
    inner = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if interrupts.interrupted():
            return after_signal(method, url, *args, **kwargs)
        check_liveness()  # a request to a dead etcd would hang to its read timeout
        if kwargs.get("_request_timeout") is None and not _WATCH_URL.search(url):
            kwargs["_request_timeout"] = (connect, read)
        return inner(method, url, *args, **kwargs)

    def after_signal(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if rest._desched_gone:
            raise ApiGone(f"{method} {url.split('?')[0]}: {rest._desched_gone} (not retried)")
        kwargs["_request_timeout"] = AFTER_SIGNAL_TIMEOUT_S
        try:
            return inner(method, url, *args, **kwargs)
        except Exception as exc:
            why = api_failure(exc)
            if why is not None and "HTTP" not in why:  # a transport failure, not an answer
                rest._desched_gone = f"the API server stopped answering after the signal ({why})"
            raise

    rest.request = request
    rest._desched_bounded = (connect, read)
    rest._desched_gone = ""
    pool = rest.pool_manager
    pool.connection_pool_kw["retries"] = urllib3.Retry(total=3, read=0, redirect=3)
    pool.clear()  # pools made before this keep their old retries otherwise
    return api_client


def api_failure(exc: BaseException) -> str | None:
    """Why a request failed, when the API server (not the request) is the cause, else None.

    Transport errors (refused, reset, timed out), 5xx answers and a dead control-plane
    process (ControlPlaneDied, raised before the request) count; a 4xx answer is the API
    server working as designed (404, 409, 429 PDB, 403 RBAC) and returns None.
    """
    import urllib3
    from kubernetes.client.rest import ApiException

    if isinstance(exc, ControlPlaneDied):
        return exc.short
    if isinstance(exc, ApiException):
        status = exc.status or 0
        return f"HTTP {status} {exc.reason or ''}".strip() if status == 0 or status >= 500 else None
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    if isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError):
        text = str(exc)
        for needle, short in (
            ("Connection refused", "connection refused"),
            ("timed out", "request timed out"),
            ("Connection reset", "connection reset"),
            ("Connection aborted", "connection aborted"),
            ("Response ended prematurely", "connection closed mid-response"),
        ):
            if needle in text:
                return f"{short} ({type(exc).__name__})"
        return f"{type(exc).__name__}: {text[:200]}"
    return None


def server_gone(exc: BaseException) -> str | None:
    """Why a request failed when the API server itself is down (refused, timed out, or
    latched as gone after a signal), else None: any HTTP answer, even a 5xx, is a server
    that still answers."""
    if isinstance(exc, ApiGone):
        return str(exc)
    why = api_failure(exc)
    return why if why is not None and not why.startswith("HTTP") else None


def api_health(cluster: HasApi, timeout: float = 6.0) -> str:
    """One line on the API server's state from its /readyz?verbose, bounded by `timeout`.

    Names the failing checks (e.g. `etcd`), so an error says which component is down.
    Never raises: it is what an error message is built from.
    """
    server = getattr(getattr(cluster.api_client, "configuration", None), "host", "(unknown)")
    try:
        method, url, headers, _, _ = cluster.api_client.param_serialize(
            "GET", "/readyz", query_params=[("verbose", "true")], auth_settings=["BearerToken"]
        )
        resp = cluster.api_client.call_api(
            method, url, header_params=headers, _request_timeout=(min(timeout, 3.0), timeout)
        )
        resp.read()
        body = (resp.data or b"").decode(errors="replace")
    except Exception as exc:
        return f"kube-apiserver {server} is unreachable: {api_failure(exc) or repr(exc)[:200]}"
    failed = [line[3:].split(" ")[0] for line in body.splitlines() if line.startswith("[-]")]
    if resp.status == 200 and not failed:
        return f"kube-apiserver {server} is ready again (/readyz ok)"
    return (
        f"kube-apiserver {server} answers but is not ready (/readyz {resp.status}): failing "
        f"checks {', '.join(failed) or 'unknown'}"
    )


@contextmanager
def api_unavailable(cluster: HasApi, doing: str) -> Iterator[None]:
    """Re-raise an API-server failure inside the block as a RoundError naming the server.

    The message says what was being done, how the request failed and what /readyz says now;
    errors that are not the API server's (4xx, the engine's own) pass through unchanged.
    """
    try:
        yield
    except DeschedError:
        raise
    except Exception as exc:
        why = api_failure(exc)
        if why is None:
            raise
        died = control_plane_death()
        if died:  # the cause, named: which process died, and its log
            raise ControlPlaneDied(died) from exc
        raise RoundError(
            f"the API server failed while {doing}: {why}; {api_health(cluster)}. "
            "The round's outcome is unknown: failing closed"
        ) from exc


# A round's pod must be placed before anything runs it. Without kube-scheduler (or with no
# node it fits) the pod would sit Pending until the round's own timeout (120 s) with nothing
# said; past this bound the round ends naming why the pod has no node.
ROUND_POD_SCHEDULE_TIMEOUT_S = 20.0


def unscheduled_why(pod: Any) -> str:
    """Why a pod has no node, from its PodScheduled condition (or the lack of one)."""
    for c in (pod.status.conditions or []) if pod.status else []:
        if c.type == "PodScheduled" and c.status == "False":
            return f"the scheduler cannot place it ({c.reason}: {(c.message or '')[:300]})"
    return (
        "no scheduler has acted on it (it has no PodScheduled condition): "
        "kube-scheduler is not running or not leading"
    )


class UnscheduledGuard:
    """Ends a wait on a Job whose pod stayed unscheduled for `limit` seconds (RoundError)."""

    def __init__(self, what: str, limit: float = ROUND_POD_SCHEDULE_TIMEOUT_S) -> None:
        self.what, self.limit, self.clock = what, limit, time.monotonic
        self.first: dict[str, float] = {}

    def check(self, pods: list[Any]) -> None:
        now = self.clock()
        for p in pods:
            phase = p.status.phase if p.status else None
            if phase not in (None, "Pending"):
                continue  # started (or over): placed long ago
            if getattr(p.spec, "node_name", None) or getattr(
                p.metadata, "deletion_timestamp", None
            ):
                continue
            since = self.first.setdefault(p.metadata.uid, now)
            if now - since >= self.limit:
                raise RoundError(
                    f"{self.what}: pod {p.metadata.namespace}/{p.metadata.name} is still "
                    f"unscheduled after {now - since:.0f}s: {unscheduled_why(p)}. No descheduler "
                    "ran; the Job is left for the emergency stop (it has not started)"
                )


def owned_by_job(pod: Any, job_uid: str | None) -> bool:
    """False for a pod another Job owned: one of the same name, already deleted, not yet gone.

    Round Jobs belong to the CronJob, whose controller deletes finished ones beyond its
    history limits (3 successful, 1 failed); the runbook's name is then free and reused,
    while the garbage collector may not yet have removed the old Job's pods, which carry the
    same `job-name` label. Selecting by that label alone would take the old round's run (and
    its evictions) for the new one's. A pod whose owner is unknown is kept.
    """
    if not job_uid:
        return True
    owners = [
        o
        for o in getattr(pod.metadata, "owner_references", None) or []
        if getattr(o, "kind", None) == "Job"
    ]
    return not owners or any(getattr(o, "uid", None) == job_uid for o in owners)


# -- a user's cluster: the first contact ----------------------------------------------------
# `desched snapshot`, `desched record` and the existing provider read a cluster the user names
# by kubeconfig and context. A server URL that does not parse, or a server that refuses the
# connection, surfaced as urllib3's LocationParseError / MaxRetryError at the first request
# and exited 70 ("internal error"). They are the user's input and the user's cluster: one
# line naming the context and the fix, exit 2 (ConfigError) and exit 3 (ProviderError).
FIRST_CONTACT_TIMEOUT_S = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)


def user_client(kubeconfig: Any, context: str) -> Any:
    """A client for the cluster behind `context` of `kubeconfig`, its server reached once.

    ConfigError when the kubeconfig's server URL does not parse; ProviderError when the
    server does not answer (refused, timed out, TLS). An HTTP answer of any status is a
    server that is there: what it refuses is the caller's to say.
    """
    from kubernetes import config as kconfig
    from kubernetes.config.config_exception import ConfigException

    where = f"context {context!r} of {kubeconfig}"
    try:
        api = kconfig.new_client_from_config(config_file=str(kubeconfig), context=context)
    except (ConfigException, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}; fix the kubeconfig (kubectl config view)") from exc
    check_server_url(api.configuration.host, where)
    reach(api, where)
    return api


def check_server_url(server: str, where: str) -> None:
    """ConfigError unless `server` is an http(s) URL with a host and a valid port."""
    import urllib3

    try:
        url = urllib3.util.parse_url(server)
        ok = url.scheme in ("http", "https") and bool(url.host)
        why = "" if ok else "it needs http:// or https:// and a host"
    except (urllib3.exceptions.LocationParseError, ValueError) as exc:
        why = str(exc)
    if why:
        raise ConfigError(
            f"{where}: its cluster's server URL {server!r} does not parse ({why}); fix the "
            "cluster's `server:` field (e.g. https://HOST:6443)"
        )


def reach(api: Any, where: str) -> None:
    """GET /version once, bounded: ProviderError naming the server when nothing answers."""
    server = api.configuration.host
    m, url, hdrs, body, post = api.param_serialize(
        method="GET",
        resource_path="/version",
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    try:  # any HTTP answer (even 401) is a server that is there: what it refuses is for later
        api.call_api(
            m,
            url,
            header_params=hdrs,
            body=body,
            post_params=post,
            _request_timeout=FIRST_CONTACT_TIMEOUT_S,
        ).read()
    except Exception as exc:
        why = api_failure(exc)
        if why is None:
            raise
        raise ProviderError(
            f"cluster unreachable: {where} points at {server}, which did not answer ({why}); "
            "start the cluster or fix the context's server, then retry"
        ) from exc
