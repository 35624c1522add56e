"""A one-node stand-in Kafka broker that answers just enough for stock clients.

It exists to capture the request frames real clients write, so it keeps every frame
it receives (the bytes after the 4-byte size prefix) in arrival order. Responses are
built from kio's schema types; request headers are parsed here by hand so that a
frame kio cannot read is still recorded.
"""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from protocol.build import build

NODE_ID = 0
CLUSTER_ID = "golden-cluster"
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INT32_MIN = -(2**31)
# Long polls are capped so scenarios stay short; clients simply poll again.
MAX_FETCH_WAIT_S = 0.2


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header occupies at the start of the frame


@dataclass(frozen=True, slots=True)
class CapturedFrame:
    connection: int
    frame: bytes
    header: RequestHeader


def _read_uvarint(buf: bytes, off: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[off]
        off += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, off
        shift += 7


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether the request uses header v2 (tagged fields)."""
    try:
        return bool(load_request_schema(api_key, api_version).__flexible__)
    except Exception:
        # Only ApiVersions may arrive at a version we do not know; v3+ is flexible.
        return api_key == 18 and api_version >= 3


def parse_request_header(frame: bytes) -> RequestHeader:
    api_key, api_version, correlation_id, id_len = struct.unpack_from(">hhih", frame, 0)
    off = 10
    client_id = None
    if id_len >= 0:
        client_id = frame[off : off + id_len].decode()
        off += id_len
    if is_flexible(api_key, api_version):
        count, off = _read_uvarint(frame, off)
        for _ in range(count):
            _tag, off = _read_uvarint(frame, off)
            length, off = _read_uvarint(frame, off)
            off += length
    return RequestHeader(api_key, api_version, correlation_id, client_id, off)


def kio_version_range(api_key: int) -> tuple[int, int]:
    versions = schema_name_map[api_key_map[api_key]]
    return min(versions), max(versions)


def _topic_id(name: str) -> uuid.UUID:
    # Deterministic so re-running the capture produces the same ids in requests.
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kmirror-golden/{name}")


def _batches(records: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each v2 record batch in a produce payload."""
    off = 0
    while off + 12 <= len(records):
        (length,) = struct.unpack_from(">i", records, off + 8)
        yield off, off + 12 + length
        off += 12 + length


@dataclass
class _Group:
    generation: int = 0
    assignments: dict[str, bytes] = field(default_factory=dict)


@dataclass
class _State:
    topics: dict[str, int] = field(default_factory=dict)  # name -> partition count
    logs: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    hwm: dict[tuple[str, int], int] = field(default_factory=dict)
    groups: dict[str, _Group] = field(default_factory=dict)
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    next_producer_id: int = 4000
    next_member: int = 0


Handler = Callable[[Any, int, RequestHeader], dict[str, Any] | None]


class FakeBroker:
    """Threaded loopback server; one instance per capture scenario."""

    def __init__(self, partitions: dict[str, int] | None = None) -> None:
        self._default_partitions = dict(partitions or {})
        self._state = _State()
        self._lock = threading.Lock()
        self.frames: list[CapturedFrame] = []
        self.unhandled: list[RequestHeader] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._closing = False
        self._handlers: dict[int, Handler] = {
            0: self._produce,
            1: self._fetch,
            2: self._list_offsets,
            3: self._metadata,
            8: self._offset_commit,
            9: self._offset_fetch,
            10: self._find_coordinator,
            11: self._join_group,
            12: self._heartbeat,
            13: self._leave_group,
            14: self._sync_group,
            18: self._api_versions,
            19: self._create_topics,
            22: self._init_producer_id,
            32: self._describe_configs,
        }
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeBroker:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing = True
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    # -- seeding -----------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> None:
        with self._lock:
            self._ensure_topic(name, partitions)

    def seed(self, topic: str, partition: int, batch: bytes) -> None:
        """Append an already-built record batch (base offset is rewritten)."""
        with self._lock:
            self._append(topic, partition, batch)

    # -- networking --------------------------------------------------------------

    def _accept_loop(self) -> None:
        conn_no = 0
        while not self._closing:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn, conn_no), daemon=True).start()
            conn_no += 1

    @staticmethod
    def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = conn.recv(n - len(chunks))
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def _serve(self, conn: socket.socket, conn_no: int) -> None:
        try:
            while True:
                size_bytes = self._recv_exact(conn, 4)
                if size_bytes is None:
                    return
                frame = self._recv_exact(conn, struct.unpack(">i", size_bytes)[0])
                if frame is None:
                    return
                header = parse_request_header(frame)
                with self._lock:
                    self.frames.append(CapturedFrame(conn_no, frame, header))
                response = self._respond(frame, header)
                if response is None:
                    if header.api_key == 0:
                        continue  # acks=0 produce: no response by design
                    return
                conn.sendall(struct.pack(">i", len(response)) + response)
        except OSError:
            return
        finally:
            conn.close()

    def _respond(self, frame: bytes, header: RequestHeader) -> bytes | None:
        handler = self._handlers.get(header.api_key)
        if handler is None:
            self._unhandled(header)
            return None
        low, high = kio_version_range(header.api_key)
        if not low <= header.api_version <= high:
            if header.api_key == 18:
                return self._encode(18, 0, header.correlation_id, self._versions_body(35))
            self._unhandled(header)
            return None
        request_type = load_request_schema(header.api_key, header.api_version)
        body, _ = entity_reader(request_type)(frame, header.size)
        data = handler(body, header.api_version, header)
        if data is None:
            return None
        return self._encode(header.api_key, header.api_version, header.correlation_id, data)

    def _unhandled(self, header: RequestHeader) -> None:
        print(f"fake broker: no answer for {header}", file=sys.stderr)
        with self._lock:
            self.unhandled.append(header)

    @staticmethod
    def _encode(api_key: int, version: int, correlation_id: int, data: dict[str, Any]) -> bytes:
        response_type = load_response_schema(api_key, version)
        # kio pins ApiVersions responses to header v0, as the protocol requires.
        header_type = response_type.__header_schema__
        buf = io.BytesIO()
        entity_writer(header_type)(buf, header_type(correlation_id=i32(correlation_id)))
        entity_writer(response_type)(buf, build(response_type, data))
        return buf.getvalue()

    # -- state helpers (call with the lock held) -----------------------------------

    def _ensure_topic(self, name: str, partitions: int | None = None) -> int:
        if name not in self._state.topics:
            count = partitions or self._default_partitions.get(name, 1)
            self._state.topics[name] = count
            for p in range(count):
                self._state.logs[(name, p)] = []
                self._state.hwm[(name, p)] = 0
        return self._state.topics[name]

    def _name_of(self, topic_id: uuid.UUID) -> str:
        for name in self._state.topics:
            if _topic_id(name) == topic_id:
                return name
        raise KeyError(topic_id)

    def _resolve(self, entry: Any) -> str:
        name = getattr(entry, "name", None) or getattr(entry, "topic", None)
        if name:
            return str(name)
        return self._name_of(entry.topic_id)

    def _append(self, topic: str, partition: int, records: bytes) -> int:
        key = (topic, partition)
        first = self._state.hwm[key]
        for start, end in _batches(records):
            batch = bytearray(records[start:end])
            (last_delta,) = struct.unpack_from(">i", batch, 23)
            # Base offset sits outside the CRC, so rewriting it keeps the batch valid.
            struct.pack_into(">q", batch, 0, self._state.hwm[key])
            self._state.logs[key].append(bytes(batch))
            self._state.hwm[key] += last_delta + 1
        return first

    # -- handlers ------------------------------------------------------------------

    def _versions_body(self, error: int) -> dict[str, Any]:
        keys = []
        for api_key in sorted(self._handlers):
            low, high = kio_version_range(api_key)
            keys.append({"api_key": api_key, "min_version": low, "max_version": high})
        return {"error_code": error, "api_keys": keys, "throttle_time": 0}

    def _api_versions(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        return self._versions_body(0)

    def _broker_entry(self) -> dict[str, Any]:
        return {"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port, "rack": None}

    def _topic_metadata(self, name: str) -> dict[str, Any]:
        parts = [
            {
                "error_code": 0,
                "partition_index": p,
                "leader_id": NODE_ID,
                "leader_epoch": 0,
                "replica_nodes": [NODE_ID],
                "isr_nodes": [NODE_ID],
                "offline_replicas": [],
            }
            for p in range(self._state.topics[name])
        ]
        return {
            "error_code": 0,
            "name": name,
            "topic_id": _topic_id(name),
            "is_internal": False,
            "partitions": parts,
            "topic_authorized_operations": INT32_MIN,
        }

    def _metadata(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        with self._lock:
            if body.topics is None:
                names: Iterable[str] = list(self._state.topics)
            else:
                names = []
                for t in body.topics:
                    name = t.name if t.name else self._name_of(t.topic_id)
                    self._ensure_topic(name)
                    names.append(name)
            topics = [self._topic_metadata(n) for n in names]
        return {
            "throttle_time": 0,
            "brokers": [self._broker_entry()],
            "cluster_id": CLUSTER_ID,
            "controller_id": NODE_ID,
            "topics": topics,
            "cluster_authorized_operations": INT32_MIN,
            "error_code": 0,
        }

    def _produce(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any] | None:
        responses = []
        with self._lock:
            for t in body.topic_data:
                name = self._resolve(t)
                self._ensure_topic(name)
                parts = []
                for p in t.partition_data:
                    base = self._append(name, p.index, bytes(p.records or b""))
                    parts.append(
                        {
                            "index": p.index,
                            "error_code": 0,
                            "base_offset": base,
                            "log_append_time": None,
                            "log_start_offset": 0,
                            "record_errors": [],
                            "error_message": None,
                        }
                    )
                responses.append(
                    {"name": name, "topic_id": _topic_id(name), "partition_responses": parts}
                )
        if body.acks == 0:
            return None
        return {"responses": responses, "throttle_time": 0}

    def _fetch(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        def collect() -> tuple[list[dict[str, Any]], bool]:
            any_data = False
            out = []
            with self._lock:
                for t in body.topics:
                    name = self._resolve(t)
                    parts = []
                    for p in t.partitions:
                        key = (name, p.partition)
                        chunks: list[bytes] = []
                        size = 0
                        offset = 0
                        for batch in self._state.logs.get(key, []):
                            (last_delta,) = struct.unpack_from(">i", batch, 23)
                            if offset + last_delta >= p.fetch_offset and (
                                not chunks or size + len(batch) <= p.partition_max_bytes
                            ):
                                chunks.append(batch)
                                size += len(batch)
                            offset += last_delta + 1
                        any_data = any_data or bool(chunks)
                        hwm = self._state.hwm.get(key, 0)
                        parts.append(
                            {
                                "partition_index": p.partition,
                                "error_code": 0,
                                "high_watermark": hwm,
                                "last_stable_offset": hwm,
                                "log_start_offset": 0,
                                "aborted_transactions": [],
                                "preferred_read_replica": -1,
                                "records": b"".join(chunks),
                            }
                        )
                    out.append(
                        {
                            "topic": name,
                            "topic_id": _topic_id(name),
                            "partitions": parts,
                        }
                    )
            return out, any_data

        responses, any_data = collect()
        if not any_data:
            wait = body.max_wait.total_seconds()
            time.sleep(min(wait, MAX_FETCH_WAIT_S))
        return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}

    def _list_offsets(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        topics = []
        with self._lock:
            for t in body.topics:
                parts = []
                for p in t.partitions:
                    latest = self._state.hwm.get((t.name, p.partition_index), 0)
                    offset = latest if p.timestamp == -1 else 0
                    parts.append(
                        {
                            "partition_index": p.partition_index,
                            "error_code": 0,
                            "timestamp": -1,
                            "offset": offset,
                            "leader_epoch": 0,
                        }
                    )
                topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time": 0, "topics": topics}

    def _find_coordinator(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        me = {
            "node_id": NODE_ID,
            "host": "127.0.0.1",
            "port": self.port,
            "error_code": 0,
            "error_message": None,
        }
        keys = getattr(body, "coordinator_keys", None) or [getattr(body, "key", "")]
        return {"throttle_time": 0, **me, "coordinators": [{"key": k, **me} for k in keys]}

    def _join_group(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        with self._lock:
            group = self._state.groups.setdefault(body.group_id, _Group())
            member_id = body.member_id
            if not member_id:
                member_id = f"{h.client_id}-{self._state.next_member}"
                self._state.next_member += 1
            group.generation += 1
            generation = group.generation
        protocol = body.protocols[0]
        # A single member per scenario, so every join completes at once with it as leader.
        return {
            "throttle_time": 0,
            "error_code": 0,
            "generation_id": generation,
            "protocol_type": getattr(body, "protocol_type", "consumer"),
            "protocol_name": protocol.name,
            "leader": member_id,
            "skip_assignment": False,
            "member_id": member_id,
            "members": [
                {
                    "member_id": member_id,
                    "group_instance_id": getattr(body, "group_instance_id", None),
                    "metadata": protocol.metadata,
                }
            ],
        }

    def _sync_group(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        with self._lock:
            group = self._state.groups.setdefault(body.group_id, _Group())
            for a in body.assignments:
                group.assignments[a.member_id] = bytes(a.assignment)
            assignment = group.assignments.get(body.member_id, b"")
        return {
            "throttle_time": 0,
            "error_code": 0,
            "protocol_type": getattr(body, "protocol_type", None),
            "protocol_name": getattr(body, "protocol_name", None),
            "assignment": assignment,
        }

    def _heartbeat(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": 0}

    def _leave_group(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        members = [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": 0}
            for m in getattr(body, "members", ())
        ]
        return {"throttle_time": 0, "error_code": 0, "members": members}

    def _offset_commit(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        topics = []
        with self._lock:
            for t in body.topics:
                name = self._resolve(t)
                for p in t.partitions:
                    self._state.committed[(body.group_id, name, p.partition_index)] = (
                        p.committed_offset
                    )
                topics.append(
                    {
                        "name": name,
                        "topic_id": _topic_id(name),
                        "partitions": [
                            {"partition_index": p.partition_index, "error_code": 0}
                            for p in t.partitions
                        ],
                    }
                )
        return {"throttle_time": 0, "topics": topics}

    def _committed_topics(self, group_id: str, requested: Any) -> list[dict[str, Any]]:
        wanted: dict[str, list[int]] = {}
        if requested is None:
            for g, name, part in self._state.committed:
                if g == group_id:
                    wanted.setdefault(name, []).append(part)
        else:
            for t in requested:
                wanted[self._resolve(t)] = list(t.partition_indexes)
        return [
            {
                "name": name,
                "topic_id": _topic_id(name),
                "partitions": [
                    {
                        "partition_index": part,
                        "committed_offset": self._state.committed.get((group_id, name, part), -1),
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": 0,
                    }
                    for part in parts
                ],
            }
            for name, parts in wanted.items()
        ]

    def _offset_fetch(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        with self._lock:
            if hasattr(body, "groups"):
                groups = [
                    {
                        "group_id": g.group_id,
                        "topics": self._committed_topics(g.group_id, g.topics),
                        "error_code": 0,
                    }
                    for g in body.groups
                ]
                return {"throttle_time": 0, "groups": groups}
            topics = self._committed_topics(body.group_id, body.topics)
        return {"throttle_time": 0, "topics": topics, "error_code": 0}

    def _create_topics(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        results = []
        with self._lock:
            for t in body.topics:
                count = t.num_partitions if t.num_partitions > 0 else 1
                exists = t.name in self._state.topics
                if not exists and not body.validate_only:
                    self._ensure_topic(t.name, count)
                results.append(
                    {
                        "name": t.name,
                        "topic_id": _topic_id(t.name),
                        "error_code": TOPIC_ALREADY_EXISTS if exists else 0,
                        "error_message": None,
                        "num_partitions": count,
                        "replication_factor": 1,
                        "configs": [],
                    }
                )
        return {"throttle_time": 0, "topics": results}

    def _describe_configs(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        defaults = {
            "cleanup.policy": "delete",
            "retention.ms": "604800000",
            "compression.type": "producer",
        }
        results = []
        for r in body.resources:
            keys = defaults if r.configuration_keys is None else r.configuration_keys
            configs: list[dict[str, Any]] = [
                {
                    "name": k,
                    "value": defaults.get(k),
                    "read_only": False,
                    "config_source": 5,  # DEFAULT_CONFIG
                    "is_default": True,
                    "is_sensitive": False,
                    "synonyms": [],
                    "config_type": 2,  # STRING
                    "documentation": None,
                }
                for k in keys
            ]
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                    "configs": configs,
                }
            )
        return {"throttle_time": 0, "results": results}

    def _init_producer_id(self, body: Any, version: int, h: RequestHeader) -> dict[str, Any]:
        with self._lock:
            pid = self._state.next_producer_id
            self._state.next_producer_id += 1
        return {
            "throttle_time": 0,
            "error_code": 0,
            "producer_id": pid,
            "producer_epoch": 0,
            "ongoing_txn_producer_id": -1,
            "ongoing_txn_producer_epoch": -1,
        }
