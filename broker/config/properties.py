"""A ``.properties`` reader/writer with java.util.Properties semantics.

Kafka loads ``server.properties`` with ``Properties.load``; operators copy files between
Kafka and us, so the edge cases (continuations, escapes, ``key value`` separators) must
read the same.  Line numbers are kept so configuration errors can point at ``file:line``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Properties",
    "PropertiesError",
    "format_properties",
    "load_properties",
    "parse_properties",
]

# java.util.Properties treats exactly these as whitespace.
_WS = " \t\f"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """Malformed input (a bad ``\\uXXXX`` escape), with ``source:line``."""


@dataclass(frozen=True, slots=True)
class Entry:
    key: str
    value: str
    line: int  # 1-based line where the logical line starts


class Properties(dict[str, str]):
    """``key -> value`` (last definition wins), remembering where each key was defined."""

    def __init__(self, entries: Iterable[Entry] = (), source: str = "<string>") -> None:
        super().__init__()
        self.source = source
        self.lines: dict[str, int] = {}
        for e in entries:
            self[e.key] = e.value
            self.lines[e.key] = e.line

    def where(self, key: str) -> str:
        """``file:line`` of ``key``'s definition (just the file if unknown)."""
        line = self.lines.get(key)
        return f"{self.source}:{line}" if line is not None else self.source


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Join continued lines; yields (first line number, raw logical line)."""
    natural = _NEWLINE.split(text)  # only \n, \r\n and \r end lines, as in Java's LineReader
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # comments never continue, even with a trailing backslash
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])
            if i >= len(natural):
                break  # a continuation at end of input is dropped
            line = natural[i].lstrip(_WS)
            i += 1
        yield start + 1, "".join(parts)


def _unescape(raw: str, where: str) -> str:
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"{where}: malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    text = "".join(out)
    if "\\u" in raw:
        # \uD800\uDC00-style surrogate pairs (UTF-16, as Java writes them) become one character.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _split(line: str) -> tuple[str, str]:
    """Split a logical line into raw (still escaped) key and value."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _WS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WS:
            j += 1
    return key, line[j:]


def parse_properties(text: str, source: str = "<string>") -> Properties:
    entries: list[Entry] = []
    for lineno, logical in _logical_lines(text):
        where = f"{source}:{lineno}"
        raw_key, raw_value = _split(logical)
        entries.append(Entry(_unescape(raw_key, where), _unescape(raw_value, where), lineno))
    return Properties(entries, source)


def load_properties(path: str | Path) -> Properties:
    """Read a file; UTF-8 first, ISO-8859-1 (what Properties.load(InputStream) uses) if that fails."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, str(path))


def _escape(s: str, is_key: bool) -> str:
    out: list[str] = []
    for idx, ch in enumerate(s):
        if ch == " ":
            out.append("\\ " if is_key or idx == 0 else " ")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch in "=:#!\\":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            # Like Properties.store: non-ASCII as \\uXXXX (surrogate pairs for astral chars).
            units = ch.encode("utf-16-be")
            for k in range(0, len(units), 2):
                out.append(f"\\u{int.from_bytes(units[k : k + 2], 'big'):04X}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties(values: Mapping[str, str], comments: Iterable[str] = ()) -> str:
    """Render ``key=value`` lines (escaped so parse_properties reads them back exactly)."""
    lines = [f"#{c}" for c in comments]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"
