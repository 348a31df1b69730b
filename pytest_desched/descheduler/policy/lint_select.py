"""Which of `desched lint`'s rules report: ``--select``/``--ignore``, the config file, inline ignores.

The conventions are ruff's, which most Python-using SREs already know:

- ``--select CODE,...`` keeps only those rules, ``--ignore CODE,...`` drops rules; both also
  come from ``[tool.desched.lint]`` (``select = [...]``, ``ignore = [...]``) in the nearest
  ``pyproject.toml`` above the working directory. A command-line value replaces the file's.
- ``# desched: ignore[DL007] the reason`` on a finding's line silences that finding only. An
  ignore with no reason (or naming an unknown code) is refused: the finding stays and the
  comment itself is reported as DL020, so every silenced finding carries its why.
- An unknown code on the command line or in the file is bad input (exit 2) naming the code and
  the nearest valid one.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_desched.descheduler.policy.lint import Finding
from pytest_desched.descheduler.policy.lint_output import RULES, rule_link
from pytest_desched.errors import ConfigError
from pytest_desched.render import render, table

__all__ = [
    "CONFIG_TABLE",
    "Selection",
    "apply_inline",
    "list_rules",
    "load_config",
    "parse_codes",
    "selection",
]

CONFIG_TABLE = "tool.desched.lint"  # in pyproject.toml, as ruff's [tool.ruff.lint]
_KEYS = ("select", "ignore")
# `# desched: ignore[DL007, DL009] reason`; the codes are checked, the reason must be there.
_INLINE = re.compile(r"#\s*desched:\s*ignore\[([^\]]*)\]\s*(.*)$")


def _unknown(code: str, source: str) -> ConfigError:
    """The code, and the nearest valid one: the same number (DL07 -> DL007), else by spelling."""
    m = re.fullmatch(r"DL?0*(\d{1,3})", code)
    padded = f"DL{int(m.group(1)):03d}" if m else ""
    nearest = padded if padded in RULES else difflib.get_close_matches(code, RULES, 1, 0.0)[0]
    return ConfigError(
        f"{source}: unknown lint rule {code!r}; did you mean {nearest}? "
        "(desched lint --list-rules lists them)"
    )


def parse_codes(value: str | Iterable[str], source: str) -> frozenset[str]:
    """Rule codes from ``DL007,DL009`` or a list; an unknown code is a ConfigError (exit 2)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    codes = [str(c).strip().upper() for c in items if str(c).strip()]
    for code in codes:
        if code not in RULES:
            raise _unknown(code, source)
    return frozenset(codes)


@dataclass(frozen=True)
class Selection:
    """The rules that report: ``select`` (None: all) minus ``ignore``."""

    select: frozenset[str] | None = None
    ignore: frozenset[str] = frozenset()

    def keeps(self, code: str) -> bool:
        return (self.select is None or code in self.select) and code not in self.ignore

    def apply(self, findings: Sequence[Finding]) -> list[Finding]:
        return [f for f in findings if self.keeps(f.rule)]


def load_config(start: Path) -> tuple[dict[str, Any], str]:
    """``[tool.desched.lint]`` of the nearest pyproject.toml at or above ``start`` (ruff's
    lookup), and where it came from; ``({}, "")`` when there is none."""
    for folder in (start.resolve(), *start.resolve().parents):
        file = folder / "pyproject.toml"
        if not file.is_file():
            continue
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{file}: not readable TOML ({exc}); fix or remove it") from exc
        section: Any = data
        for key in CONFIG_TABLE.split("."):
            section = section.get(key, {}) if isinstance(section, dict) else {}
        if not isinstance(section, dict):
            raise ConfigError(f"{file}: [{CONFIG_TABLE}] must be a table")
        return section, f"{file} [{CONFIG_TABLE}]"
    return {}, ""


def selection(select: str | None, ignore: str | None, cwd: Path) -> Selection:
    """The command line's ``--select``/``--ignore`` over the config file's, each checked."""
    config, where = load_config(cwd)
    for key in config:
        if key not in _KEYS:
            guess = difflib.get_close_matches(key, _KEYS, n=1, cutoff=0.0)[0]
            raise ConfigError(f"{where}: unknown key {key!r}; did you mean {guess!r}?")
    values: dict[str, frozenset[str] | None] = {"select": None, "ignore": frozenset()}
    for key in _KEYS:
        if key in config:
            if not isinstance(config[key], list):
                raise ConfigError(f'{where}: {key} must be a list of codes, e.g. ["DL007"]')
            values[key] = parse_codes(config[key], f"{where} {key}")
    if select is not None:
        values["select"] = parse_codes(select, "--select")
    if ignore is not None:
        values["ignore"] = parse_codes(ignore, "--ignore")
    return Selection(values["select"], values["ignore"] or frozenset())


def _comments(file: str) -> dict[int, tuple[list[str], str]]:
    """Line -> (codes, reason) of each inline ignore in ``file`` ({} when it cannot be read:
    the linter has reported that already)."""
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if m := _INLINE.search(line):
            codes = [c.strip().upper() for c in m.group(1).split(",") if c.strip()]
            out[n] = (codes, m.group(2).strip())
    return out


def apply_inline(findings: Sequence[Finding], files: Iterable[str]) -> list[Finding]:
    """Drop each finding an inline ignore with a reason names on its line; report each ignore
    without a reason or with an unknown code as DL020 (and drop nothing for it)."""
    comments = {str(Path(f).resolve()): (f, _comments(f)) for f in files}
    out: list[Finding] = []
    for f in findings:
        _, found = comments.get(str(Path(f.file).resolve()), ("", {}))
        codes, reason = found.get(f.line or 0, ([], ""))
        if not (f.rule in codes and reason and all(c in RULES for c in codes)):
            out.append(f)
    for name, found in comments.values():
        for line, (codes, reason) in sorted(found.items()):
            bad = [c for c in codes if c not in RULES]
            if reason and codes and not bad:
                continue
            what = f"unknown rule(s) {bad}" if bad else "no rule" if not codes else "no reason"
            out.append(
                Finding(
                    rule="DL020",
                    severity=RULES["DL020"].severity,
                    file=name,
                    path="<comment>",
                    message=f"inline ignore with {what}: it silences nothing",
                    fix="write it as `# desched: ignore[DL007] why this is safe here`",
                    line=line,
                )
            )
    return out


def list_rules(fmt: str = "text") -> str:
    """Every rule: code, severity, summary and the link to its docs (``--list-rules``)."""
    rows = [
        {"code": r.id, "name": r.name, "severity": r.severity, "summary": r.summary}
        | {"help": rule_link(r.id)}
        for r in RULES.values()
    ]
    cols = {"code": "CODE", "severity": "SEVERITY", "name": "NAME", "summary": "SUMMARY"}
    cols["help"] = "HELP"
    return render(
        rows, fmt, text=lambda: table(rows, cols, "text"), md=lambda: table(rows, cols, "md")
    )
