"""``meta.properties``: the identity file Kafka 4.x KRaft keeps in every log directory.

Format (version 1): ``version=1``, ``cluster.id``, ``node.id``, ``directory.id``.  Ids are
Kafka Uuids rendered as Uuid.toString does: URL-safe base64 of the 16 bytes, no padding.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from broker.config.properties import format_properties, load_properties

__all__ = [
    "META_PROPERTIES",
    "MetaProperties",
    "MetaPropertiesError",
    "parse_uuid",
    "random_uuid",
    "read_meta_properties",
    "write_meta_properties",
]

META_PROPERTIES = "meta.properties"
# Kafka's reserved ids (ZERO_UUID, ONE_UUID == METADATA_TOPIC_ID) are never handed out.
_RESERVED = frozenset({bytes(16), bytes(15) + b"\x01"})


class MetaPropertiesError(ValueError):
    pass


def uuid_to_str(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def parse_uuid(text: str) -> bytes:
    """Uuid.fromString: URL-safe base64 (padding optional) of exactly 16 bytes."""
    if len(text) > 24:
        raise MetaPropertiesError(f"{text[:24]!r}... is too long to be a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as e:
        raise MetaPropertiesError(f"{text!r} is not base64: {e}") from None
    if len(raw) != 16 or set(text) - set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_="
    ):
        raise MetaPropertiesError(f"{text!r} does not decode to the 16 bytes of a UUID")
    return raw


def random_uuid() -> str:
    """Uuid.randomUuid().toString(): a v4 UUID, never reserved, never starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        s = uuid_to_str(raw)
        if raw not in _RESERVED and not s.startswith("-"):
            return s


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = 1

    def to_dict(self) -> dict[str, str]:
        out = {
            "version": str(self.version),
            "cluster.id": self.cluster_id,
            "node.id": str(self.node_id),
        }
        if self.directory_id is not None:
            out["directory.id"] = self.directory_id
        return out


def read_meta_properties(log_dir: str | Path) -> MetaProperties:
    path = Path(log_dir) / META_PROPERTIES
    props = load_properties(path)
    version = props.get("version")
    if version != "1":
        raise MetaPropertiesError(
            f"{path}: unsupported version {version!r} (only KRaft version 1 is supported)"
        )
    if "cluster.id" not in props:
        raise MetaPropertiesError(f"{path}: cluster.id was not found.")
    if "node.id" not in props:
        raise MetaPropertiesError(f"{path}: node.id was not found.")
    try:
        node_id = int(props["node.id"])
    except ValueError:
        raise MetaPropertiesError(
            f"{path}: node.id {props['node.id']!r} is not an integer"
        ) from None
    directory_id = props.get("directory.id")
    if directory_id is not None:
        try:
            parse_uuid(directory_id)
        except MetaPropertiesError as e:
            raise MetaPropertiesError(
                f"{path}: unable to read directory.id as a Uuid: {e}"
            ) from None
    return MetaProperties(props["cluster.id"], node_id, directory_id, 1)


def write_meta_properties(log_dir: str | Path, meta: MetaProperties, fsync: bool = True) -> Path:
    """Write atomically (temp file + rename), with the header Properties.store writes."""
    d = Path(log_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / META_PROPERTIES
    tmp = d / (META_PROPERTIES + ".tmp")
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    text = format_properties(meta.to_dict(), comments=("", stamp))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        dir_fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path
