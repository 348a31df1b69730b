"""pytest-desched: the Kubernetes Descheduler safe-rollout runbook as auditable experiments.

One engine, three front ends (the pytest plugin, the `desched` command, the benchmark):

    from pytest_desched import DeschedSession, build_config

    with DeschedSession(build_config({"--desched-provider": "embedded"})) as session:
        result = session.run("positive", variant="pdb-lister-workaround")
        print(result.outcome, result.blocking_layer, result.records[-1]["audit"])

The packages follow the runbook's links: `tools` (binaries), `providers` (clusters),
`descheduler` (chart, release, policy, rounds, logs, decisions, known bugs), `lab`
(workload and watches), `experiments`, `evidence`, and the front ends `plugin` and `cli`.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# Where the project lives: pyproject.toml's [project.urls] say the same (a unit test keeps them
# equal); links the tool prints (a lint rule's docs, SARIF helpUri) are made from these.
PROJECT_URL = "https://github.com/pytest-desched/pytest-desched"
# the docs site (mkdocs.yml site_url): GitHub Pages of the project's organisation
DOCS_URL = "https://pytest-desched.github.io/pytest-desched/"


def docs_link(page: str, anchor: str = "") -> str:
    """The published URL of docs/<page> (at `#anchor`), as the project host renders it."""
    return f"{PROJECT_URL}/blob/main/docs/{page}" + (f"#{anchor}" if anchor else "")


_PUBLIC = {
    "DeschedSession": "pytest_desched.session",
    "DeschedConfig": "pytest_desched.config",
    "build_config": "pytest_desched.config",
    "Experiment": "pytest_desched.experiments",
    "ExperimentContext": "pytest_desched.experiments",
    "ExperimentResult": "pytest_desched.experiments",
    "KnownUpstreamBug": "pytest_desched.errors",
    "ExperimentFailed": "pytest_desched.errors",
    "Fate": "pytest_desched.descheduler.decisions",
    "Layer": "pytest_desched.descheduler.decisions",
    "Policy": "pytest_desched.descheduler.policy",
    "Lab": "pytest_desched.lab",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """The public API, imported on first use (the pytest entry point stays light)."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'pytest_desched' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_PUBLIC[name]), name)
