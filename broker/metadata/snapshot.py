"""Metadata snapshots of the image: the records that rebuild it, their encoding, its digest.

A snapshot holds what ``__cluster_metadata`` below its end offset adds up to, as metadata
records (Kafka's ``MetadataImage.write``): replaying them on an empty image gives back the
image, field for field. Order, as Kafka writes them: the feature levels first (a reader learns
``metadata.version`` before anything else), then brokers, topics with their partitions,
configs, the producer id block, ACLs, SCRAM credentials.

Each record comes with an offset: the image's offset, except a broker registration, which
carries the offset of its RegisterBrokerRecord (``BrokerImage.registered_offset``: the
broker is unfenced once it has caught up to it). A trailing NoOpRecord at the image's offset
keeps that offset when nothing else would end there.

Config values are written in their stored form: a value kept decoded in the image (secrets at
rest) is written as the log holds it (``encoded_configs``), one this node cannot decode as it
is (``unreadable_configs``). A snapshot never holds a decoded secret.

``image_digest`` hashes the same records (without the image's offset) in a canonical order:
two nodes with the same digest hold the same metadata, whatever their dicts' order, their
offsets or their ``password.encoder.secret``.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from collections.abc import Mapping
from typing import Any, Final

from protocol.errors import DecodeError
from protocol.metadata_records import (
    decode_metadata_record,
    encode_metadata_record,
    latest_type,
)

from .image import BrokerImage, Delta, MetadataImage, TopicImage

FORMAT_VERSION: Final = 0
_HEADER: Final = struct.Struct(">h")  # format version
_FRAME: Final = struct.Struct(">qi")  # record offset, record length

_FeatureLevel = latest_type("FeatureLevelRecord")
_RegisterBroker = latest_type("RegisterBrokerRecord")
_Endpoint = sys.modules[_RegisterBroker.__module__].BrokerEndpoint
_Feature = sys.modules[_RegisterBroker.__module__].BrokerFeature
_Topic = latest_type("TopicRecord")
_Partition = latest_type("PartitionRecord")
_Config = latest_type("ConfigRecord")
_ProducerIds = latest_type("ProducerIdsRecord")
_Acl = latest_type("AccessControlEntryRecord")
_Scram = latest_type("UserScramCredentialRecord")
_Quota = latest_type("ClientQuotaRecord")
_QuotaEntity = sys.modules[_Quota.__module__].EntityData
_NoOp = latest_type("NoOpRecord")

Entry = tuple[int, Any]  # (offset, metadata record)


def image_records(image: MetadataImage) -> list[Entry]:
    """The (offset, record) pairs that rebuild ``image`` from an empty one (``apply_records``)."""
    at = image.offset
    out: list[Entry] = [
        (at, _FeatureLevel(name=name, feature_level=level))
        for name, level in sorted(image.features.items())
    ]
    out.extend((b.registered_offset, _broker_record(b)) for _, b in sorted(image.brokers.items()))
    for name in sorted(image.topics):
        t = image.topics[name]
        out.append((at, _Topic(name=t.name, topic_id=t.topic_id)))
        out.extend((at, _partition_record(t, p)) for p in sorted(t.partitions))
    for (rtype, rname), values in sorted(_stored_configs(image).items()):
        for key, value in sorted(values.items()):
            out.append(
                (at, _Config(resource_type=rtype, resource_name=rname, name=key, value=value))
            )
    if image.next_producer_id:
        # as Kafka's snapshot writes it: the block's owner is no longer known
        out.append(
            (
                at,
                _ProducerIds(
                    broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id
                ),
            )
        )
    for acl_id, a in sorted(image.acls.items(), key=lambda kv: kv[0].bytes if kv[0] else b""):
        out.append(
            (
                at,
                _Acl(
                    id=acl_id,
                    resource_type=a.resource_type,
                    resource_name=a.resource_name,
                    pattern_type=a.pattern_type,
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                ),
            )
        )
    for (user, mechanism), c in sorted(image.scram.items()):
        out.append(
            (
                at,
                _Scram(
                    name=user,
                    mechanism=mechanism,
                    salt=c.salt,
                    stored_key=c.stored_key,
                    server_key=c.server_key,
                    iterations=c.iterations,
                ),
            )
        )
    for entity in sorted(image.client_quotas, key=_entity_order):
        parts = tuple(_QuotaEntity(entity_type=t, entity_name=n) for t, n in entity)
        for key, rate in sorted(image.client_quotas[entity].items()):
            out.append((at, _Quota(entity=parts, key=key, value=rate, remove=False)))
    if at >= 0 and (not out or out[-1][0] != at):
        out.append((at, _NoOp()))  # the image's offset is where the replay must end
    return out


def _entity_order(entity: tuple[tuple[str, str | None], ...]) -> list[tuple[str, bool, str]]:
    """Default entities (null names) first, then by name."""
    return [(t, n is not None, n or "") for t, n in entity]


def _broker_record(b: BrokerImage) -> Any:
    return _RegisterBroker(
        broker_id=b.broker_id,
        is_migrating_zk_broker=False,
        incarnation_id=b.incarnation_id,
        broker_epoch=b.epoch,
        end_points=tuple(
            _Endpoint(
                name=e.listener, host=e.host, port=e.port, security_protocol=e.security_protocol
            )
            for e in b.endpoints
        ),
        features=tuple(
            _Feature(name=n, min_supported_version=lo, max_supported_version=hi)
            for n, lo, hi in b.features
        ),
        rack=b.rack,
        fenced=b.fenced,
        in_controlled_shutdown=b.in_controlled_shutdown,
        log_dirs=(),
    )


def _partition_record(t: TopicImage, partition: int) -> Any:
    p = t.partitions[partition]
    return _Partition(
        partition_id=p.partition,
        topic_id=t.topic_id,
        replicas=p.replicas,
        isr=p.isr,
        removing_replicas=p.removing_replicas,
        adding_replicas=p.adding_replicas,
        leader=p.leader,
        leader_recovery_state=0,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        directories=(),
        eligible_leader_replicas=None,
        last_known_elr=None,
    )


def _stored_configs(image: MetadataImage) -> dict[tuple[int, str], dict[str, str]]:
    """Every config value as ``__cluster_metadata`` holds it."""
    out: dict[tuple[int, str], dict[str, str]] = {}
    for layer in (image.configs, image.encoded_configs, image.unreadable_configs):
        for resource, values in layer.items():
            out.setdefault(resource, {}).update(values)
    return out


# --- the snapshot's bytes -----------------------------------------------------------------------


def encode_snapshot(entries: list[Entry]) -> bytes:
    """The state a ``.checkpoint`` file stores: a format version, then (offset, length,
    framed metadata record) for each entry."""
    parts = [_HEADER.pack(FORMAT_VERSION)]
    for offset, record in entries:
        payload = encode_metadata_record(record)
        parts.append(_FRAME.pack(offset, len(payload)))
        parts.append(payload)
    return b"".join(parts)


def decode_snapshot(data: bytes) -> list[Entry]:
    """``encode_snapshot``'s entries back; ``DecodeError`` on anything else."""
    if len(data) < _HEADER.size:
        raise DecodeError("metadata snapshot shorter than its header")
    (version,) = _HEADER.unpack_from(data, 0)
    if version != FORMAT_VERSION:
        raise DecodeError(f"metadata snapshot format {version} is not supported")
    view = memoryview(data)
    pos, out = _HEADER.size, []
    while pos < len(data):
        if pos + _FRAME.size > len(data):
            raise DecodeError(f"metadata snapshot truncated at byte {pos}")
        offset, size = _FRAME.unpack_from(data, pos)
        pos += _FRAME.size
        if size < 0 or pos + size > len(data):
            raise DecodeError(f"metadata snapshot record of {size} bytes at byte {pos} truncated")
        out.append((offset, decode_metadata_record(view[pos : pos + size])))
        pos += size
    return out


_KEY: Final = struct.Struct(">q")  # a snapshot record's key: the entry's metadata log offset


class RecordsCodec:
    """``encode_snapshot``'s state as one ``.checkpoint`` record per metadata record, as Kafka
    writes snapshots (its ``kafka-dump-log.sh --cluster-metadata-decoder`` reads them): the value
    is the framed metadata record, the key the offset the image needs it at (Kafka leaves the
    key null; readers of the value ignore it)."""

    def split(self, data: bytes) -> list[tuple[bytes | None, bytes]] | None:
        if len(data) < _HEADER.size or _HEADER.unpack_from(data, 0)[0] != FORMAT_VERSION:
            return None
        out: list[tuple[bytes | None, bytes]] = []
        pos = _HEADER.size
        while pos < len(data):
            if pos + _FRAME.size > len(data):
                return None
            offset, size = _FRAME.unpack_from(data, pos)
            pos += _FRAME.size
            if size < 0 or pos + size > len(data):
                return None
            out.append((_KEY.pack(offset), data[pos : pos + size]))
            pos += size
        return out

    def join(self, records: list[tuple[bytes | None, bytes]]) -> bytes:
        parts = [_HEADER.pack(FORMAT_VERSION)]
        for key, value in records:
            offset = _KEY.unpack(key)[0] if key is not None and len(key) == _KEY.size else -1
            parts.append(_FRAME.pack(offset, len(value)))
            parts.append(value)
        return b"".join(parts)


# --- the digest ---------------------------------------------------------------------------------


def records_digest(entries: list[Entry]) -> str:
    """The digest of ``image_records``' output (what ``image_digest`` computes)."""
    h = hashlib.sha256(b"kmirror-metadata-image-v1")
    for offset, record in entries:
        if isinstance(record, _NoOp):
            continue
        payload = encode_metadata_record(record)
        # the only offset that is content: where a broker registered
        where = offset if isinstance(record, _RegisterBroker) else -1
        h.update(_FRAME.pack(where, len(payload)))
        h.update(payload)
    return h.hexdigest()


_last: tuple[MetadataImage, str] | None = None  # images are immutable: one digest per image


def image_digest(image: MetadataImage) -> str:
    """A hex digest of the image's content, independent of its offset and of dict order."""
    global _last
    last = _last
    if last is not None and last[0] is image:
        return last[1]
    digest = records_digest(image_records(image))
    _last = (image, digest)
    return digest


def image_info(image: MetadataImage) -> tuple[str, int]:
    """(digest, offset): the ``kmirror_metadata_image_info`` labels."""
    return image_digest(image), image.offset


# --- reacting to a snapshot -------------------------------------------------------------------


def snapshot_delta(old: MetadataImage, new: MetadataImage) -> Delta:
    """What a node must act on when a snapshot replaces ``old`` with ``new`` (Kafka's loader
    diffs the two images the same way: what the snapshot lacks is gone)."""
    d = Delta()
    for name, t in old.topics.items():
        n = new.topics.get(name)
        if n is None or n.topic_id != t.topic_id:
            d.deleted_topics.append(t)
    for name, t in sorted(new.topics.items()):
        o = old.topics.get(name)
        same = o is not None and o.topic_id == t.topic_id
        if not same:
            d.created_topics.append(name)
        for p, part in sorted(t.partitions.items()):
            if not same or o is None or o.partitions.get(p) != part:
                d.changed_partitions.append((name, p))
    old_stored, new_stored = _stored_configs(old), _stored_configs(new)
    for key in sorted(set(old_stored) | set(new_stored)):
        if old_stored.get(key) != new_stored.get(key) or old.config(*key) != new.config(*key):
            d.changed_configs.append(key)
    d.brokers_changed = _differ(old.brokers, new.brokers)
    d.acls_changed = _differ(old.acls, new.acls)
    return d


def _differ(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> bool:
    return dict(a) != dict(b)
