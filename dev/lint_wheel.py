"""`make wheel-lint`: the pytest-desched-lint-bin wheel, from the cached helm, policy checker
and chart, so that `desched lint` after `pip install` needs no Go (docs/lint.md#first-use).

The checkout's `dev/lint-bin/` (pyproject, hatch hook, README) is staged with the two binaries the
toolchain resolves (the cache; built first when missing), the pinned chart and manifest.json;
pip builds the wheel with hatchling, without build isolation (offline), into `dist/`.

The tag is `py3-none-manylinux_2_17_<arch>.manylinux2014_<arch>.musllinux_1_1_<arch>`: the
binaries are static Go builds (`CGO_ENABLED=0`, checked from each binary's own build info),
so they need no libc and run on any glibc or musl Linux of that architecture, and no Python
ABI. `linux_<arch>` would say the same, but PyPI refuses it; a binary built with cgo is
refused here rather than mis-tagged.

The binaries link Apache-2.0, BSD and MIT modules, whose licences ask that a redistribution
carry their text: the wheel holds the project's LICENSE and the licence and notice files of
every module each binary's build info lists, in `licenses/<module>@<version>/` (slashes
escaped; read from the Go module cache through `go mod download`), and the manifest names
any module that has none.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pytest_desched import __version__
from pytest_desched.descheduler.chart_source import obtain_chart
from pytest_desched.errors import ToolError
from pytest_desched.log import say
from pytest_desched.proc import run
from pytest_desched.tools import lint_bin
from pytest_desched.tools.gobuild import go_env
from pytest_desched.tools.groups import TOOL_GROUP
from pytest_desched.tools.toolchain import Toolchain

CHECKOUT = Path(__file__).resolve().parents[1]
SKELETON = Path(__file__).resolve().parent / "lint-bin"  # the wheel's own project files
# the files a module's licence lives in (hatchling's own default globs for license-files)
LICENSE_GLOBS = ("LICEN[CS]E*", "COPYING*", "NOTICE*", "AUTHORS*")
# GOARCH -> the architecture in a wheel's platform tag
WHEEL_ARCH = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"}


def build_record(binary: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """What the Go toolchain recorded in `binary`, from one `go version -m`: the build info
    (go, GOOS, GOARCH, CGO_ENABLED, ...; the binary's own word on how it was built, not the
    cache's) and the modules linked into it as (path, version), replacements applied, the main
    module only when it has a version (ours is `(devel)`)."""
    res = run(["go", "version", "-m", str(binary)], check=False)
    if res.returncode != 0:
        raise ToolError(f"`go version -m {binary}` failed: {(res.stderr or res.stdout)[-300:]}")
    lines = res.stdout.splitlines()
    info = {"go": lines[0].rpartition(": ")[2].strip()} if lines else {}
    mods: list[tuple[str, str]] = []
    for line in lines[1:]:
        parts = line.strip().split("\t")
        if len(parts) == 2 and parts[0] == "build" and "=" in parts[1]:
            key, _, value = parts[1].partition("=")
            info[key] = value
        elif parts[0] in ("mod", "dep") and len(parts) >= 3 and parts[2] != "(devel)":
            mods.append((parts[1], parts[2]))
        elif parts[0] == "=>" and len(parts) >= 3 and mods and not parts[1].startswith((".", "/")):
            mods[-1] = (parts[1], parts[2])  # the module that was built, not the one named
    return info, mods


def go_build_info(binary: Path) -> dict[str, str]:
    """The build info of :func:`build_record`."""
    return build_record(binary)[0]


def go_modules(binary: Path) -> list[tuple[str, str]]:
    """The linked modules of :func:`build_record`."""
    return build_record(binary)[1]


def collect_licenses(modules: list[tuple[str, str]], dest: Path) -> dict[str, Any]:
    """Copy each module's licence and notice files to `dest/<path>@<version>/`; what was
    found, and the modules that carry none (named in the manifest, never silently dropped)."""
    wanted = sorted(set(modules))
    if not wanted:
        return {"modules": 0, "files": 0, "without": []}
    res = run(
        ["go", "mod", "download", "-json", *(f"{m}@{v}" for m, v in wanted)],
        env=go_env(), check=False, timeout=900, cwd=dest.parent,
    )  # fmt: skip
    dirs = {}
    for obj in _json_stream(res.stdout):
        if obj.get("Dir") and not obj.get("Error"):
            dirs[(obj["Path"], obj["Version"])] = Path(obj["Dir"])
    files, without = 0, []
    for mod in wanted:
        src = dirs.get(mod)
        found = (
            sorted({f for g in LICENSE_GLOBS for f in src.glob(g) if f.is_file()}) if src else []
        )
        if not found:
            without.append(f"{mod[0]}@{mod[1]}")
            continue
        out = dest / license_dir(*mod)
        out.mkdir(parents=True, exist_ok=True)
        for f in found:
            shutil.copyfile(f, out / f.name)
            files += 1
    if len(without) == len(wanted):
        raise ToolError(
            f"no licence file found for any of the {len(wanted)} modules the binaries link: "
            f"`go mod download` said {(res.stderr or res.stdout)[-400:]}; fetch them with "
            "`go mod download` (the Go module proxy) and rebuild the wheel"
        )
    return {"modules": len(wanted), "files": files, "without": without}


def license_dir(path: str, version: str) -> str:
    """The folder of a module's licence files: one level (hatchling globs without `**`), the
    module path's slashes escaped so that no two modules share one."""
    return quote(f"{path}@{version}", safe="@")


def _json_stream(text: str) -> list[dict[str, Any]]:
    """The objects of `go mod download -json`'s output: JSON values one after another."""
    decoder, objs, i = json.JSONDecoder(), [], 0
    while (i := _skip_ws(text, i)) < len(text):
        obj, i = decoder.raw_decode(text, i)
        objs.append(obj)
    return objs


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def wheel_tag(goos: str, goarch: str) -> str:
    """The wheel tag of static binaries for GOOS/GOARCH (the module docstring says why)."""
    arch = WHEEL_ARCH.get(goarch)
    if goos != "linux" or arch is None:
        raise ToolError(
            f"no wheel tag for {goos}/{goarch}: the lint-bin wheel is built for Linux on "
            f"{', '.join(sorted(WHEEL_ARCH))}"
        )
    return f"py3-none-manylinux_2_17_{arch}.manylinux2014_{arch}.musllinux_1_1_{arch}"


def tool_entry(
    tc: Toolchain, tool: str, staged: Path
) -> tuple[dict[str, Any], dict[str, str], list[tuple[str, str]]]:
    """The manifest entry of `tool` (resolved by `tc`, copied to `staged`) and its build info;
    a binary built with cgo is refused (the tag promises a static binary)."""
    src = tc.path(tool)
    info, modules = build_record(src)
    if info.get("CGO_ENABLED") != "0":
        raise ToolError(
            f"{tool} at {src} was built with CGO_ENABLED={info.get('CGO_ENABLED', '?')}: the "
            "wheel carries static binaries only; rebuild it with CGO_ENABLED=0 (`desched tools`)"
        )
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, staged)
    staged.chmod(0o755)
    group = tc.groups[TOOL_GROUP[tool]]
    entry = {
        "file": f"bin/{tool}",
        "version": group.version,
        "key": group.key,
        "module": group.module,
        "sha256": lint_bin.sha256(staged),
        "go": info.get("go", ""),
        "from": tc.sources[tool],
    }
    return entry, info, modules


def stage(tc: Toolchain, root: Path) -> dict[str, Any]:
    """Copy the skeleton to `root` and fill its package: binaries, chart, manifest.json."""
    if not (SKELETON / "pyproject.toml").is_file():
        raise ToolError(f"{SKELETON}/pyproject.toml is missing: build the wheel from a checkout")
    shutil.copytree(SKELETON, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pkg = root / lint_bin.PACKAGE
    tools: dict[str, Any] = {}
    platforms = set()
    modules: list[tuple[str, str]] = []
    for tool in lint_bin.TOOLS:
        tools[tool], info, linked = tool_entry(tc, tool, pkg / "bin" / tool)
        platforms.add((info.get("GOOS", ""), info.get("GOARCH", "")))
        modules += linked
    shutil.copyfile(CHECKOUT / "LICENSE", root / "LICENSE")
    (root / "licenses").mkdir()
    licenses = collect_licenses(modules, root / "licenses")
    if len(platforms) != 1:
        raise ToolError(f"helm and the policy checker were built for {sorted(platforms)}")
    goos, goarch = platforms.pop()
    ref = obtain_chart(tc, tc.versions, "auto", report=tc.report)
    (pkg / "charts").mkdir()
    shutil.copyfile(ref.path, pkg / "charts" / ref.path.name)
    manifest = {
        "schema": lint_bin.SCHEMA,
        "version": __version__,
        "tag": wheel_tag(goos, goarch),
        "goos": goos,
        "goarch": goarch,
        "tools": tools,
        "licenses": licenses,
        "chart": {
            "file": f"charts/{ref.path.name}",
            "name": tc.versions.chart_name,
            "version": ref.version,
            "app_version": ref.app_version,
            "source": ref.source,
            "sha256": ref.digest,
        },
    }
    (pkg / lint_bin.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def build_wheel(tc: Toolchain, dist: Path) -> tuple[Path, dict[str, Any]]:
    """Build the wheel into `dist`; its path and manifest."""
    if importlib.util.find_spec("hatchling") is None:
        raise ToolError("hatchling is not installed: pip install 'pytest-desched[dev]'")
    dist.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lint-bin-") as tmp:
        root = Path(tmp) / "lint-bin"
        manifest = stage(tc, root)
        name = f"{lint_bin.PACKAGE}-{manifest['version']}-{manifest['tag']}.whl"
        (dist / name).unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        res = run([*cmd, "--no-index", "-q", "-w", str(dist), str(root)], check=False, timeout=900)
        if res.returncode != 0 or not (dist / name).is_file():
            raise ToolError(f"pip wheel of {root} failed: {(res.stderr or res.stdout)[-800:]}")
    return dist / name, manifest


def main(argv: list[str] | None = None) -> int:
    """`python -m dev.lint_wheel`: the lint-bin wheel into dist/."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--dist", type=Path, default=Path("dist"), help="output folder")
    ap.add_argument("--cache-dir", type=Path, default=None, help="the tool cache")
    args = ap.parse_args(argv)
    try:
        wheel, manifest = build_wheel(
            Toolchain(cache_dir=args.cache_dir, use_path=False), args.dist
        )
    except (ToolError, subprocess.SubprocessError, OSError) as exc:
        say(f"error: {exc}")
        return 1
    for tool, entry in manifest["tools"].items():
        say(f"{tool} {entry['version']} ({entry['key']}, {entry['go']}) sha256:{entry['sha256']}")
    say(
        f"chart {manifest['chart']['name']}-{manifest['chart']['version']} ({manifest['chart']['source']})"
    )
    print(wheel)
    say(f"{wheel.stat().st_size / 1e6:.0f} MB; install with: pip install {wheel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
