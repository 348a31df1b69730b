"""Go builds: the wrapper module, its go.mod, the build command, its log and progress.

Every build runs the ordinary ``go`` command offline-safe (``GOTOOLCHAIN=local``,
``CGO_ENABLED=0``); a failed build's log is read for the packages it could not find.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from pytest_desched.errors import ToolError
from pytest_desched.log import Reporter
from pytest_desched.proc import run
from pytest_desched.tools.groups import Group
from pytest_desched.tools.versions import Versions, load_versions

_MISSING_PACKAGE = re.compile(
    r"(?:cannot find module providing package|no required module provides package) "
    r"([\w.\-/~]+)|package ([\w.\-/~]+) is not in std"
)


def missing_packages(log_text: str) -> list[str]:
    """The packages a failed `go build` could not find, in order, each once."""
    out: list[str] = []
    for m in _MISSING_PACKAGE.finditer(log_text):
        pkg = (m.group(1) or m.group(2)).rstrip(":;")
        if pkg not in out:
            out.append(pkg)
    return out


def copy_helper(source_dir: Path, dest: Path) -> list[str]:
    """Copy whatever *.go the helper's folder holds now into `dest` (replaced whole)."""
    files = sorted(source_dir.glob("*.go"))
    if not files:
        raise ToolError(f"no *.go files in {source_dir}: the policy checker's source is missing")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in files:
        shutil.copyfile(f, dest / f.name)
    return [f.name for f in files]


def tree_go_env(tree: Path) -> dict[str, str]:
    """The environment of a build inside a source tree: vendored and offline when it vendors."""
    env = go_env()
    env["GOWORK"] = "off"
    if (tree / "vendor" / "modules.txt").is_file():
        env["GOFLAGS"] = "-mod=vendor -buildvcs=false"
        env["GOPROXY"] = "off"
    else:
        env["GOFLAGS"] = "-mod=readonly -buildvcs=false"
    return env


def go_build_cmd(group: Group, out_dir: Path, tags: tuple[str, ...] = ()) -> list[str]:
    """`go build` of every package of `group` into `out_dir`, stripped and reproducible."""
    ldflags = " ".join(("-s", "-w", *group.ldflags))
    tagged = ["-tags", ",".join(tags)] if tags else []
    return ["go", "build", "-v", "-trimpath", *tagged, "-ldflags", ldflags, "-o", f"{out_dir}/",
            *group.packages.values()]  # fmt: skip


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"})
    return env


def module_dir(module: str, version: str) -> Path:
    """Where `module@version`'s source lies in the Go module cache (downloaded when missing)."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=go_env(),
        cwd="/",
        check=False,
    )
    if res.returncode != 0:
        raise ToolError(
            f"go mod download {module}@{version} failed: {res.stdout[-500:]} {res.stderr[-500:]}"
        )
    return Path(json.loads(res.stdout)["Dir"])


def module_gomod(module: str, version: str, env: dict[str, str], logf) -> str:
    """The text of `module@version`'s own go.mod, via `go mod download -json`."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    logf.write(res.stderr)
    if res.returncode != 0:
        raise ToolError(
            f"go mod download {module}@{version} failed: {res.stdout[-500:]} {res.stderr[-500:]}"
        )
    info = json.loads(res.stdout)
    return Path(info["GoMod"]).read_text()


def module_source_dir(module: str, version: str, env: dict[str, str]) -> Path | None:
    """Where `module@version`'s source sits in the module cache (`go mod download -json`'s
    Dir; downloaded already by the wrapper's go.mod step), None if go cannot say."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    try:
        found = json.loads(res.stdout or "{}").get("Dir")
    except json.JSONDecodeError:
        return None
    return Path(found) if res.returncode == 0 and found else None


_REPLACE_RE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+\S+)?\s+=>\s+(\S+)(?:\s+(\S+))?\s*$")


def wrapper_gomod(group: Group, upstream_gomod: str, staging_version: str | None) -> str:
    """go.mod of the wrapper: require the module, carry over its replaces and godebug.

    Local replaces (`=> ./staging/...`) only work inside the upstream repo; for
    k8s.io/kubernetes they are pinned to the published staging modules instead.
    """
    lines = [f"module desched.local/wrapper/{group.name}", "", "go 1.26.0", ""]
    lines.append(f"require {group.module} {group.version}")
    in_block = in_godebug = False
    for raw in upstream_gomod.splitlines():
        s = raw.split("//")[0].strip()
        if s.startswith("replace ("):
            in_block = True
            continue
        if s.startswith("godebug ("):
            in_godebug = True
            lines.append("godebug (")
            continue
        if (in_block or in_godebug) and s == ")":
            if in_godebug:
                lines.append(")")
            in_block = in_godebug = False
            continue
        if in_godebug:
            if s:
                lines.append(f"\t{s}")
            continue
        if s.startswith("godebug "):
            lines.append(s)
            continue
        if not (in_block or s.startswith("replace ")):
            continue
        m = _REPLACE_RE.match(s)
        if not m:
            continue
        old, new, new_ver = m.groups()
        if new.startswith("./staging/") and staging_version:
            lines.append(f"replace {old} => {old} {staging_version}")
        elif new_ver and not new.startswith("."):
            lines.append(f"replace {old} => {new} {new_ver}")
    return "\n".join(lines) + "\n"


def write_wrapper_module(
    group: Group, src: Path, env: dict[str, str], logf, versions: Versions | None = None
) -> None:
    staging = None
    kube = (versions or load_versions()).kubernetes
    if group.module == kube.module:  # kubernetes, and the kind node's kubelet/kubeadm/kube-proxy
        staging = kube.extra.get("staging_version")
    gomod = wrapper_gomod(group, module_gomod(group.module, group.version, env, logf), staging)
    (src / "go.mod").write_text(gomod)
    if group.source_dir is not None:
        # The wrapper module *is* the helper: its main package, built against group.module.
        for f in group.source_dir.glob("*.go"):
            shutil.copyfile(f, src / f.name)
    else:
        imports = "\n".join(f'\t_ "{p}"' for p in group.packages.values())
        (src / "tools.go").write_text(
            f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"
        )
    res = subprocess.run(
        ["go", "mod", "tidy"], cwd=src, env=env, stdout=logf, stderr=subprocess.STDOUT, check=False
    )
    if res.returncode != 0:
        raise ToolError(f"{group.name}: `go mod tidy` in {src} failed; see {logf.name}")


def dep_count(packages: list[str], cwd: Path, env: dict[str, str]) -> int | None:
    """How many packages a build of `packages` compiles at most (`go list -deps`): the total
    of the progress line. None when go cannot say within a minute (the build still runs)."""
    try:
        res = run(["go", "list", "-deps", *packages], env=env, check=False, timeout=60, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [x for x in res.stdout.splitlines() if x.strip()]
    return len(lines) if res.returncode == 0 and lines else None


def progress_line(name: str, count: int, total: int | None, seconds: float) -> str:
    """`name: [#####.....] 312/1450 packages, 90s`: a bar when the total is known."""
    if not total:
        return f"  {name}: {count} packages compiled, {seconds:.0f}s"
    done = min(count, total)  # cached packages are not printed, so count can stay below
    bar = "#" * (20 * done // total)
    return f"  {name}: [{bar:.<20}] {done}/{total} packages, {seconds:.0f}s"


def run_logged(
    cmd, cwd, env, logf, log: Path, group: Group, report: Reporter, interval: float = 30
) -> None:
    """Run a build, streaming its output to the log and a progress line every `interval` s."""
    logf.write("$ " + " ".join(cmd) + "\n")
    logf.flush()
    total = dep_count(list(group.packages.values()), cwd, env)
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    count = 0
    started = time.monotonic()
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(interval):
            report(progress_line(group.name, count, total, time.monotonic() - started))

    t = threading.Thread(target=heartbeat, daemon=True)
    t.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            logf.write(line)
            count += 1
        rc = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        stop.set()
        logf.flush()
    if rc != 0:
        raise ToolError(
            f"building {group.name} {group.version} failed (exit {rc}): `{' '.join(cmd[:3])} ...` "
            f"in {cwd}; full log: {log}"
        )
