"""KRaft metadata-log record framing (Kafka's MetadataRecordSerde).

Each record value in ``__cluster_metadata`` is ``uvarint frame_version (1)``, ``uvarint api_key``,
``uvarint record_version``, then the record body. Keys are null.
"""

import functools
import io
from typing import Any, Final

from kio.serial import entity_writer

from .encoders.primitives import uvarint as _uvarint
from .errors import DecodeError
from .generated.index import RECORD_KEYS, TYPES
from .readers import Buffer, read_uvarint
from .registry import _resolve, decode_body

FRAME_VERSION: Final = 1
_KEYS: Final = RECORD_KEYS["metadata"]
_KEY_OF: Final = {name: key for key, name in _KEYS.items()}


@functools.cache
def record_type(api_key: int, version: int) -> type:
    name = _KEYS.get(api_key)
    if name is None:
        raise DecodeError(f"unknown metadata record type {api_key}")
    path = TYPES[name].get(version, {}).get("data")
    if path is None:
        raise DecodeError(f"{name} version {version} is not known")
    return _resolve(path)


def latest_type(name: str) -> type:
    """The newest version of a metadata record class, e.g. ``latest_type("TopicRecord")``."""
    return record_type(_KEY_OF[name], max(TYPES[name]))


def encode_metadata_record(record: Any) -> bytes:
    cls = type(record)
    out = io.BytesIO()
    out.write(_uvarint(FRAME_VERSION))
    out.write(_uvarint(_KEY_OF[cls.__name__]))
    out.write(_uvarint(int(cls.__version__)))
    entity_writer(cls)(out, record)
    return out.getvalue()


def decode_metadata_record(buf: Buffer) -> Any:
    frame, pos = read_uvarint(buf, 0, "metadata record frame version")
    if frame != FRAME_VERSION:
        raise DecodeError(f"metadata record frame version {frame} is not supported")
    key, pos = read_uvarint(buf, pos, "metadata record type")
    version, pos = read_uvarint(buf, pos, "metadata record version")
    return decode_body(record_type(key, version), memoryview(buf), pos)
