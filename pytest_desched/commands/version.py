"""`desched version` / `--version`: this tool's version and what is pinned.

It needs no tool and no cluster: the pins come from tools/versions.py (manifests/
versions.yaml); where lint's two binaries would come from is asked of the toolchain, which
builds nothing for it.
"""

from __future__ import annotations

import argparse
from typing import Any

from pytest_desched import __version__
from pytest_desched import render as out
from pytest_desched.errors import EXIT_OK
from pytest_desched.tools.versions import load_versions


def version_info() -> dict[str, Any]:
    """This tool's version and every pin, from tools/versions.py (manifests/versions.yaml)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        tool = version("pytest-desched")
    except PackageNotFoundError:
        tool = __version__
    v = load_versions()
    return {
        "desched": tool,
        "descheduler": v.descheduler.version,
        "descheduler_image": v.descheduler_image,
        "chart": f"{v.chart_name}-{v.chart_version}",
        "chart_app_version": v.chart_app_version,
        "kubernetes": v.kubernetes.version,
        "kwok": v.kwok.version,
        "etcd": v.etcd.version,
        "helm": v.helm.version,
        **({"helm3": f"{v.helm3.version} (--helm 3)"} if v.helm3 else {}),
        "kind": v.kind.version,
        "kind_node_image": v.kind_node_image,
        "lint_tools": lint_tools(),
    }


def lint_tools() -> str:
    """Where `desched lint` takes helm and the policy checker from, as the toolchain would
    (explicit, PATH, lint-bin, cache, or a Go build on first lint); builds and prints nothing."""
    # heavy: tools.toolchain and its imports, kept out of `desched` start-up
    from pytest_desched.tools.lint_bin import SOURCE, TOOLS, installed
    from pytest_desched.tools.toolchain import Toolchain

    tc = Toolchain(report=lambda _line: None)
    where = {tool: tc.where(tool)[1] for tool in TOOLS}
    text = ", ".join(f"{tool}: {how}" for tool, how in where.items())
    found = installed()
    skipped = [why for tool, why in tc.lint_bin_skipped.items() if where[tool] != SOURCE]
    if found is not None and skipped:
        text += f" (not used: {'; '.join(skipped)})"
    elif found is not None:
        text += f" ({found.label})"
    if "build" in where.values():
        text += " (built with Go on first lint: docs/lint.md#first-use)"
    return text


def _version_text(info: dict[str, Any]) -> str:
    rows = [[k, v] for k, v in info.items() if k != "desched"]
    return f"desched {info['desched']}\n" + out.table(rows, ["PIN", "VERSION"], "text")


def cmd_version(args: argparse.Namespace) -> int:
    info = version_info()
    rows = [[k, v] for k, v in info.items()]
    out.emit(
        out.render(
            info,
            args.output,
            text=lambda: _version_text(info),
            md=lambda: out.table(rows, ["component", "version"], "md"),
        )
    )
    return EXIT_OK


class VersionAction(argparse.Action):
    """`desched --version`: print and exit (as argparse's own, but built on demand)."""

    def __init__(self, option_strings: list[str], dest: str = "", **kw: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *a: Any, **kw: Any) -> None:
        print(_version_text(version_info()))
        parser.exit()


def add_parser(sub: Any) -> None:
    p = sub.add_parser("version", help="this tool's version and every pinned version")
    p.set_defaults(func=cmd_version, parser=p)
    out.add_output(p)
