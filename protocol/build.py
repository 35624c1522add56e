"""Build kio-style entities from plain dicts, whatever the message version.

Handlers describe a response once, as nested dicts; `build` keeps the fields the target version
has, drops the rest, and gives unmentioned fields their schema default (or a neutral zero). Ints
become `ErrorCode`/`MirrorErrorCode` members for ``error_code`` fields and ``timedelta`` for
duration fields, so kio's writer accepts them; an ``error_message`` is clipped to a length any
response version can carry.
"""

import datetime
import functools
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, fields
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .errors import MirrorErrorCode, UnknownErrorCode
from .limits import clip_message

E = TypeVar("E")

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def error_code(value: int) -> Any:
    """The enum member for an error code, whichever enum knows it."""
    if isinstance(value, ErrorCode | MirrorErrorCode):
        return value
    try:
        return ErrorCode(value)
    except ValueError:
        pass
    try:
        return MirrorErrorCode(value)
    except ValueError:
        return UnknownErrorCode(value)


def _zero(f: Field[Any]) -> Any:
    cls = classify_field(f)
    if cls.is_array:
        return None if is_optional(f) else ()
    if isinstance(cls, EntityField):
        return None if is_optional(f) else build(cls.type_, {})
    if is_optional(f):
        return None
    kind = f.metadata["kafka_type"]
    if kind == "error_code":
        return ErrorCode.none
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kind == "datetime_i64":
        return _EPOCH
    if kind == "uuid":
        return None
    if kind == "bool":
        return False
    if kind == "string":
        return ""
    if kind in ("bytes", "records"):
        return b""
    if kind == "float64":
        return 0.0
    return 0


def _converter(f: Field[Any]) -> Callable[[Any], Any]:
    cls = classify_field(f)
    if isinstance(cls, EntityTupleField):
        inner = cls.type_
        return lambda v: tuple(build(inner, item) for item in v)
    if isinstance(cls, EntityField):
        inner2 = cls.type_
        return lambda v: build(inner2, v)
    if isinstance(cls, PrimitiveTupleField):
        return tuple
    kind = f.metadata.get("kafka_type")
    if kind == "error_code":
        return error_code
    if f.name == "error_message":
        return clip_message  # a message echoing a 70,000-byte name fits no int16 length
    if kind in ("timedelta_i32", "timedelta_i64"):
        return lambda v: datetime.timedelta(milliseconds=v) if isinstance(v, int) else v
    return lambda v: v


@functools.cache
def _plan(entity_type: type) -> tuple[tuple[str, Callable[[Any], Any], bool, Any], ...]:
    """Per field: name, converter, whether it may be omitted, and its zero value."""
    plan = []
    for f in fields(entity_type):
        optional = (
            f.default is not MISSING
            or f.default_factory is not MISSING
            or get_field_tag(f) is not None
        )
        plan.append((f.name, _converter(f), optional, None if optional else _zero(f)))
    return tuple(plan)


def build(entity_type: type[E], data: Mapping[str, Any] | E) -> E:
    """Instantiate ``entity_type`` from ``data``, tolerating version differences."""
    if isinstance(data, entity_type):
        return data
    assert isinstance(data, Mapping), f"cannot build {entity_type.__name__} from {type(data)}"
    kwargs: dict[str, Any] = {}
    for name, convert, optional, zero in _plan(entity_type):  # type: ignore[arg-type]
        if name in data:
            value = data[name]
            kwargs[name] = None if value is None else convert(value)
        elif not optional:
            kwargs[name] = zero
    return entity_type(**kwargs)
