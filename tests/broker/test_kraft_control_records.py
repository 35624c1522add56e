"""KIP-853's control record values (protocol/records/kraft_control.py) against Kafka's
VotersRecord.json / KRaftVersionRecord.json layouts, byte for byte."""

import uuid

import pytest

from protocol.errors import CorruptRecordError
from protocol.records.kraft_control import (
    VoterEndpoint,
    VoterEntry,
    decode_kraft_version,
    decode_voters,
    encode_kraft_version,
    encode_voters,
)


def test_kraft_version_bytes() -> None:
    # int16 Version 0, int16 KRaftVersion 1, no tagged fields
    assert encode_kraft_version(1) == b"\x00\x00\x00\x01\x00"
    assert decode_kraft_version(b"\x00\x00\x00\x01\x00") == 1


def test_voters_bytes() -> None:
    dir_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    v = VoterEntry(3, dir_id, (VoterEndpoint("CONTROLLER", "h", 9093),), 0, 1)
    want = (
        b"\x00\x00"  # Version
        + b"\x02"  # one voter (compact array: n + 1)
        + b"\x00\x00\x00\x03"  # VoterId
        + dir_id.bytes  # VoterUuid
        + b"\x02"  # one endpoint
        + b"\x0bCONTROLLER"  # Name (compact string: len + 1)
        + b"\x02h"  # Host
        + b"\x23\x85"  # Port 9093 (uint16)
        + b"\x00"  # endpoint tagged fields
        + b"\x00\x00\x00\x01"  # KRaftVersionFeature min 0, max 1
        + b"\x00"  # feature tagged fields
        + b"\x00"  # voter tagged fields
        + b"\x00"  # record tagged fields
    )
    assert encode_voters([v]) == want
    assert decode_voters(want) == (v,)


def test_voters_truncated_is_an_error() -> None:
    raw = encode_voters([VoterEntry(1, uuid.uuid4())])
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_voters(raw[:10])
