"""The one bounded reader of user files: size, file type, encoding, YAML/JSON shape limits.

Every policy, Helm values file, snapshot, explanation file and log a user hands us comes in
here, so a hostile or broken file ends as one `InputError` (a ConfigError: exit 2, nothing
changed) naming the file and the fix, in well under a second, before any walk of its data.

Limits (each stated in the refusal; the byte limits can be raised with the environment):

- size: at most ``DESCHED_MAX_INPUT_BYTES`` (default 16 MiB for policies, values, explanation
  files and kubeconfigs; ``DESCHED_MAX_BULK_BYTES``, default 512 MiB, for snapshots and logs).
  Only that many bytes (+1) are ever read: a 2 GiB file is refused after reading 16 MiB.
- regular files only: a FIFO, a device or a directory is refused before it is opened.
- UTF-8 text: a UTF-16 byte-order mark, NUL bytes or invalid UTF-8 are refused.
- YAML, checked on the event stream before anything is built (no recursion, no expansion):
  nesting depth at most ``MAX_DEPTH``; aliases expand to at most
  ``max(EXPANSION_FLOOR, EXPANSION_RATIO x nodes written)`` nodes (a billion-laughs file is
  refused after a few hundred events); an alias to an open anchor (a cycle) is refused;
  at most ``max_documents`` documents. Then it is built with libyaml's safe loader where
  integers longer than ``MAX_INT_DIGITS`` digits and duplicate mapping keys are refused.
- JSON (one document or one per line): the same depth and integer bounds.
- Values: a single document holds at most ``max_values(kind)`` values (`check_tree`):
  ``MAX_TREE_NODES`` for a small file; for a bulk one, one value per ``BULK_BYTES_PER_VALUE``
  bytes of its byte limit (33.5 million at 512 MiB), so a 100,000-pod snapshot (6.5 million
  values) loads and raising ``DESCHED_MAX_BULK_BYTES`` raises both. A JSON
  text's keys and a large YAML text's libyaml events are counted before anything is built,
  so a file far over the bound is refused in seconds, not after a full parse.

Imports nothing from this package but `errors`; the ground floor.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from pytest_desched.errors import InputError

__all__ = [
    "BULK_BYTES_DEFAULT",
    "EXPANSION_FLOOR",
    "EXPANSION_RATIO",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_TREE_NODES",
    "SMALL_BYTES_DEFAULT",
    "check_file",
    "check_tree",
    "json_lines",
    "load_json",
    "load_yaml",
    "load_yaml_all",
    "max_bytes",
    "max_values",
    "read_text",
    "require_mapping",
]

SMALL_BYTES_DEFAULT = 16 * 1024 * 1024
BULK_BYTES_DEFAULT = 512 * 1024 * 1024
MAX_DEPTH = 100  # Kubernetes objects (managedFields included) nest < 30
MAX_INT_DIGITS = 32  # int64 has 19; a 5,000-digit integer is an attack, not a count
EXPANSION_FLOOR = 100_000
EXPANSION_RATIO = 10
_CONTAINERS = (dict, list, tuple)  # what check_tree walks into
MAX_TREE_NODES = 2_000_000  # check_tree: a Python value handed in by code; a small file
# A snapshot's JSON spends about 22 bytes a value (a generated 100,000-pod one: 140 MiB, 6.5
# million keys); at 16 the bound lets such a snapshot through up to the byte limit and keeps a
# hostile file of tiny values (2-3 bytes each) refused before its parse: 33.5 million at most.
BULK_BYTES_PER_VALUE = 16

_ENV = {"small": "DESCHED_MAX_INPUT_BYTES", "bulk": "DESCHED_MAX_BULK_BYTES"}
_DEFAULT = {"small": SMALL_BYTES_DEFAULT, "bulk": BULK_BYTES_DEFAULT}
_FIX = "fix the file"


def max_bytes(kind: str = "small") -> int:
    """The byte limit for `kind` ("small": policies, values...; "bulk": snapshots, logs)."""
    env = _ENV[kind]
    raw = os.environ.get(env, "").strip()
    if not raw:
        return _DEFAULT[kind]
    try:
        value = int(raw)
    except ValueError:
        raise InputError(env, "", f"{raw!r} is not a byte count", "set a whole number") from None
    if value <= 0:
        raise InputError(env, "", f"{value} is not positive", "set a positive byte count")
    return value


def _as(what: str) -> str:
    return "" if what == "file" else f" (read as the {what})"


def _mib(n: int) -> str:
    return f"{n / 1048576:.0f} MiB" if n >= 1048576 else f"{n} bytes"


def max_values(kind: str = "small") -> int:
    """The value bound for one document of `kind` (see the module docstring)."""
    if kind == "small":
        return MAX_TREE_NODES
    return max(MAX_TREE_NODES, max_bytes(kind) // BULK_BYTES_PER_VALUE)


def check_file(path: str | Path, *, kind: str = "small", what: str = "file") -> os.stat_result:
    """An existing regular file within the size limit (nothing opened); else `InputError`."""
    p = Path(path)
    name = str(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(name, "", f"no such file{_as(what)}", "give an existing path") from None
    except OSError as exc:
        raise InputError(name, "", f"cannot read ({exc.strerror}){_as(what)}", "check it") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(name, "", f"is a directory, not a file{_as(what)}", "give a file in it")
    if not stat.S_ISREG(st.st_mode):
        kind_name = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise InputError(name, "", f"is {kind_name}{_as(what)}", "give a regular file")
    if st.st_size > max_bytes(kind):
        raise _too_big(name, kind, what)
    return st


def _too_big(name: str, kind: str, what: str) -> InputError:
    return InputError(
        name,
        "",
        f"larger than the {_mib(max_bytes(kind))} limit{_as(what)}",
        f"trim it, or raise {_ENV[kind]} (bytes)",
    )


def read_text(path: str | Path, *, kind: str = "small", what: str = "file") -> str:
    """The file's text: a regular file, within the size limit, UTF-8; else `InputError`."""
    p, name = Path(path), str(path)
    check_file(p, kind=kind, what=what)
    limit = max_bytes(kind)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(name, "", f"cannot open ({exc.strerror}){_as(what)}", "check it") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped since the stat
            raise InputError(name, "", f"not a regular file{_as(what)}", "give a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise _too_big(name, kind, what)
    return decode(data, name, what)


def decode(data: bytes, name: str, what: str = "file") -> str:
    """UTF-8 text (a UTF-8 BOM is dropped); UTF-16/32, NUL bytes and bad bytes refused."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or data[:4] in (b"\x00\x00\xfe\xff",):
        raise InputError(name, "", f"UTF-16/32 text{_as(what)}", "save it as UTF-8")
    if b"\x00" in data:
        at = data.index(b"\x00")
        raise InputError(name, "", f"binary data (NUL byte at offset {at}){_as(what)}", _TEXT_FIX)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            name,
            "",
            f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}){_as(what)}",
            "save it as UTF-8",
        ) from None


_TEXT_FIX = "give a UTF-8 text file"


def check_output(path: str | Path, flag: str = "--output-file") -> Path:
    """A file we may write: its folder exists and is writable, it is no directory or device.

    Checked before any work, so a run never ends by failing to write its result.
    """
    p = Path(path)
    if "\x00" in str(path):
        raise InputError(flag, "", f"{str(path)[:60]!r} holds a NUL byte", "give a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(flag, "", f"{parent} is not an existing folder", "create it first")
    if not os.access(parent, os.W_OK):
        raise InputError(flag, "", f"{parent} is not writable", "give a writable folder")
    if p.exists() and not p.is_file():
        raise InputError(
            flag,
            "",
            f"{p} exists and is not a regular file (a directory or device)",
            "give a file path",
        )
    return p


# ----------------------------------------------------------------------------------- YAML ---

_LIBYAML = hasattr(yaml, "CSafeLoader")
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _BoundedLoader(_BASE_LOADER):  # type: ignore[valid-type,misc]
    """libyaml's safe loader with bounded integers and no duplicate keys."""

    source = "<yaml>"


def _construct_int(loader: _BoundedLoader, node: yaml.ScalarNode) -> Any:
    digits = str(node.value).lstrip("+-").replace("_", "")
    if len(digits) > MAX_INT_DIGITS:
        raise InputError(
            loader.source,
            f"line {node.start_mark.line + 1}",
            f"an integer of {len(digits)} digits (limit {MAX_INT_DIGITS})",
            "write a realistic number, or quote it as a string",
        )
    return yaml.SafeLoader.construct_yaml_int(loader, node)


def _construct_mapping(loader: _BoundedLoader, node: yaml.MappingNode) -> Any:
    keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
    if len(set(keys)) != len(keys):  # the common case costs one set
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key in seen and key != "<<":
                raise InputError(
                    loader.source,
                    f"line {key_node.start_mark.line + 1}",
                    f"duplicate key {key!r}: the descheduler and helm keep one silently",
                    "keep exactly one",
                    code="DL003",
                )
            seen.add(key)
    return yaml.SafeLoader.construct_yaml_map(loader, node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


class _KubeLoader(_BoundedLoader):
    """As Kubernetes reads YAML (through JSON): a timestamp stays text, never a datetime."""


_KubeLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


def _scan(text: str, source: str, max_documents: int) -> None:
    """Depth, alias expansion, cycles and document count, from events only (nothing built)."""
    stack: list[list[Any]] = []  # [anchor, expanded size] per open collection
    open_anchors: set[str] = set()
    sizes: dict[str, int] = {}
    written = expanded = docs = 0

    def refuse(mark: Any, problem: str, fix: str) -> InputError:
        return InputError(source, f"line {mark.line + 1}" if mark else "", problem, fix)

    def add(n: int, mark: Any) -> None:
        nonlocal expanded
        if stack:
            stack[-1][1] += n
            total = stack[-1][1]
        else:
            expanded += n
            total = expanded
        bound = max(EXPANSION_FLOOR, EXPANSION_RATIO * written)
        if total > bound or expanded > bound:
            raise refuse(
                mark,
                f"aliases expand to more than {bound} nodes ({written} written; "
                f"limit max({EXPANSION_FLOOR}, {EXPANSION_RATIO} x written)): an alias bomb?",
                "write the data out without YAML aliases (&/*)",
            )

    for ev in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(ev, yaml.ScalarEvent):
            written += 1
            if ev.anchor:
                sizes[ev.anchor] = 1
            add(1, ev.start_mark)
        elif isinstance(ev, yaml.AliasEvent):
            if ev.anchor in open_anchors:
                raise refuse(ev.start_mark, f"alias *{ev.anchor} inside its own anchor", _FIX)
            add(sizes.get(ev.anchor or "", 1), ev.start_mark)
        elif isinstance(ev, yaml.CollectionStartEvent):
            written += 1
            if len(stack) >= MAX_DEPTH:
                raise refuse(
                    ev.start_mark,
                    f"nested deeper than {MAX_DEPTH} levels",
                    "flatten the data (no Kubernetes object nests this deep)",
                )
            if ev.anchor:
                open_anchors.add(ev.anchor)
            stack.append([ev.anchor, 1])
        elif isinstance(ev, yaml.CollectionEndEvent):
            anchor, n = stack.pop()
            if anchor:
                open_anchors.discard(anchor)
                sizes[anchor] = n
            add(n, ev.start_mark)
        elif isinstance(ev, yaml.DocumentStartEvent):
            docs += 1
            if docs > max_documents:
                raise refuse(
                    ev.start_mark,
                    f"more than {max_documents} YAML documents",
                    "split the file",
                )
            sizes.clear()  # anchors do not cross documents


def _too_many(source: str, field: str, counted: str, kind: str) -> InputError:
    """The refusal of a document over the value bound, counted before it was parsed."""
    fix = (
        "shrink it (a snapshot: take fewer objects, `desched snapshot --namespace NS`), or "
        f"raise {_ENV['bulk']}: the bound is one value per {BULK_BYTES_PER_VALUE} bytes of it"
        if kind == "bulk"
        else "shrink it (the limit is fixed)"
    )
    return InputError(
        source,
        field,
        f"{counted}: more than the {max_values(kind):,}-value limit (counted before parsing)",
        fix,
    )


def _yaml_values_at_least(text: str, limit: int) -> int:
    """A lower bound of the values `check_tree` would count in the single YAML document
    `text`, or a number over `limit` once one is certain; libyaml counts, nothing is built.

    First libyaml's C parser counts every event (`raw_parse`, no Python object per event:
    about 20-50 MB/s). Each value is at most 3 events (a mapping key, and a collection's start
    and end; a collection as a key cannot be loaded), so more than 3 x limit events (+ the
    stream's and document's 4) is over the bound at once. Between limit and 3 x limit the
    events are walked once (about 1 us each), counting values as `check_tree` does (not keys,
    not a `<<` merge's own node) and stopping past the limit.
    """
    parser = _BASE_LOADER(text)  # libyaml's CParser underneath: `raw_parse` counts events
    try:
        events = int(parser.raw_parse())  # type: ignore[attr-defined]
    finally:
        parser.dispose()
    if events <= limit:
        return events
    if events > 3 * limit + 4:
        return events // 3
    return _count_values(text, limit)


def _count_values(text: str, limit: int) -> int:
    """The values `check_tree` counts in a YAML document, from its events; stops past `limit`.
    A value behind an alias counts once (a lower bound: the loader expands it)."""
    frames: list[list[bool]] = []  # per open collection: [mapping, key next, merge value]
    n = 0
    for ev in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(ev, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
            counted, merged = True, False
            if frames:
                f = frames[-1]
                if f[0] and f[1]:  # a mapping's key: not a value; `<<` merges the next one
                    counted = False
                    f[2] = isinstance(ev, yaml.ScalarEvent) and ev.value == "<<" and not ev.style
                elif f[0]:  # a mapping's value: a merged one is no value of its own
                    counted, merged = not f[2], f[2]
                else:  # a sequence's item: not one when the sequence lists merged mappings
                    counted = not f[2]
                if f[0]:
                    f[1] = not f[1]
            if counted:
                n += 1
                if n > limit:
                    return n
            if isinstance(ev, yaml.CollectionStartEvent):
                frames.append([isinstance(ev, yaml.MappingStartEvent), True, merged])
        elif isinstance(ev, yaml.CollectionEndEvent):
            frames.pop()
    return n


def _yaml_docs(
    text: str, source: str, max_documents: int, kube: bool = False, kind: str = "small"
) -> Iterator[Any]:
    limit = max_values(kind)
    try:
        # Without an anchor there is no alias to expand; libyaml stops at 1,000 levels by
        # itself, and the depth is checked on the result (cheaper than the event scan).
        # Each value takes at least 2 bytes (`1,` or `-\n`): a smaller text is within bounds.
        if max_documents == 1 and _LIBYAML and len(text) > 2 * limit:
            values = _yaml_values_at_least(text, limit)
            if values > limit:
                raise _too_many(source, "", f"at least {values:,} values", kind)
        scanned = "&" in text or not _LIBYAML or text.count("---") >= max_documents
        if scanned:
            _scan(text, source, max_documents)
        loader = (_KubeLoader if kube else _BoundedLoader)(text)
        loader.source = source
        try:
            n = 0
            while loader.check_data():
                n += 1
                if n > max_documents:
                    raise InputError(
                        source, "", f"more than {max_documents} YAML documents", "split the file"
                    )
                doc = loader.get_data()
                if not scanned:
                    check_tree(doc, source, f"document {n}" if n > 1 else "", max_nodes=limit)
                yield doc
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        first = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise InputError(source, where, f"not valid YAML ({first})", _FIX, code="DL000") from None
    except RecursionError:
        raise InputError(source, "", f"nested deeper than {MAX_DEPTH} levels", _FIX) from None


def load_yaml_all(
    text: str,
    source: str = "<yaml>",
    *,
    max_documents: int = 100,
    kube: bool = False,
    kind: str = "small",
) -> list[Any]:
    """Every document of a YAML stream, bounded (see the module docstring); `kube`: read as
    Kubernetes reads it (timestamps stay text, so the data is JSON data); `kind` as read."""
    return list(_yaml_docs(text, source, max_documents, kube, kind))


def load_yaml(text: str, source: str = "<yaml>", *, kube: bool = False, kind: str = "small") -> Any:
    """The single document of `text` (None when empty); more than one is refused."""
    docs = load_yaml_all(text, source, max_documents=1, kube=kube, kind=kind)
    return docs[0] if docs else None


def require_mapping(doc: Any, source: str, what: str, field: str = "") -> dict[str, Any]:
    """`doc` when it is a mapping; else the one refusal (exit 2) for a file that is no YAML
    mapping at all: empty, comments only, a bare scalar or a list. `what` names what was
    asked for ("a DeschedulerPolicy, Helm values or ConfigMap")."""
    if isinstance(doc, dict):
        return doc
    if doc is None:
        problem = "holds no YAML document (empty, or comments only)"
    elif isinstance(doc, list):
        problem = "is a list, not a mapping"
    else:
        problem = f"is the bare {type(doc).__name__} {str(doc)[:40]!r}, not a mapping"
    raise InputError(source, field, problem, f"give {what}")


def load_yaml_file(path: str | Path, *, kind: str = "small", what: str = "file") -> Any:
    """`read_text` + `load_yaml`."""
    return load_yaml(read_text(path, kind=kind, what=what), str(path), kind=kind)


# ----------------------------------------------------------------------------------- JSON ---


_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1}}}")  # a longer integer is refused


def _bounded_int(raw: str) -> int:
    if len(raw.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(raw.lstrip('-'))} digits (limit {MAX_INT_DIGITS})")
    return int(raw)


def load_json(text: str, source: str = "<json>", field: str = "", *, kind: str = "small") -> Any:
    """One JSON document with the depth, integer and value-count bounds.

    The value count is bounded before parsing: every `":` outside a string ends a key, each
    key has a value, so `text.count('":')` less the escaped `\\":` is a lower bound of
    `check_tree`'s count, read in well under a second (an 87 MB snapshot took 6.7 s to parse
    and then be refused)."""
    keys = text.count('":') - text.count('\\":')
    if keys > max_values(kind):
        raise _too_many(source, field, f"{keys:,} keys", kind)
    # The integer bound costs a Python call per integer (a third of a snapshot's parse): only
    # a text with a run of more digits than it allows can hold such an integer.
    hook = _bounded_int if _LONG_DIGITS.search(text) else None
    try:
        doc = json.loads(text, parse_int=hook)
    except RecursionError:
        raise InputError(source, field, f"nested deeper than {MAX_DEPTH} levels", _FIX) from None
    except ValueError as exc:
        first = str(exc).splitlines()[0][:200]
        raise InputError(source, field, f"not valid JSON ({first})", _FIX) from None
    check_tree(doc, source, field, max_nodes=max_values(kind))
    return doc


def json_lines(text: str, source: str = "<log>") -> Iterator[tuple[int, Any]]:
    """(line number, document) for each line that is a JSON object; other lines are skipped.

    A line that starts like JSON but breaks a bound (depth, integer size) is refused, so a
    hostile log cannot hide a crash behind "skipped".
    """
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s.startswith("{"):
            continue
        try:
            doc = json.loads(s, parse_int=_bounded_int)
        except RecursionError:
            raise InputError(
                source, f"line {i}", f"JSON nested deeper than {MAX_DEPTH} levels", _FIX
            ) from None
        except ValueError as exc:
            if "digits" in str(exc):
                raise InputError(source, f"line {i}", str(exc), _FIX) from None
            continue
        check_tree(doc, source, f"line {i}")
        yield i, doc


def check_tree(
    value: Any, source: str = "<data>", field: str = "", *, max_nodes: int = MAX_TREE_NODES
) -> None:
    """Depth and expanded size of a Python value (shared references counted each time).

    Iterative, and it stops at the first bound: safe on a value a caller built with shared
    sub-objects (a YAML-alias graph from elsewhere), which a recursive walk would expand.
    """
    # Only containers are pushed (most values are scalars: a third of the time); a
    # container's children are counted, and their depth checked, when it is popped.
    if not isinstance(value, _CONTAINERS):
        return
    todo: list[tuple[Any, int]] = [(value, 0)]
    seen = 1
    while todo:
        v, depth = todo.pop()
        children = v.values() if isinstance(v, dict) else v
        if not children:
            continue
        seen += len(children)
        if seen > max_nodes:
            raise InputError(
                source, field, f"more than {max_nodes} values once expanded", "shrink it"
            )
        if depth + 1 > MAX_DEPTH:
            raise InputError(source, field, f"nested deeper than {MAX_DEPTH} levels", _FIX)
        todo.extend((x, depth + 1) for x in children if isinstance(x, _CONTAINERS))
