"""The built-in fidelity experiments: which experiment, which variant, and what each shows."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_desched.errors import ConfigError


@dataclass(frozen=True)
class FidelityCase:
    """One built-in fidelity experiment: `experiment` run in dry run and for real."""

    name: str
    experiment: str  # a registered experiment (`desched list`)
    variant: str | None  # None: the experiment's default
    shows: str


CASES: tuple[FidelityCase, ...] = (
    FidelityCase(
        "positive",
        "positive",
        "pdb-lister-workaround",
        "the runbook's positive experiment: dry run predicts the one real eviction",
    ),
    FidelityCase(
        "nodefit",
        "nodefit",
        "pdb-lister-workaround",
        "the runbook's nodeFit negative: both halves stop every pod at nodeFit",
    ),
    FidelityCase(
        "pdb",
        "pdb",
        "runbook",
        "the runbook's PDB negative as written: dry run says evict (its own PDB lister works), "
        "the real run filters every pod by PodsWithoutPDB (descheduler#1882)",
    ),
    FidelityCase(
        "pdb-zero",
        "pdb",
        "pdb-lister-workaround",
        "a PDB at 0 disruptions (descheduler#1805): dry run says evict, the real run gets 429",
    ),
    FidelityCase(
        "topology-spread",
        "topology-spread-hard",
        None,
        "RemovePodsViolatingTopologySpreadConstraint (descheduler#1917 at v0.36.0)",
    ),
)
BY_NAME = {c.name: c for c in CASES}
DEFAULT = ("positive", "nodefit", "pdb")


def lookup_case(name: str) -> FidelityCase:
    """A built-in case by name, or any registered experiment with its default variant."""
    if name in BY_NAME:
        return BY_NAME[name]
    # heavy: the kubernetes client, kept out of this module's import
    from pytest_desched.experiments import REGISTRY

    if name in REGISTRY:
        return FidelityCase(name, name, None, f"{name} in dry run and for real")
    raise ConfigError(
        f"unknown fidelity experiment {name!r}; use one of {', '.join(BY_NAME)} or a "
        f"registered experiment ({', '.join(sorted(REGISTRY))})"
    )
