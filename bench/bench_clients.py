"""The client-side processes `bench.broker_bench` starts: stock Kafka clients and raw-copy baselines.

Run as ``python -m bench.bench_clients <role> ...``. Every role prints one JSON line with what it
measured (servers first print ``listening <port>``), so the orchestrator only parses stdout.
Clients time themselves after a warm-up (connection and metadata), so start-up is not measured.

Roles:
  produce      confluent-kafka producer, for a time budget (--seconds) or a volume (--bytes)
  consume      confluent-kafka consumer reading --records records from offset 0
  file-sink    accepts one connection, writes everything to --path, answers one byte at EOF
  raw-send     writes --bytes to a file-sink in 1 MiB chunks, times until the sink's answer
  discard-sink accepts one connection, drops everything, times from accept to EOF
  file-send    reads --path and sends it to a discard-sink
"""

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from typing import Any

MiB = 1 << 20


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def produce(args: argparse.Namespace) -> None:
    from confluent_kafka import KafkaError, Message, Producer

    delivered = 0
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        elif len(errors) < 5:
            errors.append(str(err))

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "acks": 1,
        "linger.ms": args.linger_ms,
        "compression.type": "none",
        "on_delivery": on_delivery,
    }
    if args.batch_size:
        conf["batch.size"] = args.batch_size
    if args.max_request:
        conf["message.max.bytes"] = args.max_request
    producer = Producer(conf)
    value = os.urandom(args.record_size)
    producer.produce(args.topic, value)  # warm-up: connection, metadata, first batch
    if producer.flush(30) != 0 or errors:
        _emit(error=f"warm-up failed: {errors or 'timeout'}")
        return
    delivered = 0
    target_records = args.bytes // args.record_size if args.bytes else 0
    sent = 0
    start = time.perf_counter()
    deadline = start + args.seconds
    while True:
        if target_records:
            if sent >= target_records:
                break
        elif time.perf_counter() >= deadline:
            break
        for _ in range(min(1000, target_records - sent) if target_records else 1000):
            while True:
                try:
                    producer.produce(args.topic, value)
                    break
                except BufferError:
                    producer.poll(0.001)  # local queue full: let deliveries drain it
            sent += 1
        producer.poll(0)
    left = producer.flush(60)
    elapsed = time.perf_counter() - start
    _emit(
        records=delivered,
        bytes=delivered * args.record_size,
        seconds=elapsed,
        sent=sent,
        unflushed=left,
        errors=errors,
    )


def consume(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"bench-{os.getpid()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": args.fetch_max_bytes,
            "max.partition.fetch.bytes": args.partition_fetch_bytes,
        }
    )
    consumer.list_topics(args.topic, timeout=30)  # warm-up: connection and metadata
    records = 0
    nbytes = 0
    start = time.perf_counter()
    deadline = start + args.timeout
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    error = None
    while records < args.records and time.perf_counter() < deadline:
        # Never ask for more than is left: consume() waits for the count or the timeout.
        for msg in consumer.consume(num_messages=min(1000, args.records - records), timeout=1.0):
            err = msg.error()
            if err is not None:
                error = str(err)
                continue
            records += 1
            nbytes += len(msg.value() or b"")
    elapsed = time.perf_counter() - start
    consumer.close()
    _emit(records=records, bytes=nbytes, seconds=elapsed, error=error)


def _listen() -> socket.socket:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    print(f"listening {srv.getsockname()[1]}", flush=True)
    return srv


class _FileSink(asyncio.Protocol):
    def __init__(self, fd: int, done: "asyncio.Future[int]") -> None:
        self.fd = fd
        self.done = done
        self.total = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        os.write(self.fd, data)
        self.total += len(data)

    def eof_received(self) -> bool:
        assert self.transport is not None
        self.transport.write(b"\x01")  # everything is in the file (page cache, as a broker's)
        self.transport.close()
        if not self.done.done():
            self.done.set_result(self.total)
        return False


def file_sink(args: argparse.Namespace) -> None:
    import uvloop

    async def run() -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        fd = os.open(args.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        srv = _listen()
        server = await loop.create_server(lambda: _FileSink(fd, done), sock=srv)
        try:
            return await asyncio.wait_for(done, args.timeout)
        finally:
            server.close()
            os.close(fd)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        total = runner.run(run())
    _emit(bytes=total)


def raw_send(args: argparse.Namespace) -> None:
    chunk = os.urandom(MiB)
    view = memoryview(chunk)
    with socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout) as sock:
        start = time.perf_counter()
        left = args.bytes
        while left > 0:
            n = min(left, MiB)
            sock.sendall(view[:n])
            left -= n
        sock.shutdown(socket.SHUT_WR)
        ack = sock.recv(1)
        elapsed = time.perf_counter() - start
    _emit(bytes=args.bytes, seconds=elapsed, acked=ack == b"\x01")


def discard_sink(args: argparse.Namespace) -> None:
    srv = _listen()
    srv.settimeout(args.timeout)
    conn, _ = srv.accept()
    start = time.perf_counter()
    buf = bytearray(MiB)
    total = 0
    with conn:
        conn.settimeout(args.timeout)
        while n := conn.recv_into(buf):
            total += n
    elapsed = time.perf_counter() - start
    srv.close()
    _emit(bytes=total, seconds=elapsed)


def file_send(args: argparse.Namespace) -> None:
    buf = bytearray(MiB)
    with (
        open(args.path, "rb", buffering=0) as f,
        socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout) as sock,
    ):
        while n := f.readinto(buf):
            sock.sendall(memoryview(buf)[:n])
    _emit(sent=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="role", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--bytes", type=int, default=0, help="a volume instead of a time budget")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=0)
    p.add_argument("--max-request", type=int, default=0)
    p.set_defaults(fn=produce)
    p = sub.add_parser("consume")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--fetch-max-bytes", type=int, default=52428800)
    p.add_argument("--partition-fetch-bytes", type=int, default=1048576)
    p.add_argument("--timeout", type=float, default=60.0)
    p.set_defaults(fn=consume)
    for role, fn in (("file-sink", file_sink), ("discard-sink", discard_sink)):
        p = sub.add_parser(role)
        p.add_argument("--path", default=os.devnull)
        p.add_argument("--timeout", type=float, default=60.0)
        p.set_defaults(fn=fn)
    p = sub.add_parser("raw-send")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bytes", type=int, required=True)
    p.add_argument("--timeout", type=float, default=60.0)
    p.set_defaults(fn=raw_send)
    p = sub.add_parser("file-send")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--timeout", type=float, default=60.0)
    p.set_defaults(fn=file_send)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main(sys.argv[1:])
