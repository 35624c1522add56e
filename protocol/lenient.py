"""A pure-Python decoder for kio-style dataclasses that tolerates what kio's native reader rejects.

kio raises on unknown tagged fields (the protocol says skip them) and on error codes its enum does
not know (newer brokers and KIP-1279 add codes). The registry tries kio's fast native reader first
and falls back to this one, so valid-but-unusual frames decode and malformed ones get a message
naming the field that failed.
"""

import datetime
import functools
from collections.abc import Callable
from dataclasses import MISSING, Field, fields, is_dataclass
from types import EllipsisType, NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.schema.errors import ErrorCode

from . import readers as r
from .errors import DecodeError, MirrorErrorCode, TruncatedError, UnknownErrorCode

Reader = Callable[[r.Buffer, int], tuple[Any, int]]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ERROR_CODES: dict[int, int] = {int(e.value): e for e in ErrorCode}
_ERROR_CODES.update({int(e.value): e for e in MirrorErrorCode})


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (UnionType, Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _fixed(kind: str) -> Reader:
    s = r.FIXED[kind]

    def read(buf: r.Buffer, pos: int) -> tuple[Any, int]:
        return r.read_fixed(s, buf, pos, kind)

    return read


def _error_code(buf: r.Buffer, pos: int) -> tuple[Any, int]:
    v, pos = r.read_int16(buf, pos, "error_code")
    known = _ERROR_CODES.get(v)
    return (UnknownErrorCode(v) if known is None else known), pos


def _bool(buf: r.Buffer, pos: int) -> tuple[Any, int]:
    if pos >= len(buf):
        raise TruncatedError(f"buffer ends inside bool at byte {pos}")
    return buf[pos] != 0, pos + 1


def _not_null(read: Reader, what: str) -> Reader:
    def read_required(buf: r.Buffer, pos: int) -> tuple[Any, int]:
        value, pos = read(buf, pos)
        if value is None:
            raise DecodeError(f"{what}: null where the schema does not allow it")
        return value, pos

    return read_required


def _primitive(kind: str, flexible: bool, nullable: bool, what: str) -> Reader:
    read: Reader
    if kind in r.FIXED:
        return _fixed(kind)
    if kind == "bool":
        return _bool
    if kind == "error_code":
        return _error_code
    if kind == "uuid":
        return r.read_uuid
    if kind == "string":
        read = r.read_compact_string if flexible else r.read_legacy_string
    elif kind in ("bytes", "records"):
        read = r.read_compact_bytes if flexible else r.read_legacy_bytes
    elif kind in ("timedelta_i32", "timedelta_i64"):
        s = r.FIXED["int32" if kind == "timedelta_i32" else "int64"]

        def read(buf: r.Buffer, pos: int) -> tuple[Any, int]:
            ms, pos = r.read_fixed(s, buf, pos, what)
            try:
                return datetime.timedelta(milliseconds=ms), pos
            except OverflowError:  # beyond ~2.7 million years: not a duration a client means
                raise DecodeError(f"{what}: {ms} ms is out of range") from None

        return read
    elif kind == "datetime_i64":

        def read(buf: r.Buffer, pos: int) -> tuple[Any, int]:
            ms, pos = r.read_fixed(r.FIXED["int64"], buf, pos, what)
            if ms == -1 and nullable:
                return None, pos
            try:
                return _EPOCH + datetime.timedelta(milliseconds=ms), pos
            except OverflowError:
                raise DecodeError(f"{what}: timestamp {ms} is out of range") from None

        return read
    else:
        raise DecodeError(f"{what}: unsupported kafka_type {kind!r}")
    return read if nullable else _not_null(read, what)


def _array(item: Reader, flexible: bool, nullable: bool, what: str) -> Reader:
    def read(buf: r.Buffer, pos: int) -> tuple[Any, int]:
        if flexible:
            n, pos = r.read_uvarint(buf, pos, what)
            n -= 1
        else:
            n, pos = r.read_int32(buf, pos, what)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"{what}: invalid array length {n}")
        if n > len(buf) - pos:
            raise TruncatedError(f"{what}: {n} elements declared but {len(buf) - pos} bytes remain")
        out = []
        for _ in range(n):
            value, pos = item(buf, pos)
            out.append(value)
        return tuple(out), pos

    return read


def _nullable_struct(read: Reader, what: str) -> Reader:
    def read_marked(buf: r.Buffer, pos: int) -> tuple[Any, int]:
        marker, pos = r.read_fixed(r.FIXED["int8"], buf, pos, what)
        if marker < 0:
            return None, pos
        return read(buf, pos)

    return read_marked


def _field_reader(owner: type, f: Field[Any], tagged: bool) -> Reader:
    flexible = bool(owner.__flexible__)  # type: ignore[attr-defined]
    what = f"{owner.__name__}.{f.name}"
    tp, optional = _strip_optional(f.type)
    if tagged:
        optional = False  # a tagged field's absence is expressed by the missing tag
    if get_origin(tp) is tuple:
        inner, ellipsis = get_args(tp)
        assert isinstance(ellipsis, EllipsisType) or ellipsis is Ellipsis
        inner, _ = _strip_optional(inner)
        if is_dataclass(inner):
            item = entity_reader(inner)  # type: ignore[arg-type]
        else:
            item = _primitive(f.metadata["kafka_type"], flexible, False, what)
        return _array(item, flexible, optional, what)
    if is_dataclass(tp):
        nested = entity_reader(tp)  # type: ignore[arg-type]
        return _nullable_struct(nested, what) if optional else nested
    return _primitive(f.metadata["kafka_type"], flexible, optional, what)


def _tag_default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    from kio.serial._implicit_defaults import get_tagged_field_default

    return get_tagged_field_default(f)


@functools.cache
def entity_reader(entity_type: type) -> Reader:
    """A reader for one kio-style entity type, compiled once per type."""
    plain: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    defaults: dict[str, Any] = {}
    for f in fields(entity_type):
        tag = f.metadata.get("tag")
        if tag is None:
            plain.append((f.name, _field_reader(entity_type, f, False)))
        else:
            tagged[int(tag)] = (f.name, _field_reader(entity_type, f, True))
            defaults[f.name] = f
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
    name = entity_type.__name__

    def read(buf: r.Buffer, pos: int) -> tuple[Any, int]:
        values: dict[str, Any] = {}
        for fname, read_field in plain:
            values[fname], pos = read_field(buf, pos)
        if flexible:
            count, pos = r.read_uvarint(buf, pos, f"{name} tagged fields")
            for _ in range(count):
                tag, pos = r.read_uvarint(buf, pos, f"{name} tag")
                size, pos = r.read_uvarint(buf, pos, f"{name} tag {tag} size")
                end = pos + size
                if end > len(buf):
                    raise TruncatedError(
                        f"{name}: tagged field {tag} of {size} bytes runs past the end"
                    )
                known = tagged.get(tag)
                if known is not None:
                    fname, read_field = known
                    values[fname], used = read_field(buf[:end], pos)
                    if used != end:
                        raise DecodeError(
                            f"{name}: tagged field {tag} is {size} bytes but decodes to {used - pos}"
                        )
                pos = end  # unknown tags are skipped, as the protocol requires
            for fname, f in defaults.items():
                if fname not in values:
                    values[fname] = _tag_default(f)
        return entity_type(**values), pos

    return read


def decode(entity_type: type, buf: r.Buffer, pos: int = 0) -> tuple[Any, int]:
    """Decode one entity; returns it and the position after it."""
    try:
        return entity_reader(entity_type)(memoryview(buf), pos)
    except (DecodeError, TruncatedError):
        raise
    except (ValueError, TypeError) as e:  # e.g. a kio Phantom type rejecting an out-of-range value
        raise DecodeError(f"{entity_type.__name__}: {e}") from None
