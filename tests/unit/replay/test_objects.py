"""The one object model at the replay's API boundary: each kind's paths from one table, and
every table that used to spell them (the snapshot's reads, the file's sections, an audit
log's resources) derived from it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_desched
from pytest_desched.replay.capture.audit_changes import RESOURCE_SECTION
from pytest_desched.replay.capture.format import SECTIONS
from pytest_desched.replay.capture.snapshot import RESOURCES
from pytest_desched.replay.host.kwok import kwok_objects
from pytest_desched.replay.objects import KINDS, collection_path, object_path, path_of

ROOT = Path(pytest_desched.__file__).resolve().parent


@pytest.mark.parametrize(
    ("kind", "namespace", "path"),
    [
        ("Pod", "web", "/api/v1/namespaces/web/pods"),
        ("Pod", None, "/api/v1/pods"),
        ("Node", None, "/api/v1/nodes"),
        ("Deployment", "web", "/apis/apps/v1/namespaces/web/deployments"),
        ("PodDisruptionBudget", None, "/apis/policy/v1/poddisruptionbudgets"),
        ("PriorityClass", None, "/apis/scheduling.k8s.io/v1/priorityclasses"),
        ("ClusterRoleBinding", None, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
    ],
)
def test_a_kinds_collection_path(kind: str, namespace: str | None, path: str) -> None:
    assert collection_path(kind, namespace) == path


def test_an_objects_path_and_a_bodys_collection() -> None:
    assert object_path("StatefulSet", "db", "pg") == "/apis/apps/v1/namespaces/db/statefulsets/pg"
    assert object_path("Node", "", "n1") == "/api/v1/nodes/n1"
    assert path_of({"kind": "ConfigMap", "metadata": {"namespace": "k"}}) == (
        "/api/v1/namespaces/k/configmaps"
    )
    with pytest.raises(KeyError):  # a kind the model does not know is never guessed
        collection_path("Secret")


def test_the_stages_tables_agree_with_the_model() -> None:
    for section, (api_version, kind, namespaced) in SECTIONS.items():
        k = KINDS[kind]
        assert (api_version, namespaced) == (k.api_version, k.namespaced)
        assert RESOURCES[section] == (k.prefix, k.plural, namespaced)
        assert RESOURCE_SECTION[(k.group, k.plural)] == section
    assert RESOURCE_SECTION[("apps", "deployments")] == "deployments"
    assert RESOURCE_SECTION[("", "pods")] == "pods"


def test_every_kwok_object_of_a_host_replay_has_a_path() -> None:
    for body in kwok_objects("r1", "kwok:v0", "stages"):
        assert path_of(body).endswith("/" + KINDS[body["kind"]].plural)


def api_path_literals(source: str) -> list[int]:
    """Lines of string literals (plain or f-string parts) that spell an API path."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, str) and value.startswith(("/api/v1", "/apis/")):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_only_the_model_spells_an_api_path() -> None:
    """Every replay module (and the replay's hooks in fidelity) asks `objects` for a path."""
    files = [p for p in (ROOT / "replay").rglob("*.py") if p.name != "objects.py"]
    files.append(ROOT / "fidelity" / "snapshot.py")
    spelled = [
        f"{p.relative_to(ROOT)}:{line}" for p in files for line in api_path_literals(p.read_text())
    ]
    assert spelled == [], "use replay/objects.py's collection_path/object_path: " + str(spelled)
    # the scan sees both forms (a check that finds nothing passes anything)
    assert api_path_literals('x = "/api/v1/pods"\ny = f"/apis/apps/v1/namespaces/{ns}/x"') == [1, 2]
