"""Which check ids an experiment can make, read from its code rather than its module's text.

The known-bug registry may excuse only a check its experiment makes: an entry naming a check
nobody makes excuses nothing and says something false. A check is made by a `check("id", ...)`
call or a `Check("id", ...)` built in one of the experiment's steps, or in a helper those
steps call: a method of the experiment or of a helper class (the Runner, `Expect`) named as
an attribute, or a function of an experiments module named as such. Helpers are followed
through, so a check a shared helper makes counts for every experiment that calls it, and a
string that only a comment, docstring or unused constant holds counts for none.

An id built at run time (`f"evicted:{workload}"`) is a pattern (`evicted:*`): `matches` says
whether a concrete id is one of them.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any

# Functions of these modules are followed when an experiment's method names them.
_FOLLOWED = "pytest_desched.experiments"
_MAKERS = ("check", "Check")  # Runner.check(id, ...) and results.Check(id, ...)


def _function(obj: Any) -> Callable[..., Any] | None:
    """The plain function behind a method, classmethod or staticmethod (None: not code)."""
    obj = getattr(obj, "__func__", obj)
    return obj if inspect.isfunction(obj) else None


def _id_of(node: ast.expr, names: dict[str, Any]) -> str | None:
    """The check id a maker's first argument spells: a literal, a module constant naming
    one, or an f-string whose run-time parts become `*`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and isinstance(names.get(node.id), str):
        return str(names[node.id])
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def _tree(fn: Callable[..., Any]) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):  # no source (a built-in, a generated function)
        return None


def checks_in(fns: Iterable[Callable[..., Any]], owners: tuple[type, ...]) -> frozenset[str]:
    """The check ids `fns` make, themselves or through the helpers they call.

    `owners` are the classes an attribute call may resolve on (`self.r.assess_...` on the
    Runner, `e.evicted` on Expect, `self.settle` on the experiment's own class)."""
    found: set[str] = set()
    seen: set[Callable[..., Any]] = set()
    todo = [f for f in (_function(x) for x in fns) if f is not None]
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        tree = _tree(fn)
        if tree is None:
            continue
        names = fn.__globals__
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                callee = node.func
                name = (
                    callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                )
                if name in _MAKERS and (made := _id_of(node.args[0], names)) is not None:
                    found.add(made)
            if isinstance(node, ast.Attribute):
                for owner in owners:
                    helper = _function(inspect.getattr_static(owner, node.attr, None))
                    if helper is not None:
                        todo.append(helper)
            elif isinstance(node, ast.Name):
                helper = _function(names.get(node.id))
                if helper is not None and helper.__module__.startswith(_FOLLOWED):
                    todo.append(helper)
    return frozenset(found)


def steps(cls: type, names: Iterable[str]) -> list[Callable[..., Any]]:
    """The step methods `names` as `cls` has them (its own or inherited): where its checks
    start from; the helpers they call are followed from there, an unused one is not."""
    return [f for f in (_function(inspect.getattr_static(cls, n, None)) for n in names) if f]


def matches(check: str, made: Iterable[str]) -> bool:
    """Whether `check` is one of the ids (or id patterns) in `made`."""
    return any(check == m or ("*" in m and fnmatchcase(check, m)) for m in made)
