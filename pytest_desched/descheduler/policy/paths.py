"""Places inside a policy document: the dotted paths that problems name and overrides accept.

One grammar serves both directions, so a path printed in a :class:`PolicyError` can be pasted
into :meth:`Policy.override`: ``key.key``, ``[key with dots]``, ``list[index]`` and, for named
list entries (profiles, pluginConfig), ``list[name]``. It lives apart from the model because the
lint, the safety rules and the override machinery all speak it, and none of them should reach
into another's private helpers to do so.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from pytest_desched.errors import PolicyError

__all__ = ["join_path", "problem", "set_path"]

_TOKEN = re.compile(r"\[([^\]]+)\]|([^.\[\]]+)")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_PROFILE_PATH = re.compile(r"profiles\[\d+\]")


def join_path(path: str, key: str) -> str:
    """``path.key``, or ``key`` at the document root."""
    return f"{path}.{key}" if path else key


def problem(path: str, message: str) -> str:
    """One entry of :attr:`PolicyError.problems`: ``path: message`` (``<root>`` for the root)."""
    return f"{path or '<root>'}: {message}"


def _tokens(path: str) -> list[str]:
    toks: list[str] = []
    pos = 0
    while pos < len(path):
        if toks and path[pos] == "." and pos + 1 < len(path):
            pos += 1
        m = _TOKEN.match(path, pos)
        if not m:
            raise PolicyError(f"override path {path!r}: cannot parse at offset {pos}", "override")
        toks.append(m.group(1) if m.group(1) is not None else m.group(2))
        pos = m.end()
    if not toks:
        raise PolicyError("override path is empty", "override")
    return toks


def set_path(
    doc: dict[str, Any], path: str, value: Any, plugins: Collection[str]
) -> tuple[str, Any]:
    """Set (or with ``None`` delete) the addressed value in ``doc``; return (canonical, old).

    ``plugins`` are the plugin names the shorthand ``profiles[i].<Plugin>.<arg>`` accepts for
    ``profiles[i].pluginConfig[<Plugin>].args.<arg>``; a missing pluginConfig entry for one of
    them is created.
    """
    todo = _tokens(path)
    node: Any = doc
    canon = ""
    while todo:
        tok = todo.pop(0)
        shorthand = tok in plugins and _PROFILE_PATH.fullmatch(canon)
        if shorthand and isinstance(node, dict) and tok not in node:  # <profile>.<Plugin>.<arg>
            todo[:0] = ["pluginConfig", tok, "args"]
            continue
        last = not todo
        if isinstance(node, dict):
            step = f".{tok}" if _PLAIN_KEY.fullmatch(tok) else f"[{tok}]"
            canon = (canon + step).lstrip(".")
            if last:
                old = node.pop(tok, None) if value is None else node.get(tok)
                if value is not None:
                    node[tok] = value
                return canon, old
            if node.get(tok) is None:
                node[tok] = [] if tok in ("profiles", "pluginConfig") else {}
            node = node[tok]
        elif isinstance(node, list):
            idx = _list_index(node, tok, canon, plugins)
            by_name = canon.endswith("pluginConfig")
            canon += f"[{node[idx]['name'] if by_name else idx}]"
            if last:
                old = node[idx]
                if value is None:
                    del node[idx]
                else:
                    node[idx] = value
                return canon, old
            node = node[idx]
        else:
            raise PolicyError(f"override path {path!r}: {canon} is a scalar", "override")
    raise AssertionError("unreachable")


def _list_index(items: list[Any], tok: str, canon: str, plugins: Collection[str]) -> int:
    if tok.isdigit():
        if int(tok) < len(items):
            return int(tok)
        raise PolicyError(f"override path: {canon}[{tok}] is out of range", "override")
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == tok:
            return i
    if canon.endswith("pluginConfig") and tok in plugins:
        items.append({"name": tok, "args": {}})
        return len(items) - 1
    raise PolicyError(f"override path: no entry named {tok!r} in {canon}", "override")
