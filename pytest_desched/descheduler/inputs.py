"""The user's own policy and Helm values: read, checked with the pinned helm and the lint, first.

`--policy FILE` is a DeschedulerPolicy; `--values FILE` (repeatable, Helm's order) are Helm
values for the release under test. Helm alone coalesces the values (`helm template -f a -f
b`): nothing here merges them. Everything is checked before any cluster change, each refusal
a ConfigError / PolicyError naming the file (and the line when known):

- a file that is missing, unreadable or not a YAML mapping;
- values helm refuses (`helm template` fails: helm's own reason);
- values that turn `suspend` off, or `cmdOptions.dry-run` off at the first install (the
  runbook's safety flags go on top anyway; a file that says otherwise would mislead);
- a policy (the `--policy` file, else the values' `deschedulerPolicy` as helm renders it)
  with any lint error.

What the lab puts on top of the user's values (the runbook's suspend and dry run, the log
options the evidence reads) is listed in `UserInputs.on_top` and shown to the user.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.policy import Policy
from pytest_desched.descheduler.policy.checker import checker_for
from pytest_desched.descheduler.policy.lint import Target, lint_targets, values_target
from pytest_desched.descheduler.policy.safety import credential_problems
from pytest_desched.descheduler.policy.values import (
    POLICY_KEY,
    RenderedValues,
    ValuesFile,
    read_values,
    safety_off,
)
from pytest_desched.descheduler.render_checks import cronjob_args, find
from pytest_desched.errors import ConfigError, PolicyError

__all__ = ["InputFile", "UserInputs", "check_user_inputs", "read_input", "unsafe_value_lines"]

# The lab reads the descheduler's JSON log at -v=4 (every filter decision is visible there);
# a user's higher verbosity is kept, a lower one is raised (and shown).
LAB_LOG_FORMAT = "json"
LAB_MIN_VERBOSITY = 4


@dataclass(frozen=True)
class InputFile:
    """One input file as the record names it: its file name and sha256, never its content."""

    flag: str  # --policy | --values
    path: Path
    sha256: str
    values: ValuesFile = field(repr=False, compare=False)  # the document and its node

    @property
    def doc(self) -> dict[str, Any]:
        return self.values.doc

    def evidence(self) -> dict[str, str]:
        return {"file": self.path.name, "sha256": f"sha256:{self.sha256}"}


def read_input(flag: str, path: Path) -> InputFile:
    """A readable YAML mapping (read_values' rules), or a ConfigError naming flag, file, line."""
    try:
        vf = read_values(path)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {exc}") from None
    if flag == "--values":  # a policy's own credentials are its lint's (DL rule), named there
        found = credential_problems(vf.doc)  # bounded data (inputs_safe): a safe walk
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise ConfigError(f"{flag} {path}: {found[0]}{more}")
    return InputFile(flag, path, hashlib.sha256(path.read_bytes()).hexdigest(), vf)


def unsafe_value_lines(files: Sequence[InputFile]) -> list[str]:
    """Where the values turn the runbook's safety off (suspend, or dry-run at first install).

    `safety_off` decides (the last file in Helm's order that sets a key is named); `true`,
    or leaving the key out, is fine: the lab sets both on top regardless.
    """
    return [
        f"--values {f.path}{f':{line}' if line else ''}: {key}: {json.dumps(value, default=str)} "
        f"turns it off; {why}; remove the key (or set it to true)"
        for f, key, value, line, why in safety_off([f.values for f in files])
    ]


@dataclass(frozen=True)
class UserInputs:
    """The user's checked inputs: the files (names, digests), their policy, the lab's flags."""

    policy_file: InputFile | None = None
    values_files: tuple[InputFile, ...] = ()
    # The user's policy: the --policy file, else the values' deschedulerPolicy as helm renders
    # it; None means the runbook's policy runs (the values set no deschedulerPolicy).
    policy: Policy | None = None
    policy_from: str = ""  # "--policy my.yaml" / "--values prod.yaml (deschedulerPolicy)"
    on_top: tuple[str, ...] = ()  # the lab's `--set` flags over the values, with why
    set_flags: tuple[str, ...] = ()  # the same, as helm arguments

    @property
    def given(self) -> bool:
        return self.policy_file is not None or bool(self.values_files)

    @property
    def values_paths(self) -> tuple[Path, ...]:
        return tuple(f.path for f in self.values_files)

    def evidence(self) -> dict[str, Any]:
        """What the record says was used: file names and digests, never contents."""
        out: dict[str, Any] = {
            "policy": self.policy_file.evidence() if self.policy_file else None,
            "values": [f.evidence() for f in self.values_files],
            "policy_from": self.policy_from or "the runbook's safe-rebalance policy",
            "on_top": list(self.on_top),
        }
        if self.policy is not None:
            out["user_policy_digest"] = f"sha256:{self.policy.digest()}"
        return out

    def describe(self) -> list[str]:
        """Lines for the terminal: which policy and values, and what goes on top."""
        lines = [f"policy: {self.policy_from or 'the runbook safe-rebalance policy'}"]
        lines += [f"values: {f.path} (sha256 {f.sha256[:12]})" for f in self.values_files]
        lines += [f"on top of the values: {o}" for o in self.on_top]
        return lines


def _args_of(docs: list[dict[str, Any]]) -> list[str]:

    cjs = find(docs, "CronJob")
    return cronjob_args(cjs[0]) if len(cjs) == 1 else []


def lab_set_flags(docs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The lab's log options over a render of the user's values: (helm --set args, shown)."""
    args = _args_of(docs)
    flags, shown = [], []
    verbosity = next((a.split("=", 1)[1] for a in args if a.startswith("--v=")), None)
    try:
        v = int(verbosity) if verbosity is not None else None
    except ValueError:
        v = None
    if v is None or v < LAB_MIN_VERBOSITY:
        flags += ["--set", f"cmdOptions.v={LAB_MIN_VERBOSITY}"]
        shown.append(
            f"cmdOptions.v={LAB_MIN_VERBOSITY} (was {verbosity or 'unset'}: the evidence reads "
            "the descheduler's V(4) filter decisions)"
        )
    fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--logging-format=")), None)
    if fmt != LAB_LOG_FORMAT:
        flags += ["--set", f"cmdOptions.logging-format={LAB_LOG_FORMAT}"]
        shown.append(
            f"cmdOptions.logging-format={LAB_LOG_FORMAT} (was {fmt or 'unset'}: the evidence "
            "parses the JSON log)"
        )
    return flags, shown


SAFETY_ON_TOP = (
    "suspend=true (runbook: the CronJob never fires; each round is a Job created from it)",
    "cmdOptions.dry-run=true at the first install (runbook), false only for an experiment's rounds",
)


def check_user_inputs(
    policy: Path | None,
    values: Sequence[Path],
    render: Callable[[Sequence[ValuesFile]], RenderedValues],
    lint: Callable[[Target, str], None],
) -> UserInputs:
    """Read and check the user's inputs; ConfigError / PolicyError before any cluster change.

    `render` is `helm template` of the chart under test with the values files in Helm's
    order (`policy.values.render_values`: ConfigError with helm's reason); `lint(target,
    label)` raises PolicyError on any error finding (`lint_input`). Both come from the caller
    (the session), so this module needs no cluster and no toolchain of its own.
    """
    pf = read_input("--policy", policy) if policy is not None else None
    vfs = tuple(read_input("--values", v) for v in values)
    if pf is not None and pf.doc.get("kind") != "DeschedulerPolicy":
        raise ConfigError(
            f"--policy {pf.path}: kind is {pf.doc.get('kind')!r}, not DeschedulerPolicy; pass a "
            "policy file here, and Helm values (with deschedulerPolicy) with --values"
        )
    unsafe = unsafe_value_lines(vfs)
    if unsafe:
        raise ConfigError("; ".join(unsafe))
    rendered = None
    if vfs:
        try:
            rendered = render([f.values for f in vfs])
        except ConfigError as exc:
            raise ConfigError(f"--values {exc}") from None
        docs = list(rendered.manifests)
        if len([d for d in docs if d.get("kind") == "CronJob"]) != 1:
            kinds = sorted({str(d.get("kind")) for d in docs})
            raise ConfigError(
                f"--values {rendered.label}: the render has no single CronJob (kinds {kinds}; "
                "`kind: Deployment`?); the runbook runs each round as a Job created from the "
                "suspended CronJob: remove `kind` from the values"
            )
    flags, shown = lab_set_flags(list(rendered.manifests)) if rendered else ([], [])
    user_policy: Policy | None = None
    policy_from = ""
    if pf is not None:
        policy_from = f"--policy {pf.path.name} (sha256 {pf.sha256[:12]})"
        text = pf.path.read_text(encoding="utf-8")
        lint(Target(str(pf.path), pf.doc, text, "", pf.values.node), f"--policy {pf.path}")
        user_policy = Policy.from_dict(pf.doc, source=str(pf.path))
    elif rendered is not None and any(POLICY_KEY in f.doc for f in vfs):
        setting = [f for f in vfs if POLICY_KEY in f.doc]
        lint(values_target(rendered), f"--values {rendered.label}")  # the render, placed
        assert rendered.policy_text is not None  # values_target refuses a render without one
        user_policy = Policy.from_yaml(
            rendered.policy_text, source=f"{setting[-1].path} ({POLICY_KEY}, as helm renders it)"
        )
        policy_from = (
            f"--values {', '.join(f.path.name for f in setting)} ({POLICY_KEY}, as the pinned "
            "helm renders it)"
        )
    on_top = [*SAFETY_ON_TOP, *shown]
    if user_policy is not None or vfs:
        on_top.append(
            f"{POLICY_KEY}: the policy named above (an experiment holds it to its lab "
            "namespace and records each deviation)"
        )
    return UserInputs(pf, vfs, user_policy, policy_from, tuple(on_top), tuple(flags))


def lint_input(target: Target, label: str, version: str, toolchain: Any = None) -> None:
    """PolicyError (file and line when known) on any error-level lint finding of `target`.

    A values target (`values_target`) has its findings placed in the user's files by the lint
    itself; its DL018 (a safety flag off) was refused before, so only errors count here.
    """
    findings = lint_targets([target], checker_for(version, toolchain))
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise PolicyError(
            [
                f"{f.file}{f':{f.line}' if f.line else ''}: {f.path}: {f.rule} {f.name}: "
                f"{f.message}; fix: {f.fix}"
                for f in errors
            ],
            label,
        )
