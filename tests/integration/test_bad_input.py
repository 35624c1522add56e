"""Bad input against a real node: each case gets a clear error (or its connection closed) while a
stock client keeps producing and reading metadata on other connections."""

import contextlib
import json
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from .clients import create_topic, wait_for
from .node import ROOT, Node

MAX_REQUEST = 1024 * 1024
GOLDEN = ROOT / "tests" / "golden"
HEALTH_TOPIC = "health"
FUZZ_SECONDS = 15.0
# A 5-byte varint of 2**31 or more: read as a compact array count, kio's native reader
# reserves count * 8 bytes up front and the allocation failure aborts the whole process.

INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
INVALID_TOPIC_EXCEPTION = 17
INVALID_CONFIG = 40


# -- a stock client working in parallel -------------------------------------------------------


class Health:
    """A confluent producer + admin on their own connections, producing and reading metadata in a
    loop. Every case asserts the loop still makes progress afterwards and never failed."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.ok = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._round_errors: list[Any] = []
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._round_errors.append(err)

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0})
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        i = 0
        while not self._stop.is_set():
            try:
                self._round_errors.clear()
                producer.produce(HEALTH_TOPIC, value=b"ping-%d" % i, on_delivery=self._delivered)
                left = producer.flush(10)
                md = admin.list_topics(timeout=10)
                if left or self._round_errors:
                    raise RuntimeError(f"produce failed: {self._round_errors or 'timed out'}")
                if HEALTH_TOPIC not in md.topics or 1 not in md.brokers:
                    raise RuntimeError(f"bad metadata: {md.topics}, {md.brokers}")
                with self._lock:
                    self.ok += 1
            except Exception as e:  # recorded, asserted on by the test thread
                with self._lock:
                    self.errors.append(repr(e))
            i += 1
            self._stop.wait(0.05)

    def check(self, what: str, timeout: float = 20.0) -> None:
        """The parallel client works (two more full rounds) and never failed so far."""
        with self._lock:
            base = self.ok

        def progress_or_error() -> bool:
            with self._lock:
                return self.ok >= base + 2 or bool(self.errors)

        wait_for(progress_or_error, timeout, f"the parallel client to go on after {what}")
        with self._lock:
            assert not self.errors, f"after {what}: the parallel client failed: {self.errors}"
            assert self.ok >= base + 2, f"after {what}: the parallel client made no progress"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(
        tmp_path_factory.mktemp("bad_input") / "n",
        socket__request__max__bytes=str(MAX_REQUEST),
    )
    n.start()
    admin = AdminClient({"bootstrap.servers": n.bootstrap})
    for f in admin.create_topics([NewTopic(HEALTH_TOPIC, 1, 1)], request_timeout=10).values():
        f.result(15)
    yield n
    n.kill()


@pytest.fixture(scope="module")
def health(node: Node) -> Iterator[Health]:
    h = Health(node.bootstrap)
    h.start()
    h.check("start-up")
    yield h
    h.stop()


def _alive(node: Node) -> None:
    assert node.proc is not None and node.proc.poll() is None, f"node died:\n{node.log_tail()}"


# -- raw Kafka framing ------------------------------------------------------------------------


def request(
    api_key: int, version: int, corr: int, body: bytes = b"", flexible: bool = False
) -> bytes:
    """A request payload: header v1 (v2 with an empty tagged-field section when flexible)."""
    cid = b"bad-input"
    head = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid
    return head + (b"\x00" if flexible else b"") + body


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def connect(node: Node) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", node.port), timeout=5)
    s.settimeout(5)
    return s


def read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame(sock: socket.socket) -> bytes | None:
    """One response payload, or None when the server closed the connection."""
    size = read_exact(sock, 4)
    if size is None:
        return None
    (n,) = struct.unpack(">i", size)
    return read_exact(sock, n)


def assert_closed(sock: socket.socket, what: str, timeout: float = 5.0) -> None:
    """The server closes the connection (within timeout) without sending anything."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        data = b""
    except TimeoutError:
        raise AssertionError(f"{what}: the connection was not closed within {timeout}s") from None
    assert data == b"", f"{what}: expected a close, got {data[:64]!r}"


def api_versions_v0(sock: socket.socket, corr: int) -> dict[int, tuple[int, int]]:
    sock.sendall(framed(request(18, 0, corr)))
    resp = read_frame(sock)
    assert resp is not None, "ApiVersions v0 got no answer"
    got_corr, error, apis = parse_api_versions_v0(resp)
    assert got_corr == corr and error == 0
    return apis


def parse_api_versions_v0(resp: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """Response header v0 (correlation id) + ApiVersions v0 body, by hand."""
    corr, error, n = struct.unpack_from(">ihi", resp, 0)
    pos = 10
    apis = {}
    for _ in range(n):
        key, lo, hi = struct.unpack_from(">hhh", resp, pos)
        apis[key] = (lo, hi)
        pos += 6
    assert pos == len(resp), f"{len(resp) - pos} trailing bytes in ApiVersions v0 response"
    return corr, error, apis


# -- framing-level garbage ----------------------------------------------------------------------


def test_random_bytes_close_the_connection(node: Node, health: Health) -> None:
    rng = random.Random(1279)
    for i in range(5):
        junk = bytearray(rng.randbytes(4096))
        # Half the cases: a size prefix that fits, so the junk reaches the header parser.
        if i % 2:
            junk[0:4] = struct.pack(">i", len(junk) - 4)
        with connect(node) as s:
            s.sendall(bytes(junk))
            s.shutdown(socket.SHUT_WR)
            # Either closed at once, or (size fits, header unparseable / unknown api) after it.
            sock_data = b""
            s.settimeout(5)
            try:
                while chunk := s.recv(65536):
                    sock_data += chunk
            except ConnectionResetError:
                pass
            except TimeoutError:
                raise AssertionError(f"random bytes #{i}: connection left open") from None
            assert sock_data == b"", f"random bytes #{i}: unexpected answer {sock_data[:40]!r}"
    _alive(node)
    health.check("random bytes")


def test_truncated_frame_then_close(node: Node, health: Health) -> None:
    payload = request(3, 12, 1, b"\x00\x00", flexible=True)
    with connect(node) as s:
        s.sendall(struct.pack(">i", 1000) + payload)  # promises 1000 bytes, sends a few
    with connect(node) as s:  # a size prefix cut in half
        s.sendall(b"\x00\x00")
    _alive(node)
    health.check("truncated frame")
    # The server still answers on a fresh connection.
    with connect(node) as s:
        assert 18 in api_versions_v0(s, 7)


def test_oversize_frame_closes_the_connection(node: Node, health: Health) -> None:
    size = 2 * MAX_REQUEST
    with connect(node) as s:
        s.sendall(struct.pack(">i", size) + request(0, 9, 1))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(b"\x00" * 256 * 1024)  # the server may hang up while we send
        assert_closed(s, "oversize frame")
    _alive(node)
    health.check("oversize frame")
    logged = node.output.read_text(errors="replace")
    assert f"frame size {size} exceeds the maximum of {MAX_REQUEST} bytes" in logged


def test_negative_size_closes_the_connection(node: Node, health: Health) -> None:
    with connect(node) as s:
        s.sendall(struct.pack(">i", -5) + b"\x00" * 16)
        assert_closed(s, "negative size")
    _alive(node)
    health.check("negative size")


# -- header-level errors ------------------------------------------------------------------------


def test_unknown_api_key_closes_the_connection(node: Node, health: Health) -> None:
    for key in (999, 32000, -2):
        with connect(node) as s:
            assert api_versions_v0(s, 1)  # a working connection first
            s.sendall(framed(request(key, 0, 2)))
            assert_closed(s, f"unknown api key {key}")
    _alive(node)
    health.check("unknown api key")


def test_api_versions_at_an_unknown_version_gets_a_v0_error(node: Node, health: Health) -> None:
    with connect(node) as s:
        # A future client: header v2, a body this server cannot know.
        s.sendall(framed(request(18, 99, 4242, b"\x05some\x031.0\x00\xff\xfe", flexible=True)))
        resp = read_frame(s)
        assert resp is not None, "no answer to ApiVersions v99"
        corr, error, apis = parse_api_versions_v0(resp)
        assert corr == 4242
        assert error == UNSUPPORTED_VERSION
        for key in (0, 1, 3, 18, 19):
            assert key in apis, f"api {key} missing from {apis}"
        assert apis[18][0] == 0 and apis[18][1] >= 3
        assert apis[3][1] >= 12
        # The connection stays usable: the client retries at a version from the list.
        assert api_versions_v0(s, 4243) == apis
    health.check("ApiVersions v99")


def test_unsupported_metadata_version_closes_the_connection(node: Node, health: Health) -> None:
    with connect(node) as s:
        apis = api_versions_v0(s, 1)
        too_new = apis[3][1] + 1
        s.sendall(framed(request(3, too_new, 2, b"\x01\x00\x00\x00", flexible=True)))
        assert_closed(s, f"Metadata v{too_new}")
    with connect(node) as s:
        s.sendall(framed(request(3, -1, 2, b"\x00\x00\x00\x00")))
        assert_closed(s, "Metadata v-1")
    _alive(node)
    health.check("unsupported Metadata version")


# -- body-level errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version", "flexible"),
    [
        (60, 0, True),  # DescribeCluster
        (10, 0, False),  # FindCoordinator v0
        (22, 1, False),  # InitProducerId
    ],
)
def test_garbage_body_closes_the_connection(
    node: Node, health: Health, api_key: int, version: int, flexible: bool
) -> None:
    """As Kafka's socket server: a body that does not parse closes its connection unanswered
    (requests pipelined after it are dropped), with one WARN line naming the listener, the
    client, the api key and version; other connections go on."""
    since = node.output.stat().st_size
    with connect(node) as s:
        # A string length far past the frame end: the body cannot be decoded. An ApiVersions
        # request right behind it is dropped with it.
        bad = framed(request(api_key, version, 77, b"\x7f\xff\xff\xf0garbage", flexible))
        s.sendall(bad + framed(request(18, 0, 78)))
        assert_closed(s, f"api {api_key} v{version} garbage body")
    wanted = f"api key {api_key} v{version} request from client 'bad-input' does not parse"

    def warned() -> list[str]:
        with node.output.open("rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        return [line for line in text.splitlines() if wanted in line]

    wait_for(lambda: bool(warned()), 10, "the WARN line")
    [line] = warned()
    assert "WARNING" in line and "on listener PLAINTEXT" in line, line
    with connect(node) as s:
        assert api_versions_v0(s, 79)  # a new connection is served
    health.check(f"garbage body for api {api_key}")


def test_garbage_body_of_hot_apis_is_not_a_crash(node: Node, health: Health) -> None:
    """Produce, Fetch and Metadata bodies that cannot be parsed: an answer or a close."""
    for key, version, flexible in (
        (0, 9, True),
        (0, 3, False),
        (1, 12, True),
        (1, 4, False),
        (3, 12, True),
    ):
        with connect(node) as s:
            s.sendall(framed(request(key, version, 5, b"\x00\x01\xff\xff\xff\xff\x7f", flexible)))
            resp = read_frame(s)
            if resp is not None:
                assert struct.unpack_from(">i", resp, 0)[0] == 5
    _alive(node)
    health.check("garbage hot-path bodies")
    assert "Traceback" not in node.output.read_text(errors="replace"), node.log_tail()


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_null_in_a_non_nullable_array_closes_the_connection(node: Node, health: Health) -> None:
    """A null where the schema forbids one is a request that does not parse: Kafka's socket
    server closes the connection (no handler sees it, nothing crashes)."""
    # JoinGroup v5: group_id, session_timeout, rebalance_timeout, member_id, group_instance_id,
    # protocol_type, protocols = null.
    body = _str("g-null") + struct.pack(">ii", 10_000, 10_000) + _str("") + struct.pack(">h", -1)
    body += _str("consumer") + struct.pack(">i", -1)
    with connect(node) as s:
        s.sendall(framed(request(11, 5, 31, body)))
        assert_closed(s, "JoinGroup with null protocols")
    with connect(node) as s:
        # ListOffsets v1: replica_id, topics = null
        s.sendall(framed(request(2, 1, 32, struct.pack(">ii", -1, -1))))
        assert_closed(s, "ListOffsets with null topics")
    _alive(node)
    health.check("null arrays")
    assert "Traceback" not in node.output.read_text(errors="replace"), node.log_tail()


def test_huge_array_count_does_not_kill_the_node(tmp_path: Path) -> None:
    own = Node(tmp_path / "n")  # not the module's node: this kills its node
    try:
        own.start()
        with connect(own) as s:
            # Metadata v12: topics = compact array, count varint 0xffffffff (4294967294 items).
            s.sendall(framed(request(3, 12, 1, b"\xff\xff\xff\xff\x0f\x00\x00\x00", True)))
            s.settimeout(10)
            try:
                while s.recv(65536):
                    pass
            except OSError:
                pass
        time.sleep(0.5)  # time to crash, if it would (nothing to wait on: it must not)
        assert own.proc is not None and own.proc.poll() is None, "node died: " + "\n".join(
            own.log_tail(5).splitlines()[:3]
        )
        with connect(own) as s:
            assert 3 in api_versions_v0(s, 2)
    finally:
        own.kill()


# -- admin-level validation -------------------------------------------------------------------


def test_bad_topic_names_are_invalid_topic_exception(node: Node, health: Health) -> None:
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10_000)
    bad = ["bad name", "a/b", "..", ".", "x" * 250, "tab\tname", "ünïcode"]
    try:
        result = admin.create_topics(
            {name: {"num_partitions": 1, "replication_factor": 1} for name in bad},
            raise_errors=False,
        )
    finally:
        admin.close()
    by_name = {t["name"]: t for t in result["topics"]}
    assert set(by_name) == set(bad)
    for name, t in by_name.items():
        assert t["error_code"] == INVALID_TOPIC_EXCEPTION, (name, t)
        assert t["error_message"], f"{name!r}: no error message"
    assert (
        "illegal" in by_name["a/b"]["error_message"].lower()
        or "invalid" in by_name["a/b"]["error_message"].lower()
    )
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10)
    assert not set(bad) & set(md.topics)
    health.check("bad topic names")


def test_invalid_topic_config_is_invalid_config_naming_the_key(node: Node, health: Health) -> None:
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10_000)
    cases = {
        "cfg-bad-value": ("retention.ms", "abc"),
        "cfg-unknown-key": ("no.such.topic.config", "1"),
        "cfg-bad-choice": ("cleanup.policy", "sometimes"),
    }
    try:
        result = admin.create_topics(
            {
                name: {"num_partitions": 1, "replication_factor": 1, "configs": {k: v}}
                for name, (k, v) in cases.items()
            },
            raise_errors=False,
        )
    finally:
        admin.close()
    by_name = {t["name"]: t for t in result["topics"]}
    for name, (key, _value) in cases.items():
        t = by_name[name]
        assert t["error_code"] == INVALID_CONFIG, (name, t)
        assert key in (t["error_message"] or ""), (name, t)
    health.check("invalid topic config")


# -- fuzzing ------------------------------------------------------------------------------------


def _golden_frames() -> list[bytes]:
    index = json.loads((GOLDEN / "index.json").read_text())
    return [(GOLDEN / name).read_bytes() for name in sorted(index["frames"])]


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    op = rng.randrange(5)
    if op == 0:  # byte flips
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif op == 1:  # truncation
        del data[rng.randrange(len(data)) :]
    elif op == 2 and len(data) >= 8:  # an int16/int32 (array or string length...) changed
        i = rng.randrange(len(data) - 4)
        if rng.random() < 0.5:
            struct.pack_into(
                ">h", data, i, rng.choice([-1, 0, 1, 0x7FFF, rng.randrange(-0x8000, 0x8000)])
            )
        else:
            struct.pack_into(
                ">i", data, i, rng.choice([-1, 0, 0x7FFFFFFF, rng.randrange(-(1 << 31), 1 << 31)])
            )
    elif op == 3:  # a varint-ish byte sequence spliced in
        i = rng.randrange(len(data) + 1)
        data[i:i] = bytes(rng.choice([0x80, 0xFF, 0x00, 0x7F]) for _ in range(rng.randint(1, 6)))
    else:  # random bytes overwrite a span
        i = rng.randrange(len(data))
        n = rng.randint(1, 16)
        data[i : i + n] = rng.randbytes(n)
    return bytes(data)


def _fuzz_worker(
    node: Node, frames: list[bytes], seed: int, until: float, stats: dict[str, int]
) -> None:
    rng = random.Random(seed)
    sock: socket.socket | None = None
    while time.monotonic() < until:
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", node.port), timeout=2)
            stats["connections"] += 1
        payload = _mutate(rng, rng.choice(frames))
        # Mostly a correct size prefix (so the body parsers are exercised), sometimes a wrong one.
        size = (
            len(payload)
            if rng.random() < 0.9
            else rng.choice([len(payload) + rng.randint(1, 9), -1, MAX_REQUEST + 1])
        )
        try:
            sock.sendall(struct.pack(">i", size) + payload)
            if size != len(payload):
                raise ConnectionError  # the stream is out of step: start over
            sock.settimeout(1.0)
            resp = read_frame(sock)
            if resp is None:
                raise ConnectionError
            stats["answered"] += 1
        except (OSError, ConnectionError):
            stats["closed"] += 1
            sock.close()
            sock = None
    if sock is not None:
        sock.close()


def test_fuzzed_golden_frames_do_not_hurt_the_node(node: Node, health: Health) -> None:
    frames = _golden_frames()
    assert len(frames) >= 50
    before = node.output.read_text(errors="replace").count("Traceback")
    until = time.monotonic() + FUZZ_SECONDS
    stats = [{"connections": 0, "answered": 0, "closed": 0} for _ in range(4)]
    threads = [
        threading.Thread(target=_fuzz_worker, args=(node, frames, 1000 + i, until, stats[i]))
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(FUZZ_SECONDS + 30)
    total = {k: sum(s[k] for s in stats) for k in stats[0]}
    print("fuzz:", total)
    _alive(node)
    assert total["answered"] > 50 and total["closed"] > 10, total
    health.check("fuzzing")
    with connect(node) as s:
        assert 0 in api_versions_v0(s, 9)
    text = node.output.read_text(errors="replace")
    assert text.count("Traceback") == before, "unhandled exceptions in node.output:\n" + "\n".join(
        text.splitlines()[-60:]
    )
    assert "Task exception was never retrieved" not in text
    assert "Exception in callback" not in text


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_keyless_record_in_a_compacted_topic_is_invalid_record(
    node: Node, health: Health, compression: str
) -> None:
    """As Kafka: compaction keeps the latest record per key, so a record without a key could
    never be cleaned; the whole batch is refused (compressed batches are decompressed to look)."""
    topic = f"compacted-{compression}"
    create_topic(node.bootstrap, topic, config={"cleanup.policy": "compact"})
    p = Producer(
        {"bootstrap.servers": node.bootstrap, "compression.type": compression, "linger.ms": 20}
    )
    results: list[tuple[bytes | None, int]] = []

    def report(err: Any, msg: Any) -> None:
        results.append((msg.key(), err.code() if err is not None else 0))

    p.produce(topic, key=b"k1", value=b"v1", partition=0, on_delivery=report)
    assert p.flush(15) == 0
    p.produce(topic, key=b"k2", value=b"v2", partition=0, on_delivery=report)
    p.produce(topic, value=b"no key", partition=0, on_delivery=report)  # same batch as k2
    assert p.flush(15) == 0
    assert results[0] == (b"k1", 0)
    assert sorted(code for _, code in results[1:]) == [KafkaError.INVALID_RECORD] * 2
    health.check("a keyless record in a compacted topic")
