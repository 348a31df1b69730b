"""Issue 43: a snapshot's shape is checked by a JSON Schema before anything reads it, and a
snapshot too big to hold is refused before it is parsed.

Was: `objects.nodes: 1`, a policy that is a mapping, a header that is a string ended in exit 1
with TypeError / AttributeError / ValueError; an 87 MB snapshot took 6.7 s to be refused.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_desched.errors import InputError
from pytest_desched.inputs_safe import MAX_TREE_NODES, load_json
from pytest_desched.replay.capture.format import API_VERSION, KIND, Snapshot
from pytest_desched.replay.capture.schema import check_shape
from pytest_desched.replay.gen.generator import Shape, generate
from tests.unit import DATA_ROOT

NODE = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}
POD = {
    "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
}


def _doc(**top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "header": {"takenAt": "2026-11-30T00:00:00Z"},
        "objects": {"nodes": [json.loads(json.dumps(NODE))], "pods": [json.loads(json.dumps(POD))]},
    }
    doc.update(top)
    return doc


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    at: Any = doc
    for p in parents:
        at = at[int(p)] if p.isdigit() else at[p]
    at[int(last) if last.isdigit() else last] = value
    return doc


# (path set, value, the path and words the refusal names)
WRONG: list[tuple[str, Any, str]] = [
    ("objects.nodes", 1, "objects.nodes: is 1 (a number), not a list"),
    ("objects", 1, "objects: is 1 (a number), not a mapping or null"),
    ("policy", {"apiVersion": "x"}, "policy: is a mapping, not a string or null"),
    ("header", "oops", "header: is 'oops' (a string), not a mapping or null"),
    ("header", ["a"], "header: is a list, not a mapping or null"),
    ("header.descheduler", "v0.36.0", "header.descheduler: is 'v0.36.0' (a string)"),
    ("header.takenAt", 5, "header.takenAt: is 5 (a number), not a string"),
    ("objects.nodes.0.status", "x", "objects.nodes[0].status: is 'x' (a string)"),
    ("objects.nodes.0.status.allocatable", 5, "status.allocatable: is 5 (a number), not a mapping"),
    ("objects.pods.0.metadata.labels", ["a"], "objects.pods[0].metadata.labels: is a list"),
    ("objects.pods.0.metadata.labels.app", 1, "metadata.labels.app: is 1 (a number), not a str"),
    ("objects.pods.0.spec.containers", {}, "objects.pods[0].spec.containers: is a mapping"),
    ("objects.pods.0.spec.priority", "high", "spec.priority: is 'high' (a string), not an int"),
]


@pytest.mark.parametrize(("path", "value", "words"), WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_type_is_one_input_error_naming_the_fields_path(
    path: str, value: Any, words: str
) -> None:
    doc = _set(_doc(), path, value)
    with pytest.raises(InputError) as err:
        Snapshot.from_doc(doc, "snap.json")
    assert words in str(err.value), str(err.value)
    assert str(err.value).startswith("snap.json: ") and "\n" not in str(err.value)


def test_real_shaped_snapshots_pass_the_schema() -> None:
    """The generator's snapshot (every section the replay reads) and a minimal one."""
    snap = generate(Shape(seed=3, nodes=5, pods=40))
    check_shape(json.loads(snap.dump("json")), "generated")
    check_shape(_doc(), "minimal")
    check_shape(_doc(policy=None, header=None, objects=None), "nulls")


def test_a_yaml_snapshot_with_unquoted_timestamps_is_json_data(tmp_path: Path) -> None:
    """YAML timestamps are read as Kubernetes reads them (text), so the schema check holds;
    a value JSON has no type for (!!binary) is named by its path."""
    text = (
        f"apiVersion: {API_VERSION}\nkind: {KIND}\nheader: {{takenAt: 2026-11-30T00:00:00Z}}\n"
        "objects:\n  nodes:\n  - metadata: {name: n1, creationTimestamp: 2026-11-01T00:00:00Z}\n"
    )
    (tmp_path / "ok.yaml").write_text(text)
    snap = Snapshot.load(tmp_path / "ok.yaml")
    assert snap.nodes[0]["metadata"]["creationTimestamp"] == "2026-11-01T00:00:00Z"
    (tmp_path / "bin.yaml").write_text(text.replace("name: n1", "name: !!binary aGk="))
    with pytest.raises(InputError, match=r"objects\.nodes\[0\]\.metadata\.name: is a bytes"):
        Snapshot.load(tmp_path / "bin.yaml")


def test_ten_thousand_pods_are_checked_in_well_under_a_second() -> None:
    doc = json.loads(generate(Shape(seed=1, nodes=500, pods=10_000)).dump("json"))
    t0 = time.process_time()
    check_shape(doc, "big")
    assert time.process_time() - t0 < 1.0  # jsonschema-rs ~25 ms; the Python jsonschema 3.8 s


def test_a_json_document_with_too_many_values_is_refused_before_it_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "{" + ",".join(f'"k{i}":1' for i in range(MAX_TREE_NODES + 10)) + "}"

    def no_parse(*a: object, **k: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(json, "loads", no_parse)
    t0 = time.process_time()
    with pytest.raises(
        InputError, match=r"more than the 2,000,000-value limit \(counted before parsing\)"
    ):
        load_json(text, "big.json")
    assert time.process_time() - t0 < 1.0
    # an escaped quote before a colon inside a string is no key: not counted
    monkeypatch.undo()
    assert load_json('{"a": "x\\": y"}', "s.json") == {"a": 'x": y'}


# -- --from-log lines and --from-record records ------------------------------------------


def test_real_descheduler_logs_and_a_real_record_pass_their_schemas() -> None:
    """Every JSON line of the v0.36.0 logs kept as test data, and a record as a run writes it."""
    from pytest_desched.evidence.record import RoundRecord
    from pytest_desched.inputs_safe import json_lines
    from pytest_desched.replay.capture.schema import first_problem

    data = DATA_ROOT / "descheduler-v0.36.0"
    lines = [
        (f.name, i, doc)
        for f in sorted(data.glob("*.log"))
        for i, doc in json_lines(f.read_text(), f.name)
        if "msg" in doc
    ]
    assert len(lines) > 500
    assert [
        (n, i, first_problem("log line", d)) for n, i, d in lines if first_problem("log line", d)
    ] == []
    decision = {"fate": "evicted", "layer": "api", "namespace": "ns", "name": "p"}
    record = RoundRecord(
        experiment="positive",
        round_name="round-1",
        provider="embedded",
        verdict="evicted",
        decisions=[decision],
    )
    assert first_problem("round record", json.loads(json.dumps(record.to_dict()))) is None


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"msg": "Evicted pod", "pod": {"name": "p"}}, "is a descheduler log line, not a round"),
        ({"experiment": "e"}, "has no 'round_name'"),
        ({"experiment": "e", "round_name": "r", "decisions": [{"fate": 1}]}, "decisions[0]"),
        ({"experiment": "e", "round_name": "r", "caps": {"total": "2"}}, "caps.total: is '2'"),
    ],
    ids=["log-line", "no-round-name", "decision-fate-number", "cap-string"],
)
def test_a_round_record_of_the_wrong_shape_is_refused(record: dict[str, Any], words: str) -> None:
    from pytest_desched.replay.ledger import ledger_from_record

    with pytest.raises(InputError) as err:
        ledger_from_record(record)
    assert words in str(err.value), str(err.value)
