from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config.properties import (
    PropertiesError,
    format_properties,
    load_properties,
    parse_properties,
)


def test_separators_and_whitespace() -> None:
    p = parse_properties("a=1\n  b : 2\nc 3\nd\t=\t4  \ne=\nf\n g:=h\n")
    assert dict(p) == {"a": "1", "b": "2", "c": "3", "d": "4  ", "e": "", "f": "", "g": "=h"}


def test_comments_and_blank_lines() -> None:
    p = parse_properties("# a=1\n! b=2\n   # c=3\n\n   \nd=4\n")
    assert dict(p) == {"d": "4"}
    assert p.lines == {"d": 6}


def test_comment_does_not_continue() -> None:
    assert dict(parse_properties("# comment \\\nx=1\n")) == {"x": "1"}


def test_continuation_strips_leading_whitespace_and_keeps_first_line_number() -> None:
    p = parse_properties("x=1\nlisteners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\ny=2\n", "f")
    assert p["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9093"
    assert p.where("listeners") == "f:2"
    assert p.where("y") == "f:4"


def test_even_backslashes_do_not_continue() -> None:
    assert dict(parse_properties("a=x\\\\\nb=y\n")) == {"a": "x\\", "b": "y"}


def test_continuation_at_end_of_input() -> None:
    assert dict(parse_properties("a=x\\")) == {"a": "x"}


def test_escapes() -> None:
    p = parse_properties("k\\ ey\\:x=v\\t\\n\\u0041\\q\n")
    assert dict(p) == {"k ey:x": "v\t\nAq"}


def test_malformed_unicode_escape_names_line() -> None:
    with pytest.raises(PropertiesError, match="f:2"):
        parse_properties("a=1\nb=\\u12G4\n", "f")


def test_crlf_and_cr_line_endings() -> None:
    assert dict(parse_properties("a=1\r\nb=2\rc=3")) == {"a": "1", "b": "2", "c": "3"}


def test_last_definition_wins() -> None:
    p = parse_properties("a=1\na=2\n")
    assert p["a"] == "2"
    assert p.lines["a"] == 2


def test_load_latin1_fallback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "x.properties"
    f.write_bytes(b"a=caf\xe9\n")
    assert load_properties(f)["a"] == "café"


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@given(st.dictionaries(_text.filter(bool), _text, max_size=5))
def test_format_round_trip(d: dict[str, str]) -> None:
    assert dict(parse_properties(format_properties(d, comments=["hdr"]))) == d
