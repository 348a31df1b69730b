"""Report charts drawn in the background as each experiment is recorded, not all at the end."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pytest_desched.evidence.report import _plain, entry_views
from pytest_desched.redaction import Redactor


class ViewsAhead:
    """Each entry's charts drawn in a background thread as soon as the entry is recorded.

    A session records an experiment, then runs the next one (mostly waiting on the cluster):
    drawing its charts meanwhile takes them off the end of the run. What was drawn is used
    only for an entry that redacts to exactly the same data at the end; any other is drawn
    again then.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="desched-report")
        self._ahead: dict[int, tuple[Any, Future[list[dict[str, Any]]]]] = {}

    def submit(self, index: int, entry: Mapping[str, Any], redactor: Redactor) -> None:
        data = redactor.redact(_plain(dict(entry)))
        self._ahead[index] = (data, self._pool.submit(entry_views, data, index))

    def views(self, index: int, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
        data, future = self._ahead.get(index, (None, None))
        if future is not None and data == entry:
            try:
                return future.result()
            except Exception:  # drawn again below; a chart that cannot be drawn raises there
                pass
        return entry_views(entry, index)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
