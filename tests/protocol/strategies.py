"""Hypothesis strategies that build any kio-style entity (kio's types and our generated ones)."""

import datetime
import uuid
from dataclasses import fields, is_dataclass
from functools import cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

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
_text = st.text(max_size=12)
_uuids = st.one_of(st.none(), st.uuids().filter(lambda u: u.int != 0))


def _optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (UnionType, Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0], True
    return tp, False


def _primitive(kind: str, hint: Any) -> st.SearchStrategy[Any]:
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return st.integers(lo, hi).map(hint) if callable(hint) else st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "string":
        return _text.map(hint) if hint is not str else _text
    if kind in ("bytes", "records"):
        return st.binary(max_size=24)
    if kind == "uuid":
        return _uuids
    if kind == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kind == "timedelta_i32":
        return st.integers(0, 2**31 - 1).map(
            lambda ms: hint.parse(datetime.timedelta(milliseconds=ms))
        )
    if kind == "timedelta_i64":
        return st.integers(0, 2**40).map(lambda ms: hint.parse(datetime.timedelta(milliseconds=ms)))
    if kind == "datetime_i64":
        return st.integers(0, 2**41).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
        )
    raise AssertionError(f"no strategy for {kind}")


@cache
def entities(cls: type, depth: int = 0) -> st.SearchStrategy[Any]:
    """Any valid instance of a kio-style entity class (arrays kept short, nesting bounded)."""
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields(cls):
        tp, optional = _optional(f.type)
        tagged = "tag" in f.metadata
        if get_origin(tp) is tuple:
            inner, _ = _optional(get_args(tp)[0])
            if is_dataclass(inner):
                item = entities(inner, depth + 1)  # type: ignore[arg-type]
                max_size = 2 if depth < 2 else 0
            else:
                item = _primitive(f.metadata["kafka_type"], inner)
                max_size = 3
            s: st.SearchStrategy[Any] = st.lists(item, max_size=max_size).map(tuple)
        elif is_dataclass(tp):
            s = entities(tp, depth + 1)  # type: ignore[arg-type]
        else:
            s = _primitive(f.metadata["kafka_type"], tp)
            if f.metadata["kafka_type"] == "uuid":
                optional = False  # uuid strategy already includes None (the zero uuid)
        if optional and not tagged:
            s = st.one_of(st.none(), s)
        kwargs[f.name] = s
    return st.builds(cls, **kwargs)


def any_uuid() -> st.SearchStrategy[uuid.UUID]:
    return st.uuids()
