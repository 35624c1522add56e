"""Build kio response entities from plain dicts, whatever the message version.

The fake broker describes a response once (as nested dicts) and this fills in the
fields a particular version has: keys the version lacks are dropped, fields the dict
does not mention get their schema default or a neutral zero value.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
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

E = TypeVar("E")

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


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
        return uuid.UUID(int=0)
    if kind == "bool":
        return False
    if kind == "string":
        return ""
    if kind in ("bytes", "records"):
        return b""
    if kind == "float64":
        return 0.0
    return 0


def _convert(f: Field[Any], value: Any) -> Any:
    if value is None:
        return None
    cls = classify_field(f)
    if isinstance(cls, EntityTupleField):
        return tuple(build(cls.type_, item) for item in value)
    if isinstance(cls, EntityField):
        return build(cls.type_, value)
    if isinstance(cls, PrimitiveTupleField):
        return tuple(value)
    kind = f.metadata.get("kafka_type")
    if kind == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kind in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    return value


def build(entity_type: type[E], data: Mapping[str, Any]) -> E:
    """Instantiate `entity_type` from `data`, tolerating version differences."""
    if isinstance(data, entity_type):
        return data
    kwargs: dict[str, Any] = {}
    for f in fields(entity_type):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _convert(f, data[f.name])
        elif (
            f.default is not MISSING
            or f.default_factory is not MISSING
            or get_field_tag(f) is not None
        ):
            continue  # the schema default (or absent tag) is what we want
        else:
            kwargs[f.name] = _zero(f)
    return entity_type(**kwargs)
