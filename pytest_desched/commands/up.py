"""`desched up`: a kept embedded cluster with the release (`desched down` removes it).

`up` keeps a cluster only once the release is installed (suspended, dry run) and the policy
applied; interrupted or failed before, everything it made is deleted and checked gone. The
session and the embedded provider are imported inside the command: heavy, and `desched
--version` needs neither.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pytest_desched import interrupts
from pytest_desched import render as out
from pytest_desched.config import add_config_options, config_from_args, resolve
from pytest_desched.errors import EXIT_OK
from pytest_desched.log import say
from pytest_desched.tools.locate import default_cache_dir


def cmd_up(args: argparse.Namespace) -> int:
    """Bring up a cluster with the release, and keep it: but only once all of that finished.

    Interrupted or failed before, the cluster and this run's `up/run-*` folder are deleted
    (and checked gone); the keep mark, the folder's `cluster-name` and the printed lines are
    written shielded, so a signal cannot leave a kept cluster `desched down` does not know.
    """
    # heavy: see above
    from pytest_desched.providers.embedded.owners import write_up_kept, write_up_owner

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
            if not cluster.capabilities.reaps_leftovers:  # no owner record keeps it
                write_up_kept(run_dir, cluster.provider, cluster.name, cluster.created)
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


def add_parser(sub: Any) -> None:
    p = sub.add_parser("up", help="bring up a kept cluster with the release installed")
    p.set_defaults(func=cmd_up, parser=p)
    add_config_options(p, "up")
    out.add_output(p)
