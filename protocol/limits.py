"""Wire limits a request can exceed in a flexible version but a legacy field cannot hold.

A flexible request carries strings with a varint length, so a 70,000-byte group id or topic
name parses; the same string cannot go into a legacy (int16-length) response field or a
coordinator record key. Handlers refuse such a request with their API's error up front.
"""

from typing import Final

INT16_STRING_MAX: Final = 0x7FFF  # bytes in a string with an int16 length


def too_long_for_int16(value: str | None) -> bool:
    """True when ``value`` (UTF-8) does not fit a string field with an int16 length."""
    # A character is at most 4 bytes: only long strings need encoding to know.
    return (
        value is not None
        and len(value) * 4 > INT16_STRING_MAX
        and (len(value.encode("utf-8", "surrogatepass")) > INT16_STRING_MAX)
    )


def clip_message(message: str | None, limit: int = 4096) -> str | None:
    """An error message short enough for any response (an echoed name can be 70,000 bytes)."""
    if message is None or len(message) <= limit:
        return message
    return message[: limit - 3] + "..."
