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
