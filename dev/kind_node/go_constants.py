"""kind's node-image constants (CNI and storage manifests, image names), read from the kind
module's own Go source at build time: string literals and constants joined by `+`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pytest_desched.errors import ToolError

_CONST_RE = re.compile(r"^const\s+(\w+)\s*=\s*", re.M)


def _go_string_expr(src: str, start: int, consts: dict[str, str]) -> str:
    """Evaluate `"a" + `b` + name` (string literals and known constants) starting at `start`."""
    out, i = [], start
    while True:
        while src[i] in " \t":
            i += 1
        if src[i] == "`":
            end = src.index("`", i + 1)
            out.append(src[i + 1 : end])
            i = end + 1
        elif src[i] == '"':
            m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(src, i)
            assert m is not None
            out.append(json.loads(m.group(0)))
            i = m.end()
        else:
            m = re.compile(r"\w+").match(src, i)
            if not m or m.group(0) not in consts:
                raise ToolError(f"cannot evaluate Go expression near {src[i : i + 40]!r}")
            out.append(consts[m.group(0)])
            i = m.end()
        j = i
        while j < len(src) and src[j] in " \t":
            j += 1
        if j < len(src) and src[j] == "+":
            i = j + 1
            while src[i] in " \t\n":
                i += 1
            continue
        return "".join(out)


def kind_go_constants(kind_dir: Path) -> dict[str, str]:
    """The string constants of kind's pkg/build/nodeimage (CNI/storage manifests, images)."""
    consts: dict[str, str] = {}
    for name in ("const_cni.go", "const_storage.go", "defaults.go"):
        src = (kind_dir / "pkg/build/nodeimage" / name).read_text()
        for m in _CONST_RE.finditer(src):
            consts[m.group(1)] = _go_string_expr(src, m.end(), consts)
    return consts
