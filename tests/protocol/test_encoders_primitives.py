"""Shared encoder primitives against kio's writer functions."""

import io
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import writers as kw
from kio.static.primitive import uvarint

from protocol.encoders import primitives as p


def kio(writer: Callable[[Any, Any], None], value: Any) -> bytes:
    buf = io.BytesIO()
    writer(buf, value)
    return buf.getvalue()


@given(st.integers(0, 2**35 - 1) | st.integers(0, 20_000))
def test_uvarint_matches_kio(value: int) -> None:
    assert p.uvarint(value) == kio(kw.write_unsigned_varint, value)


@pytest.mark.parametrize(
    "value", [0, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**31 - 1, 2**35 - 1]
)
def test_uvarint_table_boundaries(value: int) -> None:
    assert p.uvarint(value) == kio(kw.write_unsigned_varint, value)


def test_uvarint_rejects_negative() -> None:
    with pytest.raises(ValueError):
        p.uvarint(-1)


@given(st.none() | st.text(max_size=300))
def test_strings_match_kio(value: str | None) -> None:
    assert p.compact_nullable_string(value) == kio(kw.write_nullable_compact_string, value)
    assert p.legacy_nullable_string(value) == kio(kw.write_nullable_legacy_string, value)
    if value is not None:
        assert p.compact_string(value) == kio(kw.write_compact_string, value)
        assert p.legacy_string(value) == kio(kw.write_legacy_string, value)


def test_legacy_string_length_limit() -> None:
    p.legacy_string("x" * 0x7FFF)
    with pytest.raises(ValueError):
        p.legacy_string("x" * 0x8000)


@given(st.none() | st.binary(max_size=300))
def test_bytes_match_kio(value: bytes | None) -> None:
    assert p.compact_nullable_bytes(value) == kio(kw.write_nullable_compact_string, value)
    assert p.legacy_nullable_bytes(value) == kio(kw.write_nullable_legacy_bytes, value)


@given(st.none() | st.integers(0, 100_000))
def test_array_lengths_match_kio(n: int | None) -> None:
    assert p.compact_len(n) == kio(kw.write_compact_array_length, n)
    expected = kio(kw.write_legacy_array_length, -1 if n is None else n)
    assert p.legacy_array_len(n) == expected


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=200))
def test_int32_arrays_match_kio(values: list[int]) -> None:
    assert p.compact_int32_array(values) == kio(kw.compact_array_writer(kw.write_int32), values)
    assert p.legacy_int32_array(values) == kio(kw.legacy_array_writer(kw.write_int32), values)


@given(st.none() | st.uuids())
def test_uuid_matches_kio(value: uuid.UUID | None) -> None:
    assert p.uuid_bytes(value) == kio(kw.write_uuid, value)


@given(st.dictionaries(st.integers(0, 1000), st.binary(max_size=200), max_size=6))
def test_tagged_fields_sorted_with_sizes(fields: dict[int, bytes]) -> None:
    shuffled = list(reversed(list(fields.items())))
    expected = io.BytesIO()
    kw.write_unsigned_varint(expected, uvarint(len(fields)))
    for tag in sorted(fields):
        kw.write_tagged_field(expected, uvarint(tag), write_raw, fields[tag])
    assert p.tagged_fields(shuffled) == expected.getvalue()


def write_raw(buf: Any, value: bytes) -> None:
    buf.write(value)


def test_tagged_fields_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="twice"):
        p.tagged_fields([(1, b""), (1, b"x")])
