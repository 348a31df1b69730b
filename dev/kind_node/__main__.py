"""`python -m dev.kind_node [all|engine|build] [--kubernetes vX.Y.Z]`: kind, run from what is
built here.

all (default): install missing Debian packages, make sure a Docker engine answers, build
(or find cached) the node image and the descheduler image, build kind itself.
engine: only the packages and the engine (`--print-env` for scripts).
stop-engine: stop the dockerd `engine` started (never any other).
build: only the images (the engine must answer, DOCKER_HOST set if it is this tool's).

--kubernetes (env KIND_KUBERNETES): the node image at another served Kubernetes than the pin
(kindest/node:<version>, cached by version beside the pinned one), for `--desched-provider
kind --desched-kubernetes <version>`; an unserved version exits 2 before anything is built.
"""

from __future__ import annotations

import argparse
import os
import time

from dev.kind_node.binaries import Pins
from dev.kind_node.build import NodeImageBuild
from dev.kind_node.engine import ENGINE_HOST, ensure_engine, ensure_packages, stop_engine
from dev.kind_node.kwok_image import build_kwok_image
from pytest_desched.errors import ConfigError, ToolError
from pytest_desched.log import tagged
from pytest_desched.tools.toolchain import Toolchain
from pytest_desched.tools.versions import load_versions

_report = tagged("kind-node")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "step", nargs="?", default="all", choices=["all", "engine", "build", "stop-engine"]
    )
    ap.add_argument(
        "--print-env",
        action="store_true",
        help="engine: print shell lines for the caller: `export DOCKER_HOST=...` when the "
        "engine is this tool's own, DESCHED_ENGINE_STARTED=yes|no",
    )
    ap.add_argument(
        "--kubernetes",
        default=os.environ.get("KIND_KUBERNETES") or None,
        help="build/all: the node image at this served Kubernetes version (default: the pin)",
    )
    args = ap.parse_args(argv)
    try:
        pins = Pins.load(args.kubernetes) if args.step in ("all", "build") else None
    except ConfigError as exc:
        _report(f"error: {exc}")
        return 2
    except ToolError as exc:  # the Kubernetes module could not be read for kubeadm's pins
        _report(f"error: {exc}")
        return 1

    started = time.monotonic()
    try:
        if args.step == "stop-engine":
            if not stop_engine():
                _report("no dockerd started by this tool is running")
            return 0
        kube = pins.versions.kubernetes.version if pins is not None else None
        moved = pins is not None and pins.versions != load_versions()  # --kubernetes, not the pin
        tc = Toolchain(kubernetes_version=kube) if moved else Toolchain()
        if args.step in ("all", "engine"):
            ensure_packages()
            info = ensure_engine(tc.cache_dir)
            _report(
                f"docker {info['docker']} (started here: {info['started']}, "
                f"default runtime: {info['runtime']}, DOCKER_HOST={info['host'] or '-'})"
            )
            if args.print_env:
                if info["host"]:
                    print(f"export DOCKER_HOST={info['host']}")
                print(f"DESCHED_ENGINE_STARTED={info['started']}")
                # this tool's own engine, started now or by an earlier target (`make
                # kind-image`): the documented sequence stops it at its end
                print(f"DESCHED_ENGINE_OWN={'yes' if info['host'] == ENGINE_HOST else 'no'}")
        if args.step in ("all", "build"):
            _report(f"kind {tc.path('kind')}")
            assert pins is not None
            out = NodeImageBuild(tc, pins).all()
            out["kwok_image"] = build_kwok_image(tc, _report)  # a host replay's kwok
            for k, val in out.items():
                print(f"{k:<20} {val}")
    except ToolError as exc:
        _report(f"error: {exc}")
        return 1
    _report(f"done in {time.monotonic() - started:.0f}s")
    if args.step in ("all", "engine") and not args.print_env:
        _report(left_running(info["host"] == ENGINE_HOST))  # the last line: what is left
    return 0


def left_running(own: bool) -> str:
    """The last line of a step that made sure of an engine: what it leaves and how to stop it."""
    if not own:
        return "left running: nothing started here (the Docker engine was already answering)"
    return (
        f"left running: this tool's dockerd on {ENGINE_HOST} (`make e2e-kind` uses it and "
        "stops it at its end); stop it now: python -m dev.kind_node stop-engine"
    )


if __name__ == "__main__":
    raise SystemExit(main())
