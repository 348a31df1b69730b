"""The tool cache's key for CI (`desched tools --cache-key`): the pins and the platform.

A CI cache keyed on the user's requirements files reused stale tools after a pin change (the
plugin's pins are not in them). This key changes exactly when what the cache holds would:
every build group's key (its version, and for the project's own helper its source digest),
the pinned chart and images, and the platform the binaries were built for.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Iterable

from pytest_desched.tools.groups import Group
from pytest_desched.tools.versions import Versions

PREFIX = "desched-tools"


def cache_key(
    groups: Iterable[Group], versions: Versions, system: str = "", machine: str = ""
) -> str:
    """`desched-tools-<os>-<arch>-<16 hex>`; `system`/`machine` default to this machine's."""
    system = (system or platform.system()).lower()
    machine = (machine or platform.machine()).lower()
    pins = {
        "groups": sorted(g.key for g in groups),
        "pins": versions.summary(),
        "kind_node_image": versions.kind_node_image,
        "platform": [system, machine],
    }
    digest = hashlib.sha256(json.dumps(pins, sort_keys=True).encode()).hexdigest()[:16]
    return f"{PREFIX}-{system}-{machine}-{digest}"
