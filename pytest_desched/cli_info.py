"""`desched version` / `--version` and `desched list`: what is pinned, what can run.

Neither needs a tool or a cluster: the pins come from tools/versions.py (manifests/
versions.yaml), the experiments from the registry; where lint's two binaries would come from
is asked of the toolchain, which builds nothing for it.
"""

from __future__ import annotations

import argparse
from textwrap import shorten
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
    # heavy: tools.toolchain +2 modules (~4ms), kept out of `desched` start-up
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


class _VersionAction(argparse.Action):
    """`desched --version`: print and exit (as argparse's own, but built on demand)."""

    def __init__(self, option_strings: list[str], dest: str = "", **kw: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *a: Any, **kw: Any) -> None:
        print(_version_text(version_info()))
        parser.exit()


def cmd_list(args: argparse.Namespace) -> int:
    # heavy: kubernetes client (0.2-0.7 s), kept out of `desched` start-up
    from pytest_desched.experiments.catalogue import catalogue

    rows = catalogue()
    cols = {"name": "NAME", "variants": "VARIANTS", "strategies": "STRATEGIES"}
    cols |= {"description": "DESCRIPTION"}

    def text() -> str:  # the first sentence, at most 60 characters: a table fits a terminal
        cut = {
            r["name"]: shorten(r["description"].split(". ")[0], 60, placeholder=" ...")
            for r in rows
        }
        return out.table([{**r, "description": cut[r["name"]]} for r in rows], cols, "text")

    out.emit(out.render(rows, args.output, text=text, md=lambda: out.table(rows, cols, "md")))
    return EXIT_OK
