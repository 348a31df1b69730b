"""pytest-desched: the Kubernetes Descheduler safe-rollout runbook as pytest experiments.

Usable without pytest too: `Toolchain` builds the pinned binaries, a provider
(`EmbeddedProvider`, `KindProvider`, `ExistingProvider`) gives a `Cluster`, `Release`
installs the chart the runbook's way, `run_round` runs one descheduler round, and
`pytest_desched.experiments` holds the runbook's experiments.
"""

__version__ = "0.1.0"
