"""Message registry: (api_key, version) -> request/response types, header versions, decode/encode.

Built from kio's index and our generated one (``protocol/generated/index.py``). kio's type is used
for every version it has; our generated types fill in the versions and APIs kio lacks (Fetch v19,
CreateTopics v8, the KIP-1279 RPCs). Types are imported lazily: importing all ~2000 modules up front
would cost seconds at start-up.

Bodies are decoded by the pure-Python `lenient` decoder: it skips unknown tagged fields, accepts
error codes newer than kio's enum, bounds every array count by the bytes left, and names the field
when input is malformed. kio's native reader is faster but aborts the process on a forged array
count, so it never sees untrusted bytes; the hot requests (Produce, Fetch) have hand parsers.
"""

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pkgutil import resolve_name
from typing import Any, Final

from kio.schema.index import api_key_map as kio_api_keys
from kio.schema.index import schema_name_map as kio_schema_map
from kio.serial import entity_writer as kio_entity_writer
from kio.static.constants import EntityType

from . import lenient
from .errors import (
    DecodeError,
    ProtocolError,
    RequestBodyError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from .generated.index import API_KEYS as GEN_API_KEYS
from .generated.index import TYPES as GEN_TYPES
from .headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    peek_request_ids,
)
from .readers import Buffer

API_VERSIONS_KEY: Final = 18


def _resolve(path: str) -> type:
    obj = resolve_name(path)
    assert isinstance(obj, type)
    return obj


@dataclass(slots=True)
class ApiSpec:
    """One API: its name, the versions the codec handles and their types."""

    api_key: int
    name: str
    # version -> ("module:Class" of the request, of the response)
    paths: Mapping[int, tuple[str, str]]
    _types: dict[tuple[int, bool], type] = field(default_factory=dict, repr=False)

    @property
    def min_version(self) -> int:
        return min(self.paths)

    @property
    def max_version(self) -> int:
        return max(self.paths)

    @property
    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)

    def supports(self, version: int) -> bool:
        return version in self.paths

    def _type(self, version: int, response: bool) -> type:
        key = (version, response)
        t = self._types.get(key)
        if t is None:
            t = _resolve(self.paths[version][1 if response else 0])
            self._types[key] = t
        return t

    def request_type(self, version: int) -> type:
        return self._type(version, False)

    def response_type(self, version: int) -> type:
        return self._type(version, True)

    def is_flexible(self, version: int) -> bool:
        # Versions outside the known range are judged by the nearest one: flexibility, once
        # introduced, applies to every later version.
        v = min(max(version, self.min_version), self.max_version)
        return bool(self.request_type(v).__flexible__)  # type: ignore[attr-defined]

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 at every version, so a client that sent a version
        # the server doesn't know can still read the (v0) error response.
        if self.api_key == API_VERSIONS_KEY:
            return 0
        return 1 if self.is_flexible(version) else 0


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    header: RequestHeader
    body: Any
    spec: ApiSpec


def _kio_specs() -> dict[int, ApiSpec]:
    specs: dict[int, ApiSpec] = {}
    for key, name in kio_api_keys.items():
        paths: dict[int, tuple[str, str]] = {}
        for version, kinds in kio_schema_map[name].items():
            req = kinds.get(EntityType.request)
            resp = kinds.get(EntityType.response)
            if req and resp:
                paths[version] = (req, resp)
        if paths:
            specs[key] = ApiSpec(key, name, paths)
    return specs


def _merge_generated(specs: dict[int, ApiSpec]) -> None:
    for key, name in GEN_API_KEYS.items():
        gen = {
            v: (kinds["request"], kinds["response"])
            for v, kinds in GEN_TYPES[name].items()
            if "request" in kinds and "response" in kinds
        }
        existing = specs.get(key)
        if existing is None:
            specs[key] = ApiSpec(key, name, gen)
        else:
            merged = {**gen, **existing.paths}  # kio's own types win where both exist
            specs[key] = ApiSpec(key, existing.name, merged)


class Registry:
    def __init__(self, specs: Mapping[int, ApiSpec]) -> None:
        self._specs = dict(specs)

    @classmethod
    def default(cls) -> "Registry":
        specs = _kio_specs()
        _merge_generated(specs)
        return cls(specs)

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._specs

    def specs(self) -> list[ApiSpec]:
        return sorted(self._specs.values(), key=lambda s: s.api_key)

    def spec(self, api_key: int) -> ApiSpec:
        s = self._specs.get(api_key)
        if s is None:
            raise KeyError(api_key)
        return s

    def request_header_version(self, api_key: int, version: int) -> int:
        s = self._specs.get(api_key)
        return 1 if s is None else s.request_header_version(version)

    def decode_request(self, frame: Buffer) -> DecodedRequest:
        """Decode a request frame (without its size prefix).

        Raises `DecodeError` when not even the header can be read (the caller closes the
        connection), `UnknownApiKeyError` / `UnsupportedVersionError` / `RequestBodyError` when the
        header is readable and the server can answer with an error.
        """
        view = memoryview(frame)
        key, version, corr = peek_request_ids(view)
        spec = self._specs.get(key)
        if spec is None:
            raise UnknownApiKeyError(key, version, corr)
        if not spec.supports(version):
            err = UnsupportedVersionError(
                key, version, corr, spec.min_version, spec.max_version, spec.name
            )
            try:  # best effort: give the error the client id too
                header, _ = parse_request_header(view, self.request_header_version)
                err.client_id = header.client_id
            except ProtocolError:
                pass
            raise err
        try:
            header, pos = parse_request_header(view, self.request_header_version)
        except ProtocolError as e:
            raise RequestBodyError(
                f"{spec.name} v{version}: bad request header: {e}", key, version, corr
            ) from None
        try:
            body = decode_body(spec.request_type(version), view, pos, strict=False)
        except ProtocolError as e:
            raise RequestBodyError(
                f"{spec.name} v{version} request: {e}", key, version, corr, header.client_id
            ) from None
        return DecodedRequest(header, body, spec)

    def decode_response(self, api_key: int, version: int, frame: Buffer) -> tuple[int, Any]:
        """Decode a response frame (without size prefix): correlation id and body."""
        spec = self.spec(api_key)
        view = memoryview(frame)
        corr, pos = parse_response_header(view, spec.response_header_version(version))
        return corr, decode_body(spec.response_type(version), view, pos)

    def encode_response(self, api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
        """A whole response frame, size prefix included, through kio's generic writer."""
        spec = self.spec(api_key)
        out = io.BytesIO()
        out.write(b"\0\0\0\0")
        out.write(encode_response_header(correlation_id, spec.response_header_version(version)))
        write_body(out, body)
        return _finish_frame(out)

    def encode_request(
        self, version: int, correlation_id: int, client_id: str | None, body: Any
    ) -> bytes:
        """A whole request frame, size prefix included. The api key comes from the body's type."""
        api_key = int(type(body).__api_key__)
        spec = self.spec(api_key)
        out = io.BytesIO()
        out.write(b"\0\0\0\0")
        out.write(
            encode_request_header(
                api_key, version, correlation_id, client_id, spec.request_header_version(version)
            )
        )
        write_body(out, body)
        return _finish_frame(out)


def _finish_frame(out: io.BytesIO) -> bytes:
    buf = out.getbuffer()
    size = len(buf) - 4
    buf[0:4] = size.to_bytes(4, "big", signed=True)
    del buf
    return out.getvalue()


def decode_body(entity_type: type, buf: Buffer, pos: int, *, strict: bool = True) -> Any:
    """Decode a message body. ``strict``: it must end exactly at the end of ``buf``.

    Requests are decoded non-strictly, as Kafka does: librdkafka 2.16 sends an all-topics
    Metadata v13 request with three stray bytes after the body, and Kafka serves it.
    """
    # Never kio's native reader on bytes from the network: it reserves memory for an array
    # count before checking the frame holds that many items, so a forged count aborts the
    # process. The lenient reader checks every count against the bytes left.
    body, end = lenient.decode(entity_type, buf, pos)
    if strict and end != len(buf):
        raise DecodeError(
            f"{entity_type.__name__}: {len(buf) - end} unexpected bytes after the message"
        )
    return body


def write_body(out: io.BytesIO, body: Any) -> None:
    kio_entity_writer(type(body))(out, body)


def body_bytes(body: Any) -> bytes:
    out = io.BytesIO()
    write_body(out, body)
    return out.getvalue()


REGISTRY: Final = Registry.default()


def decode_request(frame: Buffer) -> DecodedRequest:
    return REGISTRY.decode_request(frame)
