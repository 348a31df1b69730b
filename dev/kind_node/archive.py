"""Container images as `docker save` archives, written without a Docker engine or registry.

An image is layers (tar files) plus a config; the archive (manifest.json, config, layers) is
what both `docker load` and `ctr images import` read. Layers are deterministic (sorted, fixed
mtime, root-owned unless said otherwise), so a rebuild from the same binaries has the same
digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

EPOCH = 0


@dataclass
class Entry:
    """One path in a layer: a file copied from `src`, inline `data`, a dir or a symlink."""

    path: str
    src: Path | None = None
    data: bytes | None = None
    mode: int = 0o755
    kind: str = "file"  # file | dir | symlink
    target: str = ""
    uid: int = 0
    gid: int = 0


def file(path: str, src: Path, mode: int = 0o755) -> Entry:
    return Entry(path, src=Path(src), mode=mode)


def text(path: str, content: str | bytes, mode: int = 0o644) -> Entry:
    return Entry(path, data=content.encode() if isinstance(content, str) else content, mode=mode)


def directory(path: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> Entry:
    return Entry(path, kind="dir", mode=mode, uid=uid, gid=gid)


def symlink(path: str, target: str) -> Entry:
    return Entry(path, kind="symlink", target=target, mode=0o777)


def _parents(entries: Iterable[Entry]) -> list[Entry]:
    have = {e.path.strip("/") for e in entries}
    out = []
    for e in entries:
        parts = e.path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in have:
                have.add(p)
                out.append(directory(p))
    return out


def write_layer(entries: list[Entry], dest: Path) -> None:
    """A layer tar of `entries` (missing parent directories added, 0755 root)."""
    allents = sorted(_parents(entries) + list(entries), key=lambda e: e.path.strip("/"))
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        for e in allents:
            info = tarfile.TarInfo(e.path.strip("/"))
            info.mtime, info.uid, info.gid, info.mode = EPOCH, e.uid, e.gid, e.mode
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, e.target
                tar.addfile(info)
            else:
                if e.data is not None:
                    info.size = len(e.data)
                    tar.addfile(info, io.BytesIO(e.data))
                else:
                    assert e.src is not None
                    info.size = e.src.stat().st_size
                    with open(e.src, "rb") as fh:
                        tar.addfile(info, fh)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class ImageSpec:
    tags: list[str]
    layers: list[Path]  # uncompressed layer tars, bottom first
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: list[str] = field(
        default_factory=lambda: [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ]
    )
    user: str = ""
    workdir: str = "/"
    labels: dict[str, str] = field(default_factory=dict)
    stop_signal: str = ""


def write_archive(spec: ImageSpec, dest: Path) -> str:
    """Write `spec` as a docker-save archive at `dest`; returns the image id (config digest)."""
    diff_ids = [_sha256(layer) for layer in spec.layers]
    config: dict = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Env": spec.env,
            "WorkingDir": spec.workdir,
            "Labels": spec.labels or None,
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [
            {"created": "1970-01-01T00:00:00Z", "created_by": "pytest-desched kind_node"}
            for _ in diff_ids
        ],
    }
    if spec.entrypoint is not None:
        config["config"]["Entrypoint"] = spec.entrypoint
    if spec.cmd is not None:
        config["config"]["Cmd"] = spec.cmd
    if spec.user:
        config["config"]["User"] = spec.user
    if spec.stop_signal:
        config["config"]["StopSignal"] = spec.stop_signal
    raw = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    image_id = hashlib.sha256(raw).hexdigest()
    manifest = [
        {
            "Config": f"{image_id}.json",
            "RepoTags": spec.tags,
            "Layers": [f"{d}/layer.tar" for d in diff_ids],
        }
    ]
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:

        def add_bytes(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), EPOCH, 0o644
            tar.addfile(info, io.BytesIO(data))

        add_bytes(f"{image_id}.json", raw)
        seen = set()
        for d, layer in zip(diff_ids, spec.layers, strict=True):
            if d in seen:
                continue
            seen.add(d)
            info = tarfile.TarInfo(f"{d}/layer.tar")
            info.size, info.mtime, info.mode = layer.stat().st_size, EPOCH, 0o644
            with open(layer, "rb") as fh:
                tar.addfile(info, fh)
        add_bytes("manifest.json", json.dumps(manifest).encode())
    tmp.replace(dest)
    return f"sha256:{image_id}"


def archive_tags(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        fh = tar.extractfile("manifest.json")
        assert fh is not None
        return [t for m in json.load(fh) for t in m.get("RepoTags") or []]


def archive_config_digest(path: Path) -> str:
    with tarfile.open(path) as tar:
        fh = tar.extractfile("manifest.json")
        assert fh is not None
        return "sha256:" + json.load(fh)[0]["Config"].removesuffix(".json")
