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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.errors import CommandError, ConfigError, PolicyError

if TYPE_CHECKING:
    from pytest_desched.descheduler.policy import Policy

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
    doc: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    node: yaml.Node | None = field(repr=False, compare=False, default=None)

    def evidence(self) -> dict[str, str]:
        return {"file": self.path.name, "sha256": f"sha256:{self.sha256}"}


def read_input(flag: str, path: Path) -> InputFile:
    """A readable YAML mapping, or a ConfigError naming the file and the line."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{flag} {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
        node = yaml.compose(text)
        doc = yaml.safe_load(text)
    except UnicodeDecodeError:
        raise ConfigError(f"{flag} {path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        why = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{flag} {path}{where}: not valid YAML ({why})") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{flag} {path}: the document is a {type(doc).__name__}, not a mapping")
    return InputFile(flag, path, hashlib.sha256(raw).hexdigest(), doc, node)


def _line(node: yaml.Node | None, *keys: str) -> int | None:
    """1-based line of a nested mapping key in a composed document (None when absent)."""
    line = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                line, node = k.start_mark.line + 1, v
                break
        else:
            return None
    return line


def _get(doc: Any, *keys: str) -> tuple[bool, Any]:
    for key in keys:
        if not isinstance(doc, dict) or key not in doc:
            return False, None
        doc = doc[key]
    return True, doc


def unsafe_value_lines(files: Sequence[InputFile]) -> list[str]:
    """Where the values turn the runbook's safety off: suspend, or dry-run at the first install.

    Helm's order decides: the last file that sets a key wins, so that file (and its line) is
    named. `true` (or leaving the key out) is fine: the lab sets both on top regardless.
    """
    out = []
    for keys, what in (
        (("suspend",), "suspend must stay true: rounds run only as Jobs created from the CronJob"),
        (
            ("cmdOptions", "dry-run"),
            "the first install runs in dry run; the experiments turn it off for their rounds",
        ),
    ):
        last = next((f for f in reversed(files) if _get(f.doc, *keys)[0]), None)
        if last is None:
            continue
        value = _get(last.doc, *keys)[1]
        if value is True or str(value).lower() == "true":
            continue
        line = _line(last.node, *keys)
        out.append(
            f"{last.flag} {last.path}{f':{line}' if line else ''}: {'.'.join(keys)}: "
            f"{json.dumps(value, default=str)} turns it off; {what}; remove the key (or set it to true)"
        )
    return out


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
    from pytest_desched.descheduler.chart import cronjob_args, find

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
    render: Any,
    lint: Any,
) -> UserInputs:
    """Read and check the user's inputs; ConfigError / PolicyError before any cluster change.

    `render(values_paths, set_flags)` runs `helm template` of the pinned chart and returns
    its documents (raising CommandError with helm's words); `lint(policy, input_file)` raises
    PolicyError on any lint error. Both are given by the caller (the session), so this
    module needs no cluster and no toolchain of its own.
    """
    from pytest_desched.descheduler.policy import Policy

    pf = read_input("--policy", policy) if policy is not None else None
    vfs = tuple(read_input("--values", v) for v in values)
    unsafe = unsafe_value_lines(vfs)
    if unsafe:
        raise ConfigError("; ".join(unsafe))
    safety = ["--set", "suspend=true", "--set", "cmdOptions.dry-run=true"]
    docs: list[dict[str, Any]] = []
    if vfs:
        try:
            docs = render([f.path for f in vfs], safety)
        except CommandError as exc:
            said = (exc.proc.stderr or exc.proc.stdout or str(exc)).strip()
            said = "\n".join(ln for ln in said.splitlines() if not ln.startswith("Use --debug"))
            names = " ".join(str(f.path) for f in vfs)
            raise ConfigError(f"--values {names}: helm refuses them: {said[-600:]}") from None
    if vfs and len([d for d in docs if d.get("kind") == "CronJob"]) != 1:
        kinds = sorted({str(d.get("kind")) for d in docs})
        raise ConfigError(
            f"--values {' '.join(str(f.path) for f in vfs)}: the render has no single CronJob "
            f"(kinds {kinds}; `kind: Deployment`?); the runbook runs each round as a Job "
            "created from the suspended CronJob: remove `kind` from the values"
        )
    flags, shown = lab_set_flags(docs) if vfs else ([], [])
    user_policy: Policy | None = None
    policy_from = ""
    if pf is not None:
        try:
            user_policy = Policy.from_dict(pf.doc, source=str(pf.path))
        except PolicyError as exc:
            raise PolicyError(exc.problems, f"--policy {pf.path}") from None
        policy_from = f"--policy {pf.path.name} (sha256 {pf.sha256[:12]})"
        lint(user_policy, pf)
    else:
        setting = [f for f in vfs if "deschedulerPolicy" in f.doc]
        if setting:
            text = _rendered_policy(docs)
            last = setting[-1]
            if text is None:
                raise ConfigError(
                    f"--values {last.path}: deschedulerPolicy renders no policy ConfigMap "
                    "(empty?); give a policy or pass --policy FILE"
                )
            user_policy = Policy.from_yaml(
                text, source=f"{last.path} (deschedulerPolicy, as helm renders it)"
            )
            policy_from = (
                f"--values {', '.join(f.path.name for f in setting)} (deschedulerPolicy, as "
                "the pinned helm renders it)"
            )
            lint(user_policy, last)
    on_top = [*SAFETY_ON_TOP, *shown]
    if user_policy is not None or vfs:
        on_top.append(
            "deschedulerPolicy: the policy named above (an experiment holds it to its lab "
            "namespace and records each deviation)"
        )
    return UserInputs(pf, vfs, user_policy, policy_from, tuple(on_top), tuple(flags))


def _rendered_policy(docs: list[dict[str, Any]]) -> str | None:
    cms = [
        d for d in docs if d.get("kind") == "ConfigMap" and "policy.yaml" in (d.get("data") or {})
    ]
    return str(cms[0]["data"]["policy.yaml"]) if len(cms) == 1 else None


def lint_input(policy: Policy, source: InputFile, version: str, toolchain: Any = None) -> None:
    """PolicyError (file and line when known) on any error-level lint finding of `policy`."""
    from pytest_desched.descheduler.policy.checker import checker_for
    from pytest_desched.descheduler.policy.lint import Target, lint_targets

    node = source.node
    prefix = ""
    if source.flag == "--values":  # lines of the values file's own deschedulerPolicy block
        prefix = "deschedulerPolicy."
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == "deschedulerPolicy"), None)
    doc = policy.to_dict()
    target = Target(str(source.path), doc, json.dumps(doc), prefix, node)
    findings = lint_targets([target], checker_for(version, toolchain))
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise PolicyError(
            [
                f"{f.file}{f':{f.line}' if f.line else ''}: {f.path}: {f.rule} {f.name}: "
                f"{f.message}; fix: {f.fix}"
                for f in errors
            ],
            f"{source.flag} {source.path}",
        )
