"""The bounded input loader: every hostile file is one InputError, fast, before any walk."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pytest_desched import inputs_safe as s
from pytest_desched.errors import ConfigError, InputError

BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BOMB, "aliases expand to more than"),
        ("[" * 10_000 + "]" * 10_000, "nest"),
        ("".join(" " * i + "a:\n" for i in range(150)), "nested deeper than 100"),
        ("a: " + "9" * 5000, "an integer of 5000 digits"),
        ("a: 1\nb: 2\na: 3\n", "in.yaml:3: duplicate key 'a'"),
        ("a: &x [*x]\n", "inside its own anchor"),
        ("a: [\n", "not valid YAML"),
        ("a: 1\n---\nb: 2\n", "more than 1 YAML documents"),
    ],
)
def test_hostile_yaml_is_refused_fast(text: str, message: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(InputError, match=message) as info:
        s.load_yaml(text, "in.yaml")
    assert time.monotonic() - t0 < 1.0
    assert str(info.value).startswith("in.yaml:")
    assert "\n" not in str(info.value)


def test_anchors_within_bounds_and_plain_yaml_load() -> None:
    assert s.load_yaml("d: &d {x: 1}\ne: *d\nf: [1, 2]\n") == {
        "d": {"x": 1},
        "e": {"x": 1},
        "f": [1, 2],
    }
    assert s.load_yaml_all("a: 1\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]
    assert s.load_yaml("") is None


def test_duplicate_key_carries_the_lint_rule() -> None:
    with pytest.raises(InputError) as info:
        s.load_yaml("a: 1\na: 2\n", "p.yaml")
    assert info.value.code == "DL003"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("ä: 1\n".encode("utf-16"), "UTF-16/32 text; save it as UTF-8"),
        (b"\x00\x01\x02junk", "binary data"),
        (b"a: \xe9\n", "not UTF-8 \\(byte 0xe9 at offset 3\\)"),
    ],
)
def test_non_utf8_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    p = tmp_path / "f.yaml"
    p.write_bytes(data)
    with pytest.raises(InputError, match=message):
        s.read_text(p)


def test_a_utf8_bom_is_dropped(tmp_path: Path) -> None:
    p = tmp_path / "f.yaml"
    p.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert s.load_yaml_file(p) == {"a": 1}


def test_only_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="is a FIFO; give a regular file"):
        s.read_text(fifo)
    assert time.monotonic() - t0 < 1.0  # never opened, so never blocked on a writer
    with pytest.raises(InputError, match="is a directory, not a file"):
        s.read_text(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        s.read_text(tmp_path / "missing")


def test_size_limit_reads_no_more_than_the_limit(tmp_path: Path, monkeypatch) -> None:
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:  # sparse: 2 GiB that are never read
        fh.truncate(2 * 1024**3)
    t0 = time.monotonic()
    with pytest.raises(InputError, match=r"larger than the 16 MiB limit.*DESCHED_MAX_INPUT_BYTES"):
        s.read_text(big)
    with pytest.raises(InputError, match=r"larger than the 512 MiB limit.*DESCHED_MAX_BULK_BYTES"):
        s.read_text(big, kind="bulk")
    assert time.monotonic() - t0 < 1.0
    small = tmp_path / "s.yaml"
    small.write_text("a: 12345\n")
    monkeypatch.setenv("DESCHED_MAX_INPUT_BYTES", "4")
    with pytest.raises(InputError, match="larger than the 4 bytes limit"):
        s.read_text(small)
    monkeypatch.setenv("DESCHED_MAX_INPUT_BYTES", "lots")
    with pytest.raises(ConfigError, match="DESCHED_MAX_INPUT_BYTES: 'lots' is not a byte count"):
        s.read_text(small)


def test_json_bounds() -> None:
    with pytest.raises(InputError, match="nested deeper than 100"):
        s.load_json("[" * 100_000 + "]" * 100_000, "x.json")
    with pytest.raises(InputError, match="5000 digits"):
        s.load_json("9" * 5000, "x.json")
    with pytest.raises(InputError, match="<log>:2: JSON nested deeper"):
        list(s.json_lines('{"msg": "a"}\n{"a":' + "[" * 100_000 + "]" * 100_000 + "}\n"))
    assert [n for n, _ in s.json_lines('{"msg": "a"}\nplain text\n{"msg": "b"}\n')] == [1, 3]


def test_check_tree_stops_on_a_shared_reference_graph() -> None:
    x: list[object] = ["lol"] * 10
    for _ in range(9):
        x = [x] * 10  # 10^10 leaves once expanded, 100 objects in memory
    t0 = time.monotonic()
    with pytest.raises(InputError, match="more than 1000 values once expanded"):
        s.check_tree({"a": x}, "policy", max_nodes=1000)
    assert time.monotonic() - t0 < 1.0


# -- the value bound, counted before a YAML document is parsed (issue 43) --------------------


def _values(v: object) -> int:
    """What check_tree counts: the document, every mapping value, every list item."""
    if isinstance(v, dict):
        return 1 + sum(_values(x) for x in v.values())
    if isinstance(v, list):
        return 1 + sum(_values(x) for x in v)
    return 1


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [1, 2, {c: d}]\n",
        "- 1\n- [2, 3]\n- {a: {b: c}}\n",
        "x: {<<: {a: 1, b: 2}, c: 3}\n",  # a merge's own node is no value
        "<<: [{a: 1}, {b: 2}]\nc: 4\n",
        "'<<': {a: 1}\n",  # a quoted `<<` is a plain key
        "? a\n: b\n",
        "- - - []\n",
    ],
)
def test_the_pre_parse_count_is_the_loaders_count(text: str) -> None:
    import yaml

    assert s._count_values(text, 10**9) == _values(yaml.safe_load(text))


def test_an_alias_counts_once_in_the_pre_parse_count() -> None:
    """A lower bound: the loader expands the alias (check_tree counts 7)."""
    assert s._count_values("a: &x {b: 1, c: 2}\nd: *x\n", 10**9) == 5


def _no_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def parsed(*a: object, **k: object) -> None:
        raise AssertionError("the document was built before the refusal")

    monkeypatch.setattr(s._BoundedLoader, "get_data", parsed)


def test_a_yaml_document_over_the_value_bound_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: parsed whole (7,000,000 values: about a minute of CPU), then refused. libyaml's
    event count (3 events at most per value) refuses it in well under a second of CPU."""
    path = tmp_path / "big.yaml"
    path.write_text("objects: [" + "1," * 7_000_000 + "]\n")  # 14 MB
    _no_load(monkeypatch)
    t0 = time.process_time()
    with pytest.raises(InputError) as refused:
        s.load_yaml_file(path)
    assert time.process_time() - t0 < 2.0
    assert str(refused.value) == (
        f"{path}: at least 2,333,336 values: more than the 2,000,000-value limit (counted before "
        "parsing); shrink it (the limit is fixed)"
    )


def test_a_bulk_file_is_bounded_by_its_byte_limit_not_the_small_files_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: one fixed 2,000,000-value bound, which refused a 10,000-node / 100,000-pod
    snapshot (6.5 million keys) that is well under the bulk byte limit. A bulk file's bound
    is one value per 16 bytes of that limit, and follows DESCHED_MAX_BULK_BYTES down too."""
    assert s.max_values("small") == 2_000_000
    assert s.max_values("bulk") == 512 * 1024 * 1024 // 16
    text = "{" + ",".join(f'"k{i}":1' for i in range(2_500_000)) + "}"
    assert len(s.load_json(text, "snap.json", kind="bulk")) == 2_500_000
    with pytest.raises(InputError, match="2,500,000 keys: more than the 2,000,000-value limit"):
        s.load_json(text, "policy.json")
    monkeypatch.setenv("DESCHED_MAX_BULK_BYTES", str(16 * 3_000_000))
    assert s.max_values("bulk") == 3_000_000
    monkeypatch.setenv("DESCHED_MAX_BULK_BYTES", str(16 * 1_000))  # never below the small bound
    assert s.max_values("bulk") == 2_000_000
    path = tmp_path / "big.yaml"
    path.write_text("objects: [" + "1," * 7_000_000 + "]\n")
    monkeypatch.setenv("DESCHED_MAX_BULK_BYTES", str(100 * 1024 * 1024))
    _no_load(monkeypatch)
    with pytest.raises(InputError) as refused:
        s.load_yaml_file(path, kind="bulk")
    assert str(refused.value) == (
        f"{path}: at least 6,553,601 values: more than the 6,553,600-value limit (counted before "
        "parsing); shrink it (a snapshot: take fewer objects, `desched snapshot --namespace "
        "NS`), or raise DESCHED_MAX_BULK_BYTES: the bound is one value per 16 bytes of it"
    )


def test_between_one_and_three_events_per_value_the_values_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Events in (bound, 3 x bound]: the walk counts values exactly, keys not; over is
    refused before parsing, at the bound is loaded (bound lowered to keep it quick)."""
    monkeypatch.setattr(s, "MAX_TREE_NODES", 1000)
    over = "\n".join(f"k{i}: {{a: {i}}}" for i in range(500)) + "\n"  # 1 + 500 x 2 values
    at = "\n".join(f"k{i}: {{a: {i}}}" for i in range(499)) + "\nz: 1\n"  # 1 + 998 + 1
    assert s._yaml_values_at_least(over, 1000) == 1001
    assert s._yaml_values_at_least(at, 1000) == 1000
    assert len(over) > 2 * 1000  # past the size under which no count is needed
    with pytest.raises(InputError, match="at least 1,001 values: more than the 1,000-value"):
        s.load_yaml(over, "over.yaml")
    assert len(s.load_yaml(at, "at.yaml")) == 500
