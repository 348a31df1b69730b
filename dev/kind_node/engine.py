"""A Docker engine kind can use: Debian's docker.io, started here when none answers.

On a normal machine this finds the running engine and changes nothing. On a VM whose
capability bounding set lacks CAP_SYS_RESOURCE (no container may hold it, so every
`docker run --privileged`, which kind uses for its nodes, fails in runc), the dockerd
started here gets one extra OCI runtime, ``desched-vm`` (runc_vm_wrapper.py: runc with
that one capability removed from each container's spec), as its default runtime. kind
itself, its flags and its node containers stay standard.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from pytest_desched.errors import ToolError
from pytest_desched.log import Reporter, tagged
from pytest_desched.tools.kind_runtime import VM_RUNTIME

CAP_SYS_RESOURCE = 24
WRAPPER = Path(__file__).resolve().parent / "runc_vm_wrapper.py"
RUN_DIR = Path("/run/pytest-desched")
ENGINE_HOST = f"unix://{RUN_DIR}/docker.sock"
PACKAGES = {"dockerd": "docker.io", "mmdebstrap": "mmdebstrap", "gcc": "gcc"}


_report = tagged("kind-node")


def bounding_lacks(cap: int = CAP_SYS_RESOURCE) -> bool:
    """True when this host's capability bounding set lacks `cap` (so no container can get it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapBnd:"):
                return not (int(line.split()[1], 16) >> cap) & 1
    except OSError:
        pass
    return False


def docker_info(fmt: str = "{{.ServerVersion}}") -> str | None:
    if not shutil.which("docker"):
        return None
    res = subprocess.run(
        ["docker", "info", "--format", fmt], capture_output=True, text=True, timeout=30, check=False
    )
    return res.stdout.strip() if res.returncode == 0 and res.stdout.strip() else None


def ensure_packages(report: Reporter = _report) -> None:
    """apt-get install what is missing (docker.io, mmdebstrap, gcc), as root only."""
    missing = sorted({pkg for tool, pkg in PACKAGES.items() if not shutil.which(tool)})
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ToolError(
            f"missing {', '.join(missing)}: run `sudo apt-get install -y {' '.join(missing)}`"
        )
    report(f"installing {', '.join(missing)} (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise ToolError(f"`{' '.join(cmd)}` failed: {res.stderr[-800:]}")


def docker_host(address: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if address:
        env["DOCKER_HOST"] = address
    return env


# kind's "known issues": nodes of several clusters exhaust the default inotify limits and
# their systemd exits ("Too many open files"); kind's docs raise them to these values.
INOTIFY = {"max_user_instances": 512, "max_user_watches": 524288}


def ensure_inotify(report: Reporter = _report) -> None:
    """Raise fs.inotify limits to kind's documented values when lower (root only)."""
    for name, want in INOTIFY.items():
        path = Path("/proc/sys/fs/inotify") / name
        try:
            have = int(path.read_text())
            if have < want and os.geteuid() == 0:
                path.write_text(str(want))
                report(f"fs.inotify.{name}: {have} -> {want} (kind's value for several clusters)")
        except (OSError, ValueError):
            pass


def ensure_engine(cache_dir: Path, report: Reporter = _report) -> dict[str, str]:
    """A Docker engine that answers; starts dockerd (with the VM runtime if needed) if none does.

    An engine that answers as configured (DOCKER_HOST or the default socket) is used as it is.
    Otherwise dockerd is started on a socket of its own (ENGINE_SOCKET, data under
    <cache>/kind/docker): nothing else on the host sees a Docker engine (so `auto` provider
    detection elsewhere stays as it was); `make e2e-kind` points DOCKER_HOST at it. Returns
    {"docker": version, "started", "runtime", "host": DOCKER_HOST to use ("" = as configured)}.
    """
    ensure_inotify(report)
    lacks = bounding_lacks()
    version = docker_info()
    host = ""
    if not version and not os.environ.get("DOCKER_HOST"):
        os.environ["DOCKER_HOST"] = host = ENGINE_HOST
        version = docker_info()
        if not version:
            del os.environ["DOCKER_HOST"]
    if version:
        runtime = docker_info("{{.DefaultRuntime}}") or ""
        if lacks and runtime != VM_RUNTIME:
            raise ToolError(
                "this host lacks CAP_SYS_RESOURCE, so kind's privileged node containers fail "
                f"under dockerd's default runtime {runtime!r}; restart dockerd with "
                f"`--add-runtime {VM_RUNTIME}={WRAPPER} --default-runtime {VM_RUNTIME}` "
                "(or stop it and let `make e2e-kind` start one)"
            )
        return {"docker": version, "started": "no", "runtime": runtime, "host": host}
    if os.geteuid() != 0:
        raise ToolError("no Docker engine answers `docker info`; start one (needs root)")
    if not shutil.which("dockerd"):
        ensure_packages(report)
    log = cache_dir / "kind" / "dockerd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    cmd = [
        "dockerd",
        "--host",
        ENGINE_HOST,
        "--data-root",
        str(cache_dir / "kind" / "docker"),
        "--exec-root",
        str(RUN_DIR / "exec"),
        "--pidfile",
        str(RUN_DIR / "dockerd.pid"),
        "--bridge",
        "none",
    ]
    if lacks:
        cmd += ["--add-runtime", f"{VM_RUNTIME}={WRAPPER}", "--default-runtime", VM_RUNTIME]
        report(
            "this VM's capability bounding set lacks CAP_SYS_RESOURCE: dockerd gets the "
            f"'{VM_RUNTIME}' runtime (runc minus that capability) so `docker run --privileged` works"
        )
    report(f"starting dockerd (log: {log})")
    with open(log, "a") as fh:
        subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    os.environ["DOCKER_HOST"] = ENGINE_HOST
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        version = docker_info()
        if version:
            runtime = VM_RUNTIME if lacks else "runc"
            return {"docker": version, "started": "yes", "runtime": runtime, "host": ENGINE_HOST}
        time.sleep(1)
    raise ToolError(f"dockerd did not answer within 60 s; see {log}")


def stop_engine(report: Reporter = _report) -> bool:
    """Stop the dockerd this module started (by its pidfile); any other engine is left alone."""
    pidfile = RUN_DIR / "dockerd.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if (
        not cmdline
        or Path(cmdline[0].decode()).name != "dockerd"
        or ENGINE_HOST.encode() not in cmdline
    ):
        return False
    os.kill(pid, 15)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.5)
    report(f"stopped dockerd (pid {pid})")
    return True


def docker_image_id(ref: str) -> str | None:
    res = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    return res.stdout.strip() if res.returncode == 0 else None


def docker_has(ref: str) -> bool:
    return docker_image_id(ref) is not None


def docker_label(ref: str, label: str) -> str | None:
    res = subprocess.run(
        ["docker", "image", "inspect", "--format", f'{{{{index .Config.Labels "{label}"}}}}', ref],
        capture_output=True,
        text=True,
        check=False,
    )
    return res.stdout.strip() if res.returncode == 0 else None
