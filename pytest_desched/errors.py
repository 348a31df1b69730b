"""Every exception type of pytest-desched, in one place, under one base class.

Each says what failed and how to fix it, naming the object; none carries results (those
travel in return values). Modules re-export the ones they raise, for old import paths.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol

from pytest_desched.redaction import scrub_secrets
from pytest_desched.render import printable

# The exit codes of `desched` and each subcommand (the pytest plugin uses EXIT_INTERNAL too):
# the one table, shown in `desched --help` and docs/cli.md#exit-codes.
# 70 is sysexits.h's EX_SOFTWARE: clear of pytest's own 0-5, so a crash is told apart from
# a failed experiment (1) and from a usage error (2 here, 4 in pytest) in both front ends.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3
EXIT_INTERNAL, EXIT_INTERRUPTED = 70, 130
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success: every experiment passed (or failed only as a registered known bug "
    "explains); lint: no finding at or above --fail-on; canary: every change explained",
    EXIT_FAILED: "a verdict against you: an experiment failed or errored, lint found UNSAFE, "
    "canary found a rollback trigger or an unexplained change",
    EXIT_USAGE: "bad input (a flag, an option value, a file): one line, nothing was changed",
    EXIT_INFRA: "the toolchain could not provide a tool (no Go, a failed build) or the provider "
    "could not give a cluster (or a canary track could not run), or the evidence could not be "
    "written whole (a full disk; the folder is marked incomplete): no verdict",
    EXIT_INTERNAL: "an internal error (a bug in pytest-desched): one line, the traceback with "
    "--debug or DESCHED_DEBUG=1; please report it",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM): the last line says what the cleanup "
    "verified gone, what was kept, or what is left and who removes it",
}


class FailedResult(Protocol):
    """What a failure carries to its reporter (experiments.results.ExperimentResult)."""

    error: str | None
    artifacts: dict[str, str]


class DeschedError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(DeschedError, ValueError):
    """An option or input is invalid; nothing has been changed anywhere yet."""


class InputError(ConfigError):
    """A user file or value refused at the front door: one line naming the file, field and fix."""

    def __init__(self, source: str, field: str, problem: str, fix: str, code: str = "") -> None:
        source, field = printable(source), printable(field)  # a raw file name cannot forge a line
        self.source, self.field, self.problem, self.fix = source, field, problem, fix
        self.code = code  # a lint rule id when one names the problem (DL003 duplicate key)
        line = field.removeprefix("line ")
        if line.isdigit():  # FILE:LINE, as compilers and the other refusals write it
            where = f"{source}:{line}: "
        else:
            where = f"{source}: {field}: " if field else f"{source}: "
        super().__init__(scrub_secrets(" ".join(f"{where}{problem}; {fix}".split())))


class ToolError(DeschedError, RuntimeError):
    """A tool could not be provided; the message names the tool, the command and the log."""


class ProviderError(DeschedError, RuntimeError):
    """The provider cannot give a safe cluster; the message says what to change."""


class EvidenceIncomplete(DeschedError, RuntimeError):
    """Evidence could not be written (a full disk, a read-only folder): the folder is marked
    incomplete and no verdict rests on it."""


class ControlPlaneDied(ProviderError):
    """A process of the cluster's own control plane exited: which one, and its log's end.

    `short` is the one-line cause (`etcd (pid 12) exited`), for lines that quote it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.short = message.splitlines()[0].split("; the last lines")[0]


class ImplicitKubeconfig(DeschedError, RuntimeError):
    """A kube tool would fall back to ~/.kube/config (or an inherited $KUBECONFIG)."""


class CommandError(DeschedError, RuntimeError):
    def __init__(self, cmd: list[str], proc: subprocess.CompletedProcess[str]) -> None:
        self.cmd, self.proc = cmd, proc
        tail = scrub_secrets((proc.stderr or proc.stdout or "").strip()[-2000:])
        super().__init__(
            f"`{Path(cmd[0]).name} {' '.join(cmd[1:])}` exited {proc.returncode}: {tail}"
        )


class PolicyError(DeschedError, ValueError):
    """A policy that must not reach a cluster; ``problems`` lists each ``path: issue; fix``."""

    def __init__(self, problems: list[str] | str, source: str = "policy") -> None:
        raw = [problems] if isinstance(problems, str) else list(problems)
        # A problem may quote the offending value, and that value may be a token.
        self.problems = [scrub_secrets(str(p)) for p in raw]
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid DeschedulerPolicy ({source}):\n{lines}")


class UnsafeRender(DeschedError, RuntimeError):
    """The rendered chart breaks a safety rule; nothing was installed or changed."""


class RoundError(DeschedError, RuntimeError):
    """A round could not be started or read; nothing about evictions is implied."""


class RoundHung(RoundError):
    """A round did not finish within its timeout; it was stopped (its Job deleted with its pods)
    and read. Raised by the experiment runner to end an experiment's steps: the round ran no
    cycle, so no later step has anything to act on or check (drive() records and classifies)."""


class RoundFailed(RoundError):
    """A round's pod exited non-zero: the round is over, and this carries the descheduler's words.

    A failed pod is final for the round. The chart's Job sets no backoffLimit (default 6), so
    the Job controller would start the same pod again after 10 s, 20 s, 40 s, ... A descheduler
    that exits non-zero refused its policy or flags at start-up, or crashed; rerunning it with
    the same ConfigMap and args cannot change that, it only hides the reason behind a timeout
    (formerly `WaitTimeout ... not finished after 120s; conditions={}`). So the first failure
    ends the round at once: the Job is told it has no retries left (backoffLimit 0, so the real
    Job controller marks it Failed) and the error names the Job, the pod, the exit code and the
    last error lines of the log (tokens scrubbed).
    """

    def __init__(
        self,
        namespace: str,
        job: str,
        pod: str,
        exit_code: int,
        error_lines: list[str],
        log_path: Path | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.namespace, self.job, self.pod, self.exit_code = namespace, job, pod, exit_code
        self.error_lines, self.log_path, self.notes = error_lines, log_path, list(notes or [])
        lines = "\n".join(f"  {line}" for line in error_lines) or "  (the log is empty)"
        where = f"\nfull log: {log_path}" if log_path else ""
        extra = "".join(f"\n{n}" for n in self.notes)
        super().__init__(
            f"round Job {namespace}/{job} failed: pod {pod} exited {exit_code}; "
            f"the descheduler said:\n{lines}{where}{extra}"
        )

    def with_log(self, log_path: Path) -> RoundFailed:
        """The same failure, its full log named at `log_path` (a copy that outlives the run)."""
        return RoundFailed(
            self.namespace,
            self.job,
            self.pod,
            self.exit_code,
            self.error_lines,
            log_path,
            self.notes,
        )


class LabInputError(DeschedError, ValueError):
    """A lab input that must not reach a cluster; the message names the input and the fix."""


class LabApiError(DeschedError, RuntimeError):
    """The API server refused a lab step: the object, HTTP status and reason, no headers."""

    def __init__(self, step: str, obj: str, status: int | None, reason: str, message: str):
        self.step, self.object, self.status, self.reason = step, obj, status, reason
        detail = f": {message}" if message else ""
        super().__init__(f"{step} on {obj}: HTTP {status} {reason}{detail}")


class WaitTimeout(DeschedError, AssertionError):
    """A condition did not hold in time; the message carries the last observed state."""


class ExperimentFailed(DeschedError, AssertionError):
    """A runbook expectation did not hold; the message lists each failed check and the layers.

    Raised only by `ExperimentResult.raise_for_outcome` (the pytest front end); `result` is
    the complete result, artifacts included.
    """

    def __init__(self, message: str, result: FailedResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class KnownUpstreamBug(ExperimentFailed):
    """Failed only in checks a registered upstream bug explains, with its signature proven."""
