"""A structure-aware protocol fuzzer: requests built from the message schemas, sent to a real node.

For every api key and version a listener advertises (its own ApiVersions answer), requests are
generated from the request classes (kio's, and ours for the versions kio lacks) with boundary
values: nulls where nullable, zero and unknown UUIDs, 1,000-element arrays, 70,000-character
strings (32,767 where a legacy i16 length caps them), internal topic names, negative numbers.
Each request must be answered within a bound (or its connection closed), and every answer must
decode with kio's native reader, a codec independent of the node's own encoders.

Used by ``test_protocol_fuzz.py`` (a short form in the suite) and runnable as a command for the
long form (every batch followed by a health round trip with stock clients, RSS tracked):

    python -m tests.integration.protocol_fuzz --seed 7 --minutes 10 [--nodes 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import itertools
import random
import re
import socket
import struct
import sys
import tempfile
import time
import types
import typing
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_origin

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY, decode_body

from .node import Node

BIG_ARRAY = 1000
KNOWN_TOPIC = "fuzz-known"  # its id is one of the generator's "known" ids
DESCRIBE_TRANSACTIONS = 65
BIG_STRING = 70_000
LEGACY_STRING_MAX = 32_767
INTERNAL_TOPICS = (
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
    "__cluster_metadata",
    "__mirror_state",
)
# APIs that would really delete or re-partition an internal topic (Kafka lets an admin do
# that): their requests get look-alike names, so the node stays usable for the rest of a run.
SPARE_INTERNAL = frozenset({20, 37})  # DeleteTopics, CreatePartitions
CREATES = frozenset({19, 37})  # CreateTopics, CreatePartitions
# Seconds an answer may take beyond the longest wait the request itself asks for.
ANSWER_SLACK = 5.0
# Waits the generator gives a request (ms), so the answer bound stays short.
WAITS_MS = (0, 1, 100, 1000)
_INT_BOUNDS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
}
_MIRROR_CODES = frozenset(int(c) for c in MirrorErrorCode)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _is_wait(name: str) -> bool:
    """A duration the answer may wait for (a session or transaction timeout is not one)."""
    if _is_lifetime(name):
        return False
    return "timeout" in name or "wait" in name or "delay" in name or "backoff" in name


def _is_lifetime(name: str) -> bool:
    return "session_timeout" in name or "transaction_timeout" in name


# Plausible session and transaction timeouts (ms): within the broker's bounds, so that the
# request goes past that first check
LIFETIMES_MS = (6_000, 10_000, 45_000)


def _is_node_id(name: str) -> bool:
    return name.endswith(("broker_id", "node_id", "voter_id", "replica_id", "leader_id")) or (
        name in ("candidate_id", "broker", "replicas", "isr", "new_isr", "broker_ids")
    )


@functools.cache
def _plan(cls: type) -> list[tuple[Any, Any, bool]]:
    """Each field of an entity class with its kind and nullability."""
    plan = []
    for f in fields(cls):
        kind = classify_field(f)
        # kio's is_optional of an array field tells whether its items may be null; the array
        # itself may be null only when its own type is "tuple[...] | None"
        nullable = _union_with_none(f.type) if kind.is_array else is_optional(f)
        plan.append((f, kind, nullable))
    return plan


def _union_with_none(tp: Any) -> bool:
    return get_origin(tp) in (types.UnionType, typing.Union) and type(None) in get_args(tp)


# Themes: which kinds of boundary value a request gets. A theme per request makes every kind
# reach every api: "null" nulls nullable fields (arrays less often, so their items are built
# too) with unknown ids elsewhere, "zero" gives zero UUIDs, zero numbers and empty strings and
# arrays, "unknown" unknown UUIDs and names, "big_string" strings at their length limit,
# "big_array" a 1,000-element array, "negative" the most negative numbers, "internal" internal
# topic names, "mixed" any kind anywhere (at the run's hostility), "corrupt" a request whose
# bytes are then damaged (an answer or a close, never a crash).
THEMES: dict[str, frozenset[str]] = {
    "null": frozenset({"null", "unknown"}),
    "zero": frozenset({"zero"}),
    "unknown": frozenset({"unknown"}),
    "big_string": frozenset({"big_string"}),
    "big_array": frozenset({"big_array", "unknown"}),
    "negative": frozenset({"negative"}),
    "internal": frozenset({"internal", "null"}),
    "mixed": frozenset(
        {"null", "zero", "unknown", "big_string", "big_array", "negative", "internal"}
    ),
    # a plausible request whose frame is then cut short, extended or changed at random bytes
    "corrupt": frozenset({"unknown"}),
}
THEME_P = 0.8  # chance of the theme's kind at each field where it applies
NULL_ARRAY_P = 0.3  # the same for nulling a whole array (its items are worth building)


@dataclass
class _Budget:
    """What is left for one request: huge arrays and strings are few, so frames stay small."""

    big_arrays: int = 1
    big_strings: int = 4


class RequestGenerator:
    """Requests of any api key and version, with boundary values (seeded)."""

    def __init__(
        self,
        rng: random.Random,
        node_ids: Sequence[int],
        known_topics: Sequence[str] = (),
        known_ids: Sequence[uuid.UUID] = (),
        create_for_real: bool = True,
    ) -> None:
        """``create_for_real``: False makes every CreateTopics and CreatePartitions
        validate-only, so a long run measures the node's memory, not the topics it made."""
        self.rng = rng
        self.create_for_real = create_for_real
        self.node_ids = frozenset(node_ids)
        self.known_topics = list(known_topics)
        self.known_ids = list(known_ids)
        self.theme = "mixed"
        self.p = 0.5
        self.kinds = THEMES["mixed"]
        self.api_key = -1

    def request(self, api_key: int, version: int, theme: str, hostility: float = 0.5) -> Any:
        """A request entity. ``hostility``: the chance of a boundary value at each field (of
        ``theme``'s kind; "mixed": any kind)."""
        assert theme in THEMES, theme
        self.theme, self.p, self.kinds = theme, hostility, THEMES[theme]
        self.api_key = api_key
        cls = REGISTRY.spec(api_key).request_type(version)
        body = self._entity(cls, bool(cls.__flexible__), _Budget(), 0, False)
        if not self.create_for_real and api_key in CREATES and hasattr(body, "validate_only"):
            body = dataclasses.replace(body, validate_only=True)
        return body

    def _hostile(self, kind: str, p: float = THEME_P) -> bool:
        """A boundary value of ``kind`` here?"""
        if kind not in self.kinds:
            return False
        return self.rng.random() < (self.p if self.theme == "mixed" else p)

    # -- entities and fields ------------------------------------------------------------------

    def _entity(self, cls: type, flexible: bool, budget: _Budget, depth: int, big: bool) -> Any:
        kwargs: dict[str, Any] = {}
        for f, kind, nullable in _plan(cls):
            kwargs[f.name] = self._field(f, kind, nullable, flexible, budget, depth, big)
        return cls(**kwargs)

    def _field(
        self,
        f: Any,
        kind: Any,
        nullable: bool,
        flexible: bool,
        budget: _Budget,
        depth: int,
        in_big: bool,
    ) -> Any:
        if kind.is_array:
            if nullable and self._hostile("null", NULL_ARRAY_P):
                return None
            n = self._array_len(budget, depth, in_big)
            big = in_big or n >= BIG_ARRAY
            # A big array repeats a few distinct items: building 1,000 of them is the fuzzer's
            # own stall, and duplicates are boundary values too.
            distinct = min(n, 8)
            if isinstance(kind, EntityTupleField):
                items = [
                    self._entity(kind.type_, flexible, budget, depth + 1, big)
                    for _ in range(distinct)
                ]
            else:
                assert isinstance(kind, PrimitiveTupleField)
                items = [self._primitive(f, flexible, False, budget, big) for _ in range(distinct)]
            return tuple(items[i % distinct] for i in range(n))
        if isinstance(kind, EntityField):
            if nullable and self._hostile("null", NULL_ARRAY_P):
                return None
            return self._entity(kind.type_, flexible, budget, depth + 1, in_big)
        return self._primitive(f, flexible, nullable, budget, in_big)

    def _array_len(self, budget: _Budget, depth: int, in_big: bool) -> int:
        rng = self.rng
        if in_big:
            return rng.choice((0, 1))
        if budget.big_arrays and depth <= 1 and self._hostile("big_array"):
            budget.big_arrays -= 1
            return BIG_ARRAY
        if self._hostile("zero"):
            return 0
        return rng.choice((1, 1, 2, 3))

    def _primitive(
        self, f: Any, flexible: bool, nullable: bool, budget: _Budget, in_big: bool
    ) -> Any:
        rng = self.rng
        kind = f.metadata["kafka_type"]
        name = f.name
        if nullable and self._hostile("null"):
            return None
        if kind in _INT_BOUNDS:
            return self._int(kind, name)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "float64":
            return rng.choice((0.0, -1.0, 1e308)) if self._hostile("negative") else 0.5
        if kind == "uuid":
            return self._uuid()
        if kind == "string":
            return self._string(name, flexible, budget, in_big)
        if kind in ("bytes", "records"):
            if self._hostile("unknown"):
                return rng.randbytes(rng.choice((1, 7, 61)))
            return b""
        if kind == "error_code":
            return rng.choice(list(ErrorCode)) if self._hostile("unknown") else ErrorCode.none
        if kind in ("timedelta_i32", "timedelta_i64"):
            ms = rng.choice(LIFETIMES_MS if _is_lifetime(name) else WAITS_MS)
            if self._hostile("negative"):
                ms = -1 if _is_wait(name) else rng.choice((-1, -(1 << 31)))
            elif not _is_wait(name) and self._hostile("unknown"):
                ms = (1 << 31) - 1
            return datetime.timedelta(milliseconds=ms)
        if kind == "datetime_i64":
            ms = -1 if self._hostile("negative") else int(time.time() * 1000)
            return _EPOCH + datetime.timedelta(milliseconds=ms)
        raise AssertionError(f"no generator for kafka_type {kind!r} ({name})")

    def _int(self, kind: str, name: str) -> int:
        rng = self.rng
        lo, hi = _INT_BOUNDS[kind]
        if _is_lifetime(name) and not self._hostile("negative"):
            return min(rng.choice(LIFETIMES_MS), hi)
        if _is_wait(name):  # waits stay short: the answer bound follows them
            if lo < 0 and self._hostile("negative"):
                return -1
            return min(rng.choice(WAITS_MS), hi)
        if self._hostile("negative"):
            value = rng.choice((lo, -1, -rng.randint(2, 100)))
        elif self._hostile("unknown"):
            value = rng.choice((hi, rng.randint(2, 100)))
        elif self._hostile("zero"):
            value = 0
        else:
            value = rng.choice((0, 1, 2, -1))
        value = max(lo, min(hi, value))
        if _is_node_id(name) and value in self.node_ids:
            # never this cluster's own nodes: unregistering or fencing them ends the run
            value = 1000 + value
        return value

    def _uuid(self) -> uuid.UUID:
        rng = self.rng
        if self._hostile("zero"):
            return uuid.UUID(int=0)
        if self._hostile("unknown") or not self.known_ids or rng.random() < 0.5:
            return uuid.UUID(int=rng.getrandbits(128))
        return rng.choice(self.known_ids)

    def _string(self, name: str, flexible: bool, budget: _Budget, in_big: bool) -> str:
        rng = self.rng
        if budget.big_strings and not in_big and self._hostile("big_string"):
            budget.big_strings -= 1
            if not flexible:  # an i16 length: the most bytes it can carry
                return rng.choice(("t" * LEGACY_STRING_MAX, "é" * (LEGACY_STRING_MAX // 2)))
            return rng.choice(("t", "é")) * BIG_STRING  # é: two bytes in UTF-8
        if self._hostile("internal"):
            if self.api_key in SPARE_INTERNAL:  # deleting them ends every group and txn test
                return "__fuzz_" + rng.choice(INTERNAL_TOPICS)
            return rng.choice(INTERNAL_TOPICS)
        if self._hostile("zero"):
            return ""
        if self._hostile("unknown"):
            return rng.choice(
                (".", "..", "a/b", " ", "\x00", "ü" * 3, f"unknown-{rng.randrange(1000)}")
            )
        if "topic" in name and self.known_topics and rng.random() < 0.5:
            return rng.choice(self.known_topics)
        return f"fuzz-{rng.randrange(50)}"


# -- the wire ---------------------------------------------------------------------------------


class Closed(Exception):
    """The node closed the connection instead of answering."""


class Hang(Exception):
    """No answer and no close within the bound."""


def _recv_exact(s: socket.socket, n: int, deadline: float) -> bytes:
    parts = []
    while n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Hang()
        s.settimeout(left)
        try:
            chunk = s.recv(min(n, 1 << 20))
        except TimeoutError:
            raise Hang() from None
        except OSError:
            raise Closed() from None
        if not chunk:
            raise Closed()
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


class Connection:
    """One raw connection to a listener; requests sent one at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self.corr = 0

    def _socket(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def call(
        self,
        version: int,
        body: Any,
        bound: float,
        corrupt: Callable[[bytes, int], bytes] | None = None,
    ) -> tuple[int, bytes]:
        """Send ``body``; (correlation id, response body bytes after the header). Raises
        `Closed` (and forgets the socket) or `Hang`. ``corrupt(frame, header_end)``: the frame
        actually sent (its size prefix is set again)."""
        self.corr += 1
        frame = REGISTRY.encode_request(version, self.corr, "fuzz", body)
        if corrupt is not None:
            spec = REGISTRY.spec(int(type(body).__api_key__))
            header_end = 4 + 10 + len(b"fuzz") + (1 if spec.is_flexible(version) else 0)
            payload = corrupt(frame, header_end)[4:]
            frame = struct.pack(">i", len(payload)) + payload
        s = self._socket()
        deadline = time.monotonic() + bound
        try:
            s.sendall(frame)
            if not expects_answer(body):
                return self.corr, b""
            (size,) = struct.unpack(">i", _recv_exact(s, 4, deadline))
            payload = _recv_exact(s, size, deadline)
        except Closed:
            self.close()
            raise
        except Hang:
            self.close()
            raise
        except OSError:
            self.close()
            raise Closed() from None
        api_key = int(type(body).__api_key__)
        spec = REGISTRY.spec(api_key)
        (corr,) = struct.unpack_from(">i", payload, 0)
        pos = 4
        if spec.response_header_version(version) >= 1:
            pos = _skip_tags(payload, pos)
        return corr, payload[pos:]


def expects_answer(body: Any) -> bool:
    """Kafka answers every request but a Produce with acks=0."""
    return not (int(type(body).__api_key__) == 0 and body.acks == 0)


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _skip_tags(buf: bytes, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def decode_answer(api_key: int, version: int, body: bytes) -> Any:
    """The response body through kio's native reader; it must use every byte. A KIP-1279 error
    code (unknown to kio's enum) is accepted as the only reason the reader may refuse."""
    cls = REGISTRY.spec(api_key).response_type(version)
    try:
        value, used = entity_reader(cls)(body, 0)
    except Exception as e:  # kio's OutOfBoundValue is not a ValueError
        msg = str(e)
        if msg.endswith("is not a valid ErrorCode") and int(msg.split()[0]) in _MIRROR_CODES:
            return None
        if api_key == DESCRIBE_TRANSACTIONS and "negative timestamp" in msg:
            # Kafka's start time of a transaction not begun (Empty) is -1, which kio's
            # datetime field refuses: read it with the lenient decoder, check it is -1
            resp = decode_body(cls, body, 0)
            assert all(
                s.transaction_start_time >= _EPOCH
                or s.transaction_start_time == _EPOCH - datetime.timedelta(milliseconds=1)
                for s in resp.transaction_states
            ), resp
            return resp
        raise
    if used != len(body):
        raise ValueError(f"{len(body) - used} bytes left after the {cls.__name__}")
    return value


def request_bound(body: Any) -> float:
    """Seconds the answer may take: the longest wait the request asks for, plus slack."""
    longest = 0.0

    def walk(entity: Any) -> None:
        nonlocal longest
        for f in fields(entity):
            v = getattr(entity, f.name)
            if isinstance(v, datetime.timedelta) and _is_wait(f.name):
                longest = max(longest, v.total_seconds())
            elif isinstance(v, int) and not isinstance(v, bool) and _is_wait(f.name):
                longest = max(longest, v / 1000)
            elif isinstance(v, tuple) and v and hasattr(v[0], "__dataclass_fields__"):
                for item in v[:3]:
                    walk(item)
            elif hasattr(v, "__dataclass_fields__"):
                walk(v)

    walk(body)
    return ANSWER_SLACK + min(longest, 60.0)


def advertised(port: int) -> dict[int, tuple[int, int]]:
    """The listener's ApiVersions v3 answer, decoded by kio: key -> (min, max)."""
    conn = Connection(port)
    try:
        body = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
        _corr, raw = conn.call(3, body, 10.0)
    finally:
        conn.close()
    resp, _ = entity_reader(ApiVersionsResponse)(raw, 0)
    assert resp.error_code == ErrorCode.none, resp
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}


# -- a run ------------------------------------------------------------------------------------


@dataclass
class Finding:
    listener: str
    api_key: int
    version: int
    what: str
    request: str

    def __str__(self) -> str:
        name = REGISTRY.spec(self.api_key).name
        return f"[{self.listener}] {name} (key {self.api_key}) v{self.version}: {self.what}"


class LogWatch:
    """New lines of a node's output reporting a crash or an error, since the last look."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.offset = log_size(node)

    def new_bad_lines(self) -> list[str]:
        lines = bad_log_lines(self.node, self.offset)
        self.offset = log_size(self.node)
        return lines


@dataclass
class Stats:
    watch: LogWatch | None = None  # the node behind the fuzzed listener
    sent: int = 0
    answered: int = 0
    closed: int = 0
    slowest: float = 0.0
    slowest_what: str = ""
    findings: list[Finding] = field(default_factory=list)
    no_schema: list[tuple[int, int]] = field(default_factory=list)


ThemePlan = Callable[[int, int, bool], Sequence[str]]


def short_plan(rng: random.Random, latest: int = 3) -> ThemePlan:
    """``latest`` themes for each api's latest version, one for each other version, dealt
    round-robin from a seeded shuffle so that every theme reaches every listener."""
    deck = list(THEMES)
    rng.shuffle(deck)
    turn = iter(range(1 << 62))

    def plan(_key: int, _version: int, is_latest: bool) -> Sequence[str]:
        return [deck[next(turn) % len(deck)] for _ in range(latest if is_latest else 1)]

    return plan


def random_plan(rng: random.Random, per_version: int) -> ThemePlan:
    def plan(_key: int, _version: int, _latest: bool) -> Sequence[str]:
        return [rng.choice(list(THEMES)) for _ in range(per_version)]

    return plan


def fuzz_listener(
    gen: RequestGenerator,
    listener: str,
    port: int,
    themes: ThemePlan,
    stats: Stats,
    keys: Sequence[int] | None = None,
) -> None:
    """Requests of every advertised (key, version) on one listener (or of ``keys``), one per
    theme ``themes(key, version, latest)`` names."""
    apis = advertised(port)
    conn = Connection(port)
    try:
        for key in sorted(apis):
            if keys is not None and key not in keys:
                continue
            lo, hi = apis[key]
            for version in range(lo, hi + 1):
                if not REGISTRY.spec(key).supports(version):
                    stats.no_schema.append((key, version))  # Produce v0-2: hand-parsed only
                    continue
                for theme in themes(key, version, version == hi):
                    _one(gen, conn, listener, key, version, theme, stats)
    finally:
        conn.close()


def _one(
    gen: RequestGenerator,
    conn: Connection,
    listener: str,
    key: int,
    version: int,
    theme: str,
    stats: Stats,
) -> None:
    try:
        body = gen.request(key, version, theme)
        REGISTRY.encode_request(version, 0, "fuzz", body)
    except (struct.error, OverflowError, ValueError, TypeError):
        return  # a value this version cannot carry at all (e.g. a string over an i16 length)
    bound = request_bound(body)
    started = time.monotonic()
    stats.sent += 1
    corrupt = None
    if theme == "corrupt" and expects_answer(body):
        corrupt = _corrupter(gen.rng, flips=bound <= ANSWER_SLACK)
    try:
        try:
            corr, raw = conn.call(version, body, bound, corrupt)
        except Closed:
            stats.closed += 1
            return
        except Hang:
            stats.findings.append(
                Finding(listener, key, version, f"no answer within {bound:.1f} s", _short(body))
            )
            return
        _check_answer(conn, listener, key, version, body, corr, raw, started, stats)
    finally:
        if stats.watch is not None:
            for line in stats.watch.new_bad_lines():
                what = "node log: " + _last_exception(line)
                stats.findings.append(Finding(listener, key, version, what, _short(body)))


def _corrupter(rng: random.Random, flips: bool) -> Callable[[bytes, int], bytes]:
    """A mutation of a request frame's body: cut short, garbage appended, or (for a request
    with no wait in it, where a changed byte cannot ask for a long one) bytes flipped."""

    def corrupt(frame: bytes, header_end: int) -> bytes:
        body = frame[header_end:]
        how = rng.choice(("cut", "append", "flip") if flips else ("cut", "append"))
        if how == "cut":
            return frame[:header_end] + body[: rng.randrange(len(body) + 1)]
        if how == "append":
            return frame + rng.randbytes(rng.choice((1, 5, 64)))
        data = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        return frame[:header_end] + bytes(data)

    return corrupt


def _last_exception(block: str) -> str:
    """The exception line of a logged traceback (or the block's first line)."""
    lines = block.splitlines()
    for line in reversed(lines):
        if line and not line.startswith((" ", "[", "Traceback", "The above", "During")):
            return line[:300]
    return lines[0][:300] if lines else ""


def _check_answer(
    conn: Connection,
    listener: str,
    key: int,
    version: int,
    body: Any,
    corr: int,
    raw: bytes,
    started: float,
    stats: Stats,
) -> None:
    took = time.monotonic() - started
    if took > stats.slowest:
        stats.slowest, stats.slowest_what = took, f"{listener} key {key} v{version}"
    stats.answered += 1
    if corr != conn.corr:
        stats.findings.append(
            Finding(listener, key, version, f"correlation id {corr} != {conn.corr}", _short(body))
        )
        conn.close()
        return
    if not expects_answer(body):
        return
    try:
        decode_answer(key, version, raw)
    except Exception as e:
        stats.findings.append(
            Finding(listener, key, version, f"answer not decodable: {e!r}", _short(body))
        )


def _short(body: Any) -> str:
    text = repr(body)
    return text if len(text) <= 600 else text[:600] + "..."


# -- the node's side ----------------------------------------------------------------------------

BAD_LOG_MARKS = ("Traceback", "Task exception", "] ERROR ")


def bad_log_lines(node: Node, since: int = 0) -> list[str]:
    """Lines of the node's output (from byte ``since``) that report a crash or an error."""
    with node.output.open("rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    lines = text.splitlines()
    records: list[list[str]] = [[]]
    for line in lines:  # a record: a "[time] LEVEL" line and the lines up to the next one
        if line.startswith("[") and records[-1]:
            records.append([])
        records[-1].append(line)
    return ["\n".join(r) for r in records if any(m in line for line in r for m in BAD_LOG_MARKS)]


STALL_LIMIT_S = 2.0  # a stall this long on one batch is a finding (the long form)
_STALL = re.compile(r"event loop ran again after a ([0-9.]+) s stall")


def stalls(node: Node, since: int = 0) -> list[float]:
    """The event-loop stalls the node's watchdog reported (seconds), from byte ``since``."""
    with node.output.open("rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    return [float(m.group(1)) for m in _STALL.finditer(text)]


def log_size(node: Node) -> int:
    return node.output.stat().st_size


def rss_kb(node: Node) -> int:
    assert node.proc is not None
    for line in Path(f"/proc/{node.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def health_round_trip(bootstrap: str, topic: str, tag: str, timeout: float = 30.0) -> None:
    """ApiVersions with kafka-python, then produce and consume one record with confluent-kafka."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from kafka import KafkaAdminClient

    # kafka-python's client starts with an ApiVersions exchange, then asks for metadata
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        assert topic in admin.list_topics(), f"health ({tag}): {topic} not listed"
    finally:
        admin.close()
    value = f"health-{tag}".encode()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    failures: list[Any] = []
    offsets: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)
        else:
            offsets.append(msg.offset())

    producer.produce(topic, value=value, on_delivery=delivered)
    left = producer.flush(timeout)
    if left or failures or not offsets:
        raise RuntimeError(f"health produce failed ({tag}): {failures or 'timed out'}")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"health-{tag}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offsets[0])])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            if msg.value() == value:
                return
        raise RuntimeError(f"health consume ({tag}): the record did not come back")
    finally:
        consumer.close()


def create_topic(bootstrap: str, topic: str, replication: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, replication)], request_timeout=15).values():
        f.result(30)


def known_topic_ids(port: int, topic: str) -> list[uuid.UUID]:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v12.response import MetadataResponse

    conn = Connection(port)
    try:
        req = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=topic),),  # type: ignore[arg-type]
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        _c, raw = conn.call(12, req, 10.0)
    finally:
        conn.close()
    resp, _ = entity_reader(MetadataResponse)(raw, 0)
    return [t.topic_id for t in resp.topics if t.topic_id is not None]


# What a fuzzed node serves beyond the defaults: share groups (their RPCs and the share-state
# coordinator) and one-replica internal topics.
FUZZ_NODE = {
    "group__share__enable": "true",
    "share__coordinator__state__topic__num__partitions": "1",
    "share__coordinator__state__topic__replication__factor": "1",
    "transaction__state__log__replication__factor": "1",
    "transaction__state__log__num__partitions": "2",
}


# -- the command (long form) --------------------------------------------------------------------


def _nodes(workdir: Path, count: int) -> Iterator[list[Node]]:
    if count == 1:
        node = Node(workdir / "n1", **FUZZ_NODE)
        try:
            node.start()
            yield [node]
        finally:
            node.kill()
        return
    from .cluster import Cluster

    cluster = Cluster(workdir, size=count, group__share__enable="true")
    try:
        cluster.start()
        yield cluster.nodes
    finally:
        cluster.kill()


def long_run(
    seed: int, minutes: float, nodes: int, out: Callable[[str], None] = print
) -> list[str]:
    """Fuzz batches (one api key on one listener of one node each) for ``minutes``; after each,
    the node log, a health round trip and RSS. Returns the problems found."""
    rng = random.Random(seed)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        for cluster in _nodes(Path(tmp), nodes):
            first = cluster[0]
            topic = f"fuzz-health-{seed}"
            create_topic(first.bootstrap, topic, min(3, nodes))
            # the generator's known topic: it may be deleted or changed, the health one not
            create_topic(first.bootstrap, KNOWN_TOPIC, min(3, nodes))
            time.sleep(1.0)
            gen = RequestGenerator(
                rng,
                [n.node_id for n in cluster],
                [KNOWN_TOPIC],
                known_topic_ids(first.port, KNOWN_TOPIC),
                create_for_real=False,
            )
            listeners = [(n, "client", n.port) for n in cluster] + [
                (n, "controller", n.controller_port) for n in cluster
            ]
            marks = {n.node_id: log_size(n) for n in cluster}
            rss: list[tuple[float, int]] = []
            start = time.monotonic()
            batch = 0
            while time.monotonic() - start < minutes * 60:
                node, listener, port = rng.choice(listeners)
                apis = sorted(advertised(port))
                keys = rng.sample(apis, min(8, len(apis)))
                stats = Stats()
                plan = random_plan(rng, 3)
                fuzz_listener(gen, f"node {node.node_id} {listener}", port, plan, stats, keys)
                batch += 1
                already = len(problems)
                for f in stats.findings:
                    problems.append(f"{f}\n    request: {f.request}")
                for n in cluster:
                    for line in bad_log_lines(n, marks[n.node_id]):
                        problems.append(f"node {n.node_id} log:\n{line}")
                    for took in stalls(n, marks[n.node_id]):
                        if took >= STALL_LIMIT_S:
                            problems.append(
                                f"node {n.node_id}: event loop stalled {took:.1f} s in batch "
                                f"{batch} ({listener} keys {keys})"
                            )
                    marks[n.node_id] = log_size(n)
                try:
                    health_round_trip(first.bootstrap, topic, f"{seed}-{batch}")
                except Exception as e:
                    problems.append(f"health round trip after batch {batch}: {e!r}")
                    break
                rss.append((time.monotonic() - start, rss_kb(first)))
                out(
                    f"batch {batch}: {listener} node {node.node_id} keys {keys}: sent "
                    f"{stats.sent}, closed {stats.closed}, slowest {stats.slowest:.2f} s "
                    f"({stats.slowest_what}), rss {rss[-1][1] // 1024} MB, "
                    f"problems so far {len(problems)}"
                )
                for p in problems[already:]:
                    out("  " + p[:2000])
            problems += rss_growth(rss)
    return problems


def rss_growth(
    samples: Sequence[tuple[float, int]], limit_mb: float = 15.0, step_mb: float = 100.0
) -> list[str]:
    """RSS must be flat after warm-up (the first third of the run). The post-warm-up samples
    fall into six windows, each judged by its lowest sample: a leak raises that floor window
    after window, while one large request raises RSS for a moment (the samples after it fall
    back) and a one-off high-water mark kept by the allocator raises the floor once. So the
    growth that counts is the sum of the floor's rises less the largest one; that one rise
    alone may be up to ``step_mb``."""
    warm = [kb / 1024 for _t, kb in samples[len(samples) // 3 :]]
    if len(warm) < 12:
        return []
    size = len(warm) // 6
    floors = [min(warm[i * size : (i + 1) * size]) for i in range(6)]
    floors[-1] = min(floors[-1], *warm[6 * size :])
    rises = [max(0.0, b - a) for a, b in itertools.pairwise(floors)]
    problems = []
    steady = sum(rises) - max(rises)
    shown = [round(f) for f in floors]
    if steady > limit_mb:
        problems.append(
            f"RSS grew {steady:.0f} MB after warm-up beyond its largest single rise "
            f"(window floors {shown} MB)"
        )
    if max(rises) > step_mb:
        problems.append(f"RSS rose {max(rises):.0f} MB at once (window floors {shown} MB)")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 32))
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    args = parser.parse_args(argv)
    print(f"protocol fuzz: seed {args.seed}, {args.minutes} min, {args.nodes} node(s)")
    problems = long_run(args.seed, args.minutes, args.nodes)
    for p in problems:
        print(p)
    print(f"seed {args.seed}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
