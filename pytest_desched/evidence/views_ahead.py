"""Report charts drawn in the background as each round and experiment is recorded, not all at
the end.

The HTML report is written last, while the release and the cluster are removed, and its
charts (three per round, with matplotlib's import first) were the longest step of that tail:
about 2 s for K=5 cycles of one experiment. Drawn here as the records come, they cost the
run nothing it waits for: the session is mostly waiting on the cluster meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pytest_desched.evidence.report import chart_key, json_native, round_charts, round_view, warm_up
from pytest_desched.redaction import Redactor


class ViewsAhead:
    """Each round's charts drawn in one background thread as soon as its record exists.

    `submit_round` as a round record is written (already redacted, as the evidence writer has
    it), `submit` as an experiment's entry is recorded (only its rounds not drawn yet). What
    was drawn is used only for a round at the same place on the page whose chart inputs
    redact to exactly the same at the end; any other is drawn again then.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="desched-report")
        self._pool.submit(warm_up)  # matplotlib's import, before the first chart needs it
        self._rounds: dict[str, tuple[str, Future[dict[str, Any]]]] = {}

    def submit_round(self, index: int, j: int, redacted: Mapping[str, Any]) -> None:
        """Round `j` of the `index`-th entry of the report."""
        salt = f"e{index}r{j}"
        key = chart_key(redacted)
        if salt in self._rounds and self._rounds[salt][0] == key:
            return  # drawn (a record rewritten with more in it, its chart inputs the same)
        self._rounds[salt] = (key, self._pool.submit(round_charts, redacted, salt))

    def submit(self, index: int, entry: Mapping[str, Any], redactor: Redactor) -> None:
        data = redactor.redact(json_native(dict(entry)))
        for j, rec in enumerate(data.get("rounds") or []):
            self.submit_round(index, j, rec)

    def views(self, index: int, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The `index`-th entry's round views, with the charts drawn ahead where they fit."""
        return [
            round_view(r, f"e{index}r{j}", self._charts(f"e{index}r{j}", r))
            for j, r in enumerate(entry.get("rounds") or [])
        ]

    def _charts(self, salt: str, rec: Mapping[str, Any]) -> dict[str, Any] | None:
        key, future = self._rounds.get(salt, (None, None))
        if future is None or key != chart_key(rec):
            return None
        try:
            return future.result()
        except Exception:  # drawn again by the caller, where a failure is raised
            return None

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
