"""Which check ids an experiment can make, read from its code rather than its module's text.

The known-bug registry may excuse only a check its experiment makes: an entry naming a check
nobody makes excuses nothing and says something false. A check is made by a `check("id", ...)`
call or a `Check("id", ...)` built in one of the experiment's steps, or in a helper those
steps call: a method of the experiment or of a helper class (the Runner, `Expect`) named as
an attribute, or a function of an experiments module named as such. Helpers are followed
through, so a check a shared helper makes counts for every experiment that calls it, and a
string that only a comment, docstring or unused constant holds counts for none.

A helper may take the id as an argument (`check_absent(r, "ll-absent", ...)`, or a keyword,
or the parameter's default): its parameter that reaches a maker's first argument, itself or
through a further helper, is an *id parameter*, and each call site's argument there (read as
a maker's would be) is an id the caller makes.

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


def _params(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []


def _callee(
    node: ast.Call, names: dict[str, Any], owners: tuple[type, ...]
) -> tuple[Callable[..., Any], bool] | None:
    """The helper a call reaches, and whether it is bound (its first parameter not passed):
    an attribute on one of `owners`, or a function of an experiments module by name."""
    callee = node.func
    if isinstance(callee, ast.Attribute):
        for owner in owners:
            raw = inspect.getattr_static(owner, callee.attr, None)
            helper = _function(raw)
            if helper is not None:
                return helper, not isinstance(raw, staticmethod)
    elif isinstance(callee, ast.Name):
        helper = _function(names.get(callee.id))
        if helper is not None and helper.__module__.startswith(_FOLLOWED):
            return helper, False
    return None


def _passed(
    node: ast.Call, helper: Callable[..., Any], bound: bool, param: str
) -> ast.expr | str | None:
    """What a call passes for the helper's `param`: the argument's expression, the
    parameter's string default when the call passes nothing, or None."""
    params = _params(helper)[1 if bound else 0 :]
    positional = [
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    for name, arg in zip(positional, node.args, strict=False):
        if isinstance(arg, ast.Starred):
            return None
        if name == param:
            return arg
    for kw in node.keywords:
        if kw.arg == param:
            return kw.value
    default = next((p.default for p in params if p.name == param), None)
    return default if isinstance(default, str) else None


def _id_params(
    fn: Callable[..., Any], owners: tuple[type, ...], memo: dict[Callable[..., Any], set[str]]
) -> set[str]:
    """`fn`'s parameters whose value becomes a check id: passed as a maker's first argument,
    or on to a helper's id parameter."""
    if fn in memo:
        return memo[fn]
    out: set[str] = set()
    memo[fn] = out  # a recursive helper adds nothing through itself
    tree = _tree(fn)
    own = {p.name for p in _params(fn)}
    if tree is None or not own:
        return out
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        name = name or getattr(node.func, "id", "")
        if name in _MAKERS and node.args:
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id in own:
                out.add(first.id)
            continue
        reached = _callee(node, fn.__globals__, owners)
        if reached is None:
            continue
        helper, bound = reached
        for param in _id_params(helper, owners, memo):
            arg = _passed(node, helper, bound, param)
            if isinstance(arg, ast.Name) and arg.id in own:
                out.add(arg.id)
    return out


def _ids_passed(
    node: ast.Call,
    names: dict[str, Any],
    own: set[str],
    owners: tuple[type, ...],
    memo: dict[Callable[..., Any], set[str]],
) -> set[str]:
    """The ids a call passes to its helper's id parameters (a caller's own parameter passed
    on is its caller's to name: `_id_params` follows it)."""
    reached = _callee(node, names, owners)
    if reached is None:
        return set()
    target, bound = reached
    out = set()
    for param in _id_params(target, owners, memo):
        arg = _passed(node, target, bound, param)
        if isinstance(arg, str):
            out.add(arg)
        elif isinstance(arg, ast.expr) and not (isinstance(arg, ast.Name) and arg.id in own):
            made = _id_of(arg, names)
            if made is not None:
                out.add(made)
    return out


def checks_in(fns: Iterable[Callable[..., Any]], owners: tuple[type, ...]) -> frozenset[str]:
    """The check ids `fns` make, themselves or through the helpers they call.

    `owners` are the classes an attribute call may resolve on (`self.r.assess_...` on the
    Runner, `e.evicted` on Expect, `self.settle` on the experiment's own class)."""
    found: set[str] = set()
    seen: set[Callable[..., Any]] = set()
    memo: dict[Callable[..., Any], set[str]] = {}
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
        own = {p.name for p in _params(fn)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                callee = node.func
                name = (
                    callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                )
                if name in _MAKERS and (made := _id_of(node.args[0], names)) is not None:
                    found.add(made)
            if isinstance(node, ast.Call):
                found.update(_ids_passed(node, names, own, owners, memo))
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
