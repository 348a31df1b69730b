"""The `Lab` class: namespaces, node changes and workloads one experiment makes, and undoes.

Its steps live in mixins beside it: `base` (state, namespaces, PDB, observation), `nodes`,
`objects` (the runbook's workload and lab objects as values) and `teardown`.

A small public API so users write their own experiments the way the built-in ones are
written: every method does one step and waits on the API for its effect, and an API error
leaving a step is re-raised as a short `LabApiError`. Two levels:

* the runbook's own steps (`deploy`, `label_node`, `create_pdb`, ...) for the one
  `spread-demo` Deployment the runbook experiments move;
* lab objects as values (`apply(Deployment(...), PodDisruptionBudget(...), ...)`, see
  `workloads.py`), node operations (labels, taints, cordon) the lab restores on teardown,
  and status changes a kwok cluster cannot make by itself (a failed pod, restarts).

Snapshots and the round recorder cover every pod of the lab's namespaces. `teardown`
deletes whatever the lab created in dependency order (controllers, namespaces with any
pods force-deleted until the namespace is gone, then PVs and PriorityClasses, then node
changes), so an owner kind it does not know cannot keep it waiting.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from kubernetes.client.rest import ApiException

from pytest_desched.errors import LabApiError
from pytest_desched.lab.base import api_message
from pytest_desched.lab.capacity import CapacitySteps
from pytest_desched.lab.objects import ObjectSteps
from pytest_desched.lab.teardown import TeardownSteps
from pytest_desched.lab.usage import UsageSteps


class Lab(ObjectSteps, TeardownSteps, UsageSteps, CapacitySteps):
    """One lab namespace (and any extra ones), the objects and node changes it made."""


def _short_api_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Re-raise an ApiException leaving a Lab step as a LabApiError (object, status, reason)."""

    @functools.wraps(method)
    def wrapper(self: Lab, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ApiException as exc:
            obj, message = api_message(exc)
            where = obj or f"namespace {self.namespace}"
            raise LabApiError(
                f"Lab.{method.__name__}", where, exc.status, str(exc.reason or ""), message
            ) from None

    return wrapper


# Every public step of every mixin, but not `record`/`only_on` (context managers: the body
# is the caller's).
for _name in dir(Lab):
    _fn = inspect.getattr_static(Lab, _name)
    if inspect.isfunction(_fn) and not _name.startswith("_") and _name not in ("record", "only_on"):
        setattr(Lab, _name, _short_api_errors(_fn))
del _name, _fn
