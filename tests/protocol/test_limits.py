"""Strings a flexible request may carry but a legacy field cannot: error messages echoing them
are clipped by `build`, and `too_long_for_int16` tells a handler to refuse them."""

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from protocol.build import build
from protocol.limits import INT16_STRING_MAX, clip_message, too_long_for_int16
from protocol.registry import REGISTRY, body_bytes


def test_an_error_message_echoing_a_huge_name_still_encodes_in_a_legacy_response() -> None:
    name = "é" * 16_383  # 32,766 bytes: the longest name a CreatePartitions v0 request holds
    cls = REGISTRY.spec(37).response_type(0)
    resp = build(
        cls,
        {
            "results": [
                {
                    "name": name,
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "error_message": f"The topic '{name}' does not exist.",
                }
            ]
        },
    )
    raw = body_bytes(resp)
    back, used = entity_reader(cls)(raw, 0)
    assert used == len(raw)
    [r] = back.results
    assert r.name == name and r.error_message is not None
    assert len(r.error_message.encode()) <= INT16_STRING_MAX
    assert r.error_message.startswith("The topic '") and r.error_message.endswith("...")


def test_limits() -> None:
    assert not too_long_for_int16(None)
    assert not too_long_for_int16("t" * INT16_STRING_MAX)
    assert too_long_for_int16("t" * (INT16_STRING_MAX + 1))
    assert too_long_for_int16("é" * 16_384)  # 32,768 bytes
    assert not too_long_for_int16("é" * 16_383)
    assert clip_message(None) is None
    assert clip_message("short") == "short"
    assert len(clip_message("x" * 100_000) or "") == 4096
