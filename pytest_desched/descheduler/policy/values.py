"""Helm values as the chart renders them: the pinned helm coalesces, the lint reads the result.

A values file that sets only the caps still runs the chart's default profile (seven strategies,
PodsWithLocalStorage unprotected): linting the ``deschedulerPolicy`` block alone says the
opposite of what will run. So `desched lint` of values renders them with the pinned chart
(``helm template -f A -f B``, Helm's order; helm alone coalesces them, nothing here merges
values) and lints the policy ConfigMap of that render. :meth:`RenderedValues.locate` then
places a path of the rendered policy in the user's files: the last file in Helm's order that
sets it, or none (the chart's default).

Every refusal here is a :class:`~pytest_desched.errors.ConfigError` naming the file (and the
line when known): a missing or unreadable file, YAML that does not parse, a document that is
not a mapping, values helm refuses (helm's own reason).
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.descheduler.render_checks import find, parse_manifests
from pytest_desched.errors import CommandError, ConfigError
from pytest_desched.inputs_safe import load_yaml, read_text, require_mapping
from pytest_desched.proc import run
from pytest_desched.redaction import scrub_secrets

__all__ = [
    "POLICY_KEY",
    "RenderedValues",
    "ValuesFile",
    "read_values",
    "render_values",
    "safety_off",
    "unknown_keys",
]

POLICY_KEY = "deschedulerPolicy"  # the chart's values key whose body is policy.yaml

# The runbook's first-install flags, as values keys: a file that turns one off would mislead
# whoever installs it with `-f` alone (the chart's own default for suspend is false).
SAFETY_KEYS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("suspend",), "rounds run only as Jobs created from the suspended CronJob"),
    (("cmdOptions", "dry-run"), "the first install renders and runs in dry run"),
)


@dataclass(frozen=True)
class ValuesFile:
    """One user values file: its path, its document and its composed node (for lines)."""

    path: Path
    doc: dict[str, Any]
    node: yaml.Node | None


def read_values(path: str | Path) -> ValuesFile:
    """A readable YAML mapping, or a ConfigError naming the file (and the line when known)."""
    p = Path(path)
    text = read_text(p, what="Helm values")  # bounded: size, file type, UTF-8
    doc = load_yaml(text, str(p))  # depth, aliases, ints, duplicate keys: before any walk
    node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if doc is None:  # empty, or comments only: Helm's "no overrides"
        doc = {}
    doc = require_mapping(doc, str(p), "Helm values")
    return ValuesFile(p, doc, node)


def yaml_problem(path: Path, exc: yaml.YAMLError) -> str:
    """`FILE:LINE: not valid YAML (why)`, the one wording of a parse refusal."""
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    why = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{path}{where}: not valid YAML ({why})"


def node_line(node: yaml.Node | None, keys: Sequence[str | int]) -> int | None:
    """1-based line of the full key path in a composed document; None when any step is absent."""
    line = None
    for key in keys:
        if isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            if key >= len(node.value):
                return None
            node = node.value[key]
            line = node.start_mark.line + 1
        elif isinstance(node, yaml.MappingNode) and isinstance(key, str):
            for k, v in node.value:
                if getattr(k, "value", None) == key:
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return None
        else:
            return None
    return line


def _get(doc: Any, keys: Sequence[str]) -> tuple[bool, Any]:
    for key in keys:
        if not isinstance(doc, Mapping) or key not in doc:
            return False, None
        doc = doc[key]
    return True, doc


def safety_off(files: Sequence[ValuesFile]) -> list[tuple[ValuesFile, str, Any, int | None, str]]:
    """(file, dotted key, value, line, why) where the values turn a first-install flag off.

    Helm's order decides: the last file that sets a key wins, so that file is named.
    """
    out = []
    for keys, why in SAFETY_KEYS:
        last = next((f for f in reversed(files) if _get(f.doc, keys)[0]), None)
        if last is None:
            continue
        value = _get(last.doc, keys)[1]
        if value is True or str(value).lower() == "true":
            continue
        out.append((last, ".".join(keys), value, node_line(last.node, keys), why))
    return out


# How a chart's templates read a top-level value: `.Values.key`, `index .Values "key"`.
_VALUES_REF = re.compile(r'\.Values\.([A-Za-z0-9_]+)|index\s+\.Values\s+"([^"]+)"')


def chart_reads(shown: Mapping[str, Any], templates: Iterable[str]) -> frozenset[str]:
    """The top-level values a chart reads: its default values' keys, every key its templates
    name (a key commented out of values.yaml, e.g. `startingDeadlineSeconds`), and `global`."""
    named = {a or b for text in templates for a, b in _VALUES_REF.findall(text)}
    return frozenset({*shown, *named, "global"})


def unknown_keys(
    files: Sequence[ValuesFile], reads: frozenset[str]
) -> list[tuple[ValuesFile, str, int | None]]:
    """(file, key, line) of each top-level key no part of the chart reads: helm ignores it
    without a word, so the setting does nothing (a typo, or a key of another chart version)."""
    return [
        (f, str(key), node_line(f.node, [str(key)]))
        for f in files
        for key in f.doc
        if str(key) not in reads
    ]


def _chart_texts(chart: Path) -> list[str]:
    """The text of every template of a chart directory or packaged .tgz."""
    if chart.is_dir():
        return [
            p.read_text(errors="replace") for p in sorted(chart.rglob("templates/*")) if p.is_file()
        ]
    out = []
    with tarfile.open(chart) as tf:
        for m in tf:
            fh = tf.extractfile(m) if m.isfile() and "/templates/" in m.name else None
            if fh is not None:
                out.append(fh.read().decode(errors="replace"))
    return out


@dataclass(frozen=True)
class RenderedValues:
    """What the chart renders from the user's values: the policy ConfigMap's text, if any."""

    files: tuple[ValuesFile, ...]
    chart: str  # the chart's label, e.g. "descheduler-0.36.0"
    policy_text: str | None
    # Every document of the render (the CronJob's args, kind...): desched run/up read them.
    manifests: tuple[dict[str, Any], ...] = ()
    # The top-level values the chart reads (chart_reads); empty when not asked.
    reads: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return ", ".join(str(f.path) for f in self.files)

    def locate(self, policy_path: Sequence[str | int]) -> tuple[ValuesFile, int] | None:
        """The file (last in Helm's order) and line that set ``deschedulerPolicy.<path>``."""
        keys = [POLICY_KEY, *policy_path]
        for f in reversed(self.files):
            line = node_line(f.node, keys)
            if line is not None:
                return f, line
        return None


def helm_error(said: str, code: int) -> str:
    """helm's own reason: its `Error:` line with the indented lines that continue it (Helm 4
    splits a template error over three: where, what it executed, why; Helm 3 writes one)."""
    lines = said.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Error:")), None)
    if start is None:
        return next((ln.strip() for ln in lines if ln.strip()), f"exit {code}")
    parts = [lines[start].removeprefix("Error:").strip()]
    for ln in lines[start + 1 :]:
        if not ln[:1].isspace() or not ln.strip():
            break
        parts.append(ln.strip())
    return ": ".join(p.rstrip(":") for p in parts if p)


def render_values(
    files: Sequence[ValuesFile],
    chart: Path,
    helm: Path,
    env: Mapping[str, str],
    *,
    chart_label: str = "",
    timeout: float = 120,
) -> RenderedValues:
    """`helm template descheduler CHART -f A -f B ...`; ConfigError with helm's own reason."""
    cmd = [str(helm), "template", "descheduler", str(chart)]
    for f in files:
        cmd += ["-f", str(f.path)]
    try:
        text = run(cmd, env=dict(env), timeout=timeout).stdout
    except CommandError as exc:
        reason = helm_error(exc.proc.stderr or exc.proc.stdout or "", exc.proc.returncode)
        names = ", ".join(str(f.path) for f in files)
        raise ConfigError(f"{names}: helm refuses these values ({scrub_secrets(reason)})") from None
    try:
        docs = parse_manifests(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{files[-1].path}: the chart renders invalid YAML ({exc})") from None
    cms = [d for d in find(docs, "ConfigMap") if "policy.yaml" in (d.get("data") or {})]
    policy = str(cms[0]["data"]["policy.yaml"]) if len(cms) == 1 else None
    shown = yaml.safe_load(run([str(helm), "show", "values", str(chart)], env=dict(env)).stdout)
    reads = chart_reads(shown if isinstance(shown, dict) else {}, _chart_texts(chart))
    return RenderedValues(tuple(files), chart_label or chart.name, policy, tuple(docs), reads)
