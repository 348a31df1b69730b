"""The embedded provider: a real control plane by kwokctl, kwok nodes, a stand-in kubelet.

`cluster` brings the cluster up and down (and reaps killed runs' clusters by the records in
`owners`); `kubelet` runs round pods with the real descheduler binary, since kwok nodes run
no containers.
"""

from __future__ import annotations

from pytest_desched.providers.embedded.cluster import (
    EmbeddedProvider,
    NodeSpec,
    delete_cluster,
    from_config,
    reap_stale,
    unique_name,
)
from pytest_desched.providers.embedded.owners import kept_clusters

__all__ = [
    "EmbeddedProvider",
    "NodeSpec",
    "delete_cluster",
    "from_config",
    "kept_clusters",
    "reap_stale",
    "unique_name",
]
