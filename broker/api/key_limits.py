"""Coordinator keys longer than Kafka's records can hold, refused before any handler runs.

A flexible request carries a 70,000-byte group id or transactional id (varint lengths), but the
coordinator records keyed by it (offset commits, group metadata, transaction state) have an
int16 length: Kafka cannot store such a key either. The request is answered with the API's own
error for a bad key (INVALID_GROUP_ID, INVALID_REQUEST for a transactional id, the mirror
RPCs' INVALID_MIRROR_NAME for a name no mirror can have) instead of failing while writing the
record, and the key is never hashed or looked up. A member id or instance id no member record
can hold is INVALID_REQUEST.
"""

from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.errors import MirrorErrorCode
from protocol.limits import too_long_for_int16

GROUP_KEYED: Final = frozenset({8, 11, 12, 13, 14, 25, 28, 47, 68, 76, 88, 91, 92})
MEMBER_FIELDS: Final = ("member_id", "group_instance_id", "instance_id")
TXN_KEYED: Final = frozenset({22, 24, 25, 26, 28})
MIRROR_STATE_RPCS: Final = frozenset({100, 101})  # Read/WriteMirrorStates
MAX_MIRROR_NAME: Final = 249  # mirror names follow the topic-name rules


def oversized_key(api_key: int, request: Any) -> tuple[int, str] | None:
    """(error code, message) when ``request`` names a coordinator key no record can hold."""
    if api_key in GROUP_KEYED:
        if too_long_for_int16(getattr(request, "group_id", None)):
            return ErrorCode.invalid_group_id, "The group id is longer than 32767 bytes."
        for name in MEMBER_FIELDS:  # member records are keyed by it, or carry it
            if too_long_for_int16(getattr(request, name, None)):
                return ErrorCode.invalid_request, f"The {name} is longer than 32767 bytes."
    if api_key in TXN_KEYED and too_long_for_int16(getattr(request, "transactional_id", None)):
        return ErrorCode.invalid_request, "The transactional id is longer than 32767 bytes."
    if api_key in MIRROR_STATE_RPCS and len(request.mirror_name) > MAX_MIRROR_NAME:
        return (
            MirrorErrorCode.INVALID_MIRROR_NAME,
            f"A mirror name is at most {MAX_MIRROR_NAME} characters.",
        )
    return None
