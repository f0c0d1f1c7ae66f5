"""An OCI image layout written and read in plain Python: no Docker daemon, no registry.

``write`` turns directory trees into gzip'd tar layers (entries sorted, one mtime, owner root
unless told otherwise, so the same trees give the same digests), adds the image config and the
manifest, and writes the layout (``oci-layout``, ``index.json``, ``blobs/sha256/``) that crane,
skopeo, podman and containerd read (``crane push out/image REF``, ``skopeo copy oci:out/image
docker://REF``). ``unpack`` checks every digest and size on the way from ``index.json`` down and
extracts the layers in order into a root filesystem (what a container runtime would run).

Used by hack/build-image.sh (``make image``) and tests/integration/test_image.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gzip
import hashlib
import json
import os
import pathlib
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

LAYOUT_VERSION = "1.0.0"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
NONROOT = 65532


class LayoutError(Exception):
    """The layout is not what its index and manifest say (a digest, a size, a media type)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Descriptor:
    media_type: str
    digest: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclasses.dataclass(frozen=True, slots=True)
class Layer:
    root: pathlib.Path
    comment: str


@dataclasses.dataclass(frozen=True, slots=True)
class ImageConfig:
    entrypoint: tuple[str, ...]
    env: tuple[str, ...]
    user: str
    workdir: str
    labels: Mapping[str, str]


class _Hashing:
    """A write-only file that hashes what passes through it into ``sink`` (if any)."""

    def __init__(self, sink: IO[bytes] | gzip.GzipFile | None) -> None:
        self.sink = sink
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        if self.sink is not None:
            self.sink.write(data)
        return len(data)

    def flush(self) -> None:
        if self.sink is not None:
            self.sink.flush()


def _entries(root: pathlib.Path) -> Iterator[pathlib.Path]:
    """Every path under ``root``, parents before children, siblings in byte order."""
    for here, dirs, files in os.walk(root):
        dirs.sort()
        base = pathlib.Path(here)
        for name in sorted([*dirs, *files]):
            yield base / name  # a symlink to a directory is an entry: os.walk does not follow it


def _layer_blob(
    layer: Layer, blobs: pathlib.Path, *, mtime: int, owners: Mapping[str, int]
) -> tuple[Descriptor, str, int]:
    """Write the layer's gzip'd tar into ``blobs``; its descriptor, diff id and unpacked size."""
    with tempfile.NamedTemporaryFile(dir=blobs, delete=False) as raw:
        compressed = _Hashing(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0) as gz:
            plain = _Hashing(gz)
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for path in _entries(layer.root):
                    name = path.relative_to(layer.root).as_posix()
                    info = tar.gettarinfo(str(path), arcname=name)
                    info.mtime = mtime
                    info.uid = info.gid = owners.get(name, 0)
                    info.uname = info.gname = ""
                    if info.isreg():
                        with path.open("rb") as f:
                            tar.addfile(info, f)
                    else:
                        tar.addfile(info)
    digest = f"sha256:{compressed.sha.hexdigest()}"
    os.replace(raw.name, blobs / compressed.sha.hexdigest())
    return (
        Descriptor(MEDIA_LAYER, digest, compressed.size),
        f"sha256:{plain.sha.hexdigest()}",
        plain.size,
    )


def _json_blob(blobs: pathlib.Path, media_type: str, doc: Mapping[str, Any]) -> Descriptor:
    data = json.dumps(doc, indent=2, sort_keys=True).encode()
    hexdigest = hashlib.sha256(data).hexdigest()
    (blobs / hexdigest).write_bytes(data)
    return Descriptor(media_type, f"sha256:{hexdigest}", len(data))


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    manifest: Descriptor
    layers: tuple[Descriptor, ...]
    unpacked_bytes: int

    @property
    def compressed_bytes(self) -> int:
        return sum(d.size for d in self.layers)


def write(
    *,
    out: pathlib.Path,
    layers: Sequence[Layer],
    config: ImageConfig,
    tag: str,
    created: dt.datetime,
    owners: Mapping[str, int] | None = None,
) -> Written:
    """Write an OCI image layout of ``layers`` (bottom first) into ``out`` (replaced)."""
    shutil.rmtree(out, ignore_errors=True)
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    stamp = int(created.timestamp())
    written = [_layer_blob(layer, blobs, mtime=stamp, owners=owners or {}) for layer in layers]
    created_at = created.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created_at,
        "config": {
            "User": config.user,
            "Entrypoint": list(config.entrypoint),
            "Env": list(config.env),
            "WorkingDir": config.workdir,
            "Labels": dict(config.labels),
        },
        "rootfs": {"type": "layers", "diff_ids": [diff for _, diff, _ in written]},
        "history": [{"created": created_at, "created_by": layer.comment} for layer in layers],
    }
    config_desc = _json_blob(blobs, MEDIA_CONFIG, image_config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config_desc.to_json(),
        "layers": [d.to_json() for d, _, _ in written],
        "annotations": dict(config.labels),
    }
    manifest_desc = _json_blob(blobs, MEDIA_MANIFEST, manifest)
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [{**manifest_desc.to_json(), "annotations": {REF_NAME: tag}}],
    }
    (out / "index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    (out / "oci-layout").write_text(
        json.dumps({"imageLayoutVersion": LAYOUT_VERSION}) + "\n", encoding="utf-8"
    )
    return Written(
        manifest=manifest_desc,
        layers=tuple(d for d, _, _ in written),
        unpacked_bytes=sum(size for _, _, size in written),
    )


# ---------------------------------------------------------------- reading


def _blob(layout: pathlib.Path, desc: Mapping[str, Any], media_type: str) -> pathlib.Path:
    if desc.get("mediaType") != media_type:
        raise LayoutError(f"{desc.get('digest')}: media type {desc.get('mediaType')!r}")
    algorithm, _, hexdigest = str(desc["digest"]).partition(":")
    if algorithm != "sha256":
        raise LayoutError(f"{desc['digest']}: only sha256 digests are written here")
    path = layout / "blobs" / "sha256" / hexdigest
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
            size += len(chunk)
    if sha.hexdigest() != hexdigest or size != desc["size"]:
        raise LayoutError(f"{path}: digest or size differs from its descriptor")
    return path


def _json(path: pathlib.Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def read_config(layout: pathlib.Path, tag: str) -> tuple[dict[str, Any], list[pathlib.Path]]:
    """The image config of ``tag`` and its layer blobs (bottom first), every digest checked."""
    if _json(layout / "oci-layout").get("imageLayoutVersion") != LAYOUT_VERSION:
        raise LayoutError(f"{layout}/oci-layout: not an image layout {LAYOUT_VERSION}")
    index = _json(layout / "index.json")
    found = [m for m in index["manifests"] if m.get("annotations", {}).get(REF_NAME) == tag]
    if len(found) != 1:
        raise LayoutError(f"{layout}/index.json: {len(found)} manifests tagged {tag!r}")
    manifest = _json(_blob(layout, found[0], MEDIA_MANIFEST))
    config = _json(_blob(layout, manifest["config"], MEDIA_CONFIG))
    layers = [_blob(layout, d, MEDIA_LAYER) for d in manifest["layers"]]
    if len(layers) != len(config["rootfs"]["diff_ids"]):
        raise LayoutError("the manifest's layers and the config's diff_ids differ in number")
    return config, layers


def unpack(layout: pathlib.Path, tag: str, dest: pathlib.Path) -> dict[str, Any]:
    """Extract the image's layers in order into ``dest``; its config. Ownership is kept when run
    as root. Whiteouts (deleted files) are refused: the layers written here have none."""
    config, layers = read_config(layout, tag)
    for blob, diff_id in zip(layers, config["rootfs"]["diff_ids"], strict=True):
        sha = hashlib.sha256()
        with gzip.open(blob, "rb") as gz:
            while chunk := gz.read(1 << 20):
                sha.update(chunk)
        if f"sha256:{sha.hexdigest()}" != diff_id:
            raise LayoutError(f"{blob}: the unpacked layer is not {diff_id}")
        with tarfile.open(blob, "r:gz") as tar:
            members = tar.getmembers()
            if any(pathlib.PurePosixPath(m.name).name.startswith(".wh.") for m in members):
                raise LayoutError(f"{blob}: whiteouts are not supported")
            tar.extractall(dest, members=members, filter="fully_trusted")
    return config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oci_layout", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write an OCI image layout from directory trees")
    w.add_argument("--out", type=pathlib.Path, required=True)
    w.add_argument("--tag", required=True)
    w.add_argument("--created-epoch", type=int, default=0)
    w.add_argument("--layer", action="append", required=True, help="DIR=comment, bottom first")
    w.add_argument("--label", action="append", default=[], help="KEY=VALUE")
    u = sub.add_parser("unpack", help="check the digests and extract the layers")
    u.add_argument("layout", type=pathlib.Path)
    u.add_argument("--tag", required=True)
    u.add_argument("--dest", type=pathlib.Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "unpack":
        unpack(args.layout, args.tag, args.dest)
        return 0
    layers = [Layer(pathlib.Path(d), c) for d, _, c in (s.partition("=") for s in args.layer)]
    config = ImageConfig(
        entrypoint=("/usr/local/bin/graceguard",),
        env=(
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "PYTHONDONTWRITEBYTECODE=1",
            "PYTHONUNBUFFERED=1",
            "HOME=/home/nonroot",
            "LANG=C.UTF-8",
        ),
        user=f"{NONROOT}:{NONROOT}",
        workdir="/home/nonroot",
        labels=dict(s.partition("=")[::2] for s in args.label),
    )
    done = write(
        out=args.out,
        layers=layers,
        config=config,
        tag=args.tag,
        created=dt.datetime.fromtimestamp(args.created_epoch, dt.UTC),
        owners={"home/nonroot": NONROOT},
    )
    mib = 1024 * 1024
    for layer, desc in zip(layers, done.layers, strict=True):
        print(f"  layer {desc.digest[:19]}  {desc.size / mib:7.1f} MiB  {layer.comment}")
    print(
        f"image {args.out} (tag {args.tag}, manifest {done.manifest.digest}): "
        f"{done.compressed_bytes / mib:.1f} MiB compressed, "
        f"{done.unpacked_bytes / mib:.1f} MiB unpacked"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
