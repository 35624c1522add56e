"""Request header v0/v1/v2 and response header v0/v1.

Parsed by hand rather than with kio: kio raises on unknown tagged fields, and the protocol requires a
receiver to skip them. Which header version an API version uses is the registry's business; these
functions take it as an argument.
"""

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .errors import DecodeError
from .readers import Buffer, read_legacy_string, skip_tagged_fields

_FIXED: Final = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_CORR: Final = struct.Struct(">i")
_STR_LEN: Final = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def peek_request_ids(buf: Buffer) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: the 8 bytes every request header starts with."""
    if len(buf) < 8:
        raise DecodeError(f"request of {len(buf)} bytes is too short for a request header")
    key, version, corr = _FIXED.unpack_from(buf, 0)
    return key, version, corr


def parse_request_header(
    buf: Buffer, header_version_for: Callable[[int, int], int]
) -> tuple[RequestHeader, int]:
    """Parse the header at the start of a request frame; returns it and where the body starts."""
    key, version, corr = peek_request_ids(buf)
    header_version = header_version_for(key, version)
    pos = 8
    client_id: str | None = None
    if header_version >= 1:
        # client_id stays a legacy (int16-length) string even in flexible header v2.
        client_id, pos = read_legacy_string(buf, pos, "client_id")
    if header_version >= 2:
        pos = skip_tagged_fields(buf, pos, "request header tagged fields")
    return RequestHeader(key, version, corr, client_id, header_version), pos


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, header_version: int
) -> bytes:
    out = _FIXED.pack(api_key, api_version, correlation_id)
    if header_version >= 1:
        if client_id is None:
            out += _STR_LEN.pack(-1)
        else:
            raw = client_id.encode()
            out += _STR_LEN.pack(len(raw)) + raw
    if header_version >= 2:
        out += b"\x00"
    return out


_V1_TAIL: Final = b"\x00"


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    if header_version >= 1:
        return _CORR.pack(correlation_id) + _V1_TAIL
    return _CORR.pack(correlation_id)


def parse_response_header(buf: Buffer, header_version: int) -> tuple[int, int]:
    """correlation_id and the body position of a response frame."""
    if len(buf) < 4:
        raise DecodeError(f"response of {len(buf)} bytes is too short for a response header")
    (corr,) = _CORR.unpack_from(buf, 0)
    pos = 4
    if header_version >= 1:
        pos = skip_tagged_fields(buf, pos, "response header tagged fields")
    return corr, pos
