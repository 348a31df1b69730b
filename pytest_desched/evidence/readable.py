"""Text for people: values and free text written out without Python reprs in a report's cells.

`human` writes a value (no `None`, brackets, quotes or braces); `prose` does the same to each
Python literal quoted inside free text (a check's detail, a verdict reason). The HTML pages
(evidence/report.py) and the canary's Markdown use both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NONE_SHOWN = "\u2013"  # an en dash: no value


def human(value: Any) -> str:
    """A value as a reader wants it: no `None`, brackets, quotes or braces."""
    if value is None or value == "":
        return NONE_SHOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return (
            ", ".join(
                f"{'none' if k in (None, 'None') else k}: {human(v)}" for k, v in value.items()
            )
            or NONE_SHOWN
        )
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return ", ".join(_item(v) for v in items) or NONE_SHOWN
    return str(value)


def _item(value: Any) -> str:
    """One element of a sequence: a nested group keeps its own parentheses."""
    if isinstance(value, (list, tuple, Mapping)) and value:
        return f"({human(value)})"
    return human(value)


_LITERAL = re.compile(r"[\[({]")
_NONE_WORD = re.compile(r"\bNone\b")


def _literal_end(text: str, start: int) -> int | None:
    """The index after the bracket that closes the one at `start` (quotes respected)."""
    pairs = {"[": "]", "(": ")", "{": "}"}
    stack, quote, i = [pairs[text[start]]], None, start + 1
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if ch != stack.pop():
                return None
            if not stack:
                return i + 1
        i += 1
    return None


def prose(text: Any) -> str:
    """Free text (a check's detail, a verdict reason) with each Python literal it quotes
    (`{'w1': 3}`, `['a', 'b']`, `('a', 1)`, `None`) written out as `human` writes values."""
    import ast

    if not isinstance(text, str):
        return human(text)
    out, i = [], 0
    while (m := _LITERAL.search(text, i)) is not None:
        end = _literal_end(text, m.start())
        value: Any = ...
        subscript = m.start() > 0 and (
            text[m.start() - 1].isalnum() or text[m.start() - 1] in "_])"
        )
        if end is not None and not subscript:  # `profiles[0]`, `f(x)`: not a quoted value
            try:
                value = ast.literal_eval(text[m.start() : end])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                value = ...
        if value is ... or not isinstance(value, (list, tuple, dict, set)):
            out.append(text[i : m.start() + 1])
            i = m.start() + 1
            continue
        out.append(text[i : m.start()])
        out.append(f"({human(value)})" if isinstance(value, tuple) else human(value))
        i = end  # type: ignore[assignment]
    out.append(text[i:])
    return _NONE_WORD.sub(NONE_SHOWN, "".join(out))
