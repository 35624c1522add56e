"""KIP-853's KRaft control record values: KRaftVersionRecord (type 5) and VotersRecord (type 6).

Both are Kafka's flexible-version-0 messages written as the value of a control record (key
``(0, type)``), with no version prefix beyond their own ``Version`` field:

- KRaftVersionRecord: int16 Version, int16 KRaftVersion, tagged fields.
- VotersRecord: int16 Version, compact array of Voter {int32 VoterId, uuid VoterUuid (the
  directory id), compact array of Endpoint {compact string Name, compact string Host, uint16
  Port, tagged fields}, KRaftVersionFeature {int16 MinSupportedVersion, int16
  MaxSupportedVersion, tagged fields}, tagged fields}, tagged fields.

Tagged fields are skipped when read (none are defined) and written empty.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from protocol.errors import CorruptRecordError

from .batch import Buffer
from .varint import decode_uvarint, encode_uvarint

KRAFT_VERSION_RECORD_VERSION = 0
VOTERS_RECORD_VERSION = 0

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterEntry:
    """One voter of a VotersRecord."""

    voter_id: int
    directory_id: uuid.UUID
    endpoints: tuple[VoterEndpoint, ...] = ()
    min_kraft_version: int = 0
    max_kraft_version: int = 1


def encode_kraft_version(kraft_version: int) -> bytes:
    return _I16.pack(KRAFT_VERSION_RECORD_VERSION) + _I16.pack(kraft_version) + b"\x00"


def _compact_string(s: str, out: bytearray) -> None:
    raw = s.encode()
    encode_uvarint(len(raw) + 1, out)
    out += raw


def encode_voters(voters: list[VoterEntry] | tuple[VoterEntry, ...]) -> bytes:
    out = bytearray(_I16.pack(VOTERS_RECORD_VERSION))
    encode_uvarint(len(voters) + 1, out)
    for v in voters:
        out += _I32.pack(v.voter_id)
        out += v.directory_id.bytes
        encode_uvarint(len(v.endpoints) + 1, out)
        for e in v.endpoints:
            _compact_string(e.name, out)
            _compact_string(e.host, out)
            if not 0 <= e.port <= 0xFFFF:
                raise ValueError(f"port {e.port} of voter {v.voter_id} is not a uint16")
            out += _U16.pack(e.port)
            out.append(0)  # tagged fields
        out += _I16.pack(v.min_kraft_version) + _I16.pack(v.max_kraft_version)
        out.append(0)  # KRaftVersionFeature's tagged fields
        out.append(0)  # Voter's tagged fields
    out.append(0)
    return bytes(out)


class _Reader:
    def __init__(self, buf: Buffer, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)
        self.what = what

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise CorruptRecordError(f"{self.what} truncated at byte {self.pos}")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def u16(self) -> int:
        return int(_U16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def uvarint(self) -> int:
        value, self.pos = decode_uvarint(self.buf, self.pos, self.end)
        return value

    def compact_len(self, field: str) -> int:
        n = self.uvarint()
        if n == 0:
            raise CorruptRecordError(f"{self.what}: {field} is null")
        return n - 1

    def string(self, field: str) -> str:
        raw = self.take(self.compact_len(field))
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"{self.what}: {field} is not UTF-8: {e}") from e

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def decode_kraft_version(value: Buffer) -> int:
    r = _Reader(value, "KRaftVersionRecord")
    if r.i16() < 0:
        raise CorruptRecordError("KRaftVersionRecord has a negative version")
    kraft_version = r.i16()
    r.skip_tags()
    return kraft_version


def decode_voters(value: Buffer) -> tuple[VoterEntry, ...]:
    r = _Reader(value, "VotersRecord")
    if r.i16() < 0:
        raise CorruptRecordError("VotersRecord has a negative version")
    voters = []
    for _ in range(r.compact_len("Voters")):
        voter_id = r.i32()
        directory_id = uuid.UUID(bytes=r.take(16))
        endpoints = []
        for _ in range(r.compact_len("Endpoints")):
            name = r.string("Endpoint.Name")
            host = r.string("Endpoint.Host")
            port = r.u16()
            r.skip_tags()
            endpoints.append(VoterEndpoint(name, host, port))
        lo, hi = r.i16(), r.i16()
        r.skip_tags()
        r.skip_tags()
        voters.append(VoterEntry(voter_id, directory_id, tuple(endpoints), lo, hi))
    r.skip_tags()
    return tuple(voters)
