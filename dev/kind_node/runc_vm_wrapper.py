#!/usr/bin/python3
"""An OCI runtime for dockerd on VMs whose bounding set lacks CAP_SYS_RESOURCE: runc, minus that cap.

`docker run --privileged` (what kind uses for its nodes) asks for every capability; runc
then fails with `operation not permitted` when the VM's own bounding set has no
CAP_SYS_RESOURCE. This wrapper removes CAP_SYS_RESOURCE from the bundle's config.json
before `runc create`/`runc run` (and from the process spec of `runc exec`) and hands everything else to runc unchanged, so a
privileged container gets all it can get here. Registered by
`python -m dev.kind_node docker` only on such VMs
(`dockerd --add-runtime desched-vm=THIS --default-runtime desched-vm`); never used on a
machine whose dockerd can run privileged containers.
"""

import json
import os
import sys

DROP = os.environ.get("DESCHED_RUNC_DROP_CAPS", "CAP_SYS_RESOURCE").split(",")
RUNC = os.environ.get("DESCHED_RUNC", "/usr/sbin/runc")


def bundle_dir(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg in ("--bundle", "-b") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--bundle="):
            return arg.split("=", 1)[1]
    return os.getcwd()  # runc's default bundle is the working directory


def option(argv: list[str], names: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            return argv[i + 1]
        for n in names:
            if n.startswith("--") and arg.startswith(n + "="):
                return arg.split("=", 1)[1]
    return None


def strip_caps(config_path: str, process_only: bool = False) -> None:
    with open(config_path) as fh:
        spec = json.load(fh)
    process = spec if process_only else (spec.get("process") or {})
    caps = process.get("capabilities") or {}
    changed = False
    for key, values in caps.items():
        if isinstance(values, list):
            kept = [c for c in values if c not in DROP]
            changed |= len(kept) != len(values)
            caps[key] = kept
    if changed:
        tmp = config_path + ".desched-tmp"
        with open(tmp, "w") as fh:
            json.dump(spec, fh)
        os.replace(tmp, config_path)


def main() -> None:
    argv = sys.argv[1:]
    if "create" in argv or "run" in argv:
        config = os.path.join(bundle_dir(argv), "config.json")
        if os.path.isfile(config):
            strip_caps(config)
    elif "exec" in argv:  # `docker exec`: the process spec is a file of its own
        process = option(argv, ("--process", "-p"))
        if process and os.path.isfile(process):
            strip_caps(process, process_only=True)
    os.execv(RUNC, [RUNC, *argv])


if __name__ == "__main__":
    main()
