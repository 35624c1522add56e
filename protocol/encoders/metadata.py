"""Metadata response body encoder (v0-v13), byte-identical to kio's writer.

Version differences (Kafka's MetadataResponse.json as kio 0.6.5 generates it): v1 adds broker
rack, controller_id and is_internal; v2 cluster_id; v3 throttle_time; v5 offline_replicas; v7
leader_epoch; v8 topic and cluster authorized operations; v9 goes flexible; v10 adds topic_id;
v11 drops cluster_authorized_operations; v12 makes the topic name nullable; v13 adds a top-level
error_code at the end. There are no tagged fields in any version.

Partitions dominate large responses, so each partition is packed with a single precompiled
struct chosen by its replica/ISR/offline list lengths (cached per shape).
"""

import operator
import struct
from collections.abc import Sequence
from typing import Any, Final

from .primitives import (
    BOOL,
    EMPTY_TAGS,
    I16,
    I32,
    compact_int32_array,
    compact_nullable_string,
    compact_string,
    legacy_nullable_string,
    legacy_string,
    millis,
    uuid_bytes,
    uvarint,
)

METADATA_API_KEY: Final = 3
MIN_VERSION: Final = 0
MAX_VERSION: Final = 13

# Partition layouts: which fields exist and how array lengths are written.
_LAYOUT_V0: Final = 0  # error_code, index, leader, replicas, isr (int32 lengths)
_LAYOUT_V5: Final = 1  # ... + offline_replicas
_LAYOUT_V7: Final = 2  # ... + leader_epoch after leader
_LAYOUT_FLEX: Final = 3  # v9+: compact lengths (one byte each here) and an empty tag section

_STRUCT_CACHE_LIMIT: Final = 4096
_partition_structs: dict[tuple[int, int, int, int], struct.Struct] = {}


def _partition_struct(layout: int, nr: int, ni: int, no: int) -> struct.Struct:
    key = (layout, nr, ni, no)
    s = _partition_structs.get(key)
    if s is None:
        if layout == _LAYOUT_FLEX:
            fmt = f">hiiiB{nr}iB{ni}iB{no}iB"
        elif layout == _LAYOUT_V7:
            fmt = f">hiiii{nr}ii{ni}ii{no}i"
        elif layout == _LAYOUT_V5:
            fmt = f">hiii{nr}ii{ni}ii{no}i"
        else:
            fmt = f">hiii{nr}ii{ni}i"
        s = struct.Struct(fmt)
        if len(_partition_structs) < _STRUCT_CACHE_LIMIT:
            _partition_structs[key] = s
    return s


# One C call instead of seven attribute lookups per partition.
_flex_partition_fields: Final = operator.attrgetter(
    "error_code",
    "partition_index",
    "leader_id",
    "leader_epoch",
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
)


def encode_metadata_response(resp: Any, version: int) -> bytes:
    """Encode a kio ``MetadataResponse`` body (no response header, no size prefix)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(
            f"Metadata response: version {version} outside {MIN_VERSION}-{MAX_VERSION}"
        )
    flexible = version >= 9
    out: list[bytes] = []
    put = out.append

    if version >= 3:
        put(I32.pack(millis(resp.throttle_time)))
    brokers = resp.brokers
    put(uvarint(len(brokers) + 1) if flexible else I32.pack(len(brokers)))
    for b in brokers:
        if flexible:
            put(I32.pack(b.node_id))
            put(compact_string(b.host))
            put(I32.pack(b.port))
            put(compact_nullable_string(b.rack))
            put(EMPTY_TAGS)
        else:
            put(I32.pack(b.node_id))
            put(legacy_string(b.host))
            put(I32.pack(b.port))
            if version >= 1:
                put(legacy_nullable_string(b.rack))
    if version >= 2:
        put(
            compact_nullable_string(resp.cluster_id)
            if flexible
            else legacy_nullable_string(resp.cluster_id)
        )
    if version >= 1:
        put(I32.pack(resp.controller_id))

    topics = resp.topics
    put(uvarint(len(topics) + 1) if flexible else I32.pack(len(topics)))
    if flexible:
        layout = _LAYOUT_FLEX
    elif version >= 7:
        layout = _LAYOUT_V7
    elif version >= 5:
        layout = _LAYOUT_V5
    else:
        layout = _LAYOUT_V0
    structs = _partition_structs
    for t in topics:
        put(I16.pack(t.error_code))
        if version >= 12:
            put(compact_nullable_string(t.name))
        elif flexible:
            put(compact_string(t.name))
        else:
            put(legacy_string(t.name))
        if version >= 10:
            put(uuid_bytes(t.topic_id))
        if version >= 1:
            put(BOOL.pack(t.is_internal))
        partitions = t.partitions
        put(uvarint(len(partitions) + 1) if flexible else I32.pack(len(partitions)))
        if layout == _LAYOUT_FLEX:
            for p in partitions:
                ec, index, leader, epoch, replicas, isr, offline = _flex_partition_fields(p)
                nr = len(replicas)
                ni = len(isr)
                no = len(offline)
                s = structs.get((_LAYOUT_FLEX, nr, ni, no))
                if s is None:
                    put(_encode_partition(p, layout))
                    continue
                put(
                    s.pack(
                        ec,
                        index,
                        leader,
                        epoch,
                        nr + 1,
                        *replicas,
                        ni + 1,
                        *isr,
                        no + 1,
                        *offline,
                        0,
                    )
                )
        else:
            for p in partitions:
                put(_encode_partition(p, layout))
        if version >= 8:
            put(I32.pack(t.topic_authorized_operations))
        if flexible:
            put(EMPTY_TAGS)

    if 8 <= version <= 10:
        put(I32.pack(resp.cluster_authorized_operations))
    if version >= 13:
        put(I16.pack(resp.error_code))
    if flexible:
        put(EMPTY_TAGS)
    return b"".join(out)


def _encode_partition(p: Any, layout: int) -> bytes:
    replicas: Sequence[int] = p.replica_nodes
    isr: Sequence[int] = p.isr_nodes
    nr = len(replicas)
    ni = len(isr)
    if layout == _LAYOUT_V0:
        s = _partition_struct(layout, nr, ni, 0)
        return s.pack(p.error_code, p.partition_index, p.leader_id, nr, *replicas, ni, *isr)
    offline: Sequence[int] = p.offline_replicas
    no = len(offline)
    if layout == _LAYOUT_V5:
        s = _partition_struct(layout, nr, ni, no)
        return s.pack(
            p.error_code, p.partition_index, p.leader_id, nr, *replicas, ni, *isr, no, *offline
        )
    if layout == _LAYOUT_V7:
        s = _partition_struct(layout, nr, ni, no)
        return s.pack(
            p.error_code,
            p.partition_index,
            p.leader_id,
            p.leader_epoch,
            nr,
            *replicas,
            ni,
            *isr,
            no,
            *offline,
        )
    if nr < 127 and ni < 127 and no < 127:
        # Every compact length fits one varint byte, so the whole partition is one struct.
        s = _partition_struct(layout, nr, ni, no)
        return s.pack(
            p.error_code,
            p.partition_index,
            p.leader_id,
            p.leader_epoch,
            nr + 1,
            *replicas,
            ni + 1,
            *isr,
            no + 1,
            *offline,
            0,
        )
    return b"".join(
        (
            struct.pack(">hiii", p.error_code, p.partition_index, p.leader_id, p.leader_epoch),
            compact_int32_array(replicas),
            compact_int32_array(isr),
            compact_int32_array(offline),
            EMPTY_TAGS,
        )
    )
