"""Hypothesis strategies that build random kio entities by introspecting their dataclass fields.

Each field's ``kafka_type`` metadata picks the value strategy; nullability and nested entities
come from the annotations (through kio's own introspection helpers, pinned with kio 0.6.5).
Fields with a default draw it often, so the "tagged field left out when default" paths run.
"""

import dataclasses
import datetime
import functools
from types import UnionType
from typing import Any, Union, cast, get_args, get_origin

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
)

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}

_UTC_MIN = datetime.datetime(1971, 1, 1, tzinfo=datetime.UTC)
_UTC_MAX = datetime.datetime(2200, 1, 1, tzinfo=datetime.UTC)


def primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        # Small values hit one-byte varints and "-1 means unset" defaults; extremes hit sign bits.
        return st.one_of(st.integers(-2, 300), st.integers(lo, hi)).filter(lambda v: lo <= v <= hi)
    if kafka_type == "string":
        return st.text(max_size=12)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=40)
    if kafka_type == "uuid":
        return st.uuids().filter(lambda u: u.int != 0)  # kio reads the nil UUID as None
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "error_code":
        return st.sampled_from(ErrorCode)
    if kafka_type == "timedelta_i32":
        return st.integers(-(2**31), 2**31 - 1).map(lambda ms: datetime.timedelta(milliseconds=ms))
    if kafka_type == "timedelta_i64":
        return st.integers(-(2**40), 2**40).map(lambda ms: datetime.timedelta(milliseconds=ms))
    if kafka_type == "datetime_i64":
        return st.datetimes(
            min_value=_UTC_MIN.replace(tzinfo=None),
            max_value=_UTC_MAX.replace(tzinfo=None),
            timezones=st.just(datetime.UTC),
        ).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))  # wire has ms
    if kafka_type == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    raise NotImplementedError(kafka_type)


def _outer_optional(field: dataclasses.Field[Any]) -> bool:
    # Nullability of the field itself. kio's is_optional also looks inside tuple[X | None, ...]
    # (its uuid arrays), which would make non-nullable arrays like []uuid look nullable.
    return type(None) in get_args(field.type) and get_origin(field.type) in (UnionType, Union)


def field_strategy(field: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    fc = classify_field(field)
    base: st.SearchStrategy[Any]
    if isinstance(fc, PrimitiveField):
        base = primitive(field.metadata["kafka_type"])
    elif isinstance(fc, PrimitiveTupleField):
        base = st.lists(primitive(field.metadata["kafka_type"]), max_size=4).map(tuple)
    elif isinstance(fc, EntityField):
        base = entities(fc.type_)
    elif isinstance(fc, EntityTupleField):
        base = st.lists(entities(fc.type_), max_size=3).map(tuple)
    else:  # pragma: no cover
        raise NotImplementedError(fc)
    if _outer_optional(field) and get_field_tag(field) is None:
        base = st.none() | base
    if field.default is not dataclasses.MISSING:
        base = st.just(field.default) | base
    return base


def entities(cls: type[Any]) -> st.SearchStrategy[Any]:
    """Random instances of the kio entity class ``cls`` (nested entities included)."""
    return _entities(cast(Any, cls))


@functools.cache
def _entities(cls: Any) -> st.SearchStrategy[Any]:
    kwargs = {f.name: field_strategy(f) for f in dataclasses.fields(cls)}
    return st.builds(cls, **kwargs)
