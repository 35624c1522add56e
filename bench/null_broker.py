"""A broker that stores nothing: the upper bound a real broker's produce path is measured against.

Run with ``python -m bench.null_broker --port P --topic T --partitions N``. It answers ApiVersions,
Metadata (one topic, N partitions, itself as the leader of each) and Produce (success, offsets
counted per partition from the batch headers), and drops the records. Everything else closes the
connection. It uses our `protocol` package for decoding and encoding, one asyncio+uvloop process,
responses written synchronously from ``data_received`` (no task per request).
"""

import argparse
import asyncio
import signal
import uuid
from typing import Any, cast

import uvloop
from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.encoders.metadata import encode_metadata_response
from protocol.encoders.produce import encode_produce_rows, parse_produce_request
from protocol.framing import FrameDecoder, frame_size
from protocol.headers import encode_response_header, parse_request_header
from protocol.records import BatchView
from protocol.registry import REGISTRY, body_bytes, decode_body

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
NODE_ID = 0
CLUSTER_ID = "null-broker-cluster"
MAX_FRAME = 200 * 1024 * 1024


class NullState:
    def __init__(self, host: str, port: int, topic: str, partitions: int) -> None:
        self.host = host
        self.port = port
        self.topic = topic
        self.topic_id = uuid.uuid4()
        self.next_offset = [0] * partitions
        self.records = 0
        self.bytes = 0


def _header_version(key: int, version: int) -> int:
    return REGISTRY.request_header_version(key, version)


def _api_versions(version: int) -> Any:
    # Fetch is advertised but never served: librdkafka only writes v2 record batches to a
    # broker that lists Fetch v4+ as well as Produce v3+.
    served = ((PRODUCE, (3, 11)), (FETCH, (4, 12)), (METADATA, (0, 12)), (API_VERSIONS, (0, 4)))
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in served]
    return build(
        REGISTRY.spec(API_VERSIONS).response_type(version),
        {"error_code": ErrorCode.none, "api_keys": keys, "throttle_time": 0},
    )


def _metadata(state: NullState, version: int) -> Any:
    parts = [
        {
            "error_code": ErrorCode.none,
            "partition_index": i,
            "leader_id": NODE_ID,
            "leader_epoch": 0,
            "replica_nodes": [NODE_ID],
            "isr_nodes": [NODE_ID],
            "offline_replicas": (),
        }
        for i in range(len(state.next_offset))
    ]
    return build(
        REGISTRY.spec(METADATA).response_type(version),
        {
            "throttle_time": 0,
            "brokers": [{"node_id": NODE_ID, "host": state.host, "port": state.port}],
            "cluster_id": CLUSTER_ID,
            "controller_id": NODE_ID,
            "topics": [
                {
                    "error_code": ErrorCode.none,
                    "name": state.topic,
                    "topic_id": state.topic_id,
                    "is_internal": False,
                    "partitions": parts,
                    "topic_authorized_operations": -(2**31),
                }
            ],
            "cluster_authorized_operations": -(2**31),
        },
    )


def _produce(state: NullState, frame: memoryview, pos: int, version: int) -> bytes | None:
    req = parse_produce_request(frame, pos, version)
    topics: list[dict[str, Any]] = []
    for t in req.topics:
        rows: list[dict[str, Any]] = []
        for p in t.partitions:
            base = state.next_offset[p.index] if p.index < len(state.next_offset) else -1
            records = p.records
            if base < 0 or records is None:
                rows.append(
                    {
                        "index": p.index,
                        "error_code": ErrorCode.unknown_topic_or_partition,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                    }
                )
                continue
            # Walk the batch headers only: the offsets handed out match what a broker would assign.
            at, end, count = 0, len(records), 0
            while at < end:
                batch = BatchView(records, at)
                count += batch.last_offset_delta + 1
                at += batch.size
            state.next_offset[p.index] = base + count
            state.records += count
            state.bytes += end
            rows.append(
                {
                    "index": p.index,
                    "error_code": ErrorCode.none,
                    "base_offset": base,
                    "log_append_time": -1,
                    "log_start_offset": 0,
                }
            )
        topics.append({"name": t.name or "", "topic_id": t.topic_id, "partitions": rows})
    if req.acks == 0:
        return None
    return encode_produce_rows(topics, 0, version)


class NullConnection(asyncio.Protocol):
    def __init__(self, state: NullState) -> None:
        self.state = state
        self.decoder = FrameDecoder(MAX_FRAME)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        assert transport is not None
        for frame in self.decoder.feed(data):
            header, pos = parse_request_header(frame, _header_version)
            key, version = header.api_key, header.api_version
            body: bytes | None
            if key == PRODUCE:
                body = _produce(self.state, frame, pos, version)
            elif key == METADATA:
                body = encode_metadata_response(_metadata(self.state, version), version)
            elif key == API_VERSIONS:
                if version > 4:  # the client retries with the v0 answer's range
                    version = 0
                else:
                    decode_body(REGISTRY.spec(key).request_type(version), frame, pos, strict=False)
                body = body_bytes(_api_versions(version))
            else:
                transport.close()
                return
            if body is None:
                continue
            head = encode_response_header(
                header.correlation_id, REGISTRY.spec(key).response_header_version(version)
            )
            transport.writelines([frame_size((head, body)), head, body])


async def serve(host: str, port: int, topic: str, partitions: int) -> None:
    loop = asyncio.get_running_loop()
    states: list[NullState] = []  # filled once the port is known, before any client connects
    server = await loop.create_server(lambda: NullConnection(states[0]), host, port)
    bound = int(server.sockets[0].getsockname()[1])
    state = NullState(host, bound, topic, partitions)
    states.append(state)
    stop: asyncio.Future[None] = loop.create_future()

    def on_signal() -> None:
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    print(f"listening {bound}", flush=True)
    await stop
    server.close()
    print(f"records {state.records} bytes {state.bytes}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--topic", default="bench")
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(args.host, args.port, args.topic, args.partitions))


if __name__ == "__main__":
    main()
