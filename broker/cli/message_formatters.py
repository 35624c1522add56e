"""The record formatters of the console consumers, by the class names Kafka 4.1 ships
(``--formatter``): DefaultMessageFormatter (its ``print.*`` switches, separators, null literal
and deserializers), LoggingMessageFormatter (the default output plus a log line on stderr) and
NoOpMessageFormatter (nothing). Output is bytes, as Kafka writes it.
"""

from __future__ import annotations

import datetime
import struct
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, Final, Protocol, TextIO

PACKAGE: Final = "org.apache.kafka.tools.consumer."
DEFAULT: Final = PACKAGE + "DefaultMessageFormatter"
LOGGING: Final = PACKAGE + "LoggingMessageFormatter"
NOOP: Final = PACKAGE + "NoOpMessageFormatter"
TIMESTAMP_TYPES: Final = {0: "CreateTime", 1: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime, -1 none
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    delivery_count: int | None = None  # share consumers
    leader_epoch: int | None = None


class Formatter(Protocol):
    def write(self, record: Record, out: BinaryIO) -> None: ...


class FormatterError(Exception):
    """A formatter that cannot be built (Kafka's message: the class name, for one it lacks)."""


# Kafka's deserializers, by class name: bytes -> the text the formatter prints
Deserializer = Callable[[bytes], str]
_SER = "org.apache.kafka.common.serialization."


def _fixed(fmt: str, size: int, name: str) -> Deserializer:
    def decode(data: bytes) -> str:
        if len(data) != size:
            raise ValueError(f"Size of data received by {name} is not {size}")
        (n,) = struct.unpack(fmt, data)
        return repr(n) if isinstance(n, float) else str(n)

    return decode


def _bytes_text(data: bytes) -> str:
    """org.apache.kafka.common.utils.Bytes.toString: printable ASCII as is, else \\xHH."""
    return "".join(chr(b) if 32 <= b <= 126 and b != 92 else f"\\x{b:02X}" for b in data)


DESERIALIZERS: Final[dict[str, Deserializer]] = {
    _SER + "StringDeserializer": lambda b: b.decode("utf-8", errors="replace"),
    _SER + "IntegerDeserializer": _fixed(">i", 4, "IntegerDeserializer"),
    _SER + "LongDeserializer": _fixed(">q", 8, "LongDeserializer"),
    _SER + "ShortDeserializer": _fixed(">h", 2, "ShortDeserializer"),
    _SER + "DoubleDeserializer": _fixed(">d", 8, "DoubleDeserializer"),
    _SER + "FloatDeserializer": _fixed(">f", 4, "FloatDeserializer"),
    _SER + "UUIDDeserializer": lambda b: str(uuid.UUID(b.decode("utf-8"))),
    _SER + "BytesDeserializer": _bytes_text,
    _SER + "VoidDeserializer": lambda b: "null",
}


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    return props[key].strip().lower() == "true" if key in props else default


@dataclass
class DefaultMessageFormatter:
    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_delivery: bool = False
    print_epoch: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"
    deserializers: dict[str, Deserializer] = field(default_factory=dict)

    @classmethod
    def configure(cls, props: Mapping[str, str], err: TextIO) -> DefaultMessageFormatter:
        f = cls()
        for name in ("timestamp", "key", "value", "partition", "offset", "delivery", "epoch",
                     "headers"):  # fmt: skip
            attr = f"print_{name}"
            setattr(f, attr, _bool(props, f"print.{name}", getattr(f, attr)))
        for key in ("key.separator", "line.separator", "headers.separator", "null.literal"):
            if key in props:
                setattr(f, key.replace(".", "_"), props[key].encode("utf-8"))
        for part in ("key", "value", "headers"):
            class_name = props.get(f"{part}.deserializer")
            if class_name is None:
                continue
            found = DESERIALIZERS.get(class_name)
            if found is None:  # Kafka logs it and prints the bytes as they are
                print(f"ERROR Unable to instantiate a deserializer from {class_name}", file=err)
            else:
                f.deserializers[part] = found
        return f

    def _field(self, part: str, data: bytes | None) -> bytes:
        raw = data if data is not None else self.null_literal
        decode = self.deserializers.get(part)
        return raw if decode is None else decode(raw).encode("utf-8")

    def write(self, r: Record, out: BinaryIO) -> None:
        columns: list[bytes] = []
        if self.print_timestamp:
            kind = TIMESTAMP_TYPES.get(r.timestamp_type)
            columns.append(f"{kind}:{r.timestamp}".encode() if kind else b"NO_TIMESTAMP")
        if self.print_partition:
            columns.append(f"Partition:{r.partition}".encode())
        if self.print_offset:
            columns.append(f"Offset:{r.offset}".encode())
        if self.print_delivery:
            count = "NOT_PRESENT" if r.delivery_count is None else str(r.delivery_count)
            columns.append(f"Delivery:{count}".encode())
        if self.print_epoch:
            epoch = "NOT_PRESENT" if r.leader_epoch is None else str(r.leader_epoch)
            columns.append(f"Epoch:{epoch}".encode())
        if self.print_headers:
            if not r.headers:
                columns.append(b"NO_HEADERS")
            else:
                columns.append(
                    self.headers_separator.join(
                        k.encode("utf-8") + b":" + self._field("headers", v) for k, v in r.headers
                    )
                )
        if self.print_key:
            columns.append(self._field("key", r.key))
        if self.print_value:
            columns.append(self._field("value", r.value))
        if columns:  # the last column is followed by the line separator
            out.write(self.key_separator.join(columns) + self.line_separator)


@dataclass
class LoggingMessageFormatter:
    inner: DefaultMessageFormatter
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def write(self, r: Record, out: BinaryIO) -> None:
        self.inner.write(r, out)
        kind = TIMESTAMP_TYPES.get(r.timestamp_type)
        ts = f"{kind}:{r.timestamp}, " if kind else ""
        key = "key:" + ("null " if r.key is None else r.key.decode("utf-8", "replace") + ", ")
        value = "value:" + ("null" if r.value is None else r.value.decode("utf-8", "replace"))
        now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        print(f"[{now}] INFO {ts}{key}{value} ({LOGGING})", file=self.err, flush=True)


class NoOpMessageFormatter:
    def write(self, r: Record, out: BinaryIO) -> None:
        return None


def build(name: str, props: Mapping[str, str], err: TextIO) -> Formatter:
    """The formatter of class ``name``; FormatterError (the class name, as Java's
    ClassNotFoundException says it) for one Kafka does not ship."""
    if name == DEFAULT:
        return DefaultMessageFormatter.configure(props, err)
    if name == LOGGING:
        return LoggingMessageFormatter(DefaultMessageFormatter.configure(props, err), err)
    if name == NOOP:
        return NoOpMessageFormatter()
    raise FormatterError(name)
