"""The lab recorder's watches (lab/recorder.py) under a loaded API server: an open refused with
a transient status (429, 5xx) is a gap only when a LIST shows something changed while no watch
was open; a stream that broke after delivering events is a gap, as before (the fault matrix's
cut watch). CI saw `pdb watch broke (...): ApiException()` fail a canary under load.

The recorder lists, then watches from the list's resourceVersion, and each 1 s stream resumes
from the last watched event's: a pod removed between two streams is still seen going, and no
stream starts from a listed object's own (older) resourceVersion."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from pytest_desched.lab.recorder import record_lab

NS = "lab"


def _pod(name: str, rv: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name, uid=f"uid-{name}", resource_version=rv, namespace=NS
        ),
        spec=client.V1PodSpec(containers=[], node_name="n1"),
        status=client.V1PodStatus(phase="Running"),
    )


class Scripted:
    """One list function: each watch open plays the next script entry (events, or an error
    raised before or after them); each plain LIST answers the next entry of `lists` (the
    last one again once they run out), at resourceVersion "100" + its index."""

    def __init__(self, streams: list[Any], lists: list[Any] = ()) -> None:
        self.streams, self.lists = list(streams), list(lists)
        self.listed = 0
        self.opened_at: list[str | None] = []  # each watch open's resource_version
        self.drained = threading.Event()

    def __call__(self, ns: str, watch: bool = False, **kw: Any) -> Any:
        if not watch:
            item = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
            if isinstance(item, Exception):
                raise item
            self.listed += 1
            return SimpleNamespace(
                items=item, metadata=SimpleNamespace(resource_version=f"10{self.listed - 1}")
            )
        self.opened_at.append(kw.get("resource_version"))
        if not self.streams:
            self.drained.set()
            return None
        return self.streams.pop(0)


class FakeWatch:
    """kubernetes.watch.Watch's stream over a Scripted function; idle once it is played out."""

    def __init__(self) -> None:
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def stream(self, func: Any, ns: str, **kw: Any) -> Any:
        entry = func(ns, watch=True, **kw)
        if entry is None:
            self._stopped.wait(5)
            return
        events, error = entry
        yield from events
        if error is not None:
            raise error


def _record(monkeypatch: pytest.MonkeyPatch, pods: Scripted) -> Any:
    monkeypatch.setattr(watch, "Watch", FakeWatch)
    pods.__name__ = "list_namespaced_pod"  # type: ignore[attr-defined]
    pdbs = Scripted([], lists=[[]])
    cluster = SimpleNamespace(
        core=SimpleNamespace(list_namespaced_pod=pods),
        policy=SimpleNamespace(list_namespaced_pod_disruption_budget=pdbs),
    )
    with record_lab(cluster, NS) as rec:  # type: ignore[arg-type]
        assert pods.drained.wait(10), "the recorder never played the script out"
    return rec


def _ev(kind: str, name: str, rv: str) -> dict[str, Any]:
    return {"type": kind, "object": _pod(name, rv)}


def test_a_refused_open_that_hid_nothing_is_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = Scripted(
        [([], None), ([], ApiException(status=429, reason="Too Many Requests"))],
        lists=[[_pod("a", "1")], [_pod("a", "1")]],
    )
    rec = _record(monkeypatch, pods)
    assert rec.watch_errors == []
    assert len(rec.watch_notes) == 1 and "HTTP 429" in rec.watch_notes[0], rec.watch_notes
    assert "nothing missed" in rec.watch_notes[0]


def test_a_refused_open_while_a_pod_changed_is_a_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = Scripted(
        [([], None), ([], ApiException(status=503))],
        lists=[[_pod("a", "1")], ApiException(status=500), [_pod("a", "2"), _pod("b", "3")]],
    )
    rec = _record(monkeypatch, pods)
    assert rec.watch_notes == []
    assert len(rec.watch_errors) == 1, rec.watch_errors
    err = rec.watch_errors[0]
    assert "refused 2x" in err and "HTTP 503" in err and "changed unseen: a, b" in err, err


def test_a_stream_that_broke_after_events_is_a_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = Scripted(
        [([_ev("MODIFIED", "a", "101")], ApiException(status=500, reason="Internal Error"))],
        lists=[[_pod("a", "1")]],
    )
    rec = _record(monkeypatch, pods)
    assert rec.watch_notes == []
    assert rec.watch_errors == ["pods watch broke (list_namespaced_pod): HTTP 500 Internal Error"]


def test_a_refusal_that_is_not_transient_is_a_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = Scripted([([], ApiException(status=403, reason="Forbidden"))], lists=[[]])
    rec = _record(monkeypatch, pods)
    assert rec.watch_errors == ["pods watch broke (list_namespaced_pod): HTTP 403 Forbidden"]


def test_streams_resume_from_the_list_then_the_last_event_never_a_listed_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pod `a` last changed at "1", long before the list ("100"): a stream resumed from "1"
    replayed history from before the round into it (a long-lived experiment's Job round saw
    its first cycle's eviction again). A pod evicted and removed between two streams is seen
    going: the next stream replays its DELETED."""
    pods = Scripted(
        [([_ev("ADDED", "b", "105")], None), ([_ev("DELETED", "b", "107")], None)],
        lists=[[_pod("a", "1")]],
    )
    rec = _record(monkeypatch, pods)
    assert pods.opened_at[:3] == ["100", "105", "107"], pods.opened_at
    assert pods.listed == 1, "a healthy watch lists once"
    types = [(e["type"], e["name"], e["stream"]) for e in rec.pod_events]
    assert types == [("ADDED", "a", 1), ("ADDED", "b", None), ("DELETED", "b", None)], types
    assert rec.watch_errors == [] and rec.watch_notes == []


def test_an_expired_resume_point_lists_again_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = {"type": "ERROR", "object": None, "raw_object": {"code": 410, "reason": "Expired"}}
    pods = Scripted([([gone], None), ([], None)], lists=[[_pod("a", "1")], [_pod("a", "2")]])
    rec = _record(monkeypatch, pods)
    assert pods.listed >= 2 and pods.opened_at[:2] == ["100", "101"], pods.opened_at
    assert rec.watch_errors == []
    assert rec.watch_notes == ["pods watch resumed by listing (list_namespaced_pod): HTTP 410"]
