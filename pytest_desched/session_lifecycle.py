"""A session's end: the report, then the release and the cluster removed (or kept), checked.

`DeschedSession` takes this as a mixin: `close()` writes the run's HTML page, stops or
uninstalls the release in the runbook's order, deletes (or keeps) the cluster and checks
that nothing was left; each step is said and recorded, and a signal cannot cut it halfway.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched import interrupts, scratch
from pytest_desched.errors import ProviderError
from pytest_desched.kube import api_failure
from pytest_desched.session_state import SessionState

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster, Provider


class SessionLifecycle(SessionState):
    """The closing half of DeschedSession (its state: config, provider, cluster, release)."""

    @property
    def keep(self) -> bool:
        return self.config.keep == "always" or (self.config.keep == "on-failure" and self.failed)

    @property
    def report_path(self) -> Path:
        """Where the run's HTML report goes (written by `close()` once an experiment ran)."""
        # heavy: evidence.report and its imports, kept out of pytest start-up
        from pytest_desched.evidence.report import REPORT_NAME

        return self.config.artifacts / REPORT_NAME

    def write_report(self) -> Path | None:
        """The run's one HTML page, redacted like the records; None when nothing ran.

        A report that cannot be written is said, never raised: teardown must still run.
        """
        if not self.report_entries:
            return None
        # heavy: evidence.report and its imports, kept out of pytest start-up
        from pytest_desched.evidence.report import write_report

        shown: dict[str, Any] = {
            k: self.info.get(k) for k in ("provider", "server", "chart") if k in self.info
        }
        ahead, self._views_ahead = self._views_ahead, None
        try:
            with self.phase("report"):
                path = write_report(
                    self.report_path, self.report_entries, self.redactor, shown, ahead
                )
        except Exception as exc:
            if isinstance(exc, OSError):  # a full disk: the folder is incomplete, exit 1
                self.evidence.mark_incomplete(self.report_path, exc)
            self.info["report_error"] = f"{type(exc).__name__}: {exc}"
            self.report(f"could not write the HTML report: {self.info['report_error']}")
            return None
        finally:
            if ahead is not None:
                ahead.close()
        self.info["report"] = str(path)
        return path

    def close(self) -> dict[str, Any]:
        """Remove the release (or, when kept, stop its executor) and the cluster; report what.

        Runs shielded (pytest_desched.interrupts): a second Ctrl-C does not abandon it. After
        a signal, a cluster this session created and does not keep is deleted whole, without
        the release's uninstall and the namespace scan first: deleting it removes them, and
        the command exits within seconds. A cluster is kept only once it came up completely.
        """

        provider = self._provider
        what = "the session's cluster"
        if provider is not None:
            name = getattr(provider, "cluster_name", None) or self.info.get("cluster") or ""
            what = f"{getattr(provider, 'name', '')} cluster {name}".strip()
        try:
            with interrupts.shielded(what):
                # Said inside the shield: from this line on a signal no longer cuts the
                # cleanup short (a wait point for tests; progress for a user at the end).
                if provider is not None and interrupts.interrupted():
                    self.report(
                        f"interrupted: cleaning up {what} (a second signal does not stop it)"
                    )
                elif provider is not None and self._cluster is not None:  # one that came up
                    kept = self.keep
                    self.report(
                        f"stopping the release; keeping {what}" if kept else f"cleaning up {what}"
                    )
                return self._close()
        except KeyboardInterrupt:  # a third signal: the cleanup is abandoned, and said so
            if provider is not None and self._cluster_may_run(provider):
                who = (
                    "the next run's reaper deletes it (its owner is gone)"
                    if provider.capabilities.reaps_leftovers
                    else f"delete it with the {getattr(provider, 'name', '')} provider's own tool"
                )
                interrupts.left_behind.append(f"{what}: cleanup abandoned; {who}")
            raise

    @staticmethod
    def _cluster_may_run(provider: Provider) -> bool:
        return bool(getattr(provider, "_created", True))

    def _close(self) -> dict[str, Any]:
        # heavy: the kubernetes client, kept out of pytest start-up
        from pytest_desched.descheduler.cleanup import cleanup_release, emergency_stop

        out: dict[str, Any] = {}
        left: list[BaseException] = []
        scan: threading.Thread | None = None
        keep = self.keep and self._cluster is not None  # a half-made cluster is never kept
        # After a signal, a cluster that goes away whole takes its release and labs with it.
        whole = (
            interrupts.interrupted()
            and self._cluster is not None
            and getattr(self._cluster, "created", True)
            and not keep
        )
        reaper = getattr(self._cluster, "namespace_reaper", None)  # None: no cluster yet
        # A cluster deleted whole at the end (the embedded provider's, not kept) takes its
        # lab namespaces with it, and its checked deletion (no process, no folder left) is
        # the cleanup proof: waiting for those namespaces first would prove nothing.
        discarded = not keep and not whole and self._discards_cluster(self._provider, self._cluster)
        if reaper is not None and reaper.pending and (discarded or whole):
            out["namespaces_discarded"] = reaper.pending
        elif reaper is not None and reaper.pending:
            # The final leftover scan on a cluster that stays (kept, kind, existing): every
            # lab namespace deleted in the background is gone (providers/reaper.py); one that is
            # not fails the session, named. It mostly waits on the namespace controller's
            # 5 s delay, so the report and the releases' removal go on meanwhile; the
            # cluster is stopped only after it ended.
            def final_scan() -> None:
                with self.phase("teardown.namespaces"):
                    try:
                        out["namespaces_gone"] = reaper.wait_all()
                    except Exception as exc:
                        out["namespaces_left"] = str(exc)
                        left.append(exc)

            scan = threading.Thread(target=final_scan, name="desched-final-scan", daemon=True)
            scan.start()
        # The HTML report is drawn beside the releases' removal and the cluster's deletion
        # (they mostly wait on helm and kwokctl); it needs the redactor, not the cluster.
        # After a signal it is not drawn: importing matplotlib and charting took up to 3.9 s
        # of a canary's exit under load, past the 2 s a SIGTERM is given; the records it
        # would show are all in the evidence folder.
        report: threading.Thread | None = None
        if interrupts.interrupted() and self.report_entries:
            self.info["report_error"] = (
                "interrupted: not drawn (every record is in the evidence folder)"
            )
        else:
            report = threading.Thread(target=self.write_report, name="desched-report", daemon=True)
            report.start()
        try:
            cluster = self._cluster  # a release is installed only on a started cluster
            releases = [r for r in (self._release, *self._lane_releases.values()) if r]
            releases = [r for r in releases if r.installed and cluster is not None]
            if whole and releases:
                out["cleanup"] = "interrupted: the release goes with the cluster, deleted whole"
                releases = []
            with self.phase("teardown.release") if releases else nullcontext():
                for rel in releases:
                    key = "" if rel is self._release else f".{rel.name}"
                    try:
                        assert cluster is not None  # releases were kept only with a cluster
                        if keep:
                            out["emergency_stop" + key] = emergency_stop(cluster, rel)
                        else:
                            out["cleanup" + key] = cleanup_release(cluster, rel)
                    except Exception as exc:
                        failed = api_failure(exc)  # gone (refused, timed out) or 5xx
                        if failed is None or not discarded:  # a kept cluster's release: raised
                            raise
                        # The cluster is deleted whole next (that deletion is the proof);
                        # its release goes with it. Waiting on a dead server proves nothing.
                        out["cleanup" + key] = (
                            f"not uninstalled: the API server failed ({failed}); the release "
                            "goes with the cluster, deleted next"
                        )
                        self.report(f"{rel.name}: {out['cleanup' + key]}")
        finally:
            if scan is not None:
                scan.join()
            if self._provider is not None:
                self._provider.keep = keep
                with self.phase("teardown.cluster"):
                    self._provider.stop()
                if discarded:
                    self._check_discarded(self._provider, out, left)
                self._note_teardown(self._provider, keep)
                if keep:
                    out["kept"] = self._provider.resume_hint()
                    scratch.keep(self.config.run_dir)  # the hint's kubeconfig lives there
            if report is not None:
                report.join()
        self.info.update(out)
        if left:
            raise left[0]
        return out

    @staticmethod
    def _discards_cluster(provider: Provider | None, cluster: Cluster | None) -> bool:
        """Whether stop() deletes this cluster whole and checks the deletion itself."""
        return (
            provider is not None
            and cluster is not None
            and getattr(cluster, "created", True)
            and bool(getattr(provider, "deletion_is_cleanup_proof", False))
        )

    @staticmethod
    def _check_discarded(
        provider: Provider, out: dict[str, Any], left: list[BaseException]
    ) -> None:
        """The discarded cluster's deletion, as checked by stop(): the session's cleanup proof."""
        verified = getattr(provider, "teardown", None)
        if not isinstance(verified, dict) or verified.get("deleted") is None:
            left.append(ProviderError(f"{provider.name} cluster: its deletion was not checked"))
            return
        out["cluster_deleted"] = verified["text"]
        if verified["left"]:
            left.append(ProviderError(verified["text"]))

    def _note_teardown(self, provider: Provider, keep: bool) -> None:
        """What the exit line after a signal says about this session's cluster."""

        name = self.info.get("cluster") or getattr(provider, "cluster_name", "")
        verified = getattr(provider, "teardown", None)  # the embedded provider checks its own
        if verified is not None:
            provider.teardown = None  # type: ignore[attr-defined]  # noted once
        if keep:
            interrupts.kept.append(f"{getattr(provider, 'name', '')} cluster {name}")
        elif isinstance(verified, dict) and verified.get("deleted") is not None:
            if verified["left"]:
                interrupts.left_behind.append(verified["text"])
            elif verified["deleted"]:
                interrupts.cleaned.append(verified["text"])
        elif (
            not hasattr(provider, "teardown")
            and self._cluster is not None
            and getattr(self._cluster, "created", True)
        ):
            interrupts.cleaned.append(f"{getattr(provider, 'name', '')} cluster {name} deleted")
