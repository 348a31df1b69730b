"""Providers are asked what they can do: no provider name is compared outside providers/.

A rule that depends on a provider asks `capabilities.Capabilities` (one row a provider, one
message a rule); only `providers/` and that table may compare a provider's name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_desched
from pytest_desched.capabilities import CAPABILITIES, capabilities_of
from pytest_desched.config import PROVIDERS
from pytest_desched.providers import REGISTRY

ROOT = Path(pytest_desched.__file__).resolve().parent
NAMES = {"embedded", "kind", "existing"}
# providers/ and the table know the names; tools/ names the `kind` binary, not the provider.
ALLOWED = ("providers/", "capabilities.py", "tools/")


def compared_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) for every `x == "kind"`, `"embedded" != x`, `x in ("kind", "auto")`."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            strings = [v.value for v in values if isinstance(v, ast.Constant)]
            if len(values) > 1 and not set(strings) <= NAMES | {"auto"}:
                continue  # ("apiVersion", "kind"): a manifest's field names, not providers
            out += [
                (node.lineno, v.value)
                for v in values
                if isinstance(v, ast.Constant) and v.value in NAMES
            ]
    return out


def test_no_provider_name_is_compared_outside_providers() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: compares {name!r}"
        for path in sorted(ROOT.rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(ALLOWED)
        for line, name in compared_names(ast.parse(path.read_text()))
    ]
    assert found == [], "ask capabilities.Capabilities instead:\n" + "\n".join(found)


def test_the_check_sees_a_comparison() -> None:
    tree = ast.parse('if p == "embedded" or q in ("kind", "auto") or "existing" != r: pass')
    assert sorted(name for _, name in compared_names(tree)) == ["embedded", "existing", "kind"]


def test_every_provider_has_one_row() -> None:
    assert set(CAPABILITIES) == set(REGISTRY) == set(PROVIDERS) - {"auto"}
    assert capabilities_of("auto") is None  # known once chosen
    for name, caps in CAPABILITIES.items():
        assert caps.provider == name


@pytest.mark.parametrize(
    ("provider", "is_image", "published", "refused"),
    [
        ("embedded", True, True, "the embedded provider runs no images"),
        ("embedded", False, False, None),
        ("kind", False, False, "a local build has no published image and the kind provider"),
        ("existing", True, True, None),
        ("kind", False, True, None),
    ],
)
def test_one_rule_for_where_a_candidate_runs(
    provider: str, is_image: bool, published: bool, refused: str | None
) -> None:
    why = CAPABILITIES[provider].candidate_refusal("candidate x", is_image, published)
    assert (why is None) == (refused is None)
    if refused:
        assert why is not None and why.startswith("candidate x: ") and refused in why
