"""protocol/records/scan.py epoch_prefix: the leading batches a fetched epoch vouches for."""

from protocol.records import Record, build_batch
from protocol.records.scan import epoch_prefix


def _batch(base: int, epoch: int) -> bytes:
    return bytes(build_batch([Record(value=b"v")], base_offset=base, partition_leader_epoch=epoch))


def test_stops_at_the_first_batch_above_the_bound() -> None:
    a, b, c = _batch(0, 3), _batch(1, 5), _batch(2, 4)
    data = a + b + c
    assert epoch_prefix(data, 5) == len(data)
    assert epoch_prefix(data, 4) == len(a)  # c is within, but it comes after b
    assert epoch_prefix(data, 2) == 0
    assert epoch_prefix(memoryview(data), 3) == len(a)


def test_malformed_or_partial_data_is_left_for_the_append_to_refuse() -> None:
    a = _batch(0, 3)
    assert epoch_prefix(a + b"\x00" * 5, 3) == len(a) + 5  # a torn tail stays in
    assert epoch_prefix(b"", 1) == 0
