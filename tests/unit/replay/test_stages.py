"""replay/ is grouped by stage, and the stages are a stack: a module imports only its own
stage or those below it, so a stage can be read (and moved) without the ones that use it.

Bottom up: the API boundary (`kubeapi`, `objects`); `capture/` (the files and how they are
taken); `gen/` and `rebuild/` (files made up, files restored); the run and its ledger;
`timeline/` and `host/` (`Replay`s with their own hooks); the command line.
"""

from __future__ import annotations

from tests.unit.test_import_graph import imports, modules

STAGES: list[set[str]] = [
    {"kubeapi", "objects"},
    {"capture"},
    {"gen", "rebuild"},
    {"ledger", "rows", "aftermath", "log_compare", "inputs", "run", "repeat"},
    {"timeline", "host"},
    {"cli", "__init__"},
]
STAGE = {name: i for i, names in enumerate(STAGES) for name in names}


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["pytest_desched", "replay"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def test_every_replay_module_has_a_stage() -> None:
    found = {stage_of(m) for m in modules()} - {None}
    assert found - set(STAGE) == set(), "place these in STAGES (tests/unit/replay/test_stages.py)"


def test_no_replay_import_runs_back_up_a_stage() -> None:
    back = [
        f"{a}:{line} imports {b}"
        for a, b, line in imports(modules())
        if (sa := stage_of(a)) and (sb := stage_of(b)) and STAGE[sb] > STAGE[sa]
    ]
    assert back == [], "imports running back up replay's stages:\n" + "\n".join(back)


def test_the_stage_graph_is_read() -> None:
    """The checks above see real imports between stages (a parser that found none passes)."""
    pairs = {(stage_of(a), stage_of(b)) for a, b, _ in imports(modules())}
    assert ("host", "run") in pairs and ("rebuild", "capture") in pairs
    assert ("capture", "objects") in pairs
