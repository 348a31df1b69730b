"""`desched up` and `desched down`: a kept embedded cluster with the release, and its removal.

`up` keeps a cluster only once the release is installed (suspended, dry run) and the policy
applied; interrupted or failed before, everything it made is deleted and checked gone.
`down` deletes kept clusters by name (or lists them). The session and the embedded
provider are imported inside the commands: heavy, and `desched --version` needs neither.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from pytest_desched import interrupts
from pytest_desched import render as out
from pytest_desched.config import config_from_args, resolve
from pytest_desched.errors import EXIT_INFRA, EXIT_OK, ConfigError
from pytest_desched.log import say
from pytest_desched.tools.locate import default_cache_dir


def cmd_up(args: argparse.Namespace) -> int:
    """Bring up a cluster with the release, and keep it: but only once all of that finished.

    Interrupted or failed before, the cluster and this run's `up/run-*` folder are deleted
    (and checked gone); the keep mark, the folder's `cluster-name` and the printed lines are
    written shielded, so a signal cannot leave a kept cluster `desched down` does not know.
    """
    # heavy: see above
    from pytest_desched.providers.embedded.owners import write_up_owner

    # heavy: session and its imports, kept out of `desched` start-up
    from pytest_desched.session import DeschedSession

    cache = Path(
        resolve("--desched-cache-dir", getattr(args, "--desched-cache-dir", None))
        or default_cache_dir()
    )
    up_dir = cache / "up"
    up_dir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=up_dir))  # removed by `desched down`
    write_up_owner(run_dir)  # until kept, a `desched down` leaves a live run's folder alone
    config = session = None
    finished = False
    try:
        config = config_from_args(args, keep="always", run_dir=run_dir)
        session = DeschedSession(config, report=say)
        name = getattr(session.provider, "cluster_name", None)
        if name:  # known before anything starts: `desched down NAME` finds this folder
            (run_dir / "cluster-name").write_text(name)
        session.release  # noqa: B018 (cluster, then the release: suspended, dry run)
        policy, said = session.install_policy()
        hints = session.continue_hints()
        with interrupts.shielded(f"desched up's cluster {name}: marking it kept"):
            cluster, release = session.cluster, session.release
            session.close()  # kept: marks the cluster kept, so no later run reaps it
            finished = True
            data = {
                "cluster": cluster.name,
                "kubeconfig": str(cluster.kubeconfig),
                "release": release.name,
                "release_namespace": "kube-system",
                "suspended": True,
                "dry_run": True,
                "policy": said,
                "policy_digest": policy.digest(),
                "on_top_of_values": list(session.inputs.on_top),
                "next_steps": list(hints),
                "delete": f"desched down {cluster.name}",
            }
            text = "\n".join(
                [
                    *hints,
                    f"# release {release.name} in kube-system: suspended, dry run, policy "
                    f"{said} (digest {policy.digest()[:12]})",
                    *(f"# on top of your values: {line}" for line in session.inputs.on_top),
                    f"# delete: desched down {cluster.name}",
                ]
            )
            out.emit(out.render(data, args.output, text=lambda: text))
    except BaseException:
        if not finished:  # a half-made cluster is not kept
            with interrupts.shielded(f"desched up's folder {run_dir}"):
                try:
                    if session is not None and config is not None:
                        session.config = config.with_(keep="never")
                        session.close()
                finally:
                    shutil.rmtree(run_dir, ignore_errors=True)
                    if run_dir.exists():
                        interrupts.left_behind.append(f"folder {run_dir}")
        raise
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    # heavy: providers.embedded.cluster and its imports; providers.embedded.owners and its imports; tools.toolchain and its imports, kept out of `desched` start-up
    from pytest_desched.providers.embedded.cluster import delete_cluster
    from pytest_desched.providers.embedded.owners import kept_clusters, stale_up_dirs
    from pytest_desched.tools.toolchain import Toolchain

    cache = resolve("--desched-cache-dir", args.cache_dir)
    tc = Toolchain(cache_dir=Path(cache) if cache else None, report=say)
    root = tc.cache_dir / "clusters"
    kept = kept_clusters(root)
    for stale in stale_up_dirs(tc.cache_dir / "up", root):  # left by interrupted `up`s
        shutil.rmtree(stale, ignore_errors=True)
        say(f"removed {stale} (its cluster is gone)")
    names = kept if args.all else args.names
    if not names:
        out.emit(
            out.render(
                {"kept": kept},
                args.output,
                text=lambda: "\n".join(kept) if kept else "no kept embedded clusters",
                md=lambda: out.table([[k] for k in kept], ["kept cluster"], "md"),
            )
        )
        return EXIT_OK
    unknown = sorted(set(names) - set(kept))
    if unknown:
        raise ConfigError(f"not a kept embedded cluster: {unknown}; kept: {kept or 'none'}")
    for name in names:
        found = delete_cluster(tc, root, name, say)
        for marker in (tc.cache_dir / "up").glob("run-*/cluster-name"):
            if marker.read_text().strip() == name:  # `desched up`'s kubeconfig copy and files
                shutil.rmtree(marker.parent, ignore_errors=True)
        if found["processes_left"] or found["dir_left"]:
            say(f"embedded cluster {name}: not fully deleted ({found}); run desched down again")
            return EXIT_INFRA
        say(f"deleted embedded cluster {name} (0 processes, folder removed)")
    return EXIT_OK
